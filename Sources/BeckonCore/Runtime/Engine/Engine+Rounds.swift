/// Rounds: the rules an event (or an attribute change) triggers are evaluated against the same state, arbitrated, and
/// the winners fired in order; every verdict is counted, and recorded when verdicts are kept.
extension Engine {
    /// A triggered rule, with the index of the attribute change that triggered it (-1: an event).
    struct Candidate {
        var rule: Int32
        var change: Int32
    }

    /// Runs `on_change` rules for attribute changes, round after round, up to the cascade depth.
    func cascade(profile: UserProfile, now: Int64, triggerKey: TriggerKey, round: inout RoundState, out: inout EventOutcome) {
        var depth = 0
        while !round.changes.isEmpty {
            let changes = round.changes
            round.changes = []
            let frame = candidates.count
            defer { candidates.pop(to: frame) }
            for (k, (slot, change)) in changes.enumerated() where slot < ruleSet.rulesByAttribute.count {
                for r in ruleSet.rulesByAttribute[slot] {
                    guard case .change(_, let from, let to) = ruleSet.rules[Int(r)].trigger else { continue }
                    if let from, !from.contains(where: { Value.equal($0, change.from) }) { continue }
                    if let to, !to.contains(where: { Value.equal($0, change.to) }) { continue }
                    candidates.push(Candidate(rule: r, change: Int32(k)))
                }
            }
            guard candidates.count > frame else { return }
            depth += 1
            if depth > ruleSet.settings.maxCascadeDepth {
                for i in frame..<candidates.count {
                    note(
                        candidates[i].rule, .cascadeLimit(ruleSet.settings.maxCascadeDepth), now: now,
                        userID: profile.userID, trigger: "change", out: &out)
                }
                return
            }
            runRound(
                from: frame, changes: changes.map(\.change), event: scope.event, profile: profile, now: now,
                triggerKey: triggerKey.appending("|\(depth)"), triggerName: nil, round: &round, out: &out)
        }
    }

