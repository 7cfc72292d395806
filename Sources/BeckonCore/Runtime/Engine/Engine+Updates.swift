/// The state an event updates before its rules run, and attribute writes: the stream's clock, de-duplication,
/// sessions, history, attributes.
extension Engine {
    /// Sets (or with `nil`, removes) an attribute, noting a change for `on_change` rules when the value differs.
    /// `more`: how many writes of the same batch may follow (the row grows once for them; the batch's writer trims it
    /// after, with ``SparseRow/trim()``).
    func applyAttribute(
        _ p: UserProfile, name: String, slot: Int?, value: Value?, changes: inout [(slot: Int, change: AttributeChange)],
        more: Int = 0
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
        let old = p.attributes.replace(slot, with: value, roomForMore: more)
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

    /// A session ends by its timeout whether or not an event comes: a delayed action due after it fires outside any
    /// session (docs/time.md, "Sessions"), so each such fire counts in a session of its own and per-session caps do
    /// not hold it; the user's next event begins a new session as usual. (The last activity is left as it was: a
    /// fire is not the user's.)
    func endSessionIfTimedOut(_ p: UserProfile, _ now: Int64) {
        guard p.session.id != 0, p.session.lastActivity != Int64.min,
            now - p.session.lastActivity >= ruleSet.settings.sessionTimeoutMs
        else { return }
        p.session.id &+= 1
        p.session.start = now
    }

    func updateSession(_ p: UserProfile, startsSession: Bool, _ now: Int64) {
        // (A restored session may have no last activity: it is over.)
        if p.session.id == 0 || p.session.lastActivity == Int64.min
            || now - p.session.lastActivity >= ruleSet.settings.sessionTimeoutMs || startsSession
        {
            p.session.id &+= 1
            p.session.start = now
        }
        p.session.lastActivity = now
    }

    /// Records the event in the series its plan names (those whose filter it passes; a `sum` series its value).
    func recordHistory(_ p: UserProfile, _ e: BoundEvent, _ plan: EventPlans.Plan, _ now: Int64) {
        let rs = ruleSet
        for k in plan.series {
            let s = rs.eventPlans.item(k)
            let spec = rs.seriesTable[inRange: Int(s)]
            if spec.hasFilter, case .event(_, let filter) = rs.series[Int(s)].source {
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
    func isDuplicate(_ p: UserProfile, _ id: String, _ time: Int64) -> Bool {
        let now = max(time, p.clock)
        let clock = self.clock
        let arrival = clock == Int64.min ? now : min(now, clock &+ ruleSet.settings.clockSkewMs)
        let horizon = (clock == Int64.min ? now : min(now, clock)) &- ruleSet.settings.dedupWindowMs
        return !p.messageIDs.insert(ByteHash.hash(id), at: arrival, forgettingUpTo: horizon)
    }

    /// Moves the stream's clock for an event of `user` at `time` (see ``clock``).
    @inline(__always) func moveClock(_ time: Int64, user: String) {
        if time > latestTime { latestTime = time }
        let clock = self.clock
        guard time > clock else { return }
        // The common case: a stream in time order moves the clock a little at each event.
        if clock != Int64.min && time &- clock <= ruleSet.settings.clockSkewMs {
            self.clock = time
            return
        }
        moveClockAhead(time, user: user)
    }

    /// An event further ahead of the clock than the skew (or the first events of a stream): it moves the clock only
    /// when another user's event within the skew of it confirms it.
    private func moveClockAhead(_ time: Int64, user id: String) {
        // (The user by a hash without the profile table's seed, which is drawn per process: the entries are saved
        // with the stream's state and must name the same user in the engine that restores them.)
        let user = ByteHash.hash(id)
        let skew = ruleSet.settings.clockSkewMs
        if let other = ahead.first(where: { $0.user != user && abs($0.time - time) <= skew }) {
            clock = max(clock, other.time, time)
            let clock = self.clock
            ahead.removeAll { $0.time - clock <= skew }
            return
        }
        ahead.removeAll { $0.user == user }
        ahead.append((time, user))
        if ahead.count > Engine.maxAhead { ahead.removeFirst() }
    }
}
