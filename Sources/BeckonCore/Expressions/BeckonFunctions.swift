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

/// Query parameters of a URL or deep link.
public enum URLParams {
    /// The first value of `name` in the query, percent-decoded (`+` is a space); `""` for a bare `?name`.
    public static func value(of name: String, in url: String) -> String? {
        var s = Substring(url)
        if let hash = s.firstIndex(of: "#") { s = s[..<hash] }
        guard let q = s.firstIndex(of: "?") else { return nil }
        for pair in s[s.index(after: q)...].split(separator: "&", omittingEmptySubsequences: true) {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if decode(kv[0]) == name { return kv.count > 1 ? decode(kv[1]) : "" }
        }
        return nil
    }

    static func decode(_ s: Substring) -> String {
        var out: [UInt8] = []
        let b = Array(s.utf8)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "+") {
                out.append(32)
            } else if b[i] == UInt8(ascii: "%"), i + 2 < b.count,
                let v = UInt8(String(decoding: b[(i + 1)...(i + 2)], as: UTF8.self), radix: 16)
            {
                out.append(v)
                i += 2
            } else {
                out.append(b[i])
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
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
