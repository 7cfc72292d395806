import BeckonCore
import Foundation
import JWTKit

/// A set of secret keys, each compared by its bytes in full (no early exit at the first differing byte, no Unicode
/// equivalence): the write keys of ingest and the admin keys.
package struct KeyRing: Sendable {
    package let keys: [[UInt8]]
    /// Each key's `Authorization` header as Segment's libraries send it (`Basic ` and the key and a colon in base64),
    /// compared whole before any other form is decoded: Foundation's base64 and trimming were 0.7% of a fleet
    /// process's time at ingest.
    let basicHeaders: [[UInt8]]

    package init(keys: some Sequence<String>) {
        self.keys = keys.map { Array($0.utf8) }
        // (Not for a key that is empty or has a colon, which no `Authorization: Basic` header names.)
        basicHeaders = self.keys.filter { !$0.isEmpty && !$0.contains(UInt8(ascii: ":")) }.map {
            Array(("Basic " + Data($0 + [UInt8(ascii: ":")]).base64EncodedString()).utf8)
        }
    }

    package func contains(_ key: String) -> Bool { Self.any(of: keys, is: Array(key.utf8)) }

    /// Whether one of `list` is `given`, every entry compared in full (no early exit at the first found).
    static func any(of list: [[UInt8]], is given: [UInt8]) -> Bool {
        var found = false
        for k in list where same(k, given) { found = true }
        return found
    }

    /// Equal bytes, every byte looked at when the lengths match.
    package static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in a.indices { diff |= a[i] ^ b[i] }
        return diff == 0
    }

    /// Whether an `Authorization` header is HTTP Basic with one of the keys as the user name and an empty password,
    /// as Segment's API (a key with no colon at all is taken too).
    package func allowsBasic(_ header: String?) -> Bool {
        guard let header else { return false }
        if Self.any(of: basicHeaders, is: Array(header.utf8)) { return true }
        guard header.count > 6, header.prefix(6).lowercased() == "basic " else { return false }
        guard let data = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let text = String(data: data, encoding: .utf8)
        else { return false }
        let key = text.hasSuffix(":") ? String(text.dropLast()) : text
        return !key.isEmpty && !key.contains(":") && contains(key)
    }

    /// The key of an `Authorization: Bearer KEY` header, if it is one of the keys.
    package func bearer(_ header: String?) -> String? {
        guard let key = bearerCredential(header), contains(key) else { return nil }
        return key
    }
}

/// What follows `Bearer` (any case) and the spaces after it in an `Authorization` header, without the spaces around
/// it (HTTP allows one or more: RFC 9110, 11.4); `nil` for another scheme or no credential.
package func bearerCredential(_ header: String?) -> String? {
    guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else { return nil }
    let credential = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
    return credential.isEmpty ? nil : credential
}

/// The claims of a user's token: `sub` is the user id; `exp` and `nbf`, when present, are checked.
package struct UserToken: JWTPayload {
    package var sub: SubjectClaim
    package var exp: ExpirationClaim?
    package var nbf: NotBeforeClaim?

    package func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp?.verifyNotExpired()
        try nbf?.verifyNotBefore()
    }
}

/// Checks the bearer tokens of the user endpoints: a JWT signed with the app's secret (HS256) whose `sub` is the
/// user in the path, as Braze's SDK authentication. One user's token never reads another's actions.
package struct UserAuth: Sendable {
    package let keys: JWTKeyCollection

    package init(secret: String) async {
        keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
    }

    package enum Failure: Error, Equatable { case missing, invalid, otherUser }

    /// The header's token is valid and names `user`.
    package func check(_ header: String?, user: String) async throws(Failure) {
        guard let credential = bearerCredential(header) else { throw .missing }
        // The header must say what the token is signed with: HS256 (one signed so but saying `none` or `RS256` is
        // not taken, so that no reader of the token is misled by it), and ask for no extension (`crit`), which this
        // reader would not honour (RFC 7515, 4.1.11).
        guard Self.headerIsTaken(credential) else { throw .invalid }
        let token: UserToken
        do {
            token = try await keys.verify(credential, as: UserToken.self)
        } catch {
            throw .invalid
        }
        // By bytes: `==` would take canonically equivalent spellings of two users' ids for one.
        guard token.sub.value.utf8.elementsEqual(user.utf8) else { throw .otherUser }
    }

    /// Whether a compact JWT's header (its first part, base64url JSON) names `HS256` as its `alg` and has no `crit`,
    /// and neither it nor the claims give a key twice (readers differ on which one counts: `{"alg": "none", "alg":
    /// "HS256"}` was taken, the last `alg` read here, and of two `sub`s jwt-kit read the first).
    static func headerIsTaken(_ token: some StringProtocol) -> Bool {
        let parts = token.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].utf8.count <= 1024, parts[1].utf8.count <= 16 * 1024,
            case .map(let header)? = json(parts[0]), json(parts[1]) != nil
        else { return false }
        guard case .string("HS256")? = header[string: "alg"] else { return false }
        return header[string: "crit"] == nil
    }

    /// A base64url part of a token as JSON, no key given twice; `nil` if it is not.
    static func json(_ part: some StringProtocol) -> Value? {
        var b64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64), let text = String(validating: data, as: UTF8.self) else { return nil }
        return try? JSONValue.parse(text, refusingRepeatedKeys: true)
    }
}
