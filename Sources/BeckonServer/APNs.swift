import AsyncHTTPClient
import BeckonCore
import Crypto
import Foundation
import JWTKit
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Apple's push service with token authentication (docs/push.md): a provider token (an ES256 JWT with the key id in
/// its header and the team id and issue time in its claims) on every request, made again every
/// ``tokenLifetime`` (Apple refuses one older than an hour and throttles one renewed more often than every 20
/// minutes), and at once after APNs answers 403 `ExpiredProviderToken`.
package final class APNsSender: PushProvider {
    package var name: String { "APNs" }
    package var platform: Device.Platform { .ios }
    package let spec: Destination.APNs
    private let key: ES256PrivateKey
    private let token = SharedCredential()
    /// The certificates to trust for the destination's host, when it names its own.
    package let tls: TLSConfiguration?
    package static let tokenLifetime = Duration.seconds(40 * 60)

    /// A sender for `spec`, with its key's PEM text.
    package init(_ spec: Destination.APNs, keyPEM: String) throws {
        self.spec = spec
        do { key = try ES256PrivateKey(pem: keyPEM) } catch {
            throw CredentialError(description: "the APNs key is not a P-256 private key in PEM (a .p8 file): \(error)")
        }
        tls = try spec.caFile.map(CredentialError.trusting)
    }

    struct ProviderClaims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    private func makeToken() async throws -> (token: String, until: ContinuousClock.Instant) {
        let now = ContinuousClock.now
        // (Made every 40 minutes at most: a key collection of its own each time costs nothing that matters.)
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: spec.keyID))
        let made = try await keys.sign(
            ProviderClaims(iss: IssuerClaim(value: spec.teamID), iat: IssuedAtClaim(value: Date())),
            kid: JWKIdentifier(string: spec.keyID))
        return (made, now + Self.tokenLifetime)
    }

    package func send(
        _ push: PushMessage, to token: String, destination: Destination, client: HTTPClient
    ) async
        -> PushOutcome
    {
        guard let payload = Self.payload(push) else { return .refused("the push cannot be encoded") }
        return await send(
            payload, to: token, id: Self.apnsID(action: push.id, device: token), baseURL: destination.url,
            timeoutMs: destination.timeoutMs, client: client)
    }

    /// The request's path for a device token: the token as one path segment, every byte but letters, digits, `-`,
    /// `_` and `~` percent-encoded. An APNs token is hex and goes as it is; anything else (`#` ending the path, `/` or
    /// `..` reaching another one, both in a token a user registered or a `to:` built from event data) stays inside
    /// the segment, and APNs refuses it as a bad token (which then goes from the user).
    static func path(of device: String) -> String {
        "/3/device/" + (device.addingPercentEncoding(withAllowedCharacters: tokenCharacters) ?? "")
    }
    /// ASCII letters and digits, `-`, `_` and `~` (`.alphanumerics` would keep letters of every script as they are).
    private static let tokenCharacters = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~")

    /// Sends `payload` to one device; a 403 `ExpiredProviderToken` makes a new provider token and tries once more.
    func send(
        _ payload: [UInt8], to device: String, id: String, baseURL: String, timeoutMs: Int64, client: HTTPClient
    )
        async -> PushOutcome
    {
        await token.sending(
            make: { try await self.makeToken() }, isRefusal: { $0 == .refused("403 ExpiredProviderToken") },
            refusedAgain: "403 ExpiredProviderToken after a new provider token"
        ) { provider in
            var request = HTTPClientRequest(url: baseURL + Self.path(of: device))
            request.method = .POST
            request.tlsConfiguration = tls
            request.headers.add(name: "authorization", value: "bearer " + provider)
            request.headers.add(name: "apns-topic", value: spec.topic)
            request.headers.add(name: "apns-push-type", value: spec.pushType)
            request.headers.add(name: "apns-priority", value: String(spec.priority))
            request.headers.add(name: "apns-id", value: id)
            request.headers.add(
                name: "apns-expiration",
                value: String(spec.expirationSeconds.map { Int64(Date().timeIntervalSince1970) + $0 } ?? 0))
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: payload))
            let answer = try await client.exchange(request, timeout: .milliseconds(timeoutMs), bodyUpTo: 16 * 1024)
            return Self.outcome(
                status: Int(answer.status.code), body: answer.body, retryAfter: answer.headers.first(name: "retry-after"))
        }
    }

    /// The outcome of an APNs answer: its status and `{"reason": …}`.
    package static func outcome(status: Int, body: [UInt8], retryAfter: String?) -> PushOutcome {
        if (200..<300).contains(status) { return .accepted }
        let reason = (try? JSONDecoder().decode(Reason.self, from: Data(body)))?.reason ?? "no reason given"
        let said = Delivery.said(status, reason)
        switch (status, reason) {
        case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"): return .invalidToken(said)
        case (429, _), (500..<600, _):
            return .retry(said, after: retryAfter.flatMap { Delivery.retryAfterMs($0, now: Date()) })
        default: return .refused(said)
        }
    }

    struct Reason: Decodable { var reason: String }

    /// The APNs payload of a push: `aps.alert` with the title and body; the action id, deep link, image and data
    /// beside `aps` for the app.
    package static func payload(_ m: PushMessage) -> [UInt8]? {
        let push = m.push
        var alert: [(String, AnyJSON)] = []
        if let title = push.title { alert.append(("title", .string(title))) }
        alert.append(("body", .string(push.body)))
        var aps: [(String, AnyJSON)] = [("alert", .object(alert))]
        if push.image != nil { aps.append(("mutable-content", .int(1))) }
        var top: [(String, AnyJSON)] = [("aps", .object(aps)), ("beckon_action_id", .string(m.id))]
        if let link = push.deep_link { top.append(("deep_link", .string(link))) }
        if let image = push.image { top.append(("image", .string(image))) }
        if let data = push.data { top.append(("data", data)) }
        return (try? JSONEncoder().encode(AnyJSON.object(top))).map(Array.init)
    }

    /// A stable `apns-id` (a UUID) for an action and a device: a retry of the same push carries the same id.
    package static func apnsID(action: String, device: String) -> String {
        var bytes = Array(SHA256.hash(data: Array((action + "\u{0}" + device).utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        // (`String(format:)` per byte was 7% of a push's CPU in the push benchmark.)
        let b = bytes
        return UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        ).uuidString
    }
}
