import BeckonCore
import BeckonStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// The HTTP API (docs/service.md): ingest, pull delivery, the inbox, health and metrics.
struct Routes: Sendable {
    let processor: Processor
    let backend: SQLiteStateBackend
    let current: CurrentRules
    let reloader: Reloader
    let deliverer: Deliverer
    let writeKeys: KeyRing
    let adminKeys: KeyRing
    let logger: Logger
    let userAuth: UserAuth?
    let metrics: ServiceMetrics
    let feed: ActionFeed
    let clock: ClockMode
    /// The pages under `/console`.
    let console: Console

    /// The longest `wait` of a long poll, in seconds, and the most actions one pull returns.
    static let maxWait = 30.0
    static let maxActions = 500

    func router() -> Router<BeckonContext> {
        let router = Router(context: BeckonContext.self)
        router.add(middleware: MetricsMiddleware(metrics: metrics))
        router.add(middleware: CredentialThrottleMiddleware(throttle: CredentialThrottle(), logger: logger))
        let kinds: [(String, Event.Kind)] = [
            ("track", .track), ("identify", .identify), ("screen", .screen), ("page", .page), ("group", .group),
            ("alias", .alias),
        ]
        for (path, kind) in kinds {
            router.post(RouterPath("/v1/\(path)")) { request, _ in await ingest(request, kind: kind) }
        }
        router.post("/v1/batch") { request, _ in await ingest(request, kind: nil) }
        router.get("/v1/users/:userId/actions") { request, context in
            let user = try Self.parameter(context, "userId")
            if let refused = await refuseUser(request, user) { return refused }
            return try await pull(request, user: user)
        }
        router.get("/v1/users/:userId/inbox") { request, context in
            let user = try Self.parameter(context, "userId")
            if let refused = await refuseUser(request, user) { return refused }
            return try await inbox(user)
        }
        router.post("/v1/users/:userId/inbox/:itemId/read") { request, context in
            let user = try Self.parameter(context, "userId")
            let item = try Self.parameter(context, "itemId")
            if let refused = await refuseUser(request, user) { return refused }
            return try await markRead(user, item)
        }
        router.get("/admin/rules") { request, _ in
            guard admin(request, "GET /admin/rules") != nil else { return Self.refusedAdmin }
            return Self.json(.ok, current.value.loaded.json)
        }
        router.post("/admin/reload") { request, _ in
            guard let key = admin(request, "POST /admin/reload") else { return Self.refusedAdmin }
            return await reload(by: "POST /admin/reload, key \(key)")
        }
        router.delete("/v1/users/:userId") { request, context in
            let user = try Self.parameter(context, "userId")
            guard admin(request, "DELETE /v1/users/{id}") != nil else { return Self.refusedAdmin }
            return try await forget(user)
        }
        router.get("/v1/users/:userId/export") { request, context in
            let user = try Self.parameter(context, "userId")
            guard admin(request, "GET /v1/users/{id}/export") != nil else { return Self.refusedAdmin }
            return try await export(user)
        }
        console.add(to: router)
        router.get("/livez") { _, _ in Self.json(.ok, #"{"status":"live"}"#) }
        router.get("/readyz") { _, _ in
            processor.ready
                ? Self.json(.ok, #"{"status":"ready"}"#) : Self.json(.serviceUnavailable, #"{"status":"not ready"}"#)
        }
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: metrics.text())))
        }
        return router
    }

    /// A path parameter, percent-decoded (a user id may hold any character; clients percent-encode it in the path).
    static func parameter(_ context: BeckonContext, _ name: String) throws -> String {
        let raw = try context.parameters.require(name)
        return raw.removingPercentEncoding ?? raw
    }

    static func json(_ status: HTTPResponse.Status, _ text: String, headers: HTTPFields = [:]) -> Response {
        var h = headers
        h[.contentType] = "application/json"
        return Response(status: status, headers: h, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func problem(_ status: HTTPResponse.Status, _ message: String) -> Response {
        json(status, SegmentRequest.Problem(message: message).json)
    }

    // MARK: Admin

    /// The fingerprint of the request's admin key (`Authorization: Bearer KEY`; write keys and user tokens never
    /// are one), `nil` when it has none; an admin request is logged with what it asked (a route pattern, never a user
    /// id) and the key's fingerprint, never the key.
    func admin(_ request: Request, _ what: String) -> String? {
        guard let key = adminKeys.bearer(request.headers[.authorization]) else {
            logger.notice("admin request refused", metadata: ["request": "\(what)"])
            return nil
        }
        let fingerprint = LoadedRules.fingerprint(key)
        logger.info("admin request", metadata: ["request": "\(what)", "key": "\(fingerprint)"])
        return fingerprint
    }

    func reload(by who: String) async -> Response {
        switch await reloader.reload(by: who) {
        case .changed(let r): return Self.json(.ok, Self.reloaded(r, changed: true))
        case .unchanged(let r): return Self.json(.ok, Self.reloaded(r, changed: false))
        case .refused(let why):
            var w = JSONWriter()
            w.beginObject()
            w.key("success")
            w.value(.bool(false))
            w.key("error")
            w.string(why.message + "; the rules loaded before are still served")
            w.key("diagnostics")
            w.string(why.diagnostics)
            w.endObject()
            return Self.json(.unprocessableContent, w.output)
        case .failed:
            return Self.problem(.serviceUnavailable, "the rules could not be swapped; the rules loaded before are still served")
        }
    }

    /// `GET /admin/rules`' object with `"changed"` first.
    static func reloaded(_ r: ServingRules, changed: Bool) -> String {
        "{\"changed\":\(changed)," + r.loaded.json.dropFirst()
    }

    // MARK: Privacy

    /// Runs `body` on a thread of its own: work that blocks on the database for long (reading the whole input log)
    /// stays off the few threads that answer requests.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { c in
            Thread { c.resume(with: Result { try body() }) }.start()
        }
    }

    /// The answer to a whole-log read (export, forget) while the heavy-work slots are taken (the console's two:
    /// such reads are bounded together, docs/reference/limits.md).
    static var busy: Response {
        json(
            .serviceUnavailable,
            SegmentRequest.Problem(message: "busy: other reads of the whole input log are under way; ask again").json,
            headers: [.retryAfter: "1"])
    }

    func forget(_ user: String) async throws -> Response {
        guard console.runs.take() else { return Self.busy }
        defer { console.runs.give() }
        let result: JobResult
        do {
            result = try await processor.submit(.forget(userID: user))
            // The answer comes once nothing of the user's is in flight to a destination and their events are gone
            // from the input log (the scrub reads the whole log: a thread of its own, not the request handlers').
            guard case .forgotten(_, let ids) = result else { return Self.problem(.internalServerError, "unexpected result") }
            for id in ids { await deliverer.drain(userID: id) }
            let backend = backend
            _ = try await Self.onThread { try Privacy.scrub(ids, backend: backend) }
        } catch {
            return Self.problem(.serviceUnavailable, "the user could not be forgotten; ask again")
        }
        guard case .forgotten(let known, _) = result else { return Self.problem(.internalServerError, "unexpected result") }
        return Self.forgotten(user, known: known)
    }

    /// A forget's answer: `{"userId": …, "forgotten": whether the service held anything of the user}`.
    static func forgotten(_ user: String, known: Bool) -> Response {
        var w = JSONWriter()
        w.beginObject()
        w.key("userId")
        w.string(user)
        w.key("forgotten")
        w.value(.bool(known))
        w.endObject()
        return json(.ok, w.output)
    }

    func export(_ user: String) async throws -> Response {
        guard console.runs.take() else { return Self.busy }
        defer { console.runs.give() }
        let result: JobResult
        do {
            let candidates = try backend.idsMerged(into: user)
            result = try await processor.submit(.privacy(userID: user, candidates: candidates))
        } catch {
            return Self.problem(.serviceUnavailable, "the user could not be exported; ask again")
        }
        guard case .privacy(let state, let merged) = result else {
            return Self.problem(.internalServerError, "unexpected result")
        }
        let backend = backend
        let text = try await Self.onThread {
            try Privacy.export(user, state: state, merged: merged, backend: backend, at: Processor.nowMs())
        }
        return Self.json(.ok, text)
    }

    static var refusedAdmin: Response {
        json(
            .unauthorized, SegmentRequest.Problem(message: "an admin key is needed (Authorization: Bearer KEY)").json,
            headers: [.wwwAuthenticate: "Bearer"])
    }

    // MARK: Ingest

    /// An ingest request's body, or the answer that refuses it (no write key: 401; over the size limit: 400).
    static func ingestBody(
        _ request: Request, writeKeys: KeyRing, metrics: ServiceMetrics
    ) async -> Result<
        [UInt8], ResponseError
    > {
        guard writeKeys.allowsBasic(request.headers[.authorization]) else {
            metrics.ingest(.rejected).increment()
            return .failure(
                ResponseError(
                    json(
                        .unauthorized,
                        SegmentRequest.Problem(message: "a write key is needed (HTTP Basic, the key as user name)").json,
                        headers: [.wwwAuthenticate: "Basic realm=\"beckon\""])))
        }
        let encoding = ContentEncoding(request.headers[.contentEncoding])
        if case .unsupported(let name) = encoding {
            metrics.ingest(.rejected).increment()
            return .failure(
                ResponseError(
                    problem(.unsupportedMediaType, "Content-Encoding '\(name)' is not accepted; send gzip, deflate or none")))
        }
        let tooLarge = ResponseError(problem(.badRequest, "the request is over \(SegmentRequest.maxRequestBytes) bytes"))
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: SegmentRequest.maxRequestBytes)
        } catch {
            metrics.ingest(.rejected).increment()
            return .failure(tooLarge)
        }
        do {
            return .success(try encoding.decoded(body, upTo: SegmentRequest.maxRequestBytes))
        } catch .tooLarge {
            metrics.ingest(.rejected).increment()
            return .failure(tooLarge)
        } catch {
            metrics.ingest(.rejected).increment()
            return .failure(ResponseError(problem(.badRequest, "the body is not valid \(encoding)")))
        }
    }

    func ingest(_ request: Request, kind: Event.Kind?) async -> Response {
        let body: [UInt8]
        switch await Self.ingestBody(request, writeKeys: writeKeys, metrics: metrics) {
        case .failure(let e): return e.response
        case .success(let b): body = b
        }
        let parsed: ([BoundEvent], InputLog)
        let rules = current.value
        do {
            parsed = try Ingest.events(body, kind: kind, now: Processor.nowMs(), clock: clock, decoder: rules.decoder)
        } catch {
            metrics.ingest(.rejected).increment()
            return Self.json(.badRequest, error.json)
        }
        do {
            _ = try await processor.submit(.events(parsed.0, parsed.1, decodedUnder: rules))
        } catch {
            return Self.problem(.serviceUnavailable, "the events could not be stored; send them again")
        }
        return Self.json(.ok, #"{"success":true}"#)
    }

    // MARK: Users

    /// A response refusing the request, or `nil` when its token proves `user`.
    func refuseUser(_ request: Request, _ user: String) async -> Response? {
        await Self.refuseUser(request, user, userAuth)
    }

    /// A response refusing the request, or `nil` when its token proves `user` (`userAuth`: the service's, if any).
    static func refuseUser(_ request: Request, _ user: String, _ userAuth: UserAuth?) async -> Response? {
        guard let userAuth else { return problem(.unauthorized, "no user secret is configured (--user-secret)") }
        do {
            try await userAuth.check(request.headers[.authorization], user: user)
            return nil
        } catch .otherUser {
            return problem(.forbidden, "the token is for another user")
        } catch {
            return json(
                .unauthorized, SegmentRequest.Problem(message: "a valid user token is needed (Authorization: Bearer JWT)").json,
                headers: [.wwwAuthenticate: "Bearer"])
        }
    }

    /// A pull's `after` cursor and `wait` seconds (at most ``maxWait``), or the 400 that says what is wrong.
    static func pullQuery(_ request: Request) -> Result<(after: Int64, wait: Double), ResponseError> {
        let query = request.uri.queryParameters
        var after: Int64 = 0
        if let a = query.get("after") {
            guard let v = Int64(a), v >= 0 else {
                return .failure(ResponseError(problem(.badRequest, "'after' must be a cursor")))
            }
            after = v
        }
        var wait = 0.0
        if let w = query.get("wait") {
            guard let v = Double(w), v >= 0, v.isFinite else {
                return .failure(ResponseError(problem(.badRequest, "'wait' is seconds")))
            }
            wait = min(v, maxWait)
        }
        return .success((after, wait))
    }

    /// A pull's answer: the actions' JSON objects and the cursor after them.
    static func actionsResponse(_ rows: [(seq: Int64, json: String)], after: Int64) -> Response {
        var text = #"{"actions":["#
        text += rows.map(\.json).joined(separator: ",")
        text += #"],"cursor":""# + String(rows.last?.seq ?? after) + #""}"#
        return json(.ok, text)
    }

    /// A response as an error value (for `Result`).
    struct ResponseError: Error {
        var response: Response
        init(_ r: Response) { response = r }
    }

    func pull(_ request: Request, user: String) async throws -> Response {
        let after: Int64
        let wait: Double
        switch Self.pullQuery(request) {
        case .failure(let e): return e.response
        case .success(let q): (after, wait) = q
        }
        var deadline = ContinuousClock.now + .milliseconds(Int64(wait * 1000))
        while true {
            let seen = feed.version(of: user)
            let rows = try await backend.actions(of: user, after: after, limit: Self.maxActions)
            let left = deadline - ContinuousClock.now
            if !rows.isEmpty || left <= .zero || Task.isCancelled {
                return Self.actionsResponse(rows, after: after)
            }
            let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
            // A graceful shutdown answers the poll at once rather than holding the stop for up to `maxWait`.
            await withGracefulShutdownHandler {
                await feed.wait(for: user, seen: seen, seconds: seconds)
            } onGracefulShutdown: {
                feed.close()
            }
            if feed.isClosed { deadline = .now }
        }
    }

    func inbox(_ user: String) async throws -> Response {
        let result: JobResult
        do {
            result = try await processor.submit(.inbox(userID: user))
        } catch {
            return Self.problem(.serviceUnavailable, "the service is stopping; ask again")
        }
        guard case .inbox(let found) = result else { return Self.problem(.internalServerError, "unexpected result") }
        return Self.inboxResponse(user, found ?? [])
    }

    static func inboxResponse(_ user: String, _ items: [InboxItem]) -> Response {
        var w = JSONWriter()
        w.beginObject()
        w.key("userId")
        w.string(user)
        w.key("unread")
        w.value(.int(Int64(items.count(where: { !$0.read }))))
        w.key("items")
        w.beginArray()
        for i in items {
            w.beginObject()
            w.key("id")
            w.string(i.id)
            if let s = i.sender {
                w.key("sender")
                w.string(s)
            }
            w.key("message")
            w.string(i.message)
            if let l = i.link {
                w.key("link")
                w.string(l)
            }
            w.key("createdAt")
            w.string(Timestamp(milliseconds: i.createdAt).description)
            w.key("read")
            w.value(.bool(i.read))
            if let r = i.readAt {
                w.key("readAt")
                w.string(Timestamp(milliseconds: r).description)
            }
            w.key("rule")
            w.string(i.rule)
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return json(.ok, w.output)
    }

    func markRead(_ user: String, _ item: String) async throws -> Response {
        let result: JobResult
        do {
            result = try await processor.submit(.markRead(userID: user, itemID: item))
        } catch {
            return Self.problem(.serviceUnavailable, "the change could not be stored; send it again")
        }
        guard case .markRead(let found) = result else { return Self.problem(.internalServerError, "unexpected result") }
        switch found {
        case nil: return Self.problem(.notFound, "no such user")
        case false?: return Self.problem(.notFound, "no such inbox item")
        case true?: return try await inbox(user)
        }
    }
}

/// Records each request's duration by route pattern (never the path itself, which holds user ids).
struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServiceMetrics

    func handle(
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
