import HeapModule

/// Runs a ``CompiledRuleSet`` over events, one user's state at a time, and returns the actions that fire.
///
/// The engine reads time only from events. It is not thread-safe: use one engine per thread or actor, and give
/// each engine its own users (shard by user id) or its own ``StateStore``.
///
/// ```swift
/// let engine = Engine(ruleSet: ruleSet)
/// let outcome = engine.process(event)
/// for action in outcome.actions { send(action.json) }
/// ```
///
/// What it does is split by concern: an event's steps here (``process(_:into:)``), the look-ahead over a batch
/// (`Engine+Batch`), the state an event updates (`Engine+Updates`), rounds of triggered rules and their verdicts
/// (`Engine+Rounds`), limits (`Engine+Limits`), firing and actions (`Engine+Firing`), delayed actions and sequences
/// (`Engine+Timers`), flows (`Engine+Flows`). The memory it reads per event is the storage layer's (`Storage/`).
public final class Engine {
    public struct Options: Sendable {
        /// Keep a ``RuleVerdict`` for every rule whose trigger matched, fired or not (dry-run, explain).
        public var recordVerdicts = false
        /// Also keep every condition's values in the verdicts (`beckon explain`).
        public var explain = false
        /// With ``recordVerdicts``, say which values made a condition false (the `why` of
        /// ``Verdict/conditionFalse(clause:value:why:)``, from a traced second evaluation of the condition). Off where
        /// only whom a rule triggered for is read (`beckon report`): the text costs more than the rest of the event.
        public var whyNot = true
        /// Report goal events in ``EventOutcome/goalHits`` (`beckon report`).
        public var trackGoals = false
        /// Merge an identify's `anonymousId` (an alias's `previousId`) into its user (``merge(_:into:)``). Off where
        /// the engine holds only some users and the earlier id may be another's (a fleet's partition).
        public var mergesIdentities = true
        public init(
            recordVerdicts: Bool = false, explain: Bool = false, trackGoals: Bool = false, mergesIdentities: Bool = true,
            whyNot: Bool = true
        ) {
            self.recordVerdicts = recordVerdicts || explain
            self.explain = explain
            self.whyNot = whyNot || explain
            self.trackGoals = trackGoals
            self.mergesIdentities = mergesIdentities
        }
    }

    /// Counters over everything processed.
    public struct Stats: Sendable {
        public var events = 0
        public var duplicates = 0
        /// Events refused for passing a bound (``BoundEvent/boundProblem``).
        public var refused = 0
        public var late = 0
        public var actions = 0
        /// Of ``actions``, those `skipped` (a push or email with no address: nothing was sent).
        public var skippedActions = 0
        /// Events that do not fit the loaded tracking plans (``BoundEvent/offPlan``), processed all the same.
        public var offPlan = 0
        /// Ids merged into another user (an identify with an anonymous id, an alias): each keeps a pointer.
        public var merges = 0
        /// Merges not done: the earlier id was a known user (``Engine/merge(_:into:)``).
        public var mergesRefused = 0
        /// New attributes no rule reads that a user could not keep (``ValueLimits/maxOtherAttributes``).
        public var attributesNotKept = 0
        /// Per rule index: trigger matches, fires, and blocks by reason code.
        public var triggered: [Int] = []
        public var fired: [Int] = []
        /// Delayed actions scheduled (they fire, or not, later).
        public var scheduled: [Int] = []
        /// Fires recorded for users in a holdout (no actions sent).
        public var heldBack: [Int] = []
        /// Per rule index: verdicts that were not fires, by ``Verdict/code`` (`where`, `limit:per_day`, `lost`…).
        public var blocked: [[String: Int]] = []

        public init() {}
    }

    /// Counters over everything processed (the per-rule counts are gathered when read).
    public var stats: Stats {
        var s = totals
        let n = ruleSet.rules.count
        func column(_ k: Int) -> [Int] { (0..<n).map { counts[$0 * RuleCounter.width + k] } }
        s.triggered = column(RuleCounter.triggered)
        let skipped = column(RuleCounter.skipped)
        // (A fire that reached nobody, every action skipped for want of an address, is counted as `skipped`.)
        s.fired = zip(column(RuleCounter.fired), skipped).map { $0 - $1 }
        s.scheduled = column(RuleCounter.scheduled)
        s.heldBack = column(RuleCounter.heldBack)
        s.blocked = (0..<n).map { r in
            var m = otherBlocks[r]
            if skipped[r] > 0 { m[ActionKind.skipped.rawValue] = skipped[r] }
            let replaced = counts[r * RuleCounter.width + RuleCounter.replaced]
            if replaced > 0 { m["replaced"] = replaced }
            for (i, code) in Verdict.blockCodes.enumerated() {
                let c = counts[r * RuleCounter.width + RuleCounter.blocks + i]
                if c > 0 { m[code, default: 0] += c }
            }
            return m
        }
        return s
    }

