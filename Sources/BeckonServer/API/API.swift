import BeckonCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle
import Synchronization

/// The HTTP API (docs/service.md; the contract: `GET /openapi.json`), registered once for every store: ingest, pull
/// delivery, the inbox, admin, privacy, health and metrics, and the console where the store has one. Authentication is
/// each route group's middleware (write key, user token, admin key); answers are Codable values; refusals are thrown
/// ``APIError``s.
package struct API: Sendable {
    package let backend: any ServiceBackend
    package let writeKeys: KeyRing
    package let adminKeys: KeyRing
    package let userAuth: UserAuth?
    package let logger: Logger

    package init(backend: any ServiceBackend, writeKeys: KeyRing, adminKeys: KeyRing, userAuth: UserAuth?, logger: Logger) {
        self.backend = backend
        self.writeKeys = writeKeys
        self.adminKeys = adminKeys
        self.userAuth = userAuth
        self.logger = logger
    }

    /// The longest `wait` of a long poll, in seconds, and the most actions one pull returns.
    package static let maxWait = 30.0
    package static let maxActions = 500

    /// The ingest routes: each event type's, and the batch.
    package static let ingestKinds: [(path: String, kind: Event.Kind?)] = [
        ("track", .track), ("identify", .identify), ("screen", .screen), ("page", .page), ("group", .group),
        ("alias", .alias), ("batch", nil),
    ]

    package func router() -> Router<BeckonContext> {
        let router = Router(context: BeckonContext.self)
        let routes = RouteMethods()
        router.add(middleware: ProblemForNoRoute(routes: routes))
        router.add(middleware: OnlyChunked())
        router.add(middleware: MetricsMiddleware(metrics: backend.metrics))
        router.add(middleware: CredentialThrottleMiddleware(throttle: CredentialThrottle(), logger: logger))

        let ingest = router.group("/v1").add(middleware: WriteKeyAuthentication(keys: writeKeys, metrics: backend.metrics))
        for (path, kind) in Self.ingestKinds {
            ingest.post(RouterPath(path)) { request, _ in try await self.ingest(request, kind: kind) }
        }

        let user = router.group("/v1/users/:userId").add(middleware: UserTokenAuthentication(auth: userAuth))
        user.get("actions") { request, context in try await pull(request, user: Self.parameter(context, "userId")) }
        user.get("inbox") { _, context in
            let id = try Self.parameter(context, "userId")
            return InboxPage(id, try await backend.inbox(of: id) ?? [])
        }
        user.post("inbox/:itemId/read") { _, context in
            let id = try Self.parameter(context, "userId")
            switch try await backend.markRead(id, item: Self.parameter(context, "itemId")) {
            case nil: throw APIError(.notFound, "no such user")
            case false?: throw APIError(.notFound, "no such inbox item")
            case true?: return InboxPage(id, try await backend.inbox(of: id) ?? [])
            }
        }

        user.post("devices") { request, context in
            let id = try Self.parameter(context, "userId")
            let device = try await DeviceRegistration.read(request).device
            do throws(Engine.DeviceRefusal) { try Engine.check(device) } catch { throw APIError(.badRequest, error.description) }
            try await backend.registerDevice(id, device)
            return Accepted()
        }
        user.delete("devices/:token") { _, context in
            try await backend.removeDevice(Self.parameter(context, "userId"), token: Self.parameter(context, "token"))
            return Accepted()
        }

        let admin = router.group().add(middleware: AdminKeyAuthentication(keys: adminKeys, logger: logger))
        admin.get("/admin/rules") { _, _ in RulesPage(backend.rules.loaded) }
        admin.post("/admin/reload") { _, context in
            let who: String
            if case .admin(let fingerprint) = context.principal { who = "key \(fingerprint)" } else { who = "?" }
            let r = try await backend.reload(by: "POST /admin/reload, \(who)")
            return RulesPage(r.rules, changed: r.changed)
        }
        admin.get("/admin/audience") { request, _ in try await self.audience(request) }
        admin.delete("/v1/users/:userId") { _, context in
            let id = try Self.parameter(context, "userId")
            return Forgotten(userId: id, forgotten: try await backend.forget(id))
        }
        admin.get("/v1/users/:userId/export") { _, context in try await backend.export(Self.parameter(context, "userId")) }

        // The links in emails (docs/push.md, "Email"): no credential but their signature.
        router.get("/v1/unsubscribe") { request, _ in
            try await self.unsubscribe(request)
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: Self.unsubscribedPage)))
        }
        router.post("/v1/unsubscribe") { request, _ in
            try await self.unsubscribe(request)
            return Accepted()
        }
        router.get("/v1/click") { request, _ in
            let target = try await self.click(request)
            return Response(status: .found, headers: [.location: target])
        }

        backend.console?.add(to: router)
        Self.probe(router, "/livez") { _, _ in Health(status: "live") }
        Self.probe(router, "/readyz") { _, _ in
            guard let why = backend.notReady() else { return EditedResponse(response: Health(status: "ready")) }
            return EditedResponse(status: .serviceUnavailable, response: Health(status: "not ready", reason: why))
        }
        Self.probe(router, "/openapi.json") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: PackageResources.openapi_json)))
        }
        Self.probe(router, "/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: backend.metricsText())))
        }
        routes.set(router.routes)
        return router
    }

    /// A route without side effects, answered to `GET` and to `HEAD` (the same status and headers, no body): the
    /// probes and documents a load balancer or a monitor may ask for either way. Other `GET` routes count clicks, end
    /// subscriptions or wait for actions, and answer `HEAD` with 405.
    static func probe<Answer: ResponseGenerator>(
        _ router: Router<BeckonContext>, _ path: RouterPath,
        _ answer: @escaping @Sendable (Request, BeckonContext) async throws -> Answer
    ) {
        router.get(path, use: answer)
        router.head(path) { request, context in
            try await answer(request, context).response(from: request, context: context).createHeadResponse()
        }
    }

    /// A path parameter, percent-decoded (a user id may hold any character but U+0000, as in events: clients
    /// percent-encode it in the path). A 400 for what an event or a registration could not carry either: `%00` (no id
    /// holds it, and the stores would cut the id there), a user id over ``SegmentDecoder/maxIDBytes``, a device
    /// token that a registration refuses (``Engine/tokenProblem(_:)``).
    package static func parameter(_ context: BeckonContext, _ name: String) throws -> String {
        let raw = try context.parameters.require(name)
        let value = raw.removingPercentEncoding ?? raw
        if name == "token" {
            if let why = Engine.tokenProblem(value) { throw APIError(.badRequest, "'token': \(why)") }
            return value
        }
        if let why = SegmentDecoder.idProblem(value) { throw APIError(.badRequest, "'\(name)' \(why)") }
        if let why = SegmentDecoder.lengthProblem(value) { throw APIError(.badRequest, "'\(name)' \(why)") }
        return value
    }

    // MARK: Audience

    /// `GET /admin/audience?rule=CAMPAIGN/RULE`: how many stored users the rule's `audience` and `if` select now
    /// (``AudienceCounter``), counted a page at a time on the blocking pool, one count at a time (the heavy-work slots).
    func audience(_ request: Request) async throws -> AudienceAnswer {
        guard let name = request.uri.queryParameters.get("rule").map({ String($0) }), !name.isEmpty else {
            throw APIError(.badRequest, "name the rule: ?rule=CAMPAIGN/RULE")
        }
        let rules = backend.rules.ruleSet
        let now = Processor.nowMs()
        guard var counter = AudienceCounter(ruleSet: rules, rule: name, now: now) else {
            let names = rules.rules.map(\.qualifiedID)
            let hint = Suggest.nearest(name, in: names).map { "; did you mean '\($0)'?" } ?? ""
            throw APIError(.notFound, "no rule '\(name)' in the rules served\(hint)")
        }
        let runs = backend.console?.runs
        if let runs, !runs.take() { throw APIError.busy }
        defer { runs?.give() }
        let backend = backend
        let counted = try await AudienceCount.count([counter]) { after, limit in
            do { return try await backend.storedStates(after: after, limit: limit) } catch {
                throw APIError.unavailable("the stored users cannot be read now; ask again")
            }
        }
        counter = counted[0]
        return AudienceAnswer(rule: counter.rule.qualifiedID, counter.size, at: Timestamp(milliseconds: now).description)
    }

    // MARK: Email links

    static let unsubscribedPage = """
        <!doctype html><html lang="en"><meta charset="utf-8"><title>Unsubscribed</title>
        <p>You are unsubscribed: you will get no more of these emails.</p></html>
        """

    /// A signed link's destination sender, user, action and signature, or the refusal that says what is wrong.
    func link(_ request: Request, _ kind: String, extra: [String] = []) throws -> (user: String, action: String, rule: String) {
        let q = request.uri.queryParameters
        guard let d = q.get("d"), let u = q.get("u"), let a = q.get("a"), let r = q.get("r"), let s = q.get("s"), !u.isEmpty
        else {
            throw APIError(.badRequest, "the link is incomplete")
        }
        guard let sender = backend.rules.destinations[d]?.email else { throw APIError(.notFound, "no such link") }
        guard sender.links.verify(kind, [u, a, r] + extra, signature: s) else {
            throw APIError(.forbidden, "the link's signature does not match")
        }
        return (u, a, r)
    }

    /// Records what a link says happened: events of the user's, through ingest (so both stores, and replay, see
    /// them as any other).
    func record(_ events: [LinkEvent]) async throws {
        try await accept(Array(try JSONEncoder().encode(LinkBatch(batch: events))), kind: nil)
    }

    /// `/v1/unsubscribe`: the user's `email_unsubscribed` trait set (emails to them are skipped from then on) and an
    /// `Email Unsubscribed` event in their stream; a second use of the same link changes nothing (its messageIds).
    func unsubscribe(_ request: Request) async throws {
        let (user, action, rule) = try link(request, "unsubscribe")
        let time = Timestamp(milliseconds: Processor.nowMs()).description
        try await record([
            LinkEvent(
                type: "identify", userId: user, messageId: "unsubscribe-trait-\(action)", timestamp: time,
                traits: [UserState.unsubscribedAttribute: true]),
            LinkEvent(
                type: "track", userId: user, event: "Email Unsubscribed", messageId: "unsubscribe-\(action)", timestamp: time,
                properties: ["action_id": action, "rule": rule]),
        ])
        backend.messages.count(rule: rule, channel: "email", "unsubscribed")
    }

    /// `/v1/click`: an `Email Link Clicked` event, then the signed URL to redirect to.
    func click(_ request: Request) async throws -> String {
        guard let url = request.uri.queryParameters.get("url"), url.hasPrefix("https://") || url.hasPrefix("http://") else {
            throw APIError(.badRequest, "the link is incomplete")
        }
        let (user, action, rule) = try link(request, "click", extra: [url])
        let time = Timestamp(milliseconds: Processor.nowMs()).description
        try await record([
            LinkEvent(
                type: "track", userId: user, event: "Email Link Clicked", timestamp: time,
                properties: ["action_id": action, "rule": rule, "url": url])
        ])
        backend.messages.count(rule: rule, channel: "email", "clicked")
        return url
    }

    // MARK: Ingest

    /// An ingest request's body, decompressed, at most ``SegmentRequest/maxRequestBytes`` (else 400; an unknown
    /// `Content-Encoding`: 415).
    package static func body(of request: Request, metrics: ServiceMetrics) async throws -> [UInt8] {
        let encoding = ContentEncoding(request.headers[.contentEncoding])
        if case .unsupported(let name) = encoding {
            metrics.ingest(.rejected).increment()
            throw APIError(.unsupportedMediaType, "Content-Encoding '\(name)' is not accepted; send gzip, deflate or none")
        }
        let limit = SegmentRequest.maxRequestBytes
        let tooLarge = APIError(.badRequest, "the request is over \(limit) bytes")
        let body: ByteBuffer
        do throws(BodyRefusal) {
            body = try await collect(request, upTo: limit, encoded: true)
        } catch {
            metrics.ingest(.rejected).increment()
            throw error == .tooLarge ? tooLarge : APIError(error, limit: limit)
        }
        do {
            return try encoding.decoded(body, upTo: SegmentRequest.maxRequestBytes)
        } catch .tooLarge {
            metrics.ingest(.rejected).increment()
            throw tooLarge
        } catch {
            metrics.ingest(.rejected).increment()
            throw APIError(.badRequest, "the body is not valid \(encoding)")
        }
    }

    /// Why a request's body was not read whole.
    package enum BodyRefusal: Error, Equatable {
        /// It passed the route's bound.
        case tooLarge
        /// Its bytes did not come as its head says (bad chunks).
        case unframed
        /// It says it is compressed (`Content-Encoding` other than `identity`) on a route that reads it as it is.
        case encoded
    }

    /// A request's body, whole, at most `limit` bytes: every route that reads a body reads it here. (Collected into a
    /// buffer of the length the head gives, when it gives one within the limit: growing by doubling held up to half
    /// as much again, per connection, while the body came.) `encoded`: the caller undoes the `Content-Encoding`
    /// (ingest); elsewhere a body that says it is compressed is refused, not read as it is.
    package static func collect(
        _ request: Request, upTo limit: Int, encoded: Bool = false
    ) async throws(BodyRefusal) -> ByteBuffer {
        if !encoded {
            guard case .identity = ContentEncoding(request.headers[.contentEncoding]) else { throw .encoded }
        }
        var body = ByteBuffer()
        if let n = request.headers[.contentLength].flatMap({ Int($0) }) {
            // (A head that declares more than the bound is refused at once, not once the bytes, or the body timeout,
            // have come.)
            guard n <= limit else { throw .tooLarge }
            if n > 0 { body.reserveCapacity(n) }
        }
        do {
            for try await part in request.body {
                guard body.readableBytes + part.readableBytes <= limit else { throw BodyRefusal.tooLarge }
                body.writeImmutableBuffer(part)
            }
        } catch let refusal as BodyRefusal {
            throw refusal
        } catch {
            throw .unframed
        }
        return body
    }

    /// Decodes the body under the rules served now (a bad event: 400, nothing stored) and has the store keep it;
    /// 200 once it is committed.
    package func ingest(_ request: Request, kind: Event.Kind?) async throws -> Accepted {
        try await accept(try await Self.body(of: request, metrics: backend.metrics), kind: kind)
        return Accepted()
    }

    /// Decodes events (a bad one is a 400 that says which and where) and stores them: the one way events come in.
    func accept(_ body: [UInt8], kind: Event.Kind?) async throws {
        let rules = backend.rules
        let now = Processor.nowMs()
        let decoded: SegmentRequest.Decoded
        do {
            decoded = try Ingest.decode(body, kind: kind, now: now, clock: backend.clock, decoder: backend.ingestDecoder(rules))
        } catch {
            backend.metrics.ingest(.rejected).increment()
            throw APIError(error)
        }
        try await backend.store(body, decoded, decodedUnder: rules, now: now)
    }

    // MARK: Pull

    /// A pull's `after` cursor and `wait` seconds (at most ``maxWait``), or the 400 that says what is wrong.
    package static func pullQuery(_ request: Request) throws -> (after: Int64, wait: Double) {
        let query = request.uri.queryParameters
        var after: Int64 = 0
        if let a = query.get("after") {
            guard let v = Int64(a), v >= 0 else { throw APIError(.badRequest, "'after' must be a cursor") }
            after = v
        }
        var wait = 0.0
        if let w = query.get("wait") {
            guard let v = Double(w), v >= 0, v.isFinite else { throw APIError(.badRequest, "'wait' is seconds") }
            wait = min(v, maxWait)
        }
        return (after, wait)
    }

    /// The user's actions after the cursor; with `wait`, a long poll that answers as soon as there are some.
    package func pull(_ request: Request, user: String) async throws -> ActionsPage {
        let (after, wait) = try Self.pullQuery(request)
        var deadline = ContinuousClock.now + .milliseconds(Int64(wait * 1000))
        while true {
            let seen = backend.actionsMark(of: user)
            let rows: [(seq: Int64, json: String)]
            do {
                rows = try await backend.actions(of: user, after: after, limit: Self.maxActions)
            } catch let e as APIError {
                throw e
            } catch {
                throw APIError.unavailable("the actions cannot be read now; ask again")
            }
            let left = deadline - ContinuousClock.now
            if !rows.isEmpty || left <= .zero || Task.isCancelled || backend.stopping {
                return ActionsPage(
                    actions: try rows.map { try AnyJSON(parsing: $0.json) }, cursor: String(rows.last?.seq ?? after))
            }
            let seconds = left.inSeconds
            // A graceful shutdown answers the poll at once rather than holding the stop for up to `maxWait`.
            await withGracefulShutdownHandler {
                await backend.waitForActions(of: user, seen: seen, seconds: seconds)
            } onGracefulShutdown: {
                backend.stopWaiting()
            }
            if backend.stopping { deadline = .now }
        }
    }
}

