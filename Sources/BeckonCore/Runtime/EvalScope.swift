/// What an expression can see while it runs: the event, the user, the time, comprehension variables.
/// One scope is reused for every evaluation of an engine, so evaluating allocates nothing.
public final class EvalScope {
    /// Comprehension variables (`x` in `list.exists(x, …)`), by slot.
    public var locals: [Value] = []
    /// Variables bound by name (conformance tests, `beckon` tools).
    public var bindings: [String: Value] = [:]
    /// When set, compiled-with-tracing expressions record each sub-expression's value here.
    public var trace: ExprTrace?
    /// Steps taken by the event under way (``ValueLimits/maxSteps``): comprehension iterations and `matches` work. The
    /// engine zeroes it per event.
    var steps = 0

    /// What the engine sets before evaluating, read on every evaluation: kept in a cell (the storage layer's
    /// ``ExclusiveCell``) so that reading it counts no references and checks no exclusive access in release builds.
    struct Hot {
        /// The event and the user, lent for as long as they are bound (``event``, ``profile``).
        var event: Borrowed<BoundEvent>?
        var profile: Borrowed<UserProfile>?
        /// Evaluation time in ms (the user's clock).
        var now: Int64 = 0
        var change: AttributeChange?
        /// Per-event memo of segment and audience values: valid when `memoEpoch[i] == epoch`.
        var memo: [Value] = []
        var memoEpoch: [UInt32] = []
        var epoch: UInt32 = 1
    }
    let hot = ExclusiveCell(Hot())
    var ruleSet: CompiledRuleSet?

    /// The event under evaluation. The engine binds it for the length of a call that holds it (setting it lends it,
    /// replacing or clearing it takes the loan back).
    var event: BoundEvent? {
        @inline(__always) get { hot.value.event?.object }
        set {
            hot.value.event?.endLoan()
            hot.value.event = newValue.map { Borrowed(lending: $0) }
        }
    }
    /// The user under evaluation, bound as ``event`` is.
    var profile: UserProfile? {
        @inline(__always) get { hot.value.profile?.object }
        set {
            hot.value.profile?.endLoan()
            hot.value.profile = newValue.map { Borrowed(lending: $0) }
        }
    }
    /// The loans of the bound event and user, for readers that borrow them in turn (a ``Predicate``).
    var eventLoan: Borrowed<BoundEvent>? { hot.value.event }
    var profileLoan: Borrowed<UserProfile>? { hot.value.profile }
    /// Evaluation time in ms (the user's clock).
    var now: Int64 {
        @inline(__always) get { hot.value.now }
        set { hot.value.now = newValue }
    }
    var change: AttributeChange? {
        @inline(__always) get { hot.value.change }
        set { hot.value.change = newValue }
    }
    /// Whether an attribute change is bound (cheaper than reading it).
    var hasChange: Bool { hot.value.change != nil }
    /// Whether an event is bound.
    var hasEvent: Bool { hot.value.event != nil }

    public init() {}

    func ensureLocals(_ n: Int) {
        if locals.count < n { locals.append(contentsOf: repeatElement(.null, count: n - locals.count)) }
    }

    func ensureMemo(_ n: Int) {
        if hot.value.memo.count < n {
            hot.value.memo.append(contentsOf: repeatElement(.null, count: n - hot.value.memo.count))
            hot.value.memoEpoch.append(contentsOf: repeatElement(0, count: n - hot.value.memoEpoch.count))
        }
    }

    /// When set, evaluation stops at this instant as if the budget were spent (the playground's time limit reaches
    /// into an event): looked at every ``ValueLimits/stepsPerClockCheck`` steps.
    public var deadline: ContinuousClock.Instant?
    /// The step count at which the deadline is looked at next.
    var clockCheckAt = ValueLimits.stepsPerClockCheck

    /// Counts one comprehension iteration; `false` once the event has taken ``ValueLimits/maxSteps``.
    @inline(__always) func step() -> Bool {
        steps &+= 1
        if steps >= clockCheckAt { checkDeadline() }
        return steps <= ValueLimits.maxSteps
    }

    /// Counts `n` steps at once (the work of a function over long strings or lists, a `matches` call); `false` once
    /// the event has taken ``ValueLimits/maxSteps``.
    @inline(__always) func charge(_ n: Int) -> Bool {
        steps &+= n
        if steps >= clockCheckAt { checkDeadline() }
        return steps <= ValueLimits.maxSteps
    }

    /// Spends the budget when the deadline has passed.
    @inline(never) func checkDeadline() {
        clockCheckAt = steps &+ ValueLimits.stepsPerClockCheck
        if let deadline, ContinuousClock.now >= deadline { steps = ValueLimits.maxSteps &+ 1 }
    }

    /// Zeroes the step count for a new event.
    @inline(__always) func resetSteps() {
        steps = 0
        clockCheckAt = ValueLimits.stepsPerClockCheck
    }

