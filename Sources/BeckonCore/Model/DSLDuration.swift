/// Durations as the DSL writes them: `500ms`, `90s`, `30m`, `24h`, `7d`, `2w`, or a sum like `1h30m`.
public enum DSLDuration {
    static let units: [(String, Int64)] = [
        ("ms", 1), ("s", 1000), ("m", Milliseconds.minute), ("h", Milliseconds.hour), ("d", Milliseconds.day),
        ("w", Milliseconds.week),
    ]

    /// The longest duration a rule file may write: 100 years (36,525 days, in milliseconds).
    ///
    /// Longer than any wait, window, cooldown or session a campaign means, and short enough that adding one to any
    /// time the engine sees (event times end in 2527) stays far inside 64-bit milliseconds and inside the years
    /// timestamps are shown in (to 9999), and inside CEL's durations (±292 years): the engine's timers, windows,
    /// cooldowns and the analysis add durations to times with plain arithmetic that cannot overflow.
    public static let maxMilliseconds: Int64 = 36_525 * Milliseconds.day

    /// What a duration's text reads as.
    public enum Reading: Equatable, Sendable {
        case milliseconds(Int64)
        /// A duration, but longer than ``maxMilliseconds``.
        case tooLong
        case invalid
    }

    /// Reads `500ms`, `7d`, `1h30m`… with overflow-checked arithmetic. Zero is allowed; negatives are not.
    public static func read(_ text: String) -> Reading {
        let t = text.trimmingWhitespace()
        guard !t.isEmpty else { return .invalid }
        var rest = Substring(t)
        var total: Int64 = 0
        var tooLong = false
        while !rest.isEmpty {
            let digits = rest.prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty else { return .invalid }
            rest = rest.dropFirst(digits.count)
            // Longest unit first so that "ms" is not read as "m".
            guard let (u, scale) = units.sorted(by: { $0.0.count > $1.0.count }).first(where: { rest.hasPrefix($0.0) })
            else { return .invalid }
            rest = rest.dropFirst(u.count)
            guard !tooLong else { continue }  // read to the end: the text may still not be a duration
            var n: Int64 = 0
            for d in digits {
                let (m, o1) = n.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(Int64(d.asciiValue! - 48))
                if o1 || o2 {
                    tooLong = true
                    break
                }
                n = a
            }
            let (v, o1) = n.multipliedReportingOverflow(by: scale)
            let (s, o2) = total.addingReportingOverflow(v)
            if tooLong || o1 || o2 || s > maxMilliseconds {
                tooLong = true
                continue
            }
            total = s
        }
        return tooLong ? .tooLong : .milliseconds(total)
    }

    /// Milliseconds, or `nil` when the text is not a duration or is longer than ``maxMilliseconds``
    /// (``read(_:)`` tells which).
    public static func parse(_ text: String) -> Int64? {
        if case .milliseconds(let ms) = read(text) { return ms }
        return nil
    }

    /// The message for a duration longer than the limit.
    public static func tooLongMessage(_ text: String) -> String {
        "'\(text)' is longer than the longest duration a rule file may use, 100 years (\(format(maxMilliseconds)))"
    }

    /// An exact spelling in days and smaller units: `7d`, `1h30m`, `0s` (never weeks: "14d" reads better).
    public static func format(_ ms: Int64) -> String {
        if ms == 0 { return "0s" }
        var rest = ms
        var out = ""
        for (u, scale) in units.reversed() where rest >= scale && u != "w" {
            out += "\(rest / scale)\(u)"
            rest %= scale
        }
        return out
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
