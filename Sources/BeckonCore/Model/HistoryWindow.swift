/// The span a history function or a rolling limit looks back over: the one window type, with one rule for how long
/// its entries are kept (``retentionMs``).
public enum HistoryWindow: Sendable, Hashable, CustomStringConvertible {
    /// The last `ms` milliseconds, now included: `(now - ms, now]`.
    case rolling(ms: Int64)
    /// Since the start of the calendar day, ISO week (Monday) or month `count - 1` periods before the current one,
    /// in the user's time zone: `calendar week` is this week so far, `7 calendar days` is today and the 6 days before.
    case calendar(CalendarUnit, count: Int)
    /// Everything ever recorded.
    case lifetime
    /// Since the same time one calendar month ago, in the user's zone (the day clamped to the month's length):
    /// `per_month`.
    case monthBack

    public enum CalendarUnit: String, Sendable, Hashable { case day, week, month }

    /// Parses `7d`, `24h`, `lifetime`, `calendar week`, `7 calendar days`…
    public static func parse(_ text: String) -> HistoryWindow? {
        let t = text.trimmingWhitespace().lowercased()
        if t == "lifetime" || t == "all" || t == "ever" { return .lifetime }
        let words = t.split(whereSeparator: { $0 == " " || $0 == "_" }).map(String.init)
        if words.count == 2, words[0] == "calendar" || words[0] == "this", let unit = CalendarUnit(rawValue: words[1]) {
            return .calendar(unit, count: 1)
        }
        if words.count == 3, let n = Int(words[0]), n >= 1, n <= 1000, words[1] == "calendar" {
            let u = words[2].hasSuffix("s") ? String(words[2].dropLast()) : words[2]
            if let unit = CalendarUnit(rawValue: u) { return .calendar(unit, count: n) }
        }
        if let ms = DSLDuration.parse(t), ms > 0 { return .rolling(ms: ms) }
        return nil
    }

    /// The longest this window can be: a calendar period at its longest in days (a month 31 days), before any
    /// daylight-saving hour.
    var maxSpanMs: Int64 {
        switch self {
        case .rolling(let ms): ms
        case .calendar(.day, let n): Int64(n) * Milliseconds.day
        case .calendar(.week, let n): Int64(n * 7) * Milliseconds.day
        case .calendar(.month, let n): Int64(n * 31) * Milliseconds.day
        case .monthBack: 31 * Milliseconds.day
        case .lifetime: 0
        }
    }

    /// How long entries must be kept to answer this window at any later time: a rolling window's length; a window in
    /// the user's calendar its longest span and a day more (for the user's zone and daylight saving).
    var retentionMs: Int64 {
        switch self {
        case .rolling(let ms): ms
        case .lifetime: 0
        default: maxSpanMs + Milliseconds.day
        }
    }

    /// Whether the window depends on the user's time zone.
    var needsZone: Bool {
        switch self {
        case .calendar, .monthBack: true
        case .rolling, .lifetime: false
        }
    }

    /// Whether this window lies inside `other` at every moment, for every user's zone (`false` when that is not
    /// certain): a calendar day is inside the last 25 hours, today inside this week and this month, this week not
    /// inside this month.
    func alwaysWithin(_ other: HistoryWindow) -> Bool {
        // Calendar spans are local, so a span grows by one hour on the day clocks go back.
        let dst: Int64 = 3_600_000
        switch (self, other) {
        case (_, .lifetime): return true
        case (.lifetime, _): return false
        case (.rolling(let a), .rolling(let b)): return a <= b
        case (.rolling, _): return false
        case (.calendar, .rolling(let b)), (.monthBack, .rolling(let b)): return maxSpanMs + dst <= b
        case (.calendar(let u, let n), .calendar(let v, let m)):
            return u == v ? n <= m : n == 1 && m == 1 && u == .day
        case (.calendar(let u, 1), .monthBack): return u != .month && maxSpanMs + dst <= 28 * Milliseconds.day
        case (.calendar, .monthBack), (.monthBack, .calendar): return false
        case (.monthBack, .monthBack): return true
        }
    }

    /// When the oldest of the entries in the window leaves it, if that can be known now (a rolling window's).
    func freesAt(oldest: Int64, now: Int64, zone: Zone) -> Int64? {
        switch self {
        case .rolling(let ms): oldest + ms
        // (A calendar period's fires all leave at once, when the next period starts.)
        case .calendar(let unit, 1): Calendars.periodStart(unit, now: now, zone: zone, back: -1)
        default: nil
        }
    }

    public var description: String {
        switch self {
        case .rolling(let ms): DSLDuration.format(ms)
        case .calendar(let u, 1): "calendar \(u.rawValue)"
        case .calendar(let u, let n): "\(n) calendar \(u.rawValue)s"
        case .lifetime: "lifetime"
        case .monthBack: "one month back"
        }
    }

    /// The first millisecond inside the window, at `now`, for a user in `zone`.
    func start(now: Int64, zone: Zone) -> Int64 {
        switch self {
        case .rolling(let ms): return now - ms + 1
        case .lifetime: return 0
        case .calendar(let unit, let n): return Calendars.periodStart(unit, now: now, zone: zone, back: n - 1)
        case .monthBack: return Calendars.monthBefore(now, zone: zone) + 1
        }
    }
}

/// Calendar periods in a zone, DST-correct: boundaries are local midnights converted back to UTC.
enum Calendars {
    /// The start of the period containing `now`, or of the period `back` periods before it.
    static func periodStart(_ unit: HistoryWindow.CalendarUnit, now: Int64, zone: Zone, back: Int = 0) -> Int64 {
        let (secs, _) = Civil.floorDivMod(now, 1000)
        let local = zone.local(fromUTC: secs)
        let (days, _) = Civil.floorDivMod(local, 86_400)
        var startDay = days
        switch unit {
        case .day: startDay = days - Int64(back)
        case .week:
            // ISO weeks start on Monday; weekday() is 0 for Sunday.
            let wd = Civil.weekday(fromDays: days)
            startDay = days - Int64((wd + 6) % 7) - Int64(back) * 7
        case .month:
            let (y, m, _) = Civil.civil(fromDays: days)
            let months = y * 12 + (m - 1) - back
            startDay = Civil.days(fromCivil: months / 12, months % 12 + 1, 1)
        }
        return zone.utc(fromLocal: startDay * 86_400) * 1000
    }

    /// One calendar month before `now` in `zone` (the day clamped to the month's length), in ms.
    static func monthBefore(_ now: Int64, zone: Zone) -> Int64 {
        let (secs, ms) = Civil.floorDivMod(now, 1000)
        let local = zone.local(fromUTC: secs)
        let (days, tod) = Civil.floorDivMod(local, 86_400)
        var (y, m, d) = Civil.civil(fromDays: days)
        m -= 1
        if m == 0 {
            m = 12
            y -= 1
        }
        d = min(d, Civil.daysInMonth(y, m))
        return zone.utc(fromLocal: Civil.days(fromCivil: y, m, d) * 86_400 + tod) * 1000 + ms
    }
}
