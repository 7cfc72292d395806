import Foundation

/// Lengths of time in milliseconds, the unit of every time the engine and the service keep: one definition each.
public enum Milliseconds {
    public static let second: Int64 = 1000
    public static let minute: Int64 = 60_000
    public static let hour: Int64 = 3_600_000
    public static let day: Int64 = 86_400_000
    public static let week: Int64 = 604_800_000
}

/// An instant, as CEL's `google.protobuf.Timestamp`: seconds since 1970-01-01T00:00:00Z plus nanoseconds,
/// in the range 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var seconds: Int64
    /// 0 ..< 1_000_000_000
    public var nanos: Int32

    public static let minSeconds: Int64 = -62_135_596_800
    public static let maxSeconds: Int64 = 253_402_300_799

    /// Fails with a "range" error outside year 1 to 9999.
    public init(seconds: Int64, nanos: Int32 = 0) throws(EvalError) {
        var s = seconds
        var n = Int64(nanos)
        if n < 0 || n >= 1_000_000_000 {
            s += n / 1_000_000_000
            n %= 1_000_000_000
            if n < 0 {
                n += 1_000_000_000
                s -= 1
            }
        }
        guard s >= Timestamp.minSeconds && s <= Timestamp.maxSeconds else { throw EvalError("timestamp out of range") }
        self.seconds = s
        self.nanos = Int32(n)
    }

    /// From milliseconds since the epoch, the engine's own clock unit.
    public init(milliseconds ms: Int64) {
        let s = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)
        seconds = s
        nanos = Int32((ms - s * 1000) * 1_000_000)
    }

    public var milliseconds: Int64 { seconds * 1000 + Int64(nanos) / 1_000_000 }

    public static func < (a: Timestamp, b: Timestamp) -> Bool {
        a.seconds != b.seconds ? a.seconds < b.seconds : a.nanos < b.nanos
    }

    /// RFC 3339 in UTC with the shortest exact fraction: `2009-02-13T23:31:30Z`, `…30.123Z`.
    public var description: String {
        var bytes: [UInt8] = []
        appendRFC3339(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``description``'s bytes to `bytes` (digit by digit for whole seconds in years 0–9999, the common case:
    /// no string is made).
    func appendRFC3339(to bytes: inout [UInt8]) {
        let (days, secs) = Civil.floorDivMod(seconds, 86_400)
        let (y, m, d) = Civil.civil(fromDays: days)
        guard (0...9999).contains(y) else {
            var out = Civil.pad(y, 4) + "-" + Civil.pad(m, 2) + "-" + Civil.pad(d, 2) + "T"
            out += Civil.pad(secs / 3600, 2) + ":" + Civil.pad((secs % 3600) / 60, 2) + ":" + Civil.pad(secs % 60, 2)
            out += Civil.fraction(nanos)
            bytes.append(contentsOf: (out + "Z").utf8)
            return
        }
        // The fraction's digits without trailing zeros (milliseconds, the common case, are three).
        var fraction = Int64(nanos)
        var digits = fraction == 0 ? 0 : 9
        while digits > 0 && fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        // At most 30 bytes written in place after one capacity check (appending them one by one checks the array's
        // uniqueness and capacity for each).
        bytes.append(addingCapacity: 20 + (digits == 0 ? 0 : digits + 1)) { out in
            func two(_ v: Int64, then separator: UInt8) {
                out.append(UInt8(truncatingIfNeeded: 48 + v / 10))
                out.append(UInt8(truncatingIfNeeded: 48 + v % 10))
                out.append(separator)
            }
            two(Int64(y) / 100, then: UInt8(truncatingIfNeeded: 48 + Int64(y) / 10 % 10))
            out.append(UInt8(truncatingIfNeeded: 48 + Int64(y) % 10))
            out.append(UInt8(ascii: "-"))
            two(Int64(m), then: UInt8(ascii: "-"))
            two(Int64(d), then: UInt8(ascii: "T"))
            two(secs / 3600, then: UInt8(ascii: ":"))
            two((secs % 3600) / 60, then: UInt8(ascii: ":"))
            guard digits > 0 else { return two(secs % 60, then: UInt8(ascii: "Z")) }
            two(secs % 60, then: UInt8(ascii: "."))
            var scale: Int64 = 1
            for _ in 1..<digits { scale *= 10 }
            while scale > 0 {
                out.append(UInt8(truncatingIfNeeded: 48 + fraction / scale % 10))
                scale /= 10
            }
            out.append(UInt8(ascii: "Z"))
        }
    }

    /// Parses RFC 3339 (`2026-01-05T09:00:00Z`, `…09:00:00.250+01:00`); also accepts a lower-case `t`/`z`
    /// and a space between date and time. Returns `nil` when the text is not a timestamp.
    public static func parse(_ text: String) -> Timestamp? { parse(bytes: Array(text.utf8)) }

    /// Why `text` is not a timestamp, when the reason is its UTC offset (`+99:99`): `nil` otherwise.
    public static func offsetProblem(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        // The offset is the last six characters: `+HH:MM`.
        guard bytes.count >= 6 else { return nil }
        let tail = bytes[(bytes.count - 6)...]
        var p = ASCIIScanner(Array(tail))
        guard p.eat(UInt8(ascii: "+")) || p.eat(UInt8(ascii: "-")), let h = p.digits(2), p.eat(UInt8(ascii: ":")),
            let m = p.digits(2), p.atEnd, h > 23 || m > 59
        else { return nil }
        let offset = String(decoding: tail, as: UTF8.self)
        return "the UTC offset '\(offset)' is out of range: hours go to 23 and minutes to 59 (RFC 3339)"
    }

    /// ``parse(_:)`` over UTF-8 bytes (the event decoder parses timestamps in place, without making a string).
    public static func parse<Bytes: RandomAccessCollection<UInt8>>(bytes: Bytes) -> Timestamp? where Bytes.Index == Int {
        var p = ASCIIScanner(bytes)
        guard let y = p.digits(4), p.eat(UInt8(ascii: "-")), let mo = p.digits(2), p.eat(UInt8(ascii: "-")),
            let d = p.digits(2)
        else { return nil }
        guard mo >= 1 && mo <= 12 && d >= 1 && d <= Civil.daysInMonth(y, mo) else { return nil }
        guard p.eat(UInt8(ascii: "T")) || p.eat(UInt8(ascii: "t")) || p.eat(UInt8(ascii: " ")) else { return nil }
        guard let h = p.digits(2), p.eat(UInt8(ascii: ":")), let mi = p.digits(2), p.eat(UInt8(ascii: ":")),
            let s = p.digits(2)
        else { return nil }
        guard h < 24 && mi < 60 && s < 61 else { return nil }
        var nanos: Int64 = 0
        if p.eat(UInt8(ascii: ".")) {
            var scale: Int64 = 100_000_000
            var any = false
            while let c = p.peek(), c >= 48 && c <= 57 {
                p.advance()
                any = true
                nanos += Int64(c - 48) * scale
                scale /= 10
            }
            guard any else { return nil }
        }
        var offset: Int64 = 0
        if p.eat(UInt8(ascii: "Z")) || p.eat(UInt8(ascii: "z")) {
        } else if let c = p.peek(), c == UInt8(ascii: "+") || c == UInt8(ascii: "-") {
            p.advance()
            guard let oh = p.digits(2), p.eat(UInt8(ascii: ":")), let om = p.digits(2) else { return nil }
            // RFC 3339: time-numoffset = ("+" / "-") time-hour ":" time-minute, hours 00-23, minutes 00-59.
            guard oh <= 23 && om <= 59 else { return nil }
            offset = Int64(oh * 3600 + om * 60) * (c == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        guard p.atEnd else { return nil }
        let days = Civil.days(fromCivil: y, mo, d)
        let secs = days * 86_400 + Int64(h * 3600 + mi * 60 + min(s, 59)) - offset
        return try? Timestamp(seconds: secs, nanos: Int32(nanos))
    }
}

/// A signed span of time, as CEL's `google.protobuf.Duration`: seconds plus nanoseconds of the same sign,
/// limited, as CEL implementations do, to what 64-bit nanoseconds hold (about ±292 years).
public struct TimeDuration: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var seconds: Int64
    public var nanos: Int32

    public static let maxSeconds: Int64 = 9_223_372_036

    public init(seconds: Int64, nanos: Int32 = 0) throws(EvalError) {
        var s = seconds
        var n = Int64(nanos)
        s += n / 1_000_000_000
        n %= 1_000_000_000
        if s > 0 && n < 0 {
            s -= 1
            n += 1_000_000_000
        } else if s < 0 && n > 0 {
            s += 1
            n -= 1_000_000_000
        }
        let (ns, o1) = s.multipliedReportingOverflow(by: 1_000_000_000)
        let (_, o2) = ns.addingReportingOverflow(n)
        guard !o1 && !o2 else { throw EvalError("duration out of range") }
        self.seconds = s
        self.nanos = Int32(n)
    }

    public init(milliseconds ms: Int64) {
        seconds = ms / 1000
        nanos = Int32((ms % 1000) * 1_000_000)
    }

    public var milliseconds: Int64 { seconds * 1000 + Int64(nanos) / 1_000_000 }
    public var totalNanos: Double { Double(seconds) * 1e9 + Double(nanos) }

    public static func < (a: TimeDuration, b: TimeDuration) -> Bool {
        a.seconds != b.seconds ? a.seconds < b.seconds : a.nanos < b.nanos
    }

    /// `3600s`, `1.5s`, `-0.000000001s`: the protobuf JSON form CEL's `string()` uses.
    public var description: String {
        let negative = seconds < 0 || nanos < 0
        let s = seconds.magnitude
        let n = Int32(nanos.magnitude)
        return (negative ? "-" : "") + String(s) + Civil.fraction(n) + "s"
    }

    /// Parses CEL's duration strings: a sequence of decimal numbers with units `h`, `m`, `s`, `ms`, `us`, `ns`
    /// (`1h30m`, `1.5h`, `-90s`, `0`). Beckon's DSL durations (`7d`) are parsed by ``DSLDuration``.
    public static func parse(_ text: String) -> TimeDuration? {
        var bytes = Array(text.utf8)[...]
        var negative = false
        if bytes.first == UInt8(ascii: "-") {
            negative = true
            bytes = bytes.dropFirst()
        } else if bytes.first == UInt8(ascii: "+") {
            bytes = bytes.dropFirst()
        }
        if bytes.elementsEqual("0".utf8) { return try? TimeDuration(seconds: 0) }
        guard !bytes.isEmpty else { return nil }
        var totalNanos: Double = 0
        var exactNanos: Int64 = 0
        var exact = true
        while !bytes.isEmpty {
            var intPart: Int64 = 0
            var fracDigits: [UInt8] = []
            var sawDigit = false
            while let c = bytes.first, c >= 48 && c <= 57 {
                let (m, o1) = intPart.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(Int64(c - 48))
                if o1 || o2 { return nil }
                intPart = a
                sawDigit = true
                bytes = bytes.dropFirst()
            }
            if bytes.first == UInt8(ascii: ".") {
                bytes = bytes.dropFirst()
                while let c = bytes.first, c >= 48 && c <= 57 {
                    fracDigits.append(c - 48)
                    sawDigit = true
                    bytes = bytes.dropFirst()
                }
            }
            guard sawDigit else { return nil }
            let unitNanos: Int64
            if bytes.starts(with: "ns".utf8) {
                unitNanos = 1
                bytes = bytes.dropFirst(2)
            } else if bytes.starts(with: "us".utf8) || bytes.starts(with: "µs".utf8) {
                unitNanos = 1_000
                bytes = bytes.dropFirst(bytes.first == UInt8(ascii: "u") ? 2 : 3)
            } else if bytes.starts(with: "ms".utf8) {
                unitNanos = 1_000_000
                bytes = bytes.dropFirst(2)
            } else if bytes.first == UInt8(ascii: "s") {
                unitNanos = 1_000_000_000
                bytes = bytes.dropFirst()
            } else if bytes.first == UInt8(ascii: "m") {
                unitNanos = 60_000_000_000
                bytes = bytes.dropFirst()
            } else if bytes.first == UInt8(ascii: "h") {
                unitNanos = 3_600_000_000_000
                bytes = bytes.dropFirst()
            } else {
                return nil
            }
            var frac: Double = 0
            var scale = 0.1
            for d in fracDigits {
                frac += Double(d) * scale
                scale /= 10
            }
            totalNanos += (Double(intPart) + frac) * Double(unitNanos)
            // Exact integer path while it fits.
            let (ip, o) = intPart.multipliedReportingOverflow(by: unitNanos)
            var fracNanos: Int64 = 0
            var fscale = unitNanos / 10
            for d in fracDigits {
                fracNanos += Int64(d) * fscale
                fscale /= 10
            }
            if o {
                exact = false
            } else {
                let (s1, o3) = exactNanos.addingReportingOverflow(ip)
                let (s2, o4) = s1.addingReportingOverflow(fracNanos)
                if o3 || o4 { exact = false } else { exactNanos = s2 }
            }
        }
        if exact {
            let s = exactNanos / 1_000_000_000
            let n = Int32(exactNanos % 1_000_000_000)
            return try? TimeDuration(seconds: negative ? -s : s, nanos: negative ? -n : n)
        }
        guard totalNanos.isFinite, abs(totalNanos) < 9.2e18 else { return nil }
        let s = Int64(totalNanos / 1e9)
        let n = Int32(totalNanos - Double(s) * 1e9)
        return try? TimeDuration(seconds: negative ? -s : s, nanos: negative ? -n : n)
    }
}

/// Proleptic Gregorian calendar arithmetic on day numbers (days since 1970-01-01), exact for all years.
public enum Civil {
    public static func floorDivMod(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        var q = a / b
        var r = a % b
        if r < 0 {
            q -= 1
            r += b
        }
        return (q, r)
    }

    /// Howard Hinnant's days_from_civil.
    public static func days(fromCivil y0: Int, _ m: Int, _ d: Int) -> Int64 {
        let y = Int64(m <= 2 ? y0 - 1 : y0)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = Int64((m + 9) % 12)
        let doy = (153 * mp + 2) / 5 + Int64(d) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public static func civil(fromDays z0: Int64) -> (year: Int, month: Int, day: Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (Int(m <= 2 ? y + 1 : y), Int(m), Int(d))
    }

    public static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    public static func daysInMonth(_ y: Int, _ m: Int) -> Int {
        switch m {
        case 2: isLeap(y) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// 0 = Sunday.
    public static func weekday(fromDays z: Int64) -> Int {
        let (_, r) = floorDivMod(z + 4, 7)
        return Int(r)
    }

    static func pad(_ v: some BinaryInteger, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    /// `.5`, `.123`, `.000000001`, or empty for zero nanos.
    static func fraction(_ nanos: Int32) -> String {
        guard nanos != 0 else { return "" }
        var digits = pad(nanos, 9)
        while digits.last == "0" { digits.removeLast() }
        return "." + digits
    }
}

/// A time zone for calendar questions: a fixed offset or an IANA zone (DST-aware, through Foundation).
public struct Zone: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable { case fixed(Int), named(String) }
    let kind: Kind
    private let tz: TimeZone?

    public static let utc = Zone(kind: .fixed(0), tz: nil)

    private init(kind: Kind, tz: TimeZone?) {
        self.kind = kind
        self.tz = tz
    }

    public static func == (a: Zone, b: Zone) -> Bool { a.kind == b.kind }
    public func hash(into h: inout Hasher) { h.combine(kind) }

    /// `UTC`, `Europe/Berlin`, `+05:30`, `-02:30`, `02:00` (a positive offset). `nil` if unknown.
    public init?(_ name: String) {
        if name == "UTC" || name == "Z" || name == "Etc/UTC" {
            self = .utc
            return
        }
        var p = ASCIIScanner(Array(name.utf8))
        var sign = 1
        if p.eat(UInt8(ascii: "+")) {
        } else if p.eat(UInt8(ascii: "-")) {
            sign = -1
        }
        if let h = p.digits(2), p.eat(UInt8(ascii: ":")), let m = p.digits(2), p.atEnd {
            guard h <= 23 && m <= 59 else { return nil }
            self.init(kind: .fixed(sign * (h * 3600 + m * 60)), tz: nil)
            return
        }
        guard let tz = TimeZone(identifier: name) else { return nil }
        self.init(kind: .named(name), tz: tz)
    }

    public var description: String {
        switch kind {
        case .fixed(0): "UTC"
        case .fixed(let s): (s < 0 ? "-" : "+") + Civil.pad(abs(s) / 3600, 2) + ":" + Civil.pad(abs(s) % 3600 / 60, 2)
        case .named(let n): n
        }
    }

    /// Seconds east of UTC at the instant `seconds` (since the epoch).
    public func offset(atUTC seconds: Int64) -> Int {
        switch kind {
        case .fixed(let s): return s
        case .named:
            return tz!.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(seconds)))
        }
    }

    /// The UTC instant of a local wall-clock time. In a DST gap the wall time does not exist and the result is
    /// the instant the clock jumps past it (02:30 on a spring-forward night → 03:00 local); in an overlap, the
    /// earlier of the two instants.
    public func utc(fromLocal local: Int64) -> Int64 {
        switch kind {
        case .fixed(let s): return local - Int64(s)
        case .named:
            // Try the offsets in effect a day either side; pick the earliest that maps back exactly.
            let o1 = Int64(offset(atUTC: local - 86_400))
            let o2 = Int64(offset(atUTC: local + 86_400))
            var candidates: [Int64] = []
            for o in [o1, o2] {
                let u = local - o
                if Int64(offset(atUTC: u)) == o { candidates.append(u) }
            }
            if let best = candidates.min() { return best }
            // Gap: the wall time is skipped. Find the transition instant between the two readings.
            var lo = local - Swift.max(o1, o2)  // still the old offset here
            var hi = local - Swift.min(o1, o2)  // already the new offset here
            let before = Int64(offset(atUTC: lo))
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2
                if Int64(offset(atUTC: mid)) == before { lo = mid } else { hi = mid }
            }
            return hi
        }
    }

    /// Local wall-clock seconds (since the local epoch) of a UTC instant.
    public func local(fromUTC seconds: Int64) -> Int64 { seconds + Int64(offset(atUTC: seconds)) }
}

/// A tiny forward scanner over ASCII bytes.
struct ASCIIScanner<Bytes: RandomAccessCollection<UInt8>> where Bytes.Index == Int {
    let bytes: Bytes
    var i = 0
    init(_ b: Bytes) { bytes = b }
    var atEnd: Bool { i == bytes.count }
    func peek() -> UInt8? { i < bytes.count ? bytes[i] : nil }
    mutating func advance() { i += 1 }
    mutating func eat(_ c: UInt8) -> Bool {
        if i < bytes.count && bytes[i] == c {
            i += 1
            return true
        }
        return false
    }
    mutating func digits(_ n: Int) -> Int? {
        guard i + n <= bytes.count else { return nil }
        var v = 0
        for k in 0..<n {
            let c = bytes[i + k]
            guard c >= 48 && c <= 57 else { return nil }
            v = v * 10 + Int(c - 48)
        }
        i += n
        return v
    }
}