/// Records each request's duration by route pattern (never the path itself, which holds user ids).
package struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    package let metrics: ServiceMetrics

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws
        -> Response
    {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            let route = context.endpointPath ?? "unmatched"
            metrics.request(route: route, method: request.method.rawValue, status: response.status.code).record(
                ContinuousClock.now - start)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            let route = context.endpointPath ?? "unmatched"
            metrics.request(route: route, method: request.method.rawValue, status: status).record(
                ContinuousClock.now - start)
            throw error
        }
    }
}

/// A request whose body comes in a transfer coding besides `chunked` is refused, as RFC 9112 (6.1, 6.3) has it: the
/// HTTP parser undoes the chunks alone, and the coded bytes would be read as the body itself. `gzip, chunked`: 501;
/// a last coding other than `chunked` (`gzip`): the body's end cannot be found, 400 and the connection closed. (A body
/// is compressed with `Content-Encoding`.)
struct OnlyChunked: RouterMiddleware {
    typealias Context = BeckonContext

    func handle(
        _ request: Request, context: BeckonContext, next: (Request, BeckonContext) async throws -> Response
    ) async throws -> Response {
        let codings = request.headers[values: .transferEncoding].flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        guard codings.last.map({ $0 == "chunked" }) ?? true else {
            throw APIError(
                .badRequest, "Transfer-Encoding must end with 'chunked': where the body ends cannot be told",
                headers: [.connection: "close"])
        }
        if let other = codings.first(where: { $0 != "chunked" }) {
            throw APIError(
                .notImplemented,
                "Transfer-Encoding '\(other.prefix(64))' is not taken; send the body chunked or as it is "
                    + "(compress it with Content-Encoding)")
        }
        return try await next(request, context)
    }
}

