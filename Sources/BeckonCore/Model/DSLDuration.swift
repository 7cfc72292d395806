/// Durations as the DSL writes them: `500ms`, `90s`, `30m`, `24h`, `7d`, `2w`, or a sum like `1h30m`.
public enum DSLDuration {
    static let units: [(String, Int64)] = [
        ("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000), ("w", 604_800_000),
    ]

    /// Milliseconds, or `nil` when the text is not a duration. Zero is allowed; negatives are not.
    public static func parse(_ text: String) -> Int64? {
        let t = text.trimmingWhitespace()
        guard !t.isEmpty else { return nil }
        var rest = Substring(t)
        var total: Int64 = 0
        while !rest.isEmpty {
            let digits = rest.prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty, digits.count <= 12, let n = Int64(digits) else { return nil }
            rest = rest.dropFirst(digits.count)
            // Longest unit first so that "ms" is not read as "m".
            guard let (u, scale) = units.sorted(by: { $0.0.count > $1.0.count }).first(where: { rest.hasPrefix($0.0) })
            else { return nil }
            rest = rest.dropFirst(u.count)
            let (v, o1) = n.multipliedReportingOverflow(by: scale)
            let (s, o2) = total.addingReportingOverflow(v)
            if o1 || o2 { return nil }
            total = s
        }
        return total
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