    /// Starts a new memo generation (a new event, or state changed by actions).
    func invalidateMemo() { hot.value.epoch &+= 1 }

    @inline(__always) func memoized(_ slot: Int, _ compute: (EvalScope) -> Value) -> Value {
        if hot.value.memoEpoch[slot] == hot.value.epoch { return hot.value.memo[slot] }
        let v = compute(self)
        hot.value.memo[slot] = v
        hot.value.memoEpoch[slot] = hot.value.epoch
        return v
    }

    static var constantFolding: EvalScope { EvalScope() }
}

/// The values of sub-expressions seen during one traced evaluation, for `explain` and dry-run's "why not".
public final class ExprTrace {
    public struct Entry: Sendable {
        /// The expression text the span is in (a rule's condition, or a segment it uses).
        public var source: String
        public var span: SourceSpan
        public var value: Value
        /// How many traced nodes enclose this one.
        public var depth: Int
        /// The operator, for comparisons (`>=`, `==`, `in`…).
        public var op: String?

        public var text: String {
            let scalars = Array(source.unicodeScalars)
            guard span.start >= 0, span.end <= scalars.count, span.start <= span.end else { return source }
            return String(String.UnicodeScalarView(scalars[span.start..<span.end]))
        }
    }

    /// A traced node with the traced nodes inside it.
    public struct Node: Sendable {
        public var entry: Entry
        public var children: [Node]
    }

    public private(set) var entries: [Entry] = []
    var depth = 0
    /// Entries not kept once ``maxEntries`` were (a comprehension records its body once per element).
    public private(set) var dropped = 0

    /// An explanation keeps at most this many values, and shows each in at most ``maxValueText`` characters: its size
    /// is bounded whatever the data (docs/reference/limits.md).
    public static let maxEntries = 256
    public static let maxValueText = 200
    /// The values of the segments evaluated so far in this trace (each is traced once).
    var segments: [ObjectIdentifier: Value] = [:]

    public init() {}

    func record(_ source: String, _ span: SourceSpan, _ value: Value, op: String? = nil) {
        guard entries.count < ExprTrace.maxEntries else {
            dropped += 1
            return
        }
        entries.append(Entry(source: source, span: span, value: value, depth: depth, op: op))
    }

    /// The outermost traced nodes, each with what was inside it (entries are recorded children first).
    public var roots: [Node] {
        var stack: [Node] = []
        for e in entries {
            var children: [Node] = []
            while let last = stack.last, last.entry.depth > e.depth { children.append(stack.removeLast()) }
            stack.append(Node(entry: e, children: children.reversed()))
        }
        return stack
    }

    /// One line: the values that decided, like `heavy_user = false (count("E_Opened_App", "7d") = 9)`.
    public func summary(maxDepth: Int = 3) -> String {
        func render(_ n: Node, _ level: Int) -> String {
            let inner = n.children.filter { !ExprTrace.isLiteralText($0.entry.text) }
            // A comparison with one computed side reads as "count(…) = 9, needs >= 10".
            if let op = n.entry.op, inner.count == 1, case .bool = n.entry.value {
                let child = inner[0]
                let text = n.entry.text
                if text.hasPrefix(child.entry.text) {
                    var rest = text.dropFirst(child.entry.text.count).trimmingPrefix(while: { $0 == " " })
                    if rest.hasPrefix(op) {
                        rest = rest.dropFirst(op.count).trimmingPrefix(while: { $0 == " " })
                        return render(child, level) + ", needs \(op) \(rest)"
                    }
                }
            }
            var s = "\(n.entry.text) = \(ExprTrace.show(n.entry.value))"
            if level < maxDepth && !inner.isEmpty {
                s += " (" + inner.map { render($0, level + 1) }.joined(separator: ", ") + ")"
            }
            return s
        }
        let text = roots.map { render($0, 1) }.joined(separator: "; ")
        return dropped > 0 ? text + " (… \(dropped) more values not shown)" : text
    }

    static func isLiteralText(_ t: String) -> Bool { t.first == "\"" || t.first == "'" || t.first?.isNumber == true }

    static func show(_ v: Value) -> String {
        // A large value is not written out whole only to be cut.
        let text: String =
            switch v {
            case .error(let e): "error: \(e.message)"
            case .string(let s): "\"\(s.prefix(maxValueText))\""
            default: v.byteSize(upTo: 4 * maxValueText) > 4 * maxValueText ? "(a \(v.kindName))" : JSONWriter.encode(v)
            }
        return text.count > maxValueText ? text.prefix(maxValueText - 1) + "…" : text
    }
}

/// The change of one attribute, for `on_change` rules and the `change` variable.
public struct AttributeChange: Sendable {
    public var attribute: String
    public var from: Value
    public var to: Value
}

extension Substring {
    fileprivate func trimmingPrefix(while p: (Character) -> Bool) -> Substring { self.drop(while: p) }
}
