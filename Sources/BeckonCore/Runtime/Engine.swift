import CBeckon
import HeapModule

/// Runs a ``CompiledRuleSet`` over events, one user's state at a time, and returns the actions that fire.
///
/// The engine reads time only from events. It is not thread-safe: use one engine per thread or actor, and give
/// each engine its own users (shard by user id) or its own ``StateStore``. Its hot state, its scope's and the profiles'
/// skip Swift's run-time exclusivity checks (`@exclusivity(unchecked)`): one thread, one access at a time.
///
/// ```swift
/// let engine = Engine(ruleSet: ruleSet)
/// let outcome = engine.process(event)
/// for action in outcome.actions { send(action.json) }
/// ```
public final class Engine {
    public struct Options: Sendable {
        /// Keep a ``RuleVerdict`` for every rule whose trigger matched, fired or not (dry-run, explain).
        public var recordVerdicts = false
        /// Also keep every condition's values in the verdicts (`beckon explain`).
        public var explain = false
        /// Report goal events in ``EventOutcome/goalHits`` (`beckon report`).
        public var trackGoals = false
        public init(recordVerdicts: Bool = false, explain: Bool = false, trackGoals: Bool = false) {
            self.recordVerdicts = recordVerdicts || explain
            self.explain = explain
            self.trackGoals = trackGoals
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
    }