    /// Events processed so far (cheap to read after every event, unlike ``stats``).
    public var eventCount: Int { totals.events }

    /// The per-rule counters' places in a row of ``counts``.
    enum RuleCounter {
        static let triggered = 0
        static let fired = 1
        static let scheduled = 2
        static let heldBack = 3
        /// Fires whose every action was `skipped` (a push or email with no address): not counted as fired.
        static let skipped = 4
        /// Delayed actions dropped for a later trigger of their rule (`retrigger: restart`).
        static let replaced = 5
        /// Then one per entry of ``Verdict/blockCodes``.
        static let blocks = 6
        static let width = blocks + Verdict.blockCodeCount
    }

    /// What the engine reads and changes for every event, in a cell of the storage layer (no run-time exclusivity
    /// check per access in release builds; one thread, one access at a time).
    struct Hot: ~Copyable {
        /// The totals of ``Stats`` (its per-rule arrays stay empty here).
        var totals = Stats()
        var options: Options
        var clock: Int64 = Int64.min
        /// Due times of pending delayed actions, soonest first (entries of cancelled actions are skipped when popped).
        var timers = Heap<TimerRef>()
        /// The rules of the rounds under way, a frame a round (see ``runRound(from:changes:event:profile:now:triggerKey:triggerName:round:out:)``).
        var candidates = ScratchStack<Candidate>()
        /// Some id was merged into another user (or such a state restored): events must then look for the pointer.
        var hasMerges = false
    }
    let hot: ExclusiveCell<Hot>

    var totals: Stats {
        _read { yield hot.value.totals }
        _modify { yield &hot.value.totals }
    }
    public var options: Options {
        get { hot.value.options }
        set { hot.value.options = newValue }
    }
    /// Stream time, which brings every user's delayed actions due (a user's own events bring that user's due).
    ///
    /// One device with a wrong clock must not fire other users' timers, so no one user can move it far: an event at
    /// most ``EngineSettings/clockSkewMs`` past it moves it to the event's time; an event further ahead moves it only
    /// once another user's event confirms it, within the skew of it (``ahead``), and then to the later of the two.
    /// Devices far ahead at different times never confirm one another; a real gap in the stream is crossed by the
    /// second user's event after it. ``advance(to:)`` moves it to any time.
    public internal(set) var clock: Int64 {
        get { hot.value.clock }
        set { hot.value.clock = newValue }
    }
    var timers: Heap<TimerRef> {
        _read { yield hot.value.timers }
        _modify { yield &hot.value.timers }
    }
    var candidates: ScratchStack<Candidate> {
        _read { yield hot.value.candidates }
        _modify { yield &hot.value.candidates }
    }

    /// Per rule, a row of ``RuleCounter/width`` counts: counting a verdict is an add in place.
    let counts: CounterTable
    /// Blocks whose code is not in ``Verdict/blockCodes``, by rule.
    var otherBlocks: [[String: Int]]

