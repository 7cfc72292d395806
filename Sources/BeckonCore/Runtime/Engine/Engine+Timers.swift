import HeapModule

/// A pending delayed action in the engine's queue. The action itself lives in the user's profile.
struct TimerRef: Comparable, Sendable {
    var due: Int64
    var id: UInt64
    var userID: String

    static func < (a: TimerRef, b: TimerRef) -> Bool { a.due != b.due ? a.due < b.due : a.id < b.id }
    static func == (a: TimerRef, b: TimerRef) -> Bool { a.id == b.id }
}

extension Engine {
    /// Fires every delayed action due at or before `time`, in due order, and returns what happened (with a bound on
    /// users loaded, ``maxColdLoads``, it may stop short: ``hasOverdue`` then says so).
    ///
    /// `process` calls this with each event's time; call it yourself to let time pass without events
    /// (a service's clock, or `beckon dry-run --until`).
    @discardableResult
    public func advance(to time: Int64) -> EventOutcome {
        if time > clock { clock = time }
        return firing(upTo: time)
    }

    /// ``advance(to:)`` with what fires handed to `each` a due instant at a time: the same fires in the same order,
    /// the clock at `time` throughout, but never all of a long span's actions at once (`dry-run --until` a year ahead
    /// of a daily schedule over many users held millions of actions in one outcome).
    public func advance(to time: Int64, each: (EventOutcome) -> Void) {
        if time > clock { clock = time }
        while let due = nextTimerDue, due <= time {
            each(firing(upTo: due))
            // (Something still due at this instant was left by the bound on users loaded: the next call goes on.)
            if let next = nextTimerDue, next <= due { return }
        }
    }

    /// What fires of the delayed actions due at or before `time` (the clock already moved), counted in the totals.
    private func firing(upTo time: Int64) -> EventOutcome {
        var out = EventOutcome(status: .processed, late: false, actions: [], verdicts: [])
        out.actions.reset(for: ruleSet)
        advance(to: time, into: &out)
        totals.actions += out.actions.count
        return out
    }

    func advance(to time: Int64, into out: inout EventOutcome) {
        // Keep the caller's scope (an event may be mid-processing when its user's timers come due).
        let saved = (scope.event, scope.profile, scope.now, scope.change)
        defer { (scope.event, scope.profile, scope.now, scope.change) = saved }
        while let top = timers.min, top.due <= time {
            if notesColdLoads && !holds(top.userID) {
                // (At the bound the rest stay queued, due: the next call goes on once these users are let go.)
                if coldLoads.count >= maxColdLoads { break }
                coldLoads.append(top.userID)
            }
            timers.removeMin()
            // (A saved user's placeholder, id 0, loads them: restoring puts their own timers in the queue.)
            guard let profile = profile(of: top.userID), let i = profile.pending.firstIndex(where: { $0.id == top.id })
            else { continue }
            // An inactivity timer moved by later activity: its entry goes back in the queue at the new time.
            if profile.pending[i].due > top.due {
                timers.insert(TimerRef(due: profile.pending[i].due, id: top.id, userID: top.userID))
                continue
            }
            let p = profile.pending.remove(at: i)
            fireDue(p, profile: profile, out: &out)
            if memoryTable == nil { stored(profile) }
        }
    }

    /// Fires `profile`'s own delayed actions due at or before `time`, in due order: a user's events bring their own
    /// actions due even when the stream's clock is behind them (their queue entries are skipped when popped).
    func fireOwnDue(_ profile: UserProfile, upTo time: Int64, into out: inout EventOutcome) {
        let saved = (scope.event, scope.profile, scope.now, scope.change)
        defer { (scope.event, scope.profile, scope.now, scope.change) = saved }
        while true {
            var next: Int?
            for (i, p) in profile.pending.enumerated() where p.due <= time {
                if let n = next, (profile.pending[n].due, profile.pending[n].id) <= (p.due, p.id) { continue }
                next = i
            }
            guard let next else { return }
            fireDue(profile.pending.remove(at: next), profile: profile, out: &out)
        }
    }

    /// When the soonest delayed action in the queue is due (`nil`: none): a live clock that lets time pass only when
    /// something is due asks this.
    public var nextTimerDue: Int64? { timers.min?.due }

    /// Whether something is due at the engine's clock and not fired yet: ``advance(to:)`` stopped at
    /// ``maxColdLoads``.
    public var hasOverdue: Bool { timers.min.map { $0.due <= clock } ?? false }

    /// Entries in the timer queue (moved and spent ones included until they come up).
    var timerCount: Int { timers.count }

    /// Pending delayed actions of every user, soonest first.
    public var pendingCount: Int { store.allProfiles().reduce(0) { $0 + $1.pending.count } }

