import HeapModule

/// The stable names of a rule set's rules and series, and where each name is in it: a ``UserState`` names what it
/// holds by these, so it restores under an edited rule set.
struct StateNames {
    let rules: [String: Int32]
    let seriesKeys: [String]
    let series: [String: Int32]

    init(_ rs: CompiledRuleSet) {
        rules = Dictionary(rs.rules.map { ($0.qualifiedID, $0.index) }, uniquingKeysWith: { a, _ in a })
        seriesKeys = rs.series.map { StateNames.key(of: $0, in: rs) }
        series = Dictionary(seriesKeys.enumerated().map { ($1, Int32($0)) }, uniquingKeysWith: { a, _ in a })
    }

    /// What a series counts, in names: `e:EVENT` (`e:screen:NAME` for a screen), with `|PROPERTY=VALUE` per filter
    /// (sorted) and `|sum:PROPERTY` for a series of values; `*` for every event; `f:UNIT/RULE` for a rule's fires;
    /// `m` for every message; `c:CHANNEL` for a channel's.
    static func key(of s: SeriesSpec, in rs: CompiledRuleSet) -> String {
        switch s.source {
        case .event(let id, let filter):
            var key = "e:" + rs.eventNames[Int(id)]
            for f in filter.map({ rs.propertyNames[$0.slot] + "=" + JSONWriter.encode($0.value) }).sorted() { key += "|" + f }
            if let v = s.valueSlot { key += "|sum:" + rs.propertyNames[v] }
            return key
        case .anyEvent: return "*"
        case .ruleFires(let r): return "f:" + rs.rules[Int(r)].qualifiedID
        case .globalMessages: return "m"
        case .channel(let c): return "c:" + c.rawValue
        }
    }
}

/// Why a state could not be restored.
public enum StateRestoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The engine has a profile for the user already (restore into an engine before it sees the user).
    case userExists(String)

    public var description: String {
        switch self {
        case .userExists(let id): "user '\(id)' is in the engine already: a state restores only a user it has not seen"
        }
    }
}

extension Engine {
    // MARK: Taking state

    /// The state of `userID`, if the engine has seen them.
    public func state(of userID: String) -> UserState? { profile(of: userID).map(state(of:)) }

    /// Every user's state, in no particular order.
    public func states() -> [UserState] { store.allProfiles().map(state(of:)) }

    /// The stream's clock and timer ids (kept beside the users' states: see ``StreamState``).
    public var streamState: StreamState {
        StreamState(
            clock: clock, latestTime: latestTime, nextTimerID: nextTimerID,
            ahead: ahead.map { StreamState.Ahead(time: $0.time, user: $0.user) },
            rates: rateWindows.sorted { $0.key < $1.key }.map { r, w in
                StreamState.Rate(rule: ruleSet.rules[Int(r)].qualifiedID, start: w.start, fired: UInt64(w.fired))
            })
    }

    /// `p`'s state, named by stable ids.
    public func state(of p: UserProfile) -> UserState {
        let rs = ruleSet
        func named(_ names: [String], _ slots: borrowing SparseRow) -> [(name: String, value: Value)] {
            names.indices.compactMap { i in slots[i].map { (names[i], $0) } }
        }
        var attributes = named(rs.attributeNames, p.attributes)
        for (k, v) in p.otherAttributes?.entries ?? [] { if case .string(let name) = k { attributes.append((name, v)) } }
        attributes.sort { $0.name < $1.name }
        func record(_ r: RuleRecord, _ name: String) -> UserState.Record {
            UserState.Record(
                rule: name, occurrences: r.occurrences, fires: r.fires, sessionFires: r.sessionFires, sessionID: r.sessionID,
                lastFire: r.lastFire)
        }
        let global = p.messages
        let names = stateNames
        var series: [UserState.Series] = []
        for k in p.history.entries {
            let s = Int(k >> HistoryLog.timeBits)
            let t = Int64(k & HistoryLog.timeMask)
            if series.last?.key != names.seriesKeys[s] {
                series.append(UserState.Series(key: names.seriesKeys[s], times: [], lifetime: nil, values: []))
            }
            series[series.count - 1].times.append(t)
        }
        func at(_ s: Int32) -> Int {
            if let i = series.firstIndex(where: { $0.key == names.seriesKeys[Int(s)] }) { return i }
            series.append(UserState.Series(key: names.seriesKeys[Int(s)], times: [], lifetime: nil, values: []))
            return series.count - 1
        }
        for l in p.history.lifetime { series[at(l.series)].lifetime = (l.count, l.first, l.last) }
        for v in p.history.values {
            let i = at(Int32(v.key >> HistoryLog.timeBits))
            series[i].values.append((Int64(v.key & HistoryLog.timeMask), v.value))
        }
        return UserState(
            userID: p.userID, clock: p.clock, eventCount: p.eventCount, session: p.session, attributes: attributes,
            context: named(rs.contextNames, p.context).sorted { $0.name < $1.name },
            records: p.records.map { record($0, rs.rules[Int($0.rule)].qualifiedID) },
            messages: global.fires == 0 && global.occurrences == 0 ? nil : record(global, ""),
            series: series, messageIDs: p.messageIDs.snapshot, expiredMessageIDs: p.messageIDs.expired, inbox: p.inbox,
            pending: p.pending.map { a in
                UserState.Pending(
                    id: a.id, rule: rs.rules[Int(a.rule)].qualifiedID, due: a.due, scheduledAt: a.scheduledAt, held: a.held,
                    keyMessageID: a.triggerKey.messageID, keyEventCount: a.triggerKey.eventCount,
                    keySuffix: a.triggerKey.suffix, trigger: a.trigger, event: a.event.map(unbound), change: a.change)
            },
            sequences: p.sequences.map {
                UserState.Sequence(rule: rs.rules[Int($0.rule)].qualifiedID, key: $0.key, best: $0.best)
            }, mergedInto: p.mergedInto, devices: p.devices, known: p.known)
    }

