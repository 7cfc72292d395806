import BeckonCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

// The bodies of the HTTP API's answers (docs/service.md; the contract: `GET /openapi.json`), as Codable values that
// Hummingbird encodes with the request context's encoder.

/// `{"success": true}`: ingest accepted and stored.
package struct Accepted: ResponseEncodable {
    package var success = true
}

/// `POST /v1/users/{id}/devices`: a push device the app registers (docs/push.md).
package struct DeviceRegistration: Decodable, Sendable {
    package var token: String
    package var platform: Device.Platform
    package var app: String?
    /// The OS permission the app reports (absent: allowed).
    package var pushEnabled: Bool?

    /// The largest body taken.
    package static let maxBytes = 4096

    /// The registration a request's body holds (a refusal says what is wrong with it).
    package static func read(_ request: Request) async throws -> DeviceRegistration {
        let body: ByteBuffer
        do throws(API.BodyRefusal) { body = try await API.collect(request, upTo: maxBytes) } catch {
            throw APIError(error, limit: maxBytes)
        }
        do {
            // (Read as an event's JSON is first: its bytes UTF-8, no key given twice, whose value is meant being
            // ambiguous.)
            guard let text = String(validating: body.readableBytesView, as: UTF8.self) else { throw DecodeError("not UTF-8") }
            _ = try JSONValue.parse(text, refusingRepeatedKeys: true)
            return try JSONDecoder().decode(DeviceRegistration.self, from: Data(body.readableBytesView))
        } catch {
            throw APIError(
                .badRequest,
                "the body must be {\"token\": \"…\", \"platform\": \"ios\"|\"android\", \"app\": \"…\", \"pushEnabled\": true|false}"
            )
        }
    }

    /// The device, its times set by the service.
    package var device: Device {
        Device(token: token, platform: platform, app: app, firstSeen: 0, lastSeen: 0, pushEnabled: pushEnabled ?? true)
    }
}

extension Device.Platform: Decodable {}

/// An event a signed email link records, as ingest takes it.
struct LinkEvent: Encodable {
    var type: String
    var userId: String
    var event: String?
    var messageId: String?
    var timestamp: String
    var properties: [String: String]?
    var traits: [String: Bool]?
}

struct LinkBatch: Encodable {
    var batch: [LinkEvent]
}

/// The body of every refusal: `{"success": false, "error": …}`, with the event's place in a batch and the column of
/// the problem for a bad event, or a refused reload's diagnostics.
package struct ProblemBody: Codable, Sendable {
    package var success = false
    package var error: String
    package var event: Int?
    package var column: Int?
    package var diagnostics: String?
}

/// `/livez` and `/readyz`.
package struct Health: ResponseEncodable {
    package var status: String
    package var reason: String?
}

/// A pull's answer: the actions after the cursor, and the cursor after them (a string: it is opaque to clients).
package struct ActionsPage: ResponseEncodable {
    package var actions: [AnyJSON]
    package var cursor: String
}

/// A user's inbox, newest last, with how many are unread.
package struct InboxPage: ResponseEncodable {
    package struct Item: Codable, Sendable {
        var id: String
        var sender: String?
        var message: String
        var link: String?
        var createdAt: String
        var read: Bool
        var readAt: String?
        var rule: String
    }
    package var userId: String
    package var unread: Int
    package var items: [Item]

    package init(_ user: String, _ items: [InboxItem]) {
        userId = user
        unread = items.count { !$0.read }
        self.items = items.map {
            Item(
                id: $0.id, sender: $0.sender, message: $0.message, link: $0.link,
                createdAt: Timestamp(milliseconds: $0.createdAt).description, read: $0.read,
                readAt: $0.readAt.map { Timestamp(milliseconds: $0).description }, rule: $0.rule)
        }
    }
}

/// A forget's answer: whether the service held anything of the user.
package struct Forgotten: ResponseEncodable {
    package var userId: String
    package var forgotten: Bool
}

