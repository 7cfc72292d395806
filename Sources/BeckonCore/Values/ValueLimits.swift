/// Bounds on the values Beckon builds and keeps, each defined here once (docs/reference/limits.md lists them with
/// what happens at each).
public enum ValueLimits {
    /// A user attribute's value, set by `identify` or a `set` action, is at most this many bytes (``Value/byteSize(upTo:)``):
    /// an `identify` line with a larger trait is a bad line, a `set` of a larger value is not applied (the action says
    /// why).
    public static let maxAttributeBytes = 64 << 10
    /// Attributes no loaded rule reads, kept per user: further new names are not kept (counted in ``Engine/Stats``).
    public static let maxOtherAttributes = 256
    /// A string an expression builds (`+`, `replace`, `join`) or a value it writes into an action field is at most
    /// this many bytes, and a list it concatenates at most ``maxBuiltListMembers`` members; beyond it the
    /// expression's value is an error.
    public static let maxBuiltBytes = 1 << 20
    /// Members of a list `+` builds (a member is counted as the 8-byte reference it is: members share their values).
    public static let maxBuiltListMembers = maxBuiltBytes / 8
    /// Steps one event may take, all its rules' expressions together (a delayed action coming due counts as its own):
    /// each comprehension iteration (`exists`, `all`, `exists_one`, `map`, `filter`) is one; each call of a function
    /// or operator over long values is charged its work before it runs (``bytesPerStep`` of each string or bytes
    /// argument, ``membersPerStep`` of each list argument; a map's keys are found by their hash, and `size` and
    /// indexing are free); and each `matches`
    /// call is its bound of work divided by ``matchWorkPerStep``. Beyond it, an expression's value is an error. The
    /// budget bounds one event to about a second of evaluation (docs/reference/limits.md gives the measurement).
    public static let maxSteps = 1_000_000
    /// Bytes of a string argument per budget step.
    public static let bytesPerStep = 1024
    /// Members of a list argument per budget step.
    public static let membersPerStep = 64
    /// Steps between two looks at an evaluation deadline (``EvalScope/deadline``).
    public static let stepsPerClockCheck = 4096
    /// Matcher steps (an instruction at a character) per budget step: 1,000,000 steps are 64,000,000 matcher steps.
    public static let matchWorkPerStep = 64
    /// History series the loaded rule sets keep, all files together (each event name with each property filter that a
    /// history function or a `reprompt` reads, plus each rule with a rolling limit): a series' index fills the top 20
    /// bits of a history entry. The file whose rules pass it gets `limit_exceeded`.
    public static let maxSeries = 1 << 20

    static let builtTooLarge = EvalError("the value built is larger than \(maxBuiltBytes) bytes (the limit)")
    static let builtListTooLong = EvalError("the list built has more than \(maxBuiltListMembers) members (the limit)")
    static let stepsSpent = EvalError("the event's expressions took more than \(maxSteps) steps (the limit)")
}

extension Value {
    /// The bytes the value stands for, as if written out: a string by its UTF-8 length, a list or map by its members
    /// (a string a list holds many times counts each time), 8 for a number. Counts up to `limit`: a larger value
    /// returns something above `limit` without being walked further, so the cost is bounded by `limit`.
    public func byteSize(upTo limit: Int) -> Int {
        var total = 0
        _ = Value.addByteSize(of: self, to: &total, upTo: limit)
        return total
    }

    /// Adds `v`'s ``byteSize(upTo:)`` to `total`, member by member; false, the walk stopped, once past `limit`. (A
    /// static function with `total` passed in: a nested function capturing it made each call a run-time exclusivity
    /// check on the captured variable.)
    private static func addByteSize(of v: Value, to total: inout Int, upTo limit: Int) -> Bool {
        switch v {
        case .string(let s): total += s.utf8.count
        case .bytes(let b): total += b.count
        case .list(let xs):
            total += 2
            for x in xs {
                if !addByteSize(of: x, to: &total, upTo: limit) { return false }
            }
        case .map(let m):
            total += 2
            for (k, x) in m.entries {
                if !addByteSize(of: k, to: &total, upTo: limit) || !addByteSize(of: x, to: &total, upTo: limit) {
                    return false
                }
            }
        case .type(let t): total += t.utf8.count
        case .error(let e): total += e.message.utf8.count
        default: total += 8
        }
        return total <= limit
    }
}

extension Value {
    /// The budget steps a function's pass over this value costs (``ValueLimits/bytesPerStep``,
    /// ``ValueLimits/membersPerStep``): 0 for short values and scalars.
    @inline(__always) var work: Int {
        switch self {
        case .string(let s): s.utf8.count / ValueLimits.bytesPerStep
        case .bytes(let b): b.count / ValueLimits.bytesPerStep
        case .list(let l): l.count / ValueLimits.membersPerStep
        default: 0
        }
    }
}