    public let ruleSet: CompiledRuleSet
    public let store: any StateStore
    /// The in-memory store's table, read directly (lent by the store, which `store` holds): reading a profile
    /// counts no reference. `nil` for other stores, which are asked through the protocol.
    let memoryTable: Borrowed<ProfileTable>?
    let scope = EvalScope()
    /// The latest events further ahead of the clock than the skew, one per user, waiting for another user's to confirm
    /// them (at most ``maxAhead``, the oldest forgotten first; users by the hash of their id).
    var ahead: [(time: Int64, user: UInt64)] = []
    static let maxAhead = 8
    /// The latest event time seen, whoever sent it.
    var latestTime = Int64.min
    /// Who reported each push token last since ``takeDeviceClaims()`` (collected when ``collectsDeviceClaims``).
    var deviceClaims: [String: DeviceClaim] = [:]
    /// Whether reports of push devices are collected as ``DeviceClaim``s (a service's store keeps who holds each token).
    public var collectsDeviceClaims = false
    /// Users a timer loaded from their saved state since ``takeColdLoads()`` (noted when ``notesColdLoads``).
    var coldLoads: [String] = []
    /// Whether users loaded by a timer rather than an event are noted, so that a service can let them go once their
    /// state is written (``takeColdLoads()``, ``evict(_:)``).
    public var notesColdLoads = false
    /// While ``notesColdLoads``: how many users timers may load from their saved state before ``takeColdLoads()``
    /// takes them. ``advance(to:)`` stops short of the next such user at this bound, leaving what is due queued (its
    /// clock moved all the same), so a service that writes and lets go of those users between calls holds at most
    /// this many of them, however many are due at once (a broadcast's run).
    public var maxColdLoads = Int.max
    /// Per `rate:` rule, its current window's start and how many runs fired in it (kept in ``StreamState``).
    var rateWindows: [Int32: (start: Int64, fired: Int)] = [:]
    /// How many engines share each `rate:` (a fleet's partitions, each with an engine of its own): each fires at most
    /// its share of the rate, rounded up.
    public var rateShares = 1
    /// The latest event time seen (whoever sent it): `dry-run --until +7d` counts from it.
    public var latestEventTime: Int64 { max(latestTime, clock) }
    var nextTimerID: UInt64 = 1
    var hasMerges: Bool {
        get { hot.value.hasMerges }
        set { hot.value.hasMerges = newValue }
    }
    /// With `explain`: the conditions of rules evaluated in this round, until their verdict is noted.
    var clauseBuffer: [Int32: [ClauseTrace]] = [:]
    /// The stable names a ``UserState`` uses for this rule set's rules and series (made on first use).
    lazy var stateNames = StateNames(ruleSet)

    public init(ruleSet: CompiledRuleSet, store: any StateStore = InMemoryStateStore(), options: Options = Options()) {
        self.ruleSet = ruleSet
        self.store = store
        memoryTable = (store as? InMemoryStateStore).map { Borrowed(lending: $0.table) }
        hot = ExclusiveCell(Hot(options: options))
        scope.ruleSet = ruleSet
        scope.ensureMemo(ruleSet.memoSlots)
        counts = CounterTable(count: ruleSet.rules.count * RuleCounter.width)
        otherBlocks = Array(repeating: [:], count: ruleSet.rules.count)
    }

    deinit { memoryTable?.endLoan() }

    @inline(__always) func count(_ r: Int32, _ k: Int, by n: Int = 1) { counts.add(n, at: Int(r) * RuleCounter.width + k) }

    func countBlock(_ r: Int32, _ v: Verdict) {
        if let i = v.blockIndex { count(r, RuleCounter.blocks + i) } else { otherBlocks[Int(r)][v.code, default: 0] += 1 }
    }

    /// When set, expressions stop at this instant as if the event's step budget were spent (``EvalScope/deadline``):
    /// a caller with a time limit of its own (the console's playground) is not held past it by one event.
    public var evaluationDeadline: ContinuousClock.Instant? {
        get { scope.deadline }
        set { scope.deadline = newValue }
    }

    // MARK: Profiles

    /// The profile of a user, if the engine has seen them.
    public func profile(of userID: String) -> UserProfile? {
        if let t = memoryTable {
            return t.with { $0.profile(for: userID, hash: $0.hash(of: userID)) }?.object
        }
        return loadedProfile(userID, create: false)
    }

    /// The profile of `userID` from a store other than the in-memory one: the one it holds, else the user's saved
    /// state restored (their delayed actions put in the timers), else with `create` a new one.
    func loadedProfile(_ userID: String, create: Bool) -> UserProfile? {
        if let p = store.profile(for: userID, create: false, make: { newProfile(userID) }) { return p }
        if let saved = store.savedState(of: userID), saved.userID == userID {
            try? restore(saved)
            if let p = store.profile(for: userID, create: false, make: { newProfile(userID) }) { return p }
        }
        return create ? store.profile(for: userID, create: true) { newProfile(userID) } : nil
    }

    /// Tells a store other than the in-memory one that `profile` changed.
    func stored(_ profile: UserProfile) { store.didUpdate(profile) }

    func newProfile(_ userID: String) -> UserProfile {
        UserProfile(userID: userID, attributeCount: ruleSet.attributeNames.count, contextCount: ruleSet.contextNames.count)
    }

    // MARK: One event