    /// Pending delayed actions by rule index (of the users held): the triggers still waiting for their time.
    public var pendingByRule: [Int] {
        var out = Array(repeating: 0, count: ruleSet.rules.count)
        for p in store.allProfiles() { for a in p.pending { out[Int(a.rule)] += 1 } }
        return out
    }

    /// Re-reads pending actions from the store into the queue: those of the profiles it holds, and for each user whose
    /// saved state holds some (``StateStore/usersWithPendingActions()``), a placeholder due with their soonest, which
    /// loads them when it comes due.
    public func rebuildTimers() {
        timers = Heap()
        for p in store.allProfiles() { addTimers(of: p) }
        for (user, due) in store.usersWithPendingActions()
        where store.profile(for: user, create: false, make: { newProfile(user) }) == nil {
            timers.insert(TimerRef(due: due, id: 0, userID: user))
        }
    }

    /// When a delayed rule's actions are due: `wait` after now, then the next `at` time in the user's zone.
    func dueTime(_ rule: CompiledRule, profile: UserProfile, now: Int64) -> Int64 {
        var due = now + (rule.timing.waitMs ?? 0)
        if let at = rule.timing.at {
            due = at.next(atOrAfter: due, zone: UserProfile.userZone(profile, scope.event, zoneSlots))
        }
        return due
    }

    /// The end of the quiet window `now` falls in, in the user's zone; `nil` when it is not quiet.
    func quietUntil(_ q: QuietHoursSpec, profile: UserProfile, now: Int64) -> Int64? {
        let zone = UserProfile.userZone(profile, scope.event, zoneSlots)
        let local = zone.local(fromUTC: Civil.floorDivMod(now, 1000).0)
        let minute = Int(Civil.floorDivMod(local, 86_400).1 / 60)
        guard q.contains(minute: minute) else { return nil }
        return AtSpec(minute: q.to, days: [], text: "").next(atOrAfter: now, zone: zone)
    }

    /// Keeps a rule's actions for later, following its `retrigger` policy when one is already pending.
    func schedule(
        _ rule: CompiledRule, due: Int64, held: Bool, profile: UserProfile, now: Int64, triggerKey: TriggerKey, trigger: String,
        change: AttributeChange?, out: inout EventOutcome
    ) {
        let existing = profile.pending.filter { $0.rule == rule.index }
        if let first = existing.first {
            switch rule.timing.retrigger {
            case .keep:
                note(rule.index, .alreadyPending(due: first.due), now: now, userID: profile.userID, trigger: trigger, out: &out)
                return
            case .restart:
                // (Each action replaced ends its trigger there: counted, so that a rule's outcomes add up.)
                count(rule.index, RuleCounter.replaced, by: existing.count)
                profile.pending.removeAll { $0.rule == rule.index }
            case .add:
                if existing.count >= Engine.maxPendingPerRule {
                    note(
                        rule.index, .alreadyPending(due: first.due), now: now, userID: profile.userID, trigger: trigger, out: &out
                    )
                    return
                }
            }
        }
        enqueue(
            rule.index, due: due, scheduledAt: now, held: held, triggerKey: triggerKey.appending("|t\(existing.count)"),
            trigger: trigger, event: scope.event, change: change, profile: profile)
        let v: Verdict = held ? .quietHours(heldUntil: due) : .scheduled(due: due)
        note(rule.index, v, now: now, userID: profile.userID, trigger: trigger, out: &out)
    }

    /// An activity of the user: each `inactive_for` rule's one pending action is moved to `now` plus its duration
    /// (made on the first activity), with this event as its trigger. Its queue entry is not moved — that would leave
    /// one entry per event — but put back at the new time when the old one comes up (``advance(to:)``).
    func armInactivity(_ profile: UserProfile, _ e: BoundEvent, now: Int64, key: TriggerKey) {
        for r in ruleSet.inactivityRules {
            let rule = ruleSet.rules[Int(r)]
            guard case .inactive(let ms) = rule.trigger else { continue }
            let due = now + ms
            if let i = profile.pending.firstIndex(where: { $0.rule == r }) {
                profile.pending[i].due = due
                profile.pending[i].scheduledAt = now
                profile.pending[i].held = false
                profile.pending[i].triggerKey = key.appending("|t0")
                profile.pending[i].event = e
            } else {
                enqueue(
                    r, due: due, scheduledAt: now, held: false, triggerKey: key.appending("|t0"),
                    trigger: rule.triggerDescription, event: e, change: nil, profile: profile)
            }
        }
    }

    /// Sets each `schedule` rule's timer for the user at its next run, when the user has none (their first event
    /// under these rules, or after a one-off ran). A run's id is its time: one action per user and run.
    func armSchedules(_ profile: UserProfile, now: Int64) {
        for r in ruleSet.scheduleRules where !profile.pending.contains(where: { $0.rule == r }) {
            armSchedule(ruleSet.rules[Int(r)], profile: profile, atOrAfter: now)
        }
    }