/// A request no route takes is answered as every refusal is, with a ``ProblemBody`` naming it: 405 and `Allow` for a
/// path that has routes for other methods, 404 for an unknown path.
struct ProblemForNoRoute: RouterMiddleware {
    typealias Context = BeckonContext
    /// The routes, known once they are all added (``API/router()``).
    let routes: RouteMethods

    func handle(
        _ request: Request, context: BeckonContext, next: (Request, BeckonContext) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound && error.body == nil {
            let allowed = routes.methods(for: request.uri.path)
            guard !allowed.isEmpty else { throw APIError(.notFound, "no such route: \(request.method) \(request.uri.path)") }
            let list = allowed.map(\.rawValue).joined(separator: ", ")
            throw APIError(
                .methodNotAllowed, "\(request.uri.path) takes \(list), not \(request.method)", headers: [.allow: list])
        }
    }
}

/// The methods of each route's path, for a `405`'s `Allow`: set once, when every route is added.
final class RouteMethods: Sendable {
    private let routes = Mutex<[(path: RouterPath, method: HTTPRequest.Method)]>([])

    func set(_ all: [Router<BeckonContext>.RouteDescription]) { routes.withLock { $0 = all.map { ($0.path, $0.method) } } }

    /// The methods of the routes whose path matches `path` (as the router splits it), in a stable order.
    func methods(for path: String) -> [HTTPRequest.Method] {
        let parts = path.split(separator: "/")
        let found = routes.withLock { all in
            all.filter { r in
                r.path.components.count == parts.count && zip(r.path.components, parts).allSatisfy { $0 ~= $1 }
            }.map(\.method)
        }
        return Set(found).sorted { $0.rawValue < $1.rawValue }
    }
}