    /// A bound event as a general one: its properties (all of them when the rule set kept them, else those the rules
    /// read), traits and the context fields the rules read.
    private func unbound(_ e: BoundEvent) -> Event {
        let rs = ruleSet
        func named(_ names: [String], _ values: ContiguousArray<Value?>) -> ValueMap {
            ValueMap(names.indices.compactMap { i in values[i].map { (names[i], $0) } })
        }
        return Event(
            kind: e.kind, name: e.name, userID: e.userID, timestamp: e.timestamp, messageID: e.messageID,
            properties: e.allProperties ?? named(rs.propertyNames, e.properties),
            traits: ValueMap(e.traits.map { ($0.name, $0.value) }),
            context: named(rs.contextNames, e.context))
    }

    // MARK: Restoring state

    /// Puts a user's state into this engine, and their delayed actions into its timers.
    ///
    /// Under a rule set other than the one the state was taken under, what the state names is matched by stable id:
    /// records, delayed actions and partial sequences of rules that are gone are dropped (a sequence also when its
    /// steps changed in number); history of series no rule counts any more is dropped; new rules and series start
    /// empty; a widened or narrowed window keeps every time recorded (the next recording of the series drops what its
    /// new window no longer reaches). Attributes no rule reads are kept aside as always, context fields no rule reads
    /// are dropped. A delayed action's event is bound to this rule set.
    public func restore(_ s: UserState) throws(StateRestoreError) {
        let p = newProfile(s.userID)
        fill(p, from: s)
        let stored = store.profile(for: s.userID, create: true) { p }
        guard stored === p else { throw .userExists(s.userID) }
        store.didUpdate(p)
        addTimers(of: p)
    }

    /// Puts `p`'s delayed actions in the timer queue.
    func addTimers(of p: UserProfile) {
        for a in p.pending {
            timers.insert(TimerRef(due: a.due, id: a.id, userID: p.userID))
            nextTimerID = max(nextTimerID, a.id &+ 1)
        }
    }

