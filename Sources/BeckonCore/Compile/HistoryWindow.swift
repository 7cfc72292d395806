/// The span a history function looks back over.
public enum HistoryWindow: Sendable, Hashable, CustomStringConvertible {
    /// The last `ms` milliseconds, now included: `(now - ms, now]`.
    case rolling(ms: Int64)
    /// Since the start of the current calendar day, ISO week (Monday) or month in the user's time zone.
    case calendar(CalendarUnit)
    /// Everything ever recorded.
    case lifetime

    public enum CalendarUnit: String, Sendable, Hashable { case day, week, month }

    /// Parses `7d`, `24h`, `lifetime`, `calendar week`…
    public static func parse(_ text: String) -> HistoryWindow? {
        let t = text.trimmingWhitespace().lowercased()
        if t == "lifetime" || t == "all" || t == "ever" { return .lifetime }
        if t.hasPrefix("calendar ") || t.hasPrefix("calendar_") || t.hasPrefix("this ") {
            let unit = t.split(whereSeparator: { $0 == " " || $0 == "_" }).last.map(String.init) ?? ""
            return CalendarUnit(rawValue: unit).map(HistoryWindow.calendar)
        }
        if let ms = DSLDuration.parse(t), ms > 0 { return .rolling(ms: ms) }
        return nil
    }

    /// How long entries must be kept to answer this window at any later time.
    var retentionMs: Int64 {
        switch self {
        case .rolling(let ms): ms
        case .calendar(.day): 2 * 86_400_000
        case .calendar(.week): 8 * 86_400_000
        case .calendar(.month): 32 * 86_400_000
        case .lifetime: 0
        }
    }

    public var description: String {
        switch self {
        case .rolling(let ms): DSLDuration.format(ms)
        case .calendar(let u): "calendar \(u.rawValue)"
        case .lifetime: "lifetime"
        }
    }

    /// The first millisecond inside the window, at `now`, for a user in `zone`.
    func start(now: Int64, zone: Zone) -> Int64 {
        switch self {
        case .rolling(let ms): return now - ms + 1
        case .lifetime: return 0
        case .calendar(let unit): return Calendars.periodStart(unit, now: now, zone: zone)
        }
    }
}

/// Calendar periods in a zone, DST-correct: boundaries are local midnights converted back to UTC.
enum Calendars {
    static func periodStart(_ unit: HistoryWindow.CalendarUnit, now: Int64, zone: Zone) -> Int64 {
        let (secs, _) = Civil.floorDivMod(now, 1000)
        let local = zone.local(fromUTC: secs)
        let (days, _) = Civil.floorDivMod(local, 86_400)
        var startDay = days
        switch unit {
        case .day: break
        case .week:
            // ISO weeks start on Monday; weekday() is 0 for Sunday.
            let wd = Civil.weekday(fromDays: days)
            startDay = days - Int64((wd + 6) % 7)
        case .month:
            let (y, m, _) = Civil.civil(fromDays: days)
            startDay = Civil.days(fromCivil: y, m, 1)
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
