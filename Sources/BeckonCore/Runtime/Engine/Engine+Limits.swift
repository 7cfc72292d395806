/// Limits and re-prompts: whether a rule (or the global cap) may fire for a user now, decided in one place for every
/// path (the general evaluation, delayed actions coming due, `explain`'s words; the fast path's gate reads the same
/// tests through ``LimitStanding``).
extension Engine {
    /// The first limit that blocks a fire now, if any, in ``CompiledLimits/kinds`` order.
    /// With `occurrence` nil (a delayed action coming due) the occurrence limits, decided at trigger time, are skipped.
    /// `perChannel`: a channel's caps, whose `per_user` and `per_session` count the fires in `series` (a channel keeps no
    /// fire record of its own).
    func check(
        _ l: CompiledLimits, record rec: RuleRecord, series: Int32, profile: UserProfile, now: Int64, occurrence: Int?,
        perChannel: Bool = false
    ) -> LimitHit? {
        for kind in l.kinds {
            if let s = standing(
                kind, l, record: rec, series: series, profile: profile, now: now, occurrence: occurrence,
                perChannel: perChannel), s.blocks
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
        occurrence: Int?, perChannel: Bool = false
    ) -> LimitStanding? {
        if perChannel, kind == .perUser || kind == .perSession, let max = kind == .perUser ? l.perUser : l.perSession {
            let used =
                kind == .perUser
                ? Int(profile.history.lifetimeStat(series: series)?.count ?? 0)
                : profile.history.count(series: series, from: profile.session.start, to: now)
            return LimitStanding(kind: kind, used: used, max: max, blocks: used >= max)
        }
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
        case .perMinute, .perHour, .perDay, .perWeek, .perMonth, .perCalendarDay, .perCalendarWeek, .perCalendarMonth:
            guard let max = l.rolling.first(where: { $0.kind == kind })?.max, let window = kind.window else { return nil }
            let zone = window.needsZone ? UserProfile.userZone(profile, scope.event, zoneSlots) : Zone.utc
            let from = window.start(now: now, zone: zone)
            let c = profile.history.count(series: series, from: from, to: now)
            guard c >= max else { return LimitStanding(kind: kind, used: c, max: max, blocks: false) }
            let times = profile.history.times(series: series, from: from, to: now)
            let oldest = times.dropLast(max - 1).last ?? times.first
            return LimitStanding(
                kind: kind, used: c, max: max, blocks: true,
                freesAt: oldest.flatMap { window.freesAt(oldest: $0, now: now, zone: zone) })
        case .cooldown:
            guard let cd = l.cooldownMs else { return nil }
            let blocks = LimitStanding.cooldownBlocks(lastFire: rec.lastFire, ms: cd, now: now)
            return LimitStanding(
                kind: kind, used: blocks ? 1 : 0, max: Int(cd), blocks: blocks,
                freesAt: blocks ? rec.lastFire + cd : nil, lastFire: rec.lastFire)
        }
    }

    /// How much room each limit has left, for `explain`: "per_user 1 of 3 used; per_week 0 of 1".
    func limitStatus(_ rule: CompiledRule, _ rec: RuleRecord, profile: UserProfile, now: Int64, occurrence: Int) -> String {
        rule.limits.kinds.compactMap {
            standing($0, rule.limits, record: rec, series: rule.fireSeries, profile: profile, now: now, occurrence: occurrence)?
                .explanation
        }.joined(separator: "; ")
    }

    /// Why the re-prompt condition holds the rule back, if it does.
    func repromptBlock(_ rp: CompiledReprompt, rule: Int32, profile: UserProfile, now: Int64) -> String? {
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

    var zoneSlots: (attribute: Int?, context: Int?) {
        (ruleSet.attributeSlots["timezone"], ruleSet.contextSlots["timezone"])
    }

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
}

/// One limit of a rule, for one user, now: how much of it is used, and whether it blocks a fire. The one checker:
/// the engine's check, the words of `explain` and the fast path's gate all read limits through it.
struct LimitStanding {
    let kind: LimitKind
    let used: Int
    let max: Int
    let blocks: Bool
    /// When it stops blocking, if that can be known now.
    var freesAt: Int64? = nil
    var lastFire: Int64 = Int64.min

    /// A per-user cap: `fires` of `max` used.
    @inline(__always) static func perUserBlocks(fires: UInt32, max: UInt32) -> Bool { fires >= max }
    /// A per-session cap: the fires in the user's current session.
    @inline(__always) static func perSessionBlocks(_ rec: RuleRecord, session: UInt32, max: Int) -> Bool {
        rec.firesInSession(session) >= max
    }
    /// A cooldown: the last fire less than `ms` ago.
    @inline(__always) static func cooldownBlocks(lastFire: Int64, ms: Int64, now: Int64) -> Bool {
        ms > 0 && lastFire != Int64.min && now - lastFire < ms
    }

    /// The limit as `explain` words it: "per_user 1 of 3 used", "per_week 0 of 1"…
    var explanation: String {
        switch kind {
        case .onOccurrence: "occurrence \(used) (fires on \(Engine.ordinal(max)))"
        case .everyOccurrence: "occurrence \(used) (fires on every \(Engine.ordinal(max)))"
        case .perUser: "per_user \(used) of \(max) used"
        case .cooldown:
            lastFire == Int64.min
                ? "cooldown \(DSLDuration.format(Int64(max))) (never fired)"
                : "cooldown \(DSLDuration.format(Int64(max))) (last fired \(Timestamp(milliseconds: lastFire)))"
        default: "\(kind.key) \(used) of \(max)"
        }
    }

    /// The hit a blocking limit makes of a verdict.
    var hit: LimitHit {
        kind == .cooldown
            ? LimitHit(
                key: kind.key, count: 1, max: 1, freesAt: freesAt, lastFire: lastFire, cooldownMs: Int64(max),
                keyIndex: kind.rawValue)
            : LimitHit(key: kind.key, count: used, max: max, freesAt: freesAt, keyIndex: kind.rawValue)
    }
}
