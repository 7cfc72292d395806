/// What an expression can see while it runs: the event, the user, the time, comprehension variables.
/// One scope is reused for every evaluation of an engine, so evaluating allocates nothing.
public final class EvalScope {
    /// Comprehension variables (`x` in `list.exists(x, …)`), by slot.
    public var locals: [Value] = []
    /// Variables bound by name (conformance tests, `beckon` tools).
    public var bindings: [String: Value] = [:]
    /// When set, compiled-with-tracing expressions record each sub-expression's value here.
    public var trace: ExprTrace?

    // Runtime state, set by the engine before evaluating.
    var event: BoundEvent?
    var profile: UserProfile?
    /// Evaluation time in ms (the user's clock).
    var now: Int64 = 0
    var change: AttributeChange?
    /// Per-event memo of segment and audience values: valid when `memoEpoch[i] == epoch`.
    var memo: [Value] = []
    var memoEpoch: [UInt32] = []
    var epoch: UInt32 = 1
    var ruleSet: CompiledRuleSet?

    public init() {}

    func ensureLocals(_ n: Int) {
        if locals.count < n { locals.append(contentsOf: repeatElement(.null, count: n - locals.count)) }
    }

    func ensureMemo(_ n: Int) {
        if memo.count < n {
            memo.append(contentsOf: repeatElement(.null, count: n - memo.count))
            memoEpoch.append(contentsOf: repeatElement(0, count: n - memoEpoch.count))
        }
    }

    /// Starts a new memo generation (a new event, or state changed by actions).
    func invalidateMemo() { epoch &+= 1 }

    @inline(__always) func memoized(_ slot: Int, _ compute: (EvalScope) -> Value) -> Value {
        if memoEpoch[slot] == epoch { return memo[slot] }
        let v = compute(self)
        memo[slot] = v
        memoEpoch[slot] = epoch
        return v
    }

    static var constantFolding: EvalScope { EvalScope() }
}

/// The values of sub-expressions seen during one traced evaluation, for `explain`.
public final class ExprTrace {
    public struct Entry: Sendable {
        public var span: SourceSpan
        public var value: Value
    }
    public private(set) var entries: [Entry] = []

    public init() {}

    func record(_ span: SourceSpan, _ value: Value) { entries.append(Entry(span: span, value: value)) }

    /// The last value recorded for exactly this span.
    public func value(at span: SourceSpan) -> Value? { entries.last(where: { $0.span == span })?.value }
}

/// The change of one attribute, for `on_change` rules and the `change` variable.
public struct AttributeChange: Sendable {
    public var attribute: String
    public var from: Value
    public var to: Value
}
