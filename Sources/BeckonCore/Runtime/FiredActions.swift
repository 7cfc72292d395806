/// The actions an event (or a time advance) fired, in order: a random-access collection of ``FiredAction``.
///
/// Kept compact: an action whose fields are its rule's constants is a record of plain data (the rule's origin, the
/// action's place, its time, and which of the outcome's triggers it came from), and the user and trigger that the
/// event's actions share are kept once. A ``FiredAction`` is made when one is read; ``write(_:to:)`` writes one as
/// JSON without making it. Firing an action so counts no references, and resetting the outcome for the next event
/// frees nothing per action (what is left is dropped as later actions take its place). Actions whose fields were computed, or that are their own (`held_back`), are kept whole.
public struct FiredActions: RandomAccessCollection, Sendable {
    /// One fired action. `origin` is lent by its rule, which `keeper` keeps; `own` ≥ 0: the action is `owned[own]`
    /// (which holds its origin itself).
    struct Record {
        var origin: Borrowed<ActionOrigin>?
        var action: Int32
        var trigger: Int32
        var own: Int32
        var time: Int64
    }

    /// The user and trigger that a run of actions shares.
    struct Trigger: Sendable {
        var userID: String
        var key: TriggerKey
        var name: String

        /// Whether a fire of `userID` with `key` and `name` shares this trigger: the same count and the same bytes
        /// (not `==`, which would equate canonically equivalent ids of different users).
        @inline(__always) func isSame(_ userID: String, _ key: TriggerKey, _ name: String) -> Bool {
            self.key.eventCount == key.eventCount && Bytes.equal(self.userID, userID) && Bytes.equal(self.name, name)
                && Bytes.equal(self.key.suffix, key.suffix)
                && (self.key.messageID == nil
                    ? key.messageID == nil : key.messageID.map { Bytes.equal(self.key.messageID!, $0) } ?? false)
        }
    }

    // Each list's first `…Count` entries are live. Resetting sets the counts to 0 and later appends overwrite what is
    // left (dropping it then): emptying arrays costs more than an event's actions when most events fire once or not.
    private var records: ContiguousArray<Record> = []
    private var recordCount = 0
    private var triggers: ContiguousArray<Trigger> = []
    private var triggerCount = 0
    private var owned: ContiguousArray<FiredAction> = []
    private var ownedCount = 0
    /// Holds the origins of the records (the rule set whose rules they belong to).
    private var keeper: CompiledRuleSet?

    public init() {}

    public init(_ actions: some Sequence<FiredAction>) {
        for a in actions { append(a) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { recordCount }

    public subscript(i: Int) -> FiredAction {
        precondition(i >= 0 && i < recordCount, "index out of range")
        let r = records[i]
        if r.own >= 0 { return owned[Int(r.own)] }
        let t = triggers[Int(r.trigger)]
        return FiredAction(
            origin: r.origin!.object, actionIndex: Int(r.action), triggerKey: t.key, time: r.time, userID: t.userID,
            trigger: t.name)
    }

    /// Writes action `i` as ``FiredAction/json`` does.
    public func write(_ i: Int, to w: inout JSONWriter) {
        precondition(i >= 0 && i < recordCount, "index out of range")
        let r = records[i]
        if r.own >= 0 {
            owned[Int(r.own)].write(to: &w)
            return
        }
        let t = Int(r.trigger)
        r.origin!.with { origin in
            FiredAction.write(
                origin: origin, actionIndex: Int(r.action), triggerKey: triggers[t].key, time: r.time,
                userID: triggers[t].userID, trigger: triggers[t].name, to: &w)
        }
    }

    /// Empties the collection (keeping its memory) for actions of rules of `ruleSet`.
    mutating func reset(for ruleSet: CompiledRuleSet) {
        if keeper !== ruleSet { keeper = ruleSet }
        recordCount = 0
        triggerCount = 0
        ownedCount = 0
    }

    /// Puts `x` at `a[n]` (over what is left there, or appended), then counts it.
    @inline(__always) private static func put<T>(_ x: consuming T, in a: inout ContiguousArray<T>, at n: inout Int) {
        if n < a.count { a[n] = x } else { a.append(x) }
        n += 1
    }

    /// Adds a fire of action `action` of `origin`'s rule with the rule's compiled kind and fields. The rule is one of
    /// the rule set the collection was last ``reset(for:)`` (which keeps `origin` alive).
    mutating func append(
        origin: Borrowed<ActionOrigin>, action: Int, time: Int64, userID: String, key: TriggerKey, trigger name: String
    ) {
        assert(keeper != nil, "reset(for:) first")
        if triggerCount == 0 || !triggers[triggerCount - 1].isSame(userID, key, name) {
            Self.put(Trigger(userID: userID, key: key, name: name), in: &triggers, at: &triggerCount)
        }
        Self.put(
            Record(origin: origin, action: Int32(action), trigger: Int32(triggerCount - 1), own: -1, time: time),
            in: &records, at: &recordCount)
    }

    /// Adds `other`'s actions after these, in their order, as they are kept there (an action is not made). A writer
    /// on another thread can so take a run of events' actions from an outcome that the next event reuses.
    public mutating func append(contentsOf other: FiredActions) {
        guard other.recordCount > 0 else { return }
        if keeper == nil { keeper = other.keeper }
        let sameRules = keeper === other.keeper
        let triggerBase = Int32(triggerCount)
        if sameRules {
            for t in 0..<other.triggerCount { Self.put(other.triggers[t], in: &triggers, at: &triggerCount) }
        }
        for i in 0..<other.recordCount {
            var r = other.records[i]
            if r.own >= 0 || !sameRules {
                // Kept whole: an action of its own, or one of another rule set than the one this keeps.
                append(other[i])
                continue
            }
            r.trigger += triggerBase
            Self.put(r, in: &records, at: &recordCount)
        }
    }

    /// Adds an action kept whole.
    public mutating func append(_ action: FiredAction) {
        let record = Record(
            origin: nil, action: Int32(action.actionIndex), trigger: -1, own: Int32(ownedCount), time: action.time)
        Self.put(action, in: &owned, at: &ownedCount)
        Self.put(record, in: &records, at: &recordCount)
    }
}

extension FiredActions.Record: @unchecked Sendable {}