    /// Processes a general event (binds it to the rule set first).
    @discardableResult
    public func process(_ event: Event) -> EventOutcome { process(ruleSet.bind(event)) }

    @discardableResult
    public func process(_ e: BoundEvent) -> EventOutcome {
        var out = EventOutcome(status: .processed, late: false, actions: [], verdicts: [])
        process(e, into: &out)
        return out
    }

    /// Processes an event into `out`, which is reset first: a caller that keeps one outcome across events reuses its
    /// arrays' memory (a service's hot loop allocates nothing for an event that fires).
    public func process(_ e: BoundEvent, into out: inout EventOutcome) { process(e, userHash: nil, into: &out) }

    /// ``process(_:into:)``, with the user id's hash in the in-memory store's table when the caller has it.
    func process(_ e: BoundEvent, userHash: UInt64?, into out: inout EventOutcome) {
        out.status = .processed
        out.late = false
        out.actions.reset(for: ruleSet)
        // (An empty array is left alone: emptying one still makes a new buffer reference.)
        if !out.verdicts.isEmpty { out.verdicts.removeAll(keepingCapacity: true) }
        if !out.goalHits.isEmpty { out.goalHits.removeAll(keepingCapacity: true) }
        if !out.dueTimes.isEmpty { out.dueTimes.removeAll(keepingCapacity: true) }
        totals.events += 1
        if e.isOffPlan { totals.offPlan += 1 }
        guard e.isWithinBounds else {
            totals.refused += 1
            out.status = .refused
            return
        }
        // An identify with an anonymous id, or an alias: the earlier id's user is merged into this one first.
        // (Not for a copy of an event already processed: a duplicate changes nothing, identities included.)
        if let before = e.previousID, options.mergesIdentities, !alreadySeen(e) {
            // Time passes first, as it did live: what came due by the sign-in's time fires before the merge, for the
            // id it was set for, whatever other users' events moved the stream's clock to (docs/events.md).
            passTime(to: e.timestamp, user: e.userID, into: &out)
            for id in [before, e.userID] {
                if let p = loadedProfile(id, create: false), p.mergedInto == nil, !p.pending.isEmpty {
                    fireOwnDue(p, upTo: max(e.timestamp, p.clock), into: &out)
                    if memoryTable == nil { stored(p) }
                }
            }
            merge(before, into: e.userID)
        }
        // A push device the event reports (its context's token) is kept with the user (docs/push.md).
        if let d = e.device { report(d, for: e.userID) }
        // The in-memory store's profile is borrowed from its table for the event (no reference counted); another
        // store's is held, and told of the change. An id merged into another user has that user's events.
        if let t = memoryTable {
            let h = userHash ?? t.with { $0.hash(of: e.userID) }
            // (No closure to make a profile: passing `newProfile` would capture the engine, counted, per event.)
            let profile = t.with { $0.profile(for: e.userID, hash: h) } ?? t.with { $0.insert(newProfile(e.userID), hash: h) }
            if hasMerges, let into = profile.with({ $0.mergedInto }) { return processMerged(e, as: into, into: &out) }
            profile.with { process(e, profile: $0, user: e.userID, into: &out) }
        } else {
            let profile = loadedProfile(e.userID, create: true)!
            if hasMerges, let into = profile.mergedInto { return processMerged(e, as: into, into: &out) }
            process(e, profile: profile, user: e.userID, into: &out)
            stored(profile)
        }
    }

    /// An event of `user` at `time` moves the stream's clock (``moveClock(_:user:)``), and what is due by it fires.
    @inline(__always) func passTime(to time: Int64, user: String, into out: inout EventOutcome) {
        moveClock(time, user: user)
        if let due = timers.min, due.due <= clock { advance(to: clock, into: &out) }
    }

