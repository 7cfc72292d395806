import Crypto

/// Beckon's own pure functions, beside CEL's standard ones. The event-history functions (`count`,
/// `last_seen`…) need the engine and are compiled by ``RuleEnvironment``.
extension FunctionDecl {
    static let beckon: [String: FunctionDecl] = {
        var out: [String: FunctionDecl] = [:]
        func add(_ d: FunctionDecl) { out[d.name] = d }
        add(
            FunctionDecl(
                name: "version_compare", signatures: [Signature([.string, .string], .int)],
                impl: .binary { a, b in
                    guard case .string(let x) = a, case .string(let y) = b else {
                        return a.isError ? a : (b.isError ? b : .error(.noSuchOverload))
                    }
                    return .int(Int64(VersionCompare.compare(x, y)))
                }, doc: "`version_compare(a, b)`: -1, 0 or 1 comparing dotted versions numerically (`\"10.2\"` > `\"9.12\"`)"))
        add(
            FunctionDecl(
                name: "url_param", signatures: [Signature([.string, .string], .dyn), Signature([.null, .string], .dyn)],
                impl: .binary { a, b in
                    guard case .string(let name) = b else { return b.isError ? b : .error(.noSuchOverload) }
                    switch a {
                    case .string(let url): return URLParams.value(of: name, in: url).map(Value.string) ?? .null
                    case .null: return .null
                    case .error: return a
                    default: return .error(.noSuchOverload)
                    }
                }, doc: "`url_param(url, name)`: the decoded query parameter, or `null` when absent"))
        add(
            FunctionDecl(
                name: "default", signatures: [Signature([.param("A"), .param("A")], .param("A"))],
                impl: .binary { v, fallback in
                    switch v {
                    case .error, .null: fallback
                    default: v
                    }
                },
                doc:
                    "`default(value, fallback)`: `value`, or `fallback` when it is missing, null or fails (`default(user.plan, \"free\")`)"
            ))
        add(
            FunctionDecl(
                name: "sha256", signatures: [Signature([.string], .string), Signature([.bytes], .string)],
                impl: .unary { v in
                    switch v {
                    case .string(let s): return .string(Hex.encode(SHA256.hash(data: Array(s.utf8))))
                    case .bytes(let b): return .string(Hex.encode(SHA256.hash(data: b)))
                    case .error: return v
                    default: return .error(.noSuchOverload)
                    }
                }, doc: "`sha256(s)`: lower-case hex SHA-256 of the UTF-8 text"))
        return out
    }()
}

/// Dotted version comparison: numeric parts compare as numbers; `1.0a1` < `1.0`; missing parts are 0.
public enum VersionCompare {
    public static func compare(_ a: String, _ b: String) -> Int {
        let x = a.split(separator: ".", omittingEmptySubsequences: false)
        let y = b.split(separator: ".", omittingEmptySubsequences: false)
        for i in 0..<max(x.count, y.count) {
            let p = i < x.count ? x[i] : "0"
            let q = i < y.count ? y[i] : "0"
            let c = part(p, q)
            if c != 0 { return c }
        }
        return 0
    }

    private static func part(_ p: Substring, _ q: Substring) -> Int {
        let pd = p.prefix(while: { $0.isASCII && $0.isNumber })
        let qd = q.prefix(while: { $0.isASCII && $0.isNumber })
        let pn = pd.drop(while: { $0 == "0" })
        let qn = qd.drop(while: { $0 == "0" })
        if pn.count != qn.count { return pn.count < qn.count ? -1 : 1 }
        if pn != qn { return pn < qn ? -1 : 1 }
        let ps = p.dropFirst(pd.count)
        let qs = q.dropFirst(qd.count)
        if ps == qs { return 0 }
        // A suffix marks a pre-release: "0a1" comes before "0".
        if ps.isEmpty { return 1 }
        if qs.isEmpty { return -1 }
        return ps < qs ? -1 : 1
    }
}