/// `GET /admin/audience`: how many stored users a rule selects now, of how many stored.
package struct AudienceAnswer: ResponseEncodable {
    package var rule: String
    package var users: Int
    package var stored: Int
    package var undecodable: Int
    package var at: String

    package init(rule: String, _ size: AudienceSize, at: String) {
        self.rule = rule
        users = size.users
        stored = size.stored
        undecodable = size.undecodable
        self.at = at
    }
}

/// `GET /admin/rules` (`changed` absent) and `POST /admin/reload`: the files served, their rule sets and
/// destinations.
package struct RulesPage: ResponseEncodable {
    package struct File: Codable, Sendable {
        var path: String
        var sha256: String
        var bytes: Int
    }
    package struct RuleSet: Codable, Sendable {
        var name: String
        var kind: String
        var rules: Int
    }
    package struct Destination: Codable, Sendable {
        var name: String
        var url: String
        var state: String
        var unset: [String]?
    }
    package var changed: Bool?
    package var loadedAt: String
    package var files: [File]
    package var rulesets: [RuleSet]
    package var destinations: [Destination]

    package init(_ loaded: LoadedRules, changed: Bool? = nil) {
        self.changed = changed
        loadedAt = Timestamp(milliseconds: loaded.loadedAt).description
        files = loaded.files.map { File(path: $0.path, sha256: $0.sha256, bytes: $0.bytes) }
        rulesets = loaded.units.map { RuleSet(name: $0.name, kind: $0.kind, rules: $0.rules) }
        destinations = loaded.destinations.map {
            Destination(
                name: $0.name, url: $0.url, state: $0.unset.isEmpty ? "active" : "paused",
                unset: $0.unset.isEmpty ? nil : $0.unset)
        }
    }
}

/// A JSON document the store keeps as text and answers as it is (a privacy export: the stored states and events,
/// streamed from the input log into one document). Checked to be JSON before it is sent.
package struct StoredJSON: ResponseGenerator, Sendable {
    package var text: String
    package init(text: String) { self.text = text }
    package func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Any JSON value, for stored JSON (an action as the engine wrote it) inside a Codable answer.
package enum AnyJSON: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([AnyJSON])
    case object([(String, AnyJSON)])

    package static func == (a: AnyJSON, b: AnyJSON) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.int(let x), .int(let y)): x == y
        case (.double(let x), .double(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)): x.map(\.0) == y.map(\.0) && x.map(\.1) == y.map(\.1)
        default: false
        }
    }

    /// The value of a stored JSON text.
    package init(parsing text: String) throws {
        self = try JSONDecoder().decode(AnyJSON.self, from: Data(text.utf8))
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    package init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var items: [AnyJSON] = []
            while !array.isAtEnd { items.append(try array.decode(AnyJSON.self)) }
            self = .array(items)
        } else if let object = try? decoder.container(keyedBy: Key.self) {
            self = .object(try object.allKeys.map { ($0.stringValue, try object.decode(AnyJSON.self, forKey: $0)) })
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .null
            } else if let b = try? single.decode(Bool.self) {
                self = .bool(b)
            } else if let i = try? single.decode(Int64.self) {
                self = .int(i)
            } else if let d = try? single.decode(Double.self) {
                self = .double(d)
            } else {
                self = .string(try single.decode(String.self))
            }
        }
    }

    package func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var c = encoder.singleValueContainer()
            try c.encodeNil()
        case .bool(let b):
            var c = encoder.singleValueContainer()
            try c.encode(b)
        case .int(let i):
            var c = encoder.singleValueContainer()
            try c.encode(i)
        case .double(let d):
            var c = encoder.singleValueContainer()
            try c.encode(d)
        case .string(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .array(let items):
            var c = encoder.unkeyedContainer()
            for i in items { try c.encode(i) }
        case .object(let pairs):
            var c = encoder.container(keyedBy: Key.self)
            for (k, v) in pairs { try c.encode(v, forKey: Key(stringValue: k)) }
        }
    }
}