    /// Counters over everything processed (the per-rule counts are gathered when read).
    public var stats: Stats {
        var s = totals
        let n = ruleSet.rules.count
        func column(_ k: Int) -> [Int] { (0..<n).map { counts[$0 * RuleCounter.width + k] } }
        s.triggered = column(RuleCounter.triggered)
        s.fired = column(RuleCounter.fired)
        s.scheduled = column(RuleCounter.scheduled)
        s.heldBack = column(RuleCounter.heldBack)
        s.blocked = (0..<n).map { r in
            var m = otherBlocks[r]
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
        /// Then one per entry of ``Verdict/blockCodes``.
        static let blocks = 4
        static let width = blocks + Verdict.blockCodeCount
    }

    /// The totals of ``Stats`` (its per-rule arrays stay empty here).
    @exclusivity(unchecked) var totals = Stats()
    /// Per rule, a row of ``RuleCounter/width`` counts: one flat buffer the engine owns, so counting a verdict is an
    /// add to memory (no copy-on-write check, no exclusivity check of a class property).
    let counts: UnsafeMutablePointer<Int>
    /// Blocks whose code is not in ``Verdict/blockCodes``, by rule.
    var otherBlocks: [[String: Int]]

    @inline(__always) func count(_ r: Int32, _ k: Int, by n: Int = 1) { counts[Int(r) * RuleCounter.width + k] += n }

    func countBlock(_ r: Int32, _ v: Verdict) {
        if let i = v.blockIndex { count(r, RuleCounter.blocks + i) } else { otherBlocks[Int(r)][v.code, default: 0] += 1 }
    }

    public let ruleSet: CompiledRuleSet
    public let store: any StateStore
    @exclusivity(unchecked) public var options: Options
    let scope = EvalScope()
    /// Stream time, which brings every user's delayed actions due (a user's own events bring that user's due).
    ///
    /// One device with a wrong clock must not fire other users' timers, so no one user can move it far: an event at
    /// most ``EngineSettings/clockSkewMs`` past it moves it to the event's time; an event further ahead moves it only
    /// once another user's event confirms it, within the skew of it (``ahead``), and then to the later of the two.
    /// Devices far ahead at different times never confirm one another; a real gap in the stream is crossed by the
    /// second user's event after it. ``advance(to:)`` moves it to any time.
    @exclusivity(unchecked) public internal(set) var clock: Int64 = Int64.min
    /// The latest events further ahead of the clock than the skew, one per user, waiting for another user's to confirm
    /// them (at most ``maxAhead``, the oldest forgotten first; users by the hash of their id).
    var ahead: [(time: Int64, user: UInt64)] = []
    static let maxAhead = 8
    /// The latest event time seen, whoever sent it.
    var latestTime = Int64.min
    /// The latest event time seen (whoever sent it): `dry-run --until +7d` counts from it.
    public var latestEventTime: Int64 { max(latestTime, clock) }
    /// Due times of pending delayed actions, soonest first (entries of cancelled actions are skipped when popped).
    @exclusivity(unchecked) var timers = Heap<TimerRef>()
    var nextTimerID: UInt64 = 1
    /// With `explain`: the conditions of rules evaluated in this round, until their verdict is noted.
    var clauseBuffer: [Int32: [ClauseTrace]] = [:]
    /// The stable names a ``UserState`` uses for this rule set's rules and series (made on first use).
    lazy var stateNames = StateNames(ruleSet)

    public init(ruleSet: CompiledRuleSet, store: any StateStore = InMemoryStateStore(), options: Options = Options()) {
        self.ruleSet = ruleSet
        self.store = store
        self.memoryStore = (store as? InMemoryStateStore).map { Unmanaged.passUnretained($0) }
        self.options = options
        scope.ruleSet = ruleSet
        scope.ensureMemo(ruleSet.memoSlots)
        let size = max(1, ruleSet.rules.count * RuleCounter.width)
        counts = .allocate(capacity: size)
        counts.initialize(repeating: 0, count: size)
        otherBlocks = Array(repeating: [:], count: ruleSet.rules.count)
    }

    deinit { counts.deallocate() }

    /// Processes a general event (binds it to the rule set first).
    @discardableResult
    public func process(_ event: Event) -> EventOutcome { process(ruleSet.bind(event)) }

    /// The profile of a user, if the engine has seen them.
    public func profile(of userID: String) -> UserProfile? { profileFor(userID, hash: nil, create: false) }

    /// The store, when it is the in-memory one (called directly, not through the protocol). `store` holds it: using
    /// this reference counts nothing.
    let memoryStore: Unmanaged<InMemoryStateStore>?

    private func profileFor(_ userID: String, hash: UInt64?, create: Bool) -> UserProfile? {
        if let m = memoryStore { return storedProfile(m, userID, hash: hash, create: create)?.takeUnretainedValue() }
        return loadedProfile(userID, create: create)
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

    /// Tells a store other than the in-memory one that `profile` changed (with its whole state, if it saves states).
    func stored(_ profile: UserProfile) {
        store.didUpdate(profile)
        if store.savesStates { store.save(state(of: profile)) }
    }

    /// The in-memory store's reference to the profile of `userID` (the store keeps it: taking it counts nothing).
    @inline(__always) private func storedProfile(
        _ m: Unmanaged<InMemoryStateStore>, _ userID: String, hash: UInt64?, create: Bool
    ) -> Unmanaged<UserProfile>? {
        m._withUnsafeGuaranteedRef {
            $0.profileReference(for: userID, hash: hash ?? $0.hash(of: userID), create: create) { newProfile(userID) }
        }
    }

    func newProfile(_ userID: String) -> UserProfile {
        UserProfile(userID: userID, attributeCount: ruleSet.attributeNames.count, contextCount: ruleSet.contextNames.count)
    }

    @discardableResult
    public func process(_ e: BoundEvent) -> EventOutcome {
        var out = EventOutcome(status: .processed, late: false, actions: [], verdicts: [])
        process(e, into: &out)
        return out
    }

    /// Processes `events` in order, exactly as ``process(_:into:)`` would one after the other, handing each event's
    /// outcome to `each` (in place: it is reset when the next event is processed) before the next event is processed.
    ///
    /// What it adds is time: processing an event mostly waits for memory — the event, its user's slot in the store,
    /// the user's profile and state — when users are many. While it works on one event, it asks the CPU for the
    /// memory of the events a few places ahead, in steps (event, then slot, then profile, then state), so that those
    /// loads overlap. The hints read nothing that could change a result. With a store other than the in-memory one,
    /// only events are fetched ahead.
    public func process(
        _ events: UnsafeBufferPointer<BoundEvent>, into out: inout EventOutcome, each: (inout EventOutcome) -> Void
    ) {
        let n = events.count
        guard n > 0 else { return }
        // The events as unmanaged references (the same words): reading one ahead of time counts no references, and
        // the buffer keeps every event alive for the call.
        let at = UnsafeRawPointer(events.baseAddress!).assumingMemoryBound(to: Unmanaged<BoundEvent>.self)
        @inline(__always) func prefetchEvent(_ j: Int) {
            beckon_prefetch_range(at[j].toOpaque(), BoundEvent.objectBytes, 4)
        }
        guard let store = memoryStore?.takeUnretainedValue() else {
            for i in 0..<n {
                if i + Lookahead.event < n { prefetchEvent(i + Lookahead.event) }
                at[i]._withUnsafeGuaranteedRef { process($0, into: &out) }
                each(&out)
            }
            return
        }
        // The user ids' hashes, computed once (at the slot step) for the later steps and the look-up itself.
        let ring = Lookahead.slot + 1
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: ring) { hashes in
            @inline(__always) func hash(_ j: Int) -> UInt64 { at[j]._withUnsafeGuaranteedRef { store.hash(of: $0.userID) } }
            for j in 0..<min(n, Lookahead.slot) { hashes[j % ring] = hash(j) }
            for i in 0..<n {
                if i + Lookahead.event < n { prefetchEvent(i + Lookahead.event) }
                if i + Lookahead.slot < n {
                    let h = hash(i + Lookahead.slot)
                    hashes[(i + Lookahead.slot) % ring] = h
                    store.prefetchSlot(hash: h)
                }
                if i + Lookahead.profile < n { store.prefetchProfile(hash: hashes[(i + Lookahead.profile) % ring]) }
                if i + Lookahead.state < n {
                    store.prefetchState(hash: hashes[(i + Lookahead.state) % ring])
                    at[i + Lookahead.state]._withUnsafeGuaranteedRef { $0.prefetchProperties() }
                }
                at[i]._withUnsafeGuaranteedRef { process($0, userHash: hashes[i % ring], into: &out) }
                each(&out)
            }
        }
    }

    /// How many events ahead each step of ``process(_:into:each:)`` fetches (each step reads what the one before
    /// fetched, so each is nearer than the one before it).
    enum Lookahead {
        static let event = 16
        static let slot = 10
        static let profile = 6
        static let state = 3
    }

    /// Processes an event into `out`, which is reset first: a caller that keeps one outcome across events reuses its
    /// arrays' memory (a service's hot loop allocates nothing for an event that fires).
    public func process(_ e: BoundEvent, into out: inout EventOutcome) { process(e, userHash: nil, into: &out) }

    /// ``process(_:into:)``, with the user id's hash in the in-memory store when the caller has it.
    private func process(_ e: BoundEvent, userHash: UInt64?, into out: inout EventOutcome) {
        out.status = .processed
        out.late = false
        out.actions.reset(for: ruleSet)
        // (An empty array is left alone: emptying one still makes a new buffer reference.)
        if !out.verdicts.isEmpty { out.verdicts.removeAll(keepingCapacity: true) }
        if !out.goalHits.isEmpty { out.goalHits.removeAll(keepingCapacity: true) }
        totals.events += 1
        guard e.isWithinBounds else {
            totals.refused += 1
            out.status = .refused
            return
        }
        // The in-memory store's profile is borrowed from the store for the event (no reference counted); another
        // store's is held, and told of the change.
        if let m = memoryStore {
            let h = userHash ?? m._withUnsafeGuaranteedRef { $0.hash(of: e.userID) }
            storedProfile(m, e.userID, hash: h, create: true)!._withUnsafeGuaranteedRef {
                process(e, profile: $0, user: h, into: &out)
            }
        } else {
            let profile = loadedProfile(e.userID, create: true)!
            process(e, profile: profile, user: ByteHash.hash(e.userID), into: &out)
            stored(profile)
        }
    }

    /// ``process(_:into:)`` once the user's profile is found; `user` identifies the user for the stream clock.
    private func process(_ e: BoundEvent, profile: UserProfile, user: UInt64, into out: inout EventOutcome) {
        let rs = ruleSet
        // A duplicate changes nothing, time included: its outcome is empty.
        if let mid = e.messageID, isDuplicate(profile, mid, e.timestamp) {
            totals.duplicates += 1
            out.status = .duplicate
            return
        }
        // Time passes: delayed actions due by the stream's clock fire first, then this user's own, due by their time.
        moveClock(e.timestamp, user: user)
        if let due = timers.min, due.due <= clock { advance(to: clock, into: &out) }
        if !profile.pending.isEmpty { fireOwnDue(profile, upTo: max(e.timestamp, profile.clock), into: &out) }
        out.late = e.timestamp < profile.clock
        if out.late { totals.late += 1 }
        let now = max(e.timestamp, profile.clock)
        profile.clock = now
        profile.eventCount &+= 1

        let plan: EventPlans.Plan? = e.nameID >= 0 ? rs.eventPlans[e.nameID] : nil
        if e.kind != .identify { updateSession(profile, startsSession: plan?.startsSession ?? false, now) }
        for slot in 0..<e.contextSlots.count {
            if let v = e.contextSlots[slot] { profile.context[slot] = v }
        }
        if let plan { recordHistory(profile, e, rs.eventPlans.series(plan), now) }
        if e.kind != .identify {
            for s in rs.anyEventSeries {
                profile.history.record(
                    series: s, at: e.timestamp, now: now, retentionMs: rs.seriesTable[s].retentionMs,
                    keepsLifetime: rs.seriesTable[s].keepsLifetime)
            }
        }

        var round = RoundState()
        if e.kind == .identify {
            for (name, value) in e.traits {
                applyAttribute(
                    profile, name: name, slot: rs.attributeSlots[name], value: value.isNullValue ? nil : value,
                    changes: &round.changes)
            }
        }

        // The scope holds the event and profile unowned: both live until this call returns, when it lets them go.
        scope.event = e
        scope.profile = profile
        scope.now = now
        if scope.steps != 0 { scope.steps = 0 }
        // (Cleared only when set: assigning nil runs the destroy of what was there, a generic call.)
        if scope.change != nil { scope.change = nil }
        scope.invalidateMemo()
        let triggerKey = TriggerKey(messageID: e.messageID, eventCount: profile.eventCount)
        if let plan {
            let id = Int(e.nameID)
            // The rule set's interned key: the name, or `screen:NAME` (no string is built per event).
            let triggerName = rs.eventNames[id]
            if plan.cancels && !profile.pending.isEmpty {
                cancelPending(profile, e, now: now, rules: rs.cancelIndex[id], out: &out)
            }
            let completed =
                plan.stepsSequences ? advanceSequences(profile, e, now: now, rules: rs.sequenceIndex[id]) : []
            let direct = rs.eventPlans.rules(plan)
            let n = direct.count + completed.count
            if n > 0 {
                withUnsafeTemporaryAllocation(of: Candidate.self, capacity: n) { buf in
                    for (i, r) in direct.enumerated() { buf[i] = Candidate(rule: r, change: -1) }
                    for (i, r) in completed.enumerated() { buf[direct.count + i] = Candidate(rule: r, change: -1) }
                    runRound(
                        UnsafeBufferPointer(buf), changes: [], event: e, profile: profile, now: now, triggerKey: triggerKey,
                        triggerName: triggerName, round: &round, out: &out)
                }
            }
        }
        if !round.changes.isEmpty { cascade(profile: profile, now: now, triggerKey: triggerKey, round: &round, out: &out) }
        if options.trackGoals, let plan, plan.isGoal {
            for (u, g) in rs.goalsByEvent[Int(e.nameID)] {
                let goal = rs.units[Int(u)].goals[g]
                scope.event = e
                if goal.whereExpr.map({ $0.evaluate(scope).isTrue }) ?? true {
                    out.goalHits.append(GoalHit(unit: u, goal: g, userID: e.userID, time: now))
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

    /// Runs `on_change` rules for attribute changes, round after round, up to the cascade depth.
    func cascade(profile: UserProfile, now: Int64, triggerKey: TriggerKey, round: inout RoundState, out: inout EventOutcome) {
        var depth = 0
        while !round.changes.isEmpty {
            let changes = round.changes
            round.changes = []
            var candidates: [Candidate] = []
            for (k, (slot, change)) in changes.enumerated() where slot < ruleSet.rulesByAttribute.count {
                for r in ruleSet.rulesByAttribute[slot] {
                    guard case .change(_, let from, let to) = ruleSet.rules[Int(r)].trigger else { continue }
                    if let from, !from.contains(where: { Value.equal($0, change.from) }) { continue }
                    if let to, !to.contains(where: { Value.equal($0, change.to) }) { continue }
                    candidates.append(Candidate(rule: r, change: Int32(k)))
                }
            }
            guard !candidates.isEmpty else { return }
            depth += 1
            if depth > ruleSet.settings.maxCascadeDepth {
                for c in candidates {
                    note(
                        c.rule, .cascadeLimit(ruleSet.settings.maxCascadeDepth), now: now, userID: profile.userID,
                        trigger: "change", out: &out)
                }
                return
            }
            let changeValues = changes.map(\.change)
            candidates.withUnsafeBufferPointer { buf in
                runRound(
                    buf, changes: changeValues, event: scope.event, profile: profile, now: now,
                    triggerKey: triggerKey.appending("|\(depth)"),
                    triggerName: nil,
                    round: &round, out: &out)
            }
        }
    }

    // MARK: Rounds

    /// A triggered rule, with the index of the attribute change that triggered it (-1: an event).
    struct Candidate {
        var rule: Int32
        var change: Int32
    }

    /// Evaluates triggered rules against the same state, arbitrates, then fires the winners in order.
    /// Works in stack buffers: a round allocates nothing unless something fires.
    private func runRound(
        _ triggered: UnsafeBufferPointer<Candidate>, changes: [AttributeChange], event: BoundEvent?, profile: UserProfile,
        now: Int64,
        triggerKey: TriggerKey, triggerName: String?, round: inout RoundState, out: inout EventOutcome
    ) {
        scope.invalidateMemo()
        // The rule set holds every rule for the engine's life: no reference counting per rule.
        let rules = ruleSet.ruleTable
        withUnsafeTemporaryAllocation(of: Candidate.self, capacity: triggered.count) { buf in
            var n = 0
            for c in triggered {
                let entry = rules[c.rule]
                unowned(unsafe) let rule = entry.rule.takeUnretainedValue()
                if c.change >= 0 { scope.change = changes[Int(c.change)] }
                if !options.recordVerdicts, entry.gated, let gate = rule.gate {
                    // Blocked: counted here as `note` would; passed: `note` counts it with its final verdict.
                    let block = gate.blocks(profile: profile, event: event, now: now, rule: c.rule, hasLimits: rule.hasLimits)
                    if let block {
                        count(c.rule, RuleCounter.triggered)
                        count(c.rule, RuleCounter.blocks + block)
                    } else {
                        buf[n] = c
                        n += 1
                    }
                    continue
                }
                if let v = evaluate(rule, profile: profile, event: event, now: now) {
                    note(c.rule, v, now: now, userID: profile.userID, trigger: triggerName ?? rule.triggerDescription, out: &out)
                } else {
                    buf[n] = c
                    n += 1
                }
            }
            guard n > 0 else { return }
            // Delayed rules do not show now, so they take no part in arbitration: they are scheduled.
            var m = 0
            for k in 0..<n {
                let q = buf[k]
                unowned(unsafe) let rule = rules.rule(q.rule)
                if q.change >= 0 { scope.change = changes[Int(q.change)] }
                // An `at` time that is now already is not a delay.
                if rule.isDelayed, case let due = dueTime(rule, profile: profile, now: now), due > now {
                    schedule(
                        rule, due: due, held: false, profile: profile, now: now, triggerKey: triggerKey,
                        trigger: triggerName ?? rule.triggerDescription, change: scope.change, out: &out)
                } else {
                    buf[m] = q
                    m += 1
                }
            }
            if m > 1 {
                m = arbitrate(
                    UnsafeMutableBufferPointer(rebasing: buf[0..<m]), profile: profile, now: now, triggerName: triggerName,
                    out: &out)
            }
            for k in 0..<m {
                let q = buf[k]
                unowned(unsafe) let rule = rules.rule(q.rule)
                if q.change >= 0 { scope.change = changes[Int(q.change)] }
                deliver(
                    rule, profile: profile, now: now, triggerKey: triggerKey, trigger: triggerName ?? rule.triggerDescription,
                    round: &round, out: &out)
            }
        }
    }

    /// The last checks before actions go out, shared by immediate rules and delayed actions that came due:
    /// quiet hours (hold or drop) and the global message cap; then the rule fires.
    func deliver(
        _ rule: CompiledRule, profile: UserProfile, now: Int64, triggerKey: TriggerKey, trigger: String, round: inout RoundState,
        out: inout EventOutcome
    ) {
        if rule.hasQuietHours, let q = rule.timing.quietHours, let end = quietUntil(q, profile: profile, now: now) {
            if q.hold {
                schedule(
                    rule, due: end, held: true, profile: profile, now: now, triggerKey: triggerKey, trigger: trigger,
                    change: scope.change, out: &out)
            } else {
                note(rule.index, .quietHours(heldUntil: nil), now: now, userID: profile.userID, trigger: trigger, out: &out)
            }
            return
        }
        if rule.surface != nil, let g = ruleSet.settings.globalLimits,
            let hit = check(
                g, record: profile.messages, series: ruleSet.settings.globalSeries, profile: profile, now: now, occurrence: nil)
        {
            note(rule.index, .globalLimited(hit), now: now, userID: profile.userID, trigger: trigger, out: &out)
            return
        }
        let sent = fire(rule, profile: profile, now: now, triggerKey: triggerKey, trigger: trigger, round: &round, out: &out)
        note(rule.index, sent ? .fired : .heldBack, now: now, userID: profile.userID, trigger: trigger, out: &out)
    }

    /// Counts a verdict, and records it when verdicts are recorded. The user and trigger are read only then.
    func note(
        _ r: Int32, _ v: Verdict, now: Int64, userID: @autoclosure () -> String, trigger: @autoclosure () -> String,
        out: inout EventOutcome, dueNow: Bool = false
    ) {
        // A delayed action coming due is the same trigger as when it was scheduled: counted once.
        if !dueNow { count(r, RuleCounter.triggered) }
        switch v {
        case .fired: count(r, RuleCounter.fired)
        case .heldBack: count(r, RuleCounter.heldBack)
        case .scheduled: count(r, RuleCounter.scheduled)
        default: countBlock(r, v)
        }
        if options.recordVerdicts {
            out.verdicts.append(
                RuleVerdict(
                    rule: r, qualifiedID: ruleSet.rules[Int(r)].qualifiedID, time: now, userID: userID(),
                    trigger: trigger(), verdict: v, clauses: clauseBuffer.removeValue(forKey: r) ?? []))
        }
    }

    /// `nil` when the rule qualifies; otherwise why not.
    private func evaluate(_ rule: CompiledRule, profile: UserProfile, event: BoundEvent?, now: Int64) -> Verdict? {
        let unit: CompiledUnit? = ruleSet.plainUnits[Int(rule.unit)] ? nil : ruleSet.units[Int(rule.unit)]
        if let unit, let why = notLive(unit, profile: profile, now: now) { return .notLive(why) }
        if let w = rule.whereExpr,
            let no = clause(.whereClause, w, traced: rule.whereTraced, rule: rule.index, profile: profile, event: event, now: now)
        {
            return no
        }
        var occurrence = 0
        if rule.tracksOccurrences {
            occurrence = profile.withRecord(rule.index) { rec in
                rec.occurrences &+= 1
                return Int(rec.occurrences)
            }
        }
        if let unit, let a = unit.audience,
            let no = clause(
                .audience, a, traced: unit.audienceTraced, rule: rule.index, memo: unit.audienceMemo, profile: profile,
                event: event, now: now)
        {
            return no
        }
        if let c = rule.ifExpr,
            let no = clause(.ifClause, c, traced: rule.ifTraced, rule: rule.index, profile: profile, event: event, now: now)
        {
            return no
        }
        if let rp = rule.reprompt {
            let block = repromptBlock(rp, rule: rule.index, profile: profile, now: now)
            if options.explain {
                clauseBuffer[rule.index, default: []].append(
                    ClauseTrace(
                        clause: "reprompt", passed: block == nil,
                        detail: block ?? "due: the latest \(rp.after) was \(rp.when), long enough ago"))
            }
            if let block { return .conditionFalse(clause: .reprompt, value: .bool(false), why: block) }
        }
        if rule.hasLimits {
            let rec = profile.record(for: rule.index) ?? RuleRecord(rule: rule.index)
            if let hit = check(
                rule.limits, record: rec, series: rule.fireSeries, profile: profile, now: now, occurrence: occurrence)
            {
                return .limited(hit)
            }
            if options.explain {
                clauseBuffer[rule.index, default: []].append(
                    ClauseTrace(
                        clause: "limits", passed: true,
                        detail: limitStatus(rule, rec, profile: profile, now: now, occurrence: occurrence)))
            }
        }
        return nil
    }

    /// `nil` when a condition is true; else the verdict. Without verdicts to record, a condition that is a flat
    /// ``Predicate`` is decided by it; otherwise its closures run (memoized in `memo` when given), and with `explain`
    /// its values are kept.
    private func clause(
        _ name: Clause, _ e: CompiledExpr, traced: CompiledExpr?, rule: Int32, memo: Int? = nil, profile: UserProfile,
        event: BoundEvent?, now: Int64
    ) -> Verdict? {
        if !options.recordVerdicts, let p = e.predicate {
            return p.holds(profile: profile, event: event, now: now)
                ? nil : .conditionFalse(clause: name, value: .bool(false), why: nil)
        }
        let v = memo.map { scope.memoized($0) { e.evaluate($0) } } ?? e.evaluate(scope)
        explainClause(rule, name.rawValue, v, traced)
        return v.isTrue ? nil : .conditionFalse(clause: name, value: v, why: why(traced))
    }

    /// How much room each limit has left, for `explain`: "per_user 1 of 3 used; per_week 0 of 1".
    private func limitStatus(_ rule: CompiledRule, _ rec: RuleRecord, profile: UserProfile, now: Int64, occurrence: Int) -> String
    {
        rule.limits.kinds.compactMap {
            standing($0, rule.limits, record: rec, series: rule.fireSeries, profile: profile, now: now, occurrence: occurrence)?
                .explanation
        }.joined(separator: "; ")
    }

    /// Why the file's `start`/`end` keep it from firing now, if they do.
    func notLive(_ unit: CompiledUnit, profile: UserProfile, now: Int64) -> String? {
        var t = now
        var zone = ""
        if unit.userLocalWindow {
            let z = RuleEnvironment.userZone(profile, scope.event, zoneSlots)
            t = z.local(fromUTC: Civil.floorDivMod(now, 1000).0) * 1000 + Civil.floorDivMod(now, 1000).1
            zone = " (\(z) local time)"
        }
        if let s = unit.start, t < s { return "\(unit.kind.rawValue) starts at \(Timestamp(milliseconds: s))\(zone)" }
        if let e = unit.end, t >= e { return "\(unit.kind.rawValue) ended at \(Timestamp(milliseconds: e))\(zone)" }
        return nil
    }

    /// Why the re-prompt condition holds the rule back, if it does.
    private func repromptBlock(_ rp: CompiledReprompt, rule: Int32, profile: UserProfile, now: Int64) -> String? {
        guard let all = profile.history.lifetimeStat(series: rp.allSeries) else { return "no \(rp.after) yet" }
        guard let m = profile.history.lifetimeStat(series: rp.matchingSeries), m.last == all.last else {
            return "the latest \(rp.after) was not \(rp.when)"
        }
        if now - m.last < rp.waitMs {
            return
                "\(DSLDuration.format(now - m.last)) since the latest \(rp.after) (\(rp.when)); needs \(DSLDuration.format(rp.waitMs))"
        }
        // Asking again counts as a prompt too: wait as long after the rule's own last ask.
        if let rec = profile.record(for: rule), rec.lastFire != Int64.min, now - rec.lastFire < rp.waitMs {
            return "asked again \(DSLDuration.format(now - rec.lastFire)) ago; needs \(DSLDuration.format(rp.waitMs))"
        }
        return nil
    }

    /// With `explain`, keeps a condition's result and the values behind it for the verdict.
    private func explainClause(_ r: Int32, _ clause: String, _ v: Value, _ traced: CompiledExpr?) {
        guard options.explain else { return }
        var detail = ""
        if let traced {
            let trace = ExprTrace()
            scope.trace = trace
            _ = traced.evaluate(scope)
            scope.trace = nil
            detail = trace.summary()
        }
        if case .error(let e) = v { detail = "failed: \(e.message)" + (detail.isEmpty ? "" : "; " + detail) }
        clauseBuffer[r, default: []].append(ClauseTrace(clause: clause, passed: v.isTrue, detail: detail))
    }

    /// The values that made a condition false, from its traced twin (only when verdicts are recorded).
    func why(_ traced: CompiledExpr?) -> String? {
        guard options.recordVerdicts, let traced else { return nil }
        let trace = ExprTrace()
        scope.trace = trace
        _ = traced.evaluate(scope)
        scope.trace = nil
        return trace.summary()
    }

    /// The first limit that blocks a fire now, if any, in ``CompiledLimits/kinds`` order.
    /// With `occurrence` nil (a delayed action coming due) the occurrence limits, decided at trigger time, are skipped.
    func check(
        _ l: CompiledLimits, record rec: RuleRecord, series: Int32, profile: UserProfile, now: Int64, occurrence: Int?
    ) -> LimitHit? {
        for kind in l.kinds {
            if let s = standing(kind, l, record: rec, series: series, profile: profile, now: now, occurrence: occurrence),
                s.blocks
            {
                return s.hit
            }
        }
        return nil
    }

    /// How `kind` of limits `l` stands for the user now (`nil` when `l` has no such limit, or it is an occurrence limit
    /// and `occurrence` is nil). The one place each kind of limit is decided.
    func standing(
        _ kind: LimitKind, _ l: CompiledLimits, record rec: RuleRecord, series: Int32, profile: UserProfile, now: Int64,
        occurrence: Int?
    ) -> LimitStanding? {
        switch kind {
        case .onOccurrence:
            guard let n = l.onOccurrence, let occurrence else { return nil }
            return LimitStanding(kind: kind, used: occurrence, max: n, blocks: occurrence != n)
        case .everyOccurrence:
            guard let n = l.everyOccurrence, let occurrence else { return nil }
            return LimitStanding(kind: kind, used: occurrence, max: n, blocks: occurrence % n != 0)
        case .perUser:
            guard let n = l.perUser else { return nil }
            return LimitStanding(
                kind: kind, used: Int(rec.fires), max: n,
                blocks: LimitStanding.perUserBlocks(fires: rec.fires, max: UInt32(clamping: n)))
        case .perSession:
            guard let n = l.perSession else { return nil }
            return LimitStanding(
                kind: kind, used: rec.firesInSession(profile.session.id), max: n,
                blocks: LimitStanding.perSessionBlocks(rec, session: profile.session.id, max: n))
        case .perMinute, .perHour, .perDay, .perWeek, .perMonth:
            guard let max = l.rolling.first(where: { $0.kind == kind })?.max, let window = kind.window else { return nil }
            let zone = window.needsZone ? RuleEnvironment.userZone(profile, scope.event, zoneSlots) : Zone.utc
            let from = window.start(now: now, zone: zone)
            let c = profile.history.count(series: series, from: from, to: now)
            guard c >= max else { return LimitStanding(kind: kind, used: c, max: max, blocks: false) }
            let times = profile.history.times(series: series, from: from, to: now)
            let oldest = times.dropLast(max - 1).last ?? times.first
            return LimitStanding(
                kind: kind, used: c, max: max, blocks: true, freesAt: oldest.flatMap { window.freesAt(oldest: $0) })
        case .cooldown:
            guard let cd = l.cooldownMs else { return nil }
            let blocks = LimitStanding.cooldownBlocks(lastFire: rec.lastFire, ms: cd, now: now)
            return LimitStanding(
                kind: kind, used: blocks ? 1 : 0, max: Int(cd), blocks: blocks,
                freesAt: blocks ? rec.lastFire + cd : nil, lastFire: rec.lastFire)
        }
    }

    var zoneSlots: (attribute: Int?, context: Int?) {
        (ruleSet.attributeSlots["timezone"], ruleSet.contextSlots["timezone"])
    }

    /// Keeps, per surface, the rule with the largest priority (ties: the one loaded first) and notes the others as
    /// lost; sorts the kept ones into fire order (larger priority first, then load order). Returns how many are kept,
    /// at the front of `q`.
    private func arbitrate(
        _ q: UnsafeMutableBufferPointer<Candidate>, profile: UserProfile, now: Int64, triggerName: String?,
        out: inout EventOutcome
    ) -> Int {
        let rules = ruleSet.ruleTable
        func wins(_ a: CompiledRule, over b: CompiledRule) -> Bool {
            a.priority > b.priority || (a.priority == b.priority && a.index < b.index)
        }
        var kept = 0
        for i in 0..<q.count {
            unowned(unsafe) let rule = rules.rule(q[i].rule)
            var winner: CompiledRule?
            if rule.surfaceID >= 0 {
                for j in 0..<q.count where j != i {
                    unowned(unsafe) let other = rules.rule(q[j].rule)
                    if other.surfaceID == rule.surfaceID, wins(other, over: winner ?? rule) { winner = other }
                }
            }
            if let winner {
                note(
                    rule.index, .lostTo(rule: winner.qualifiedID, priority: winner.priority, ownPriority: rule.priority),
                    now: now,
                    userID: profile.userID, trigger: triggerName ?? rule.triggerDescription, out: &out)
            } else {
                q[kept] = q[i]
                kept += 1
            }
        }
        // Insertion sort: rounds are small, and this allocates nothing.
        for i in 1..<max(1, kept) {
            let x = q[i]
            var j = i
            while j > 0, wins(rules.rule(x.rule), over: rules.rule(q[j - 1].rule)) {
                q[j] = q[j - 1]
                j -= 1
            }
            q[j] = x
        }
        return kept
    }

    // MARK: Firing

    /// Records the fire and runs the actions; `false` when the user is held back (nothing was sent).
    @discardableResult
    func fire(
        _ rule: CompiledRule, profile: UserProfile, now: Int64, triggerKey: TriggerKey, trigger: String,
        round: inout RoundState, out: inout EventOutcome
    ) -> Bool {
        let sessionID = profile.session.id
        // Only limits and re-prompts read a rule's record: a rule with neither keeps no state per user.
        if rule.keepsRecord { profile.withRecord(rule.index) { $0.noteFire(at: now, session: sessionID) } }
        if rule.fireSeries >= 0 {
            profile.history.record(
                series: rule.fireSeries, at: now, now: now,
                retentionMs: ruleSet.seriesTable[rule.fireSeries].retentionMs, keepsLifetime: false)
        }
        if rule.surface != nil {
            profile.messages.noteFire(at: now, session: sessionID)
            let g = ruleSet.settings.globalSeries
            if g >= 0 {
                profile.history.record(
                    series: g, at: now, now: now, retentionMs: ruleSet.seriesTable[g].retentionMs, keepsLifetime: false)
            }
        }
        if ruleSet.hasHoldouts, ruleSet.units[Int(rule.unit)].isHeldOut(profile.userID) {
            // The control group: the fire is recorded (and counts for limits and reports), nothing is sent.
            out.actions.append(
                FiredAction(
                    origin: rule.origin, actionIndex: -1, triggerKey: triggerKey, time: now, userID: profile.userID,
                    trigger: trigger, kind: ActionKind.heldBack.rawValue,
                    fields: [("actions", .list(rule.actions.map { .string($0.kind.rawValue) }))]))
            return false
        }
        let reference = rule.originReference
        for i in 0..<reference._withUnsafeGuaranteedRef({ $0.kinds.count }) {
            if reference._withUnsafeGuaranteedRef({ $0.isConstant(i) }) {
                out.actions.append(
                    origin: reference, action: i, time: now, userID: profile.userID, key: triggerKey, trigger: trigger)
            } else {
                let origin = reference.takeUnretainedValue()
                var fa = FiredAction(
                    origin: origin, actionIndex: i, triggerKey: triggerKey, time: now, userID: profile.userID, trigger: trigger)
                perform(rule.actions[i], rule: rule, profile: profile, now: now, action: &fa, round: &round)
                out.actions.append(fa)
            }
        }
        return true
    }

    private func perform(
        _ a: ActionTemplate, rule: CompiledRule, profile: UserProfile, now: Int64, action fa: inout FiredAction,
        round: inout RoundState
    ) {
        var w: [String] = []
        defer { fa.warnings = w }
        func eval(_ v: CompiledValue?, _ field: String) -> Value? { v.map { $0.evaluate(scope, field: field, warnings: &w) } }
        func text(_ v: Value?) -> String? {
            guard let v else { return nil }
            if case .string(let s) = v { return s }
            if case .null = v { return nil }
            if case .string(let s) = Conversions.toString(v) { return s }
            return JSONWriter.encode(v)
        }
        if let fields = a.pureFields({ $0.evaluate(scope, field: $1, warnings: &w) }) {
            fa.fields = fields
            return
        }
        switch a {
        case .message, .screen, .deepLink, .prompt, .emit: break  // pure: done above
        case .notify(let idT, let senderT, let messageT, let linkT, let data):
            let id = text(eval(idT, "id")) ?? fa.id
            let sender = text(eval(senderT, "sender"))
            let message = text(eval(messageT, "message")) ?? ""
            let link = text(eval(linkT, "link"))
            let item = InboxItem(
                id: id, sender: sender, message: message, link: link, createdAt: now, read: false, readAt: nil,
                rule: rule.qualifiedID)
            if let i = profile.inbox.firstIndex(where: { $0.id == id }) {
                profile.inbox[i] = item
            } else {
                profile.inbox.append(item)
            }
            var n = ValueMap()
            n[string: "id"] = .string(id)
            if let sender { n[string: "sender"] = .string(sender) }
            n[string: "message"] = .string(message)
            if let link { n[string: "link"] = .string(link) }
            if !data.isEmpty {
                n[string: "data"] = .map(
                    ValueMap(data.map { ($0.key, $0.value.evaluate(scope, field: "data." + $0.key, warnings: &w)) }))
            }
            fa.fields = [("notification", .map(n)), ("unread", .int(Int64(profile.unreadCount)))]
            scope.invalidateMemo()
        case .markRead(let idT):
            let id = text(eval(idT, "mark_read")) ?? ""
            var found = false
            if let i = profile.inbox.firstIndex(where: { $0.id == id }) {
                found = true
                if !profile.inbox[i].read {
                    profile.inbox[i].read = true
                    profile.inbox[i].readAt = now
                }
            }
            fa.fields = [
                ("notification", .map(ValueMap([("id", .string(id))]))), ("found", .bool(found)),
                ("unread", .int(Int64(profile.unreadCount))),
            ]
            scope.invalidateMemo()
        case .set(let attrs):
            // Every value is computed before any is applied, so `set: {a: …, b: ${user.a}}` reads the old `a`. A value
            // whose expression failed (it has a warning) or that is too large leaves the attribute as it was.
            let values = attrs.map { a -> (Int?, String, Value?) in
                let warned = w.count
                let v = a.value.evaluate(scope, field: a.name, warnings: &w)
                return (a.slot, a.name, w.count == warned ? v : nil)
            }
            var m = ValueMap()
            for (slot, name, value) in values {
                guard let v = value else {
                    w.append("'\(name)' not set: its value failed")
                    continue
                }
                let size = v.byteSize(upTo: ValueLimits.maxAttributeBytes)
                guard size <= ValueLimits.maxAttributeBytes else {
                    w.append("'\(name)' not set: its value is over \(ValueLimits.maxAttributeBytes) bytes (the limit)")
                    continue
                }
                applyAttribute(profile, name: name, slot: slot, value: v.isNullValue ? nil : v, changes: &round.changes)
                m[string: name] = v
            }
            fa.fields = [("attributes", .map(m))]
            scope.invalidateMemo()
        case .flow(let verb, let flowT, let stepT):
            let id = text(eval(flowT, "flow")) ?? ""
            let step = stepT.flatMap { text(eval($0, "step")) }
            performFlow(verb, id: id, step: step, profile: profile, now: now, action: &fa, warnings: &w, round: &round)
        case .unset(let names):
            var m = ValueMap()
            for (slot, name) in names {
                applyAttribute(profile, name: name, slot: slot, value: nil, changes: &round.changes)
                m[string: name] = .null
            }
            fa.fields = [("attributes", .map(m))]
            scope.invalidateMemo()
        }
    }

    // MARK: State

    /// Sets (or with `nil`, removes) an attribute, noting a change for `on_change` rules when the value differs.
    func applyAttribute(
        _ p: UserProfile, name: String, slot: Int?, value: Value?, changes: inout [(slot: Int, change: AttributeChange)]
    ) {
        guard let slot else {
            if let value {
                if p.otherAttributes == nil { p.otherAttributes = ValueMap() }
                if p.otherAttributes![string: name] == nil && p.otherAttributes!.count >= ValueLimits.maxOtherAttributes {
                    totals.attributesNotKept += 1
                    return
                }
                p.otherAttributes![string: name] = value
            } else {
                p.otherAttributes?[string: name] = nil
            }
            return
        }
        let old = p.attributes[slot]
        p.attributes[slot] = value
        let same: Bool
        switch (old, value) {
        case (nil, nil): same = true
        case (let a?, let b?): same = Value.equal(a, b) && a.kindName == b.kindName
        default: same = false
        }
        guard !same else { return }
        if let i = changes.firstIndex(where: { $0.slot == slot }) {
            changes[i].change.to = value ?? .null
            if Value.equal(changes[i].change.from, changes[i].change.to) { changes.remove(at: i) }
        } else {
            changes.append((slot, AttributeChange(attribute: name, from: old ?? .null, to: value ?? .null)))
        }
    }

    private func updateSession(_ p: UserProfile, startsSession: Bool, _ now: Int64) {
        // (A restored session may have no last activity: it is over.)
        if p.session.id == 0 || p.session.lastActivity == Int64.min
            || now - p.session.lastActivity >= ruleSet.settings.sessionTimeoutMs || startsSession
        {
            p.session.id &+= 1
            p.session.start = now
        }
        p.session.lastActivity = now
    }

    private func recordHistory(_ p: UserProfile, _ e: BoundEvent, _ eventSeries: UnsafeBufferPointer<Int32>, _ now: Int64) {
        let table = ruleSet.seriesTable
        for s in eventSeries {
            let spec = table[s]
            if spec.hasFilter, case .event(_, let filter) = ruleSet.series[Int(s)].source {
                guard filter.allSatisfy({ f in e.property(f.slot).map { Value.equal($0, f.value) } ?? false }) else { continue }
            }
            if spec.valueSlot >= 0 {
                let v: Double? =
                    switch e.property(Int(spec.valueSlot)) {
                    case .int(let i)?: Double(i)
                    case .uint(let u)?: Double(u)
                    case .double(let d)?: d.isFinite ? d : nil
                    default: nil
                    }
                if let v { p.history.recordValue(series: s, at: e.timestamp, value: v, now: now, retentionMs: spec.retentionMs) }
                continue
            }
            p.history.record(
                series: s, at: e.timestamp, now: now, retentionMs: spec.retentionMs, keepsLifetime: spec.keepsLifetime)
        }
    }

    /// Remembers `messageID`; `true` if it was seen within the dedup window.
    ///
    /// The window is measured in the user's time, as far as the stream's clock vouches for it: an id is kept as
    /// arriving no later than ``clock`` + `clock_skew`, and ids are forgotten once they are a window behind the user's
    /// time and the stream's clock both. So an event from a device a year ahead neither forgets the user's earlier ids
    /// at once nor keeps its own for a year. (Before the stream's clock starts, the user's time alone.)
    private func isDuplicate(_ p: UserProfile, _ id: String, _ time: Int64) -> Bool {
        let now = max(time, p.clock)
        let arrival = clock == Int64.min ? now : min(now, clock &+ ruleSet.settings.clockSkewMs)
        let horizon = (clock == Int64.min ? now : min(now, clock)) &- ruleSet.settings.dedupWindowMs
        if p.messageIDs == nil { p.messageIDs = MessageIDWindow() }
        return !p.messageIDs!.insert(ByteHash.hash(id), at: arrival, forgettingUpTo: horizon)
    }

    /// Moves the stream's clock for an event of `user` at `time` (see ``clock``).
    @inline(__always) private func moveClock(_ time: Int64, user: UInt64) {
        if time > latestTime { latestTime = time }
        guard time > clock else { return }
        // The common case: a stream in time order moves the clock a little at each event.
        if clock != Int64.min && time &- clock <= ruleSet.settings.clockSkewMs {
            clock = time
            return
        }
        moveClockAhead(time, user: user)
    }

    /// An event further ahead of the clock than the skew (or the first events of a stream): it moves the clock only
    /// when another user's event within the skew of it confirms it.
    private func moveClockAhead(_ time: Int64, user: UInt64) {
        let skew = ruleSet.settings.clockSkewMs
        if let other = ahead.first(where: { $0.user != user && abs($0.time - time) <= skew }) {
            clock = max(clock, other.time, time)
            ahead.removeAll { $0.time - clock <= skew }
            return
        }
        ahead.removeAll { $0.user == user }
        ahead.append((time, user))
        if ahead.count > Engine.maxAhead { ahead.removeFirst() }
    }
}

extension Value {
    var isNullValue: Bool { if case .null = self { true } else { false } }
}

extension Engine {
    /// 1st, 2nd, 3rd, 4th, 11th, 21st…
    static func ordinal(_ n: Int) -> String {
        let suffix: String
        switch (n % 10, n % 100) {
        case (_, 11...13): suffix = "th"
        case (1, _): suffix = "st"
        case (2, _): suffix = "nd"
        case (3, _): suffix = "rd"
        default: suffix = "th"
        }
        return "\(n)\(suffix)"
    }

    /// A map or list with null members removed, at every depth.
    static func withoutNulls(_ v: Value) -> Value {
        switch v {
        case .map(let m): .map(ValueMap(m.entries.filter { !$0.value.isNullValue }.map { ($0.key, withoutNulls($0.value)) }))
        case .list(let xs): .list(xs.map(withoutNulls))
        default: v
        }
    }
}