    /// Evaluates the rules triggered together — the frame of ``candidates`` from `start` on — against the same state,
    /// arbitrates, then fires the winners in order. The frame is filtered in place (the caller pops it): a round
    /// allocates nothing unless something fires.
    func runRound(
        from start: Int, changes: [AttributeChange], event: BoundEvent?, profile: UserProfile, now: Int64,
        triggerKey: TriggerKey, triggerName: String?, round: inout RoundState, out: inout EventOutcome
    ) {
        scope.invalidateMemo()
        let recordVerdicts = options.recordVerdicts
        // Evaluation: the candidates that qualify move to the front of the frame.
        var n = start
        for k in start..<candidates.count {
            let c = candidates[k]
            if c.change >= 0 { scope.change = changes[Int(c.change)] }
            let qualifies: Bool
            // (Candidates are rules of this rule set: in range.)
            if !recordVerdicts, let gate = ruleSet.ruleTable[inRange: Int(c.rule)].gate {
                // Blocked: counted here as `note` would; passed: `note` counts it with its final verdict.
                let hasLimits = ruleSet.ruleTable[inRange: Int(c.rule)].hasLimits
                if let block = gate.blocks(scope, now: now, rule: c.rule, hasLimits: hasLimits) {
                    count(c.rule, RuleCounter.triggered)
                    count(c.rule, RuleCounter.blocks + block)
                    qualifies = false
                } else {
                    qualifies = true
                }
            } else {
                qualifies = ruleSet.ruleTable.withRule(c.rule) { rule in
                    guard let v = evaluate(rule, profile: profile, event: event, now: now) else { return true }
                    note(c.rule, v, now: now, userID: profile.userID, trigger: triggerName ?? rule.triggerDescription, out: &out)
                    return false
                }
            }
            if qualifies {
                candidates[n] = c
                n += 1
            }
        }
        guard n > start else { return }
        // Delayed rules do not show now, so they take no part in arbitration: they are scheduled.
        var m = start
        for k in start..<n {
            let q = candidates[k]
            if q.change >= 0 { scope.change = changes[Int(q.change)] }
            let immediate = ruleSet.ruleTable.withRule(q.rule) { rule in
                // An `at` time that is now already is not a delay.
                guard rule.isDelayed, case let due = dueTime(rule, profile: profile, now: now), due > now else { return true }
                schedule(
                    rule, due: due, held: false, profile: profile, now: now, triggerKey: triggerKey,
                    trigger: triggerName ?? rule.triggerDescription, change: scope.change, out: &out)
                return false
            }
            if immediate {
                candidates[m] = q
                m += 1
            }
        }
        let kept = m > start + 1 ? arbitrate(start..<m, profile: profile, now: now, triggerName: triggerName, out: &out) : m
        for k in start..<kept {
            let q = candidates[k]
            if q.change >= 0 { scope.change = changes[Int(q.change)] }
            ruleSet.ruleTable.withRule(q.rule) { rule in
                deliver(
                    rule, profile: profile, now: now, triggerKey: triggerKey, trigger: triggerName ?? rule.triggerDescription,
                    round: &round, out: &out)
            }
        }
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
            return p.holds(profile: scope.profileLoan, event: scope.eventLoan, now: now)
                ? nil : .conditionFalse(clause: name, value: .bool(false), why: nil)
        }
        let v = memo.map { scope.memoized($0) { e.evaluate($0) } } ?? e.evaluate(scope)
        explainClause(rule, name.rawValue, v, traced)
        return v.isTrue ? nil : .conditionFalse(clause: name, value: v, why: why(traced))
    }

    /// Why the file's `start`/`end` keep it from firing now, if they do.
    func notLive(_ unit: CompiledUnit, profile: UserProfile, now: Int64) -> String? {
        var t = now
        var zone = ""
        if unit.userLocalWindow {
            let z = UserProfile.userZone(profile, scope.event, zoneSlots)
            t = z.local(fromUTC: Civil.floorDivMod(now, 1000).0) * 1000 + Civil.floorDivMod(now, 1000).1
            zone = " (\(z) local time)"
        }
        if let s = unit.start, t < s { return "\(unit.kind.rawValue) starts at \(Timestamp(milliseconds: s))\(zone)" }
        if let e = unit.end, t >= e { return "\(unit.kind.rawValue) ended at \(Timestamp(milliseconds: e))\(zone)" }
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
        guard options.recordVerdicts, options.whyNot, let traced else { return nil }
        let trace = ExprTrace()
        scope.trace = trace
        _ = traced.evaluate(scope)
        scope.trace = nil
        return trace.summary()
    }

    /// Keeps, per surface, the rule with the largest priority (ties: the one loaded first) and notes the others as
    /// lost; sorts the kept ones into fire order (larger priority first, then load order), at the front of `range` of
    /// ``candidates``. Returns where the kept ones end.
    private func arbitrate(
        _ range: Range<Int>, profile: UserProfile, now: Int64, triggerName: String?, out: inout EventOutcome
    ) -> Int {
        func wins(_ a: CompiledRule, over b: CompiledRule) -> Bool {
            a.priority > b.priority || (a.priority == b.priority && a.index < b.index)
        }
        func wins(_ a: Int32, over b: Int32) -> Bool {
            ruleSet.ruleTable.withRule(a) { x in ruleSet.ruleTable.withRule(b) { y in wins(x, over: y) } }
        }
        var kept = range.lowerBound
        for i in range {
            let winner: Int32? = ruleSet.ruleTable.withRule(candidates[i].rule) { rule in
                guard rule.surfaceID >= 0 else { return nil }
                var winner: Int32?
                for j in range where j != i {
                    let other = candidates[j].rule
                    let better = ruleSet.ruleTable.withRule(other) { o in
                        o.surfaceID == rule.surfaceID && wins(o, over: winner.map { ruleSet.ruleTable.rule($0) } ?? rule)
                    }
                    if better { winner = other }
                }
                return winner
            }
            if let winner {
                let rule = ruleSet.rules[Int(candidates[i].rule)]
                let w = ruleSet.rules[Int(winner)]
                note(
                    rule.index, .lostTo(rule: w.qualifiedID, priority: w.priority, ownPriority: rule.priority), now: now,
                    userID: profile.userID, trigger: triggerName ?? rule.triggerDescription, out: &out)
            } else {
                candidates[kept] = candidates[i]
                kept += 1
            }
        }
        // Insertion sort: rounds are small, and this allocates nothing.
        let first = range.lowerBound
        for i in (first + 1)..<max(first + 1, kept) {
            let x = candidates[i]
            var j = i
            while j > first, wins(x.rule, over: candidates[j - 1].rule) {
                candidates[j] = candidates[j - 1]
                j -= 1
            }
            candidates[j] = x
        }
        return kept
    }
}
