import BeckonCore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import NIOCore
import Testing

@testable import BeckonServer

/// The HTTP API in-process (HummingbirdTesting's router mode) over a single service on a temporary SQLite file:
/// each route group's authentication, the Codable answers and thrown refusals, and the contract (`/openapi.json`)
/// naming exactly the routes the router has.
@Suite(.serialized) struct APITests {
    static let rules = """
        version: 1
        campaign: shop
        rules:
          - id: hello
            on: Opened
            do:
              - message: { surface: launch, title: Hello }
              - notify: { id: welcome, message: Welcome aboard }
        """
    static let secret = String(repeating: "s", count: 32)
    static let write = "Basic " + Data("wk:".utf8).base64EncodedString()
    static let admin = "Bearer ak"

    /// Runs `body` against a fresh service's router; its processing thread runs meanwhile.
    func withAPI(_ body: @escaping @Sendable (any TestClientProtocol, BeckonService) async throws -> Void) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-api-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("shop.yaml").path
        try Self.rules.write(toFile: file, atomically: true, encoding: .utf8)
        var options = BeckonService.Options(paths: [file])
        options.database = dir.appendingPathComponent("beckon.sqlite").path
        options.writeKeys = ["wk"]
        options.adminKeys = ["ak"]
        options.userSecret = Self.secret
        let service = try await BeckonService(options)
        service.processor.start()
        defer { service.processor.stop() }
        let app = Application(router: service.api.router())
        try await app.test(.router) { client in try await body(client, service) }
    }

    static func token(_ user: String, secret: String = secret) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return "Bearer " + (try await keys.sign(UserToken(sub: .init(value: user), exp: nil)))
    }

    static func json(_ body: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
    }

    static func track(_ user: String) -> ByteBuffer {
        ByteBuffer(string: #"{"type":"track","event":"Opened","userId":"\#(user)","messageId":"m-\#(user)"}"#)
    }

    @Test func ingestTakesAWriteKeyAndAnswersCodableValues() async throws {
        try await withAPI { client, _ in
            let none = try await client.execute(uri: "/v1/track", method: .post, body: Self.track("amy"))
            #expect(none.status == .unauthorized)
            #expect(none.headers[.wwwAuthenticate] == "Basic realm=\"beckon\"")
            #expect(try Self.json(none.body)["success"] as? Bool == false)
            let adminKey = try await client.execute(
                uri: "/v1/track", method: .post, headers: [.authorization: Self.admin], body: Self.track("amy"))
            #expect(adminKey.status == .unauthorized)
            let ok = try await client.execute(
                uri: "/v1/track", method: .post, headers: [.authorization: Self.write], body: Self.track("amy"))
            #expect(ok.status == .ok)
            #expect(try Self.json(ok.body)["success"] as? Bool == true)
            #expect(ok.headers[.contentType]?.hasPrefix("application/json") == true)
            let bad = try await client.execute(
                uri: "/v1/batch", method: .post, headers: [.authorization: Self.write],
                body: ByteBuffer(string: #"{"batch":[{"type":"track","event":"Opened","userId":"a"},{"type":"track"}]}"#))
            #expect(bad.status == .badRequest)
            #expect(try Self.json(bad.body)["event"] as? Int == 1)
            let zstd = try await client.execute(
                uri: "/v1/track", method: .post, headers: [.authorization: Self.write, .contentEncoding: "zstd"],
                body: Self.track("amy"))
            #expect(zstd.status == .unsupportedMediaType)
        }
    }

    @Test func aUserReadsOnlyTheirOwnActionsAndInbox() async throws {
        try await withAPI { client, _ in
            let ok = try await client.execute(
                uri: "/v1/track", method: .post, headers: [.authorization: Self.write], body: Self.track("amy"))
            #expect(ok.status == .ok)
            let amy = try await Self.token("amy")
            let pulled = try await client.execute(
                uri: "/v1/users/amy/actions", method: .get, headers: [.authorization: amy])
            #expect(pulled.status == .ok)
            let page = try Self.json(pulled.body)
            let actions = try #require(page["actions"] as? [[String: Any]])
            #expect(actions.map { $0["action"] as? String } == ["message", "notify"])
            #expect((actions.first?["message"] as? [String: Any])?["title"] as? String == "Hello")
            #expect(page["cursor"] as? String == "2")
            let after = try await client.execute(
                uri: "/v1/users/amy/actions?after=2", method: .get, headers: [.authorization: amy])
            #expect(try Self.json(after.body)["actions"] as? [Any] != nil)
            #expect((try Self.json(after.body)["actions"] as? [Any])?.isEmpty == true)

            let other = try await client.execute(
                uri: "/v1/users/bob/actions", method: .get, headers: [.authorization: amy])
            #expect(other.status == .forbidden)
            let forged = try await client.execute(
                uri: "/v1/users/amy/actions", method: .get,
                headers: [.authorization: try await Self.token("amy", secret: String(repeating: "t", count: 32))])
            #expect(forged.status == .unauthorized)
            #expect(forged.headers[.wwwAuthenticate] == "Bearer")
            let badCursor = try await client.execute(
                uri: "/v1/users/amy/actions?after=-1", method: .get, headers: [.authorization: amy])
            #expect(badCursor.status == .badRequest)

            let inbox = try Self.json(
                try await client.execute(uri: "/v1/users/amy/inbox", method: .get, headers: [.authorization: amy]).body)
            #expect(inbox["unread"] as? Int == 1)
            let read = try await client.execute(
                uri: "/v1/users/amy/inbox/welcome/read", method: .post, headers: [.authorization: amy])
            #expect(read.status == .ok)
            let items = try #require(try Self.json(read.body)["items"] as? [[String: Any]])
            #expect(items.first?["read"] as? Bool == true)
            #expect(items.first?["readAt"] is String)
            let missing = try await client.execute(
                uri: "/v1/users/amy/inbox/nope/read", method: .post, headers: [.authorization: amy])
            #expect(missing.status == .notFound)
        }
    }

    @Test func adminRoutesTakeOnlyAnAdminKey() async throws {
        try await withAPI { client, _ in
            for (method, uri) in [
                (HTTPRequest.Method.get, "/admin/rules"), (.post, "/admin/reload"), (.delete, "/v1/users/amy"),
                (.get, "/v1/users/amy/export"),
            ] {
                let refused = try await client.execute(uri: uri, method: method, headers: [.authorization: Self.write])
                #expect(refused.status == .unauthorized, "\(method) \(uri)")
                #expect(refused.headers[.wwwAuthenticate] == "Bearer")
            }
            let rules = try Self.json(
                try await client.execute(uri: "/admin/rules", method: .get, headers: [.authorization: Self.admin]).body)
            #expect((rules["rulesets"] as? [[String: Any]])?.first?["name"] as? String == "shop")
            #expect(rules["changed"] == nil)
            let reload = try Self.json(
                try await client.execute(uri: "/admin/reload", method: .post, headers: [.authorization: Self.admin]).body)
            #expect(reload["changed"] as? Bool == false)
            #expect(reload["files"] is [Any])

            _ = try await client.execute(
                uri: "/v1/track", method: .post, headers: [.authorization: Self.write], body: Self.track("amy"))
            let export = try Self.json(
                try await client.execute(uri: "/v1/users/amy/export", method: .get, headers: [.authorization: Self.admin])
                    .body)
            #expect((export["actions"] as? [Any])?.count == 2)
            #expect((export["events"] as? [Any])?.count == 1)
            let forget = try Self.json(
                try await client.execute(uri: "/v1/users/amy", method: .delete, headers: [.authorization: Self.admin]).body)
            #expect(forget["forgotten"] as? Bool == true)
            let after = try Self.json(
                try await client.execute(uri: "/v1/users/amy/export", method: .get, headers: [.authorization: Self.admin])
                    .body)
            #expect(after["state"] is NSNull)
            #expect((after["events"] as? [Any])?.isEmpty == true)
        }
    }

    @Test func healthAndMetricsNeedNoCredential() async throws {
        try await withAPI { client, _ in
            #expect(try Self.json(try await client.execute(uri: "/livez", method: .get).body)["status"] as? String == "live")
            // (Ready once the processing thread has opened the database: within a moment of starting.)
            var ready = try await client.execute(uri: "/readyz", method: .get)
            for _ in 0..<100 where ready.status != .ok {
                try await Task.sleep(for: .milliseconds(50))
                ready = try await client.execute(uri: "/readyz", method: .get)
            }
            #expect(ready.status == .ok)
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(String(buffer: metrics.body).contains("beckon_"))
        }
    }

    /// A path with routes for other methods answers 405 and names them in `Allow`; an unknown path 404. The health
    /// routes answer `HEAD` (status and headers, no body); a `GET` with effects (a click) does not.
    @Test func aMethodThePathDoesNotTakeIs405WithAllow() async throws {
        try await withAPI { client, _ in
            for (uri, method, allow) in [
                ("/v1/batch", HTTPRequest.Method.delete, "POST"), ("/v1/track", .get, "POST"),
                ("/v1/users/ann/inbox", .put, "GET"), ("/v1/users/ann", .get, "DELETE"),
                ("/v1/users/ann/devices/t1", .post, "DELETE"), ("/v1/unsubscribe", .put, "GET, POST"),
                ("/v1/click", .head, "GET"), ("/admin/reload", .get, "POST"),
            ] {
                let r = try await client.execute(uri: uri, method: method)
                #expect(r.status == .methodNotAllowed, "\(method) \(uri)")
                #expect(r.headers[.allow] == allow, "\(method) \(uri)")
                #expect(try Self.json(r.body)["success"] as? Bool == false)
            }
            for (uri, method) in [("/nope", HTTPRequest.Method.get), ("/v1/users/ann/nope", .get), ("/v1", .post)] {
                let r = try await client.execute(uri: uri, method: method)
                #expect(r.status == .notFound, "\(method) \(uri)")
                #expect(r.headers[.allow] == nil)
            }
            for uri in ["/livez", "/readyz", "/openapi.json", "/metrics"] {
                let get = try await client.execute(uri: uri, method: .get)
                let head = try await client.execute(uri: uri, method: .head)
                #expect(head.status == get.status && head.status == .ok, "\(uri)")
                #expect(head.headers[.contentType] == get.headers[.contentType], "\(uri)")
                #expect(head.body.readableBytes == 0 && get.body.readableBytes > 0, "\(uri)")
            }
        }
    }

    /// A device registration reads its body as it is: one that says it is compressed is refused (415), not read as
    /// plain bytes; `identity` is as none. Ingest undoes gzip and deflate.
    @Test func aCompressedBodyIsRefusedWhereItIsReadAsItIs() async throws {
        try await withAPI { client, _ in
            let token = try await Self.token("ann")
            let device = ByteBuffer(string: #"{"token":"t1","platform":"ios"}"#)
            for (encoding, status) in [
                ("gzip", HTTPResponse.Status.unsupportedMediaType), ("br", .unsupportedMediaType),
                ("identity", .ok), ("", .ok),
            ] {
                var headers: HTTPFields = [.authorization: token, .contentType: "application/json"]
                if !encoding.isEmpty { headers[.contentEncoding] = encoding }
                let r = try await client.execute(uri: "/v1/users/ann/devices", method: .post, headers: headers, body: device)
                #expect(r.status == status, "\(encoding)")
            }
        }
    }

    /// The contract and the router cannot drift: the document's operations are exactly the routes registered (but
    /// the console's HTML pages), and `/openapi.json` serves the document.
    @Test func theContractNamesEveryRouteAndNoOther() async throws {
        try await withAPI { client, service in
            let served = try await client.execute(uri: "/openapi.json", method: .get)
            #expect(served.status == .ok)
            let document = try Self.json(served.body)
            #expect(document["openapi"] as? String == "3.1.0")
            #expect((document["info"] as? [String: Any])?["version"] as? String == BeckonRelease.version)
            let paths = try #require(document["paths"] as? [String: [String: Any]])
            var documented: Set<String> = []
            for (path, item) in paths {
                for method in item.keys where ["get", "head", "post", "put", "delete", "patch"].contains(method) {
                    documented.insert("\(method.uppercased()) \(path)")
                }
            }
            let registered = Set(
                service.api.router().routes.map { route in
                    // (`{name}` for `:name`, as the document writes a parameter.)
                    let path = "\(route.path)".split(separator: "/").map {
                        $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0)
                    }
                    return "\(route.method) /" + path.joined(separator: "/")
                }
            ).filter { !$0.contains(" /console") }
            #expect(registered == documented)
            #expect(registered.count >= 17)
        }
    }
}