    func armSchedule(_ rule: CompiledRule, profile: UserProfile, atOrAfter time: Int64) {
        guard case .schedule(let sched) = rule.trigger,
            let due = sched.next(atOrAfter: time, zone: UserProfile.userZone(profile, nil, zoneSlots))
        else { return }
        // A one-off already set for this user (and run) is not set again.
        if case .once = sched, profile.record(for: rule.index)?.occurrences ?? 0 > 0 { return }
        enqueue(
            rule.index, due: due, scheduledAt: time, held: false,
            triggerKey: TriggerKey(messageID: "schedule", eventCount: 0, suffix: "|\(due)"), trigger: rule.triggerDescription,
            event: nil, change: nil, profile: profile)
    }

    /// Keeps a delayed action of `rule` in the user's state under a new timer id, and queues its timer: the one place
    /// a pending action is made (`wait`/`at`, quiet hours, inactivity, schedules).
    func enqueue(
        _ rule: Int32, due: Int64, scheduledAt: Int64, held: Bool, triggerKey: TriggerKey, trigger: String,
        event: BoundEvent?, change: AttributeChange?, profile: UserProfile
    ) {
        let id = nextTimerID
        nextTimerID += 1
        profile.pending.append(
            PendingAction(
                id: id, rule: rule, due: due, scheduledAt: scheduledAt, held: held, triggerKey: triggerKey, trigger: trigger,
                event: event, change: change))
        timers.insert(TimerRef(due: due, id: id, userID: profile.userID))
    }

    /// Most pending actions one rule may hold for one user with `retrigger: add`.
    public static let maxPendingPerRule = 16

    /// Most items one user's inbox holds (``Engine/fire``'s `notify`).
    public static let maxInboxItems = 200

    /// Cancels this user's pending actions of rules whose `unless` matches the event.
    func cancelPending(_ profile: UserProfile, _ e: BoundEvent, now: Int64, rules: [Int32], out: inout EventOutcome) {
        for r in rules where profile.pending.contains(where: { $0.rule == r }) {
            let rule = ruleSet.rules[Int(r)]
            let matches = rule.timing.unless.contains { step in
                step.eventID == e.nameID && (step.whereExpr.map { $0.evaluate(scope).isTrue } ?? true)
            }
            guard matches else { continue }
            for p in profile.pending where p.rule == r {
                note(
                    r, .cancelled(by: e.name, due: p.due), now: now, userID: profile.userID, trigger: p.trigger, out: &out,
                    dueNow: true)
            }
            profile.pending.removeAll { $0.rule == r }
        }
    }

    /// A delayed action came due: the file must still be live, limits must still allow it (and with `recheck`,
    /// `audience` and `if` must still hold); quiet hours and the global cap apply as for any action.
    func fireDue(_ p: PendingAction, profile: UserProfile, out: inout EventOutcome) {
        out.dueTimes.append(p.due)
        let rule = ruleSet.rules[Int(p.rule)]
        let now = max(p.due, profile.clock)
        profile.clock = now
        endSessionIfTimedOut(profile, now)
        scope.event = p.event
        scope.profile = profile
        scope.now = now
        scope.change = p.change
        scope.resetSteps()
        scope.invalidateMemo()
        let unit = ruleSet.units[Int(rule.unit)]
        func block(_ v: Verdict) {
            note(rule.index, v, now: now, userID: profile.userID, trigger: p.trigger, out: &out, dueNow: true)
        }
        // A timed rule's trigger is its time coming (counted here: nothing was counted when its timer was set).
        switch rule.trigger {
        case .inactive, .schedule: if !p.held { count(rule.index, RuleCounter.triggered) }
        default: break
        }
        // A schedule's run: the next one is set first (whether this one fires or not); a one-off is marked as run.
        if case .schedule(let sched) = rule.trigger, !p.held {
            if case .every = sched {
                armSchedule(rule, profile: profile, atOrAfter: p.due + 60_000)
            } else {
                profile.withRecord(rule.index) { $0.occurrences &+= 1 }
            }
        }
        if let why = notLive(unit, profile: profile, now: now) { return block(.notLive(why)) }
        if rule.timing.recheck {
            if let a = unit.audience, case let v = a.evaluate(scope), !v.isTrue {
                return block(.conditionFalse(clause: .audience, value: v, why: why(unit.audienceTraced)))
            }
            if let c = rule.ifExpr {
                let v = c.evaluate(scope)
                if !v.isTrue { return block(.conditionFalse(clause: .ifClause, value: v, why: why(rule.ifTraced))) }
            }
        }
        if !rule.limits.isEmpty {
            let rec = profile.record(for: rule.index) ?? RuleRecord(rule: rule.index)
            if let hit = check(rule.limits, record: rec, series: rule.fireSeries, profile: profile, now: now, occurrence: nil) {
                return block(.limited(hit))
            }
        }
        var round = RoundState()
        if let q = rule.timing.quietHours, let end = quietUntil(q, profile: profile, now: now) {
            if q.hold {
                schedule(
                    rule, due: end, held: true, profile: profile, now: now, triggerKey: p.triggerKey, trigger: p.trigger,
                    change: p.change, out: &out)
                // The re-hold is the same trigger: do not count it twice.
                count(rule.index, RuleCounter.triggered, by: -1)
            } else {
                block(.quietHours(heldUntil: nil))
            }
            return
        }
        if let hit = globalBlock(rule, profile: profile, now: now) { return block(.globalLimited(hit)) }
        // A paced schedule whose window is full: the run waits for the next window, the same run (its id unchanged).
        if let rate = rule.timing.rate, let until = rateHold(rule.index, rate, now: now) {
            var later = p
            later.due = until
            later.held = true
            profile.pending.append(later)
            timers.insert(TimerRef(due: until, id: later.id, userID: profile.userID))
            return block(.rateHeld(until: until))
        }
        let sent = fire(rule, profile: profile, now: now, triggerKey: p.triggerKey, trigger: p.trigger, round: &round, out: &out)
        if sent, rule.timing.rate != nil { rateWindows[rule.index]?.fired += 1 }
        block(sent ? .fired : .heldBack)
        cascade(profile: profile, now: now, triggerKey: p.triggerKey, round: &round, out: &out)
    }

