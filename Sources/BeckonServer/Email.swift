import AsyncHTTPClient
import BeckonCore
import BeckonStore
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

/// The signed links of an email destination (docs/push.md, "Email"): an unsubscribe link per email and a click link
/// per tracked URL, pointing at this service's `/v1/unsubscribe` and `/v1/click`. Each carries the destination, the
/// user, the action (and the URL) and an HMAC-SHA256 of them under the destination's link secret, so the service
/// records only what it sent and redirects only to a URL it signed (never an open redirect).
package struct EmailLinks: Sendable {
    let destination: String
    let base: String
    let key: SymmetricKey

    package init(destination: String, base: String, secret: String) {
        self.destination = destination
        self.base = base
        key = SymmetricKey(data: Array(secret.utf8))
    }

    /// The signature of `parts` for link `kind` (base64url, no padding).
    func signature(_ kind: String, _ parts: [String]) -> String {
        let message = ([kind, destination] + parts).joined(separator: "\u{0}")
        let mac = HMAC<SHA256>.authenticationCode(for: Array(message.utf8), using: key)
        return Data(mac).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// Whether `signature` is that of `parts` (compared in constant time).
    package func verify(_ kind: String, _ parts: [String], signature: String) -> Bool {
        let expected = Array(self.signature(kind, parts).utf8)
        let given = Array(signature.utf8)
        guard expected.count == given.count else { return false }
        return zip(expected, given).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    static func query(_ pairs: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return pairs.map { k, v in "\(k)=\(v.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
            .joined(separator: "&")
    }

    /// The unsubscribe link of an email of `user`'s, fired by `rule` (`unit/rule`) as `action`.
    package func unsubscribe(user: String, action: String, rule: String) -> String {
        base + "/v1/unsubscribe?"
            + Self.query([
                ("d", destination), ("u", user), ("a", action), ("r", rule),
                ("s", signature("unsubscribe", [user, action, rule])),
            ])
    }

    package func click(user: String, action: String, rule: String, url: String) -> String {
        base + "/v1/click?"
            + Self.query([
                ("d", destination), ("u", user), ("a", action), ("r", rule), ("url", url),
                ("s", signature("click", [user, action, rule, url])),
            ])
    }
}

/// Sends `email` actions through an HTTP email API in SendGrid's v3 Mail Send shape (`POST {url}/v3/mail/send`,
/// the API key as a bearer token): the action's template and merge data (with `unsubscribe_url`, and its http(s)
/// values through the click link when tracked), `List-Unsubscribe` and `List-Unsubscribe-Post` headers, and the action
/// id in `custom_args`. Or in another API's shape, from the destination's `body` template. 2xx delivered; 429 and 5xx
/// retried; any other answer dead.
package final class EmailSender: Sendable {
    package let spec: Destination.Email
    package let links: EmailLinks
    let apiKey: String
    let tls: TLSConfiguration?
    /// The destination's `body` template, parsed (`nil`: SendGrid's shape).
    let template: AnyJSON?

    package init(_ spec: Destination.Email, destination: String, apiKey: String, linkSecret: String) throws {
        self.spec = spec
        self.apiKey = apiKey
        links = EmailLinks(destination: destination, base: spec.linksBaseURL, secret: linkSecret)
        tls = try spec.caFile.map(CredentialError.trusting)
        do { template = try spec.bodyTemplate.map(AnyJSON.init(parsing:)) } catch {
            throw CredentialError(description: "the email body template is not JSON: \(error)")
        }
    }

    /// Where an email is posted.
    func url(of destination: Destination) -> String {
        destination.url + (spec.path ?? (template == nil ? "/v3/mail/send" : ""))
    }

    /// `template` with its placeholders filled: `"{{data}}"` is the merge data object; in any other text each
    /// `{{name}}` is the email's value of it (empty when it has none).
    static func render(_ template: AnyJSON, _ values: [String: String], data: AnyJSON) -> AnyJSON {
        switch template {
        case .string(let s):
            if Destination.Email.isData(s) { return data }
            // (The rules checked every template text when they loaded: its braces close.)
            let parts = Destination.Email.parts(of: s) ?? [(Substring(s), nil)]
            return .string(parts.map { $0.placeholder.map { values[$0] ?? "" } ?? String($0.text) }.joined())
        case .array(let items): return .array(items.map { render($0, values, data: data) })
        case .object(let fields): return .object(fields.map { ($0.0, render($0.1, values, data: data)) })
        case .null, .bool, .int, .double: return template
        }
    }

    /// A fired `email` action as stored.
    package struct Action: Decodable {
        var id: String
        var campaign: String?
        var ruleset: String?
        var rule: String?
        var qualifiedRule: String { (campaign ?? ruleset ?? "") + "/" + (rule ?? "") }
        var email: Content?
        struct Content: Decodable {
            var template: String
            var to: String?
            var subject: String?
            var data: AnyJSON?
        }

        /// The action of its stored JSON (`nil`: not one).
        package init?(json: String) {
            guard let a = try? JSONDecoder().decode(Action.self, from: Data(json.utf8)) else { return nil }
            self = a
        }
    }

    /// The request body for `action`, an email of `user`'s (`nil`: not an email, or no address).
    package func body(of action: Action, user: String) -> (body: [UInt8], unsubscribe: String)? {
        guard let email = action.email, let to = email.to, !to.isEmpty else { return nil }
        let unsubscribe = links.unsubscribe(user: user, action: action.id, rule: action.qualifiedRule)
        var data: [(String, AnyJSON)] = []
        if case .object(let fields)? = email.data {
            for (k, v) in fields {
                if spec.trackClicks, case .string(let s) = v, s.hasPrefix("https://") || s.hasPrefix("http://") {
                    data.append(
                        (k, .string(links.click(user: user, action: action.id, rule: action.qualifiedRule, url: s))))
                } else {
                    data.append((k, v))
                }
            }
        }
        data.append(("unsubscribe_url", .string(unsubscribe)))
        if let template {
            let values = [
                "to": to, "from": spec.from, "from_name": spec.fromName ?? "", "subject": email.subject ?? "",
                "template": email.template, "unsubscribe_url": unsubscribe, "action_id": action.id,
            ]
            guard let bytes = try? JSONEncoder().encode(Self.render(template, values, data: .object(data))) else {
                return nil
            }
            return (Array(bytes), unsubscribe)
        }
        var from: [(String, AnyJSON)] = [("email", .string(spec.from))]
        if let name = spec.fromName { from.append(("name", .string(name))) }
        var message: [(String, AnyJSON)] = [
            (
                "personalizations",
                .array([
                    .object([
                        ("to", .array([.object([("email", .string(to))])])), ("dynamic_template_data", .object(data)),
                    ])
                ])
            ),
            ("from", .object(from)), ("template_id", .string(email.template)),
            (
                "headers",
                .object([
                    ("List-Unsubscribe", .string("<\(unsubscribe)>")),
                    ("List-Unsubscribe-Post", .string("List-Unsubscribe=One-Click")),
                ])
            ),
            ("custom_args", .object([("beckon_action_id", .string(action.id))])),
        ]
        if let subject = email.subject { message.append(("subject", .string(subject))) }
        guard let bytes = try? JSONEncoder().encode(AnyJSON.object(message)) else { return nil }
        return (Array(bytes), unsubscribe)
    }

    /// Sends `action` (the entry `row`'s); the outcome as the outbox records it.
    package func send(
        _ action: Action, row: OutboxRow, destination: Destination, client: HTTPClient
    ) async -> Delivery.Outcome {
        guard let (body, _) = self.body(of: action, user: row.entry.userID) else {
            return .dead("skipped: not an email with an address")
        }
        var request = HTTPClientRequest(url: url(of: destination))
        request.method = .POST
        request.tlsConfiguration = tls
        if let header = spec.apiKeyHeader {
            request.headers.add(name: header, value: apiKey)
        } else {
            request.headers.add(name: "authorization", value: "Bearer " + apiKey)
        }
        request.headers.add(name: "content-type", value: "application/json")
        request.headers.add(name: "idempotency-key", value: row.entry.actionID)
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let answer = try await client.exchange(request, timeout: .milliseconds(destination.timeoutMs), bodyUpTo: 64 * 1024)
            return Delivery.outcome(
                status: Int(answer.status.code), retryAfter: answer.headers.first(name: "Retry-After"), now: Date())
        } catch {
            return .retry(error: Deliverer.describe(error), after: nil)
        }
    }
}