/// Query parameters of a URL or deep link, read from the URL's bytes in place: a look-up allocates nothing but the
/// value it returns (and a buffer for a value with `%` escapes or `+`).
public enum URLParams {
    /// The first value of `name` in the query, percent-decoded (`+` is a space, `%` and two hex digits a byte, any
    /// other `%` itself); `""` for a bare `?name`.
    public static func value(of name: String, in url: String) -> String? {
        let u = url.utf8
        let end = u.firstIndex(of: UInt8(ascii: "#")) ?? u.endIndex
        guard let q = u[..<end].firstIndex(of: UInt8(ascii: "?")) else { return nil }
        var i = u.index(after: q)
        while i < end {
            let pairEnd = u[i..<end].firstIndex(of: UInt8(ascii: "&")) ?? end
            let eq = u[i..<pairEnd].firstIndex(of: UInt8(ascii: "="))
            if i < pairEnd, decoded(u[i..<(eq ?? pairEnd)], equals: name.utf8) {
                guard let eq else { return "" }
                return decode(u[u.index(after: eq)..<pairEnd])
            }
            i = pairEnd == end ? end : u.index(after: pairEnd)
        }
        return nil
    }

    /// `s` percent-decoded.
    static func decode(_ s: Substring.UTF8View) -> String {
        guard s.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else {
            return String(decoding: s, as: UTF8.self)
        }
        var out: [UInt8] = []
        out.reserveCapacity(s.count)
        var bytes = Decoded(s)
        while let b = bytes.next() { out.append(b) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `s` percent-decoded is `name`'s bytes.
    static func decoded(_ s: Substring.UTF8View, equals name: String.UTF8View) -> Bool {
        var bytes = Decoded(s)
        var n = name.makeIterator()
        while true {
            let a = bytes.next()
            guard a == n.next() else { return false }
            if a == nil { return true }
        }
    }

    /// The bytes of a percent-encoded query part, decoded one at a time.
    struct Decoded: IteratorProtocol {
        private let s: Substring.UTF8View
        private var i: Substring.UTF8View.Index

        init(_ s: Substring.UTF8View) {
            self.s = s
            i = s.startIndex
        }

        mutating func next() -> UInt8? {
            guard i < s.endIndex else { return nil }
            let b = s[i]
            s.formIndex(after: &i)
            if b == UInt8(ascii: "+") { return 32 }
            guard b == UInt8(ascii: "%"), i < s.endIndex else { return b }
            let j = s.index(after: i)
            guard j < s.endIndex, let hi = Decoded.hex(s[i]), let lo = Decoded.hex(s[j]) else { return b }
            i = s.index(after: j)
            return hi << 4 | lo
        }

        private static func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
    }
}

/// What the expression language offers, for generated documentation.
public enum ExpressionLibrary {
    /// Functions with a description, CEL's and Beckon's, by name.
    public static var functions: [(name: String, doc: String)] {
        Array(FunctionDecl.standard.values).filter { !$0.doc.isEmpty }.map { ($0.name, $0.doc) }
            + FunctionDecl.beckon.values.map { ($0.name, $0.doc) }
    }

    /// Beckon's event-history functions.
    public static let history: [(name: String, doc: String)] = [
        ("count(name, window)", "how many times the event happened in the window (an int)"),
        ("count(name, window, {prop: value})", "the same, counting only events whose properties equal the given values"),
        ("seen(name)", "whether the event ever happened"),
        ("first_seen(name)", "when it first happened (a timestamp), or `null`"),
        ("last_seen(name)", "when it last happened (a timestamp), or `null`"),
        ("days_since(name)", "whole days since it last happened; fails (the condition is false) if it never did"),
        ("days_since(timestamp)", "whole days since a time (a timestamp or an RFC 3339 string)"),
        ("sum(name, property, window)", "the sum of a numeric property over the event's occurrences in the window (a double)"),
        (
            "active_days(name, window)",
            "on how many distinct days (user's zone) the event happened in the window; `\"*\"` is any event"
        ),
        ("average(name, window)", "occurrences per day in a rolling window, or per period in a calendar window (a double)"),
        ("average(name, window, interval)", "occurrences per interval (`\"1h\"`, `\"7d\"`) in a rolling window"),
        ("count(\"*\", window)", "every track and screen event of the user"),
    ]
}
