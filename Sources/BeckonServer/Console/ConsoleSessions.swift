import BeckonCore
import Foundation
import HTTPTypes
import Synchronization

/// The console's sign-ins (docs/console.md, "Security"): a session is made when an admin key is given at the login
/// form, and lives in this process's memory — a restart signs everyone out. Its id travels in a `Secure`,
/// `HttpOnly`, `SameSite=Strict` cookie scoped to `/console`; every form posted carries the session's CSRF token,
/// compared byte for byte in full.
final class ConsoleSessions: Sendable {
    struct Session: Sendable {
        var id: String
        /// The token every form of this session carries.
        var csrf: String
        /// The fingerprint of the admin key signed in with (for the log; never the key).
        var key: String
        var created: Int64
        var seen: Int64
    }

    /// A session ends this long after its last request, and at the latest this long after it began.
    static let idleMs: Int64 = 2 * 3_600_000
    static let lifetimeMs: Int64 = 12 * 3_600_000
    /// The most sessions held; a new one past it ends the least recently used.
    static let maxSessions = 256
    /// The session's cookie. `__Secure-`: a browser takes it only with `Secure` from a secure origin, so no page of
    /// plain HTTP or of a sibling domain can plant one.
    static let cookie = "__Secure-beckon_session"
    /// The login form's own token (a double-submit cookie: another site can neither read it nor, being `__Secure-`
    /// and `SameSite=Strict`, plant or send it).
    static let loginCookie = "__Secure-beckon_login"

    private let sessions = Mutex<[String: Session]>([:])

    /// 32 random bytes from the system's generator, as hex.
    static func token() -> String {
        var g = SystemRandomNumberGenerator()
        return Hex.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &g) })
    }

    func create(key: String, at now: Int64) -> Session {
        let s = Session(id: Self.token(), csrf: Self.token(), key: key, created: now, seen: now)
        sessions.withLock { all in
            if all.count >= Self.maxSessions, let oldest = all.values.min(by: { $0.seen < $1.seen }) {
                all[oldest.id] = nil
            }
            all[s.id] = s
        }
        return s
    }

    /// The live session named by the request's cookie (its last use moved to `now`), or `nil`.
    func find(_ headers: HTTPFields, at now: Int64) -> Session? {
        guard let id = Self.cookie(Self.cookie, in: headers) else { return nil }
        return sessions.withLock { all -> Session? in
            // (A dictionary lookup by the id: the id is 256 random bits, not a secret compared against a guess.)
            guard var s = all[id] else { return nil }
            guard now - s.seen < Self.idleMs, now - s.created < Self.lifetimeMs else {
                all[id] = nil
                return nil
            }
            s.seen = now
            all[id] = s
            return s
        }
    }

    func end(_ id: String) { sessions.withLock { $0[id] = nil } }

    var count: Int { sessions.withLock { $0.count } }

    /// A cookie's value from the request's `Cookie` headers.
    static func cookie(_ name: String, in headers: HTTPFields) -> String? {
        for header in headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let p = pair.trimmingCharacters(in: .whitespaces)
                guard let eq = p.firstIndex(of: "="), p[..<eq] == name else { continue }
                return String(p[p.index(after: eq)...])
            }
        }
        return nil
    }

    /// A `Set-Cookie` value for the console: `Secure`, `HttpOnly`, `SameSite=Strict`, on `path`; `maxAge` 0 ends it.
    static func setCookie(_ name: String, _ value: String, path: String = "/console", maxAge: Int64) -> String {
        "\(name)=\(value); Path=\(path); Max-Age=\(maxAge); Secure; HttpOnly; SameSite=Strict"
    }
}

/// An `application/x-www-form-urlencoded` body (or query string): `+` is a space, `%XX` a byte; the first of a
/// repeated name wins; a name or value with an undecodable escape is kept as written.
struct FormData {
    var fields: [String: String] = [:]

    init(_ bytes: some Collection<UInt8>) {
        for pair in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            let name = Self.decode(parts[0])
            let value = parts.count > 1 ? Self.decode(parts[1]) : ""
            if fields[name] == nil { fields[name] = value }
        }
    }

    init(query: String?) { self.init(Array((query ?? "").utf8)) }

    subscript(_ name: String) -> String? { fields[name] }

    /// As ``Routes/parameter(_:_:)`` decodes a path: Foundation's percent-decoding, after `+` (a space in a form).
    static func decode(_ s: some Collection<UInt8>) -> String {
        let raw = String(decoding: s, as: UTF8.self).replacingOccurrences(of: "+", with: " ")
        return raw.removingPercentEncoding ?? raw
    }
}
