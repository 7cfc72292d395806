import AsyncHTTPClient
import BeckonCore
import Foundation
import JWTKit
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Firebase Cloud Messaging's HTTP v1 API (docs/push.md): `POST {url}/v1/projects/{project}/messages:send`, one
/// device per request, with an OAuth 2.0 access token of the service account's: an RS256 assertion (the account's
/// email as issuer, the messaging scope, the token endpoint as audience, an hour's validity) exchanged at the key
/// file's `token_uri`, kept until a minute before it expires, and fetched anew once after a 401.
package final class FCMSender: PushProvider {
    package var name: String { "FCM" }
    package var platform: Device.Platform { .android }
    let clientEmail: String
    let keyID: String?
    let tokenURI: String
    package let project: String
    private let key: Insecure.RSA.PrivateKey
    private let token = SharedCredential()
    package let tls: TLSConfiguration?
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    struct ServiceAccount: Decodable {
        var client_email: String
        var private_key: String
        var private_key_id: String?
        var token_uri: String
        var project_id: String?
    }

    /// A sender for `spec`, with the text of its service account key file.
    package init(_ spec: Destination.FCM, serviceAccount json: String) throws {
        let account: ServiceAccount
        do { account = try JSONDecoder().decode(ServiceAccount.self, from: Data(json.utf8)) } catch {
            throw CredentialError(description: "the FCM service account is not a service account key file: \(error)")
        }
        do { key = try Insecure.RSA.PrivateKey(pem: account.private_key) } catch {
            throw CredentialError(description: "the FCM service account's private_key is not an RSA key: \(error)")
        }
        guard let project = spec.projectID ?? account.project_id else {
            throw CredentialError(description: "no project: set fcm.project_id (the service account names none)")
        }
        clientEmail = account.client_email
        keyID = account.private_key_id
        tokenURI = account.token_uri
        self.project = project
        tls = try spec.caFile.map(CredentialError.trusting)
    }

    struct Assertion: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    struct TokenAnswer: Decodable {
        var access_token: String
        var expires_in: Int64
    }

    struct Failed: Error, CustomStringConvertible {
        var description: String
    }

    /// A new access token from the token endpoint (kept in ``token`` and shared until a minute before it expires).
    private func fetchToken(
        _ client: HTTPClient, timeoutMs: Int64
    ) async throws -> (
        token: String, until: ContinuousClock.Instant
    ) {
        let now = ContinuousClock.now
        let keys = JWTKeyCollection()
        await keys.add(rsa: key, digestAlgorithm: .sha256, kid: keyID.map { JWKIdentifier(string: $0) })
        let issued = Date()
        let assertion = try await keys.sign(
            Assertion(
                iss: IssuerClaim(value: clientEmail), scope: Self.scope, aud: AudienceClaim(value: [tokenURI]),
                iat: IssuedAtClaim(value: issued), exp: ExpirationClaim(value: issued.addingTimeInterval(3600))),
            kid: keyID.map { JWKIdentifier(string: $0) })
        var request = HTTPClientRequest(url: tokenURI)
        request.method = .POST
        request.tlsConfiguration = tls
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        request.body = .bytes(ByteBuffer(string: form))
        let response = try await client.exchange(request, timeout: .milliseconds(timeoutMs), bodyUpTo: 64 * 1024)
        guard response.status == .ok, let answer = try? JSONDecoder().decode(TokenAnswer.self, from: Data(response.body))
        else {
            throw Failed(description: "the token endpoint answered \(response.status.code)")
        }
        return (answer.access_token, now + Self.kept(expiresIn: answer.expires_in))
    }

    /// How long an access token is kept: until a minute before it expires, and an hour at most, whatever the endpoint
    /// says (a negative or huge `expires_in` overflowed here and took the process down).
    package static func kept(expiresIn seconds: Int64) -> Duration {
        .seconds(max(60, min(seconds, 3600)) - 60)
    }

    package func send(
        _ push: PushMessage, to device: String, destination: Destination, client: HTTPClient
    ) async
        -> PushOutcome
    {
        guard let payload = Self.payload(push, to: device) else { return .refused("the push cannot be encoded") }
        return await token.sending(
            make: { try await self.fetchToken(client, timeoutMs: destination.timeoutMs) },
            isRefusal: { if case .refused(let why) = $0 { why.hasPrefix("401") } else { false } },
            refusedAgain: "401 after a new access token"
        ) { access in
            var request = HTTPClientRequest(url: destination.url + "/v1/projects/\(project)/messages:send")
            request.method = .POST
            request.tlsConfiguration = tls
            request.headers.add(name: "authorization", value: "Bearer " + access)
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: payload))
            let answer = try await client.exchange(request, timeout: .milliseconds(destination.timeoutMs), bodyUpTo: 64 * 1024)
            return Self.outcome(
                status: Int(answer.status.code), body: answer.body, retryAfter: answer.headers.first(name: "retry-after"))
        }
    }

    struct ErrorAnswer: Decodable {
        var error: Body
        struct Body: Decodable {
            var status: String?
            var message: String?
            var details: [Detail]?
        }
        struct Detail: Decodable {
            var errorCode: String?
        }
    }

    /// The outcome of an FCM answer: its status and `error.details[].errorCode`.
    package static func outcome(status: Int, body: [UInt8], retryAfter: String?) -> PushOutcome {
        if (200..<300).contains(status) { return .accepted }
        let e = (try? JSONDecoder().decode(ErrorAnswer.self, from: Data(body)))?.error
        let code = e?.details?.compactMap(\.errorCode).first ?? e?.status ?? "no error code"
        let said = Delivery.said(status, code + (e?.message.map { ": \($0)" } ?? ""))
        switch code {
        case "UNREGISTERED", "SENDER_ID_MISMATCH": return .invalidToken(said)
        case "INVALID_ARGUMENT" where e?.message?.lowercased().contains("registration token") == true:
            return .invalidToken(said)
        case "UNAVAILABLE", "INTERNAL", "QUOTA_EXCEEDED":
            return .retry(said, after: retryAfter.flatMap { Delivery.retryAfterMs($0, now: Date()) })
        default:
            if status == 429 || status >= 500 {
                return .retry(said, after: retryAfter.flatMap { Delivery.retryAfterMs($0, now: Date()) })
            }
            return .refused(said)
        }
    }

    /// The message of a push for one device: `notification` with the title, body and image; `data` (FCM's values
    /// are strings) with the action id, the deep link and the action's data, each a string or its JSON text.
    package static func payload(_ m: PushMessage, to device: String) -> [UInt8]? {
        let push = m.push
        var notification: [(String, AnyJSON)] = []
        if let title = push.title { notification.append(("title", .string(title))) }
        notification.append(("body", .string(push.body)))
        if let image = push.image { notification.append(("image", .string(image))) }
        var data: [(String, AnyJSON)] = [("beckon_action_id", .string(m.id))]
        if let link = push.deep_link { data.append(("deep_link", .string(link))) }
        if case .object(let fields)? = push.data {
            for (k, v) in fields {
                if case .string(let s) = v {
                    data.append((k, .string(s)))
                } else if let text = try? JSONEncoder().encode(v) {
                    data.append((k, .string(String(decoding: text, as: UTF8.self))))
                }
            }
        }
        let message: AnyJSON = .object([
            (
                "message",
                .object([
                    ("token", .string(device)), ("notification", .object(notification)), ("data", .object(data)),
                    ("android", .object([("priority", .string("high"))])),
                ])
            )
        ])
        return (try? JSONEncoder().encode(message)).map(Array.init)
    }
}