    /// When a run of `rule` may fire next if its window at `now` is full (`nil`: it may fire now). Windows are aligned to
    /// the epoch; a new window starts counting from 0.
    func rateHold(_ rule: Int32, _ rate: SendRate, now: Int64) -> Int64? {
        let start = now - ((now % rate.perMs) + rate.perMs) % rate.perMs
        if rateWindows[rule]?.start != start { rateWindows[rule] = (start, 0) }
        let share = (rate.count + rateShares - 1) / max(1, rateShares)
        return rateWindows[rule]!.fired >= share ? start + rate.perMs : nil
    }

    /// Advances the user's partial matches of the sequence rules that have a step on this event; returns the rules
    /// whose last step it completes (each match is consumed when it completes).
    func advanceSequences(_ profile: UserProfile, _ e: BoundEvent, now: Int64, rules: [Int32]) -> [Int32] {
        var completed: [Int32] = []
        for r in rules {
            let rule = ruleSet.rules[Int(r)]
            guard rule.enabled, case .sequence(let seq) = rule.trigger else { continue }
            var key = ""
            if let slot = seq.correlateSlot {
                guard let v = e.property(slot), !v.isNullValue else { continue }
                key = JSONWriter.encode(v)
                // A long value is kept by its hash: a user's state holds at most 32 short keys per rule.
                if key.utf8.count > Engine.maxSequenceKeyBytes { key = "#" + String(ByteHash.hash(key), radix: 16) }
            }
            let index = profile.sequences.firstIndex { $0.rule == r && $0.key == key }
            var best = index.map { profile.sequences[$0].best } ?? Array(repeating: Int64.min, count: seq.steps.count)
            // Steps from last to first, so one event never advances two steps of the same match.
            for k in seq.steps.indices.reversed() where seq.steps[k].eventID == e.nameID {
                if let w = seq.steps[k].whereExpr, !w.evaluate(scope).isTrue { continue }
                if k == 0 {
                    best[0] = now
                } else if best[k - 1] != Int64.min && now - best[k - 1] < seq.withinMs {
                    best[k] = max(best[k], best[k - 1])
                }
            }
            // Drop partial matches that can no longer finish in time.
            for k in best.indices where best[k] != Int64.min && now - best[k] >= seq.withinMs { best[k] = Int64.min }
            if best.last != Int64.min {
                completed.append(r)
                if let index { profile.sequences.remove(at: index) }
            } else if best.contains(where: { $0 != Int64.min }) {
                if let index {
                    profile.sequences[index].best = best
                } else {
                    profile.sequences.append(SequenceState(rule: r, key: key, best: best))
                    let mine = profile.sequences.indices.filter { profile.sequences[$0].rule == r }
                    if mine.count > Engine.maxSequenceKeys,
                        let oldest = mine.min(by: {
                            profile.sequences[$0].best.max()! < profile.sequences[$1].best.max()!
                        })
                    {
                        profile.sequences.remove(at: oldest)
                    }
                }
            } else if let index {
                profile.sequences.remove(at: index)
            }
        }
        return completed
    }

    /// Most correlation keys a sequence rule tracks per user (the stalest is forgotten first).
    public static let maxSequenceKeys = 32
    /// Longest correlation value a sequence keeps as written; a longer one is kept by its 64-bit hash.
    public static let maxSequenceKeyBytes = 64
}