    /// Fills an empty profile from a state, as ``restore(_:)`` says (the timers are not queued here).
    func fill(_ p: UserProfile, from s: UserState) {
        let rs = ruleSet
        let names = stateNames
        if let into = s.mergedInto {
            p.mergedInto = into
            hasMerges = true
        }
        p.clock = s.clock
        p.eventCount = s.eventCount
        p.known = s.known
        p.session = s.session
        // One batch of writes: the row grows once and keeps room for what it holds (SparseRow's `trim`).
        for (k, (name, value)) in s.attributes.enumerated() {
            if let slot = rs.attributeSlots[name] {
                _ = p.attributes.replace(slot, with: value, roomForMore: s.attributes.count - k - 1)
            } else if (p.otherAttributes?.count ?? 0) < ValueLimits.maxOtherAttributes {
                if p.otherAttributes == nil { p.otherAttributes = ValueMap() }
                p.otherAttributes![string: name] = value
            } else {
                totals.attributesNotKept += 1
            }
        }
        p.attributes.trim()
        for (k, (name, value)) in s.context.enumerated() {
            if let slot = rs.contextSlots[name] {
                _ = p.context.replace(slot, with: value, roomForMore: s.context.count - k - 1)
            }
        }
        p.context.trim()
        func apply(_ from: UserState.Record, to r: inout RuleRecord) {
            r.occurrences = from.occurrences
            r.fires = from.fires
            r.sessionFires = from.sessionFires
            r.sessionID = from.sessionID
            r.lastFire = from.lastFire
        }
        for rec in s.records { if let r = names.rules[rec.rule] { p.withRecord(r) { apply(rec, to: &$0) } } }
        if let m = s.messages { apply(m, to: &p.messages) }
        // In the log's order (series, then time), so every entry goes at the end.
        let series = s.series.compactMap { x in names.series[x.key].map { ($0, x) } }.sorted { $0.0 < $1.0 }
        for (i, x) in series {
            for t in x.times { p.history.restoreEntry(series: i, at: t) }
            if let l = x.lifetime { p.history.restoreLifetime(series: i, count: l.count, first: l.first, last: l.last) }
            for v in x.values { p.history.restoreValue(series: i, at: v.time, value: v.value) }
        }
        if !s.messageIDs.isEmpty || !s.expiredMessageIDs.isEmpty {
            p.messageIDs = MessageIDWindow(restoring: s.messageIDs, expired: s.expiredMessageIDs)
        }
        if !s.inbox.isEmpty { p.inbox = s.inbox }
        if !s.devices.isEmpty { p.devices = s.devices }
        for a in s.pending {
            guard let r = names.rules[a.rule] else { continue }
            var (due, suffix, trigger) = (a.due, a.keySuffix, a.trigger)
            // A schedule's next run set under another schedule (the rule's time was edited) moves to the new one's
            // next run from when it was set, or from now if that is later (a one-off now past is dropped).
            let rule = rs.rules[Int(r)]
            if case .schedule(let sched) = rule.trigger, !a.held, a.keyMessageID == "schedule",
                a.trigger != rule.triggerDescription
            {
                let zone = UserProfile.userZone(p, nil, zoneSlots)
                guard let next = sched.next(atOrAfter: max(a.scheduledAt, clock), zone: zone) else { continue }
                (due, suffix, trigger) = (next, "|\(next)", rule.triggerDescription)
            }
            p.pending.append(
                PendingAction(
                    id: a.id, rule: r, due: due, scheduledAt: a.scheduledAt, held: a.held,
                    triggerKey: TriggerKey(messageID: a.keyMessageID, eventCount: a.keyEventCount, suffix: suffix),
                    trigger: trigger, event: a.event.map { rs.bind($0) }, change: a.change))
        }
        for q in s.sequences {
            guard let r = names.rules[q.rule], case .sequence(let seq) = rs.rules[Int(r)].trigger,
                seq.steps.count == q.best.count
            else { continue }
            p.sequences.append(SequenceState(rule: r, key: q.key, best: q.best))
        }
    }

    /// Puts the stream's clock and timer ids back (see ``StreamState``); the clock never moves back.
    public func restore(stream s: StreamState) {
        clock = max(clock, s.clock)
        latestTime = max(latestTime, s.latestTime)
        nextTimerID = max(nextTimerID, s.nextTimerID)
        ahead = s.ahead.suffix(Engine.maxAhead).map { ($0.time, $0.user) }
        // (By the rule's name: a reload keeps a run's window; a rule gone or no longer paced leaves its own.)
        for r in s.rates {
            guard let rule = ruleSet.rules.first(where: { $0.qualifiedID == r.rule }), rule.timing.rate != nil else { continue }
            rateWindows[rule.index] = (r.start, Int(clamping: r.fired))
        }
    }

    /// An engine for `ruleSet` holding every user's state from `old`, restored under the new rule set as
    /// ``restore(_:)`` says, and `old`'s stream clock: a rule set is swapped without losing anyone's state.
    public convenience init(
        ruleSet: CompiledRuleSet, carryingStateFrom old: Engine, store: any StateStore = InMemoryStateStore(),
        options: Options = Options()
    ) {
        self.init(ruleSet: ruleSet, store: store, options: options)
        restore(stream: old.streamState)
        for p in old.store.allProfiles() {
            // The new store is empty: no user is in it twice.
            try? restore(old.state(of: p))
        }
        // A schedule added by the new rules reaches the users the old engine held, not only those who come back.
        if !ruleSet.scheduleRules.isEmpty {
            for p in store.allProfiles() where p.mergedInto == nil { armSchedules(p, now: clock) }
        }
    }
}

extension Engine {
    /// The encoded states of the users changed since the last call (a ``SavedStateStore``'s; empty for other stores),
    /// each encoded once however many events changed it: what a service writes at a checkpoint.
    public func takeChangedStates() -> [SavedState] {
        guard let saved = store as? SavedStateStore else { return [] }
        return saved.takeChanged().map(savedState(of:))
    }

    /// Writes the states of the users changed since the last call to the ``SavedStateStore``'s backend in one batch;
    /// on failure they are noted as changed again, and the error is thrown.
    public func saveStates() throws {
        guard let saved = store as? SavedStateStore else { return }
        let profiles = saved.takeChanged()
        do {
            try saved.backend.write(profiles.map(savedState(of:)))
        } catch {
            for p in profiles { saved.didUpdate(p) }
            throw error
        }
    }

    func savedState(of p: UserProfile) -> SavedState {
        let s = state(of: p)
        return SavedState(
            userID: s.userID, bytes: s.encoded(), nextDue: s.pending.map(\.due).min(), mergedInto: s.mergedInto)
    }
}