    /// An event's steps, once the user's profile is found; `user` is the id whose events they are, for the stream clock.
    func process(_ e: BoundEvent, profile: UserProfile, user: String, into out: inout EventOutcome) {
        let rs = ruleSet
        // (An id named as a `userId` is a known user from then on; an event of an id merged into `user` is not its.)
        if e.identified && !profile.known && user == e.userID { profile.known = true }
        // A duplicate changes nothing, time included: its outcome is empty.
        if let mid = e.messageID, isDuplicate(profile, mid, e.timestamp) {
            totals.duplicates += 1
            out.status = .duplicate
            return
        }
        // Time passes: delayed actions due by the stream's clock fire first, then this user's own, due by their time.
        passTime(to: e.timestamp, user: user, into: &out)
        if !profile.pending.isEmpty { fireOwnDue(profile, upTo: max(e.timestamp, profile.clock), into: &out) }
        out.late = e.timestamp < profile.clock
        if out.late { totals.late += 1 }
        let now = max(e.timestamp, profile.clock)
        profile.clock = now
        profile.eventCount &+= 1

        let plan: EventPlans.Plan? = e.nameID >= 0 ? rs.eventPlans[e.nameID] : nil
        // Identify, alias and group calls say who the user is, not what they did: no session activity, no `"*"`
        // count, no inactivity timer moved.
        let isActivity = e.kind != .identify && e.kind != .alias && e.kind != .group
        if isActivity { updateSession(profile, startsSession: plan?.startsSession ?? false, now) }
        for slot in 0..<e.contextSlots.count {
            if let v = e.contextSlots[slot] { profile.context[slot] = v }
        }
        if let plan { recordHistory(profile, e, plan, now) }
        if isActivity {
            for s in rs.anyEventSeries {
                profile.history.record(
                    series: s, at: e.timestamp, now: now, retentionMs: rs.seriesTable[s].retentionMs,
                    keepsLifetime: rs.seriesTable[s].keepsLifetime)
            }
        }

        var round = RoundState()
        if e.kind == .identify {
            for (k, (name, value)) in e.traits.enumerated() {
                applyAttribute(
                    profile, name: name, slot: rs.attributeSlots[name], value: value.isNullValue ? nil : value,
                    changes: &round.changes, more: e.traits.count - k - 1)
            }
            profile.attributes.trim()
        }

        // The scope is lent the event and profile: both live until this call returns, when it lets them go.
        scope.event = e
        scope.profile = profile
        scope.now = now
        if scope.steps != 0 { scope.resetSteps() }
        // (Cleared only when set: assigning nil runs the destroy of what was there, a generic call.)
        if scope.hasChange { scope.change = nil }
        scope.invalidateMemo()
        let triggerKey = TriggerKey(messageID: e.messageID, eventCount: profile.eventCount)
        if rs.hasTimedRules {
            if isActivity && !rs.inactivityRules.isEmpty { armInactivity(profile, e, now: now, key: triggerKey) }
            if !rs.scheduleRules.isEmpty { armSchedules(profile, now: now) }
        }
        if let plan {
            let id = Int(e.nameID)
            // The rule set's interned key: the name, or `screen:NAME` (no string is built per event).
            let triggerName = rs.eventNames[id]
            if plan.cancels && !profile.pending.isEmpty {
                cancelPending(profile, e, now: now, rules: rs.cancelIndex[id], out: &out)
            }
            let completed = plan.stepsSequences ? advanceSequences(profile, e, now: now, rules: rs.sequenceIndex[id]) : []
            let frame = candidates.count
            for k in plan.rules { candidates.push(Candidate(rule: rs.eventPlans.item(k), change: -1)) }
            for r in completed { candidates.push(Candidate(rule: r, change: -1)) }
            if candidates.count > frame {
                runRound(
                    from: frame, changes: [], event: e, profile: profile, now: now, triggerKey: triggerKey,
                    triggerName: triggerName, round: &round, out: &out)
            }
            candidates.pop(to: frame)
        }
        if !round.changes.isEmpty { cascade(profile: profile, now: now, triggerKey: triggerKey, round: &round, out: &out) }
        if options.trackGoals, let plan, plan.isGoal {
            for (u, g) in rs.goalsByEvent[Int(e.nameID)] {
                let goal = rs.units[Int(u)].goals[g]
                scope.event = e
                if goal.whereExpr.map({ $0.evaluate(scope).isTrue }) ?? true {
                    var value: Double?
                    switch goal.valueSlot.flatMap({ e.property($0) }) {
                    case .int(let n)?: value = Double(n)
                    case .uint(let n)?: value = Double(n)
                    case .double(let d)? where d.isFinite: value = d
                    default: value = nil
                    }
                    out.goalHits.append(GoalHit(unit: u, goal: g, userID: profile.userID, time: now, value: value))
                }
            }
        }
        scope.event = nil
        scope.profile = nil
        totals.actions += out.actions.count
    }

    /// State changes collected while a round runs.
    struct RoundState {
        var changes: [(slot: Int, change: AttributeChange)] = []
    }
}
