import BeckonCore
import BeckonPostgres
import BeckonStore
import BeckonYAML
import Foundation
import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle
import UnixSignals

/// `beckon serve --postgres URL`: one process of a fleet that shares a PostgreSQL database (docs/fleet.md). The same
/// HTTP API as a single service: ingest appends to the fleet's partitioned log and answers once the append is
/// committed; each process processes the partitions it holds the lease of (``FleetWorker``); pulls and inboxes read
/// what any process wrote.
public final class FleetService: Sendable {
    public struct Options: Sendable {
        public var paths: [String]
        /// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE
        public var postgres: String
        public var host = "127.0.0.1"
        public var port = 8080
        public var writeKeys: [String] = []
        public var adminKeys: [String] = []
        public var userSecret: String?
        public var clock: ClockMode = .wall
        /// How long a lease lasts without renewal: how long a dead process's partitions wait before another takes them.
        public var leaseTime: Duration = .seconds(10)
        /// This process's name in the leases (default host:pid).
        public var owner: String?
        public var connections = ConnectionLimits()
        public init(paths: [String], postgres: String) {
            self.paths = paths
            self.postgres = postgres
        }
    }

    let options: Options
    let log: FleetLog
    let rules: ServingRules
    let worker: FleetWorker
    let appender: Appender
    let deliverer: Deliverer
    let metrics: FleetMetrics
    let writeKeys: KeyRing
    let adminKeys: KeyRing
    let userAuth: UserAuth?
    let logger: Logger
    public let owner: String
    public let warnings: String

    public init(_ options: Options, logger: Logger = Logger(label: "beckon")) async throws {
        let loaded = RuleLoader.load(paths: options.paths)
        guard loaded.ruleSet != nil, loaded.errorCount == 0 else {
            throw BeckonService.ServiceError.rules(
                loaded.rendered() + "\(loaded.errorCount) error(s) in the rules; not started\n")
        }
        (writeKeys, adminKeys) = try BeckonService.ServiceError.keyRings(
            write: options.writeKeys, admin: options.adminKeys, userSecret: options.userSecret)
        warnings = loaded.warningCount > 0 ? loaded.rendered() : ""
        self.options = options
        self.logger = logger
        // (The rule set's version is the single service's database's; in a fleet, the files' digest names them.)
        rules = try ServingRules.make(loaded, environment: ProcessInfo.processInfo.environment, at: Processor.nowMs()) {
            _, _ in 0
        }
        rules.warnPaused(logger)
        log = try FleetLog(url: options.postgres, logger: logger, lockTimeout: options.leaseTime / 2)
        appender = Appender(log: log)
        metrics = FleetMetrics(ServiceMetrics(version: BeckonService.version))
        owner = options.owner ?? "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)"
        worker = FleetWorker(
            log: log, rules: rules, clock: options.clock, owner: owner, ttl: options.leaseTime, metrics: metrics,
            logger: logger)
        deliverer = Deliverer(
            backend: FleetOutbox(log: log, destinations: rules.ruleSet.settings.destinations), current: CurrentRules(rules),
            metrics: metrics.service, logger: logger)
        if let s = options.userSecret { userAuth = await UserAuth(secret: s) } else { userAuth = nil }
    }

    /// The events (their JSON) of a log entry, as `beckon fleet events` prints them.
    public static func events(inEntry body: [UInt8]) throws -> [String] {
        var out: [String] = []
        try InputLog.read(body) { input in
            if case .event(let json, let arrival) = input { out.append(InputLog.replayable(json, arrival)) }
        }
        return out
    }

    /// Serves until SIGTERM or SIGINT: the HTTP server stops first, then deliveries (attempts in flight are cut short
    /// and made again later), then the worker hands its partitions over, then the connection pool closes.
    public func run(onRunning: @escaping @Sendable (String) async -> Void = { _ in }) async throws {
        let host = options.host
        let app = Application(
            router: router(),
            server: options.connections.server(logger: logger),
            configuration: .init(address: .hostname(options.host, port: options.port), serverName: "beckon"),
            onServerRunning: { channel in await onRunning("http://\(host):\(channel.localAddress?.port ?? 0)") },
            logger: logger)
        var configuration = ServiceGroupConfiguration(
            services: [
                .init(service: Pool(log: log)), .init(service: worker),
                .init(service: AfterReady(worker: worker, service: deliverer)), .init(service: app),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // A stop ends within a bound whatever the database does: what has not stopped gracefully by then is cancelled,
        // and what a cancellation cannot end (a call into a dead connection) is left behind.
        configuration.maximumGracefulShutdownDuration = Self.stopWithin
        configuration.maximumCancellationDuration = .seconds(1)
        try await ServiceGroup(configuration: configuration).run()
    }

    /// How long an ingest request waits for its append at most (then 503), and a stop for the services to end.
    static let ingestDeadline = Duration.milliseconds(1500)
    static let stopWithin = Duration.seconds(7)

    /// A service started once the worker has set the schema up (deliveries read tables the migrations make).
    struct AfterReady<S: Service>: Service {
        let worker: FleetWorker
        let service: S
        func run() async throws {
            while !worker.ready {
                if Task.isShuttingDownGracefully || Task.isCancelled { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            try await service.run()
        }
    }

    /// The connection pool, running until the services after it have stopped.
    struct Pool: Service {
        let log: FleetLog
        func run() async throws {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await log.run() }
                try? await gracefulShutdown()
                group.cancelAll()
            }
        }
    }

    // MARK: HTTP

    func router() -> Router<BeckonContext> {
        let router = Router(context: BeckonContext.self)
        router.add(middleware: MetricsMiddleware(metrics: metrics.service))
        router.add(middleware: CredentialThrottleMiddleware(throttle: CredentialThrottle(), logger: logger))
        let kinds: [(String, Event.Kind)] = [
            ("track", .track), ("identify", .identify), ("screen", .screen), ("page", .page), ("group", .group),
            ("alias", .alias),
        ]
        for (path, kind) in kinds {
            router.post(RouterPath("/v1/\(path)")) { request, _ in await self.ingest(request, kind: kind) }
        }
        router.post("/v1/batch") { request, _ in await self.ingest(request, kind: nil) }
        router.get("/v1/users/:userId/actions") { request, context in
            let user = try Routes.parameter(context, "userId")
            if let refused = await self.refuseUser(request, user) { return refused }
            return try await self.pull(request, user: user)
        }
        router.get("/v1/users/:userId/inbox") { request, context in
            let user = try Routes.parameter(context, "userId")
            if let refused = await self.refuseUser(request, user) { return refused }
            return try await Routes.inboxResponse(user, self.inbox(of: user) ?? [])
        }
        router.post("/v1/users/:userId/inbox/:itemId/read") { request, context in
            let user = try Routes.parameter(context, "userId")
            let item = try Routes.parameter(context, "itemId")
            if let refused = await self.refuseUser(request, user) { return refused }
            return try await self.markRead(user, item)
        }
        router.get("/admin/rules") { request, _ in
            guard self.adminKeys.bearer(request.headers[.authorization]) != nil else { return Routes.refusedAdmin }
            return Routes.json(.ok, self.rules.loaded.json)
        }
        router.post("/admin/reload") { request, _ in
            guard self.adminKeys.bearer(request.headers[.authorization]) != nil else { return Routes.refusedAdmin }
            return Routes.problem(
                .notImplemented,
                "not available in a fleet yet (docs/fleet.md): restart the processes with the new rules one by one")
        }
        router.delete("/v1/users/:userId") { request, context in
            let user = try Routes.parameter(context, "userId")
            guard self.adminKeys.bearer(request.headers[.authorization]) != nil else { return Routes.refusedAdmin }
            return await self.forget(user)
        }
        router.get("/v1/users/:userId/export") { request, context in
            let user = try Routes.parameter(context, "userId")
            guard self.adminKeys.bearer(request.headers[.authorization]) != nil else { return Routes.refusedAdmin }
            return await self.export(user)
        }
        router.get("/livez") { _, _ in Routes.json(.ok, #"{"status":"live"}"#) }
        router.get("/readyz") { _, _ in
            guard let why = self.worker.notReady() else { return Routes.json(.ok, #"{"status":"ready"}"#) }
            var w = JSONWriter()
            w.beginObject()
            w.key("status")
            w.string("not ready")
            w.key("reason")
            w.string(why)
            w.endObject()
            return Routes.json(.serviceUnavailable, w.output)
        }
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: self.metrics.text(self.log))))
        }
        return router
    }

    /// Decodes the request as a single service does (a bad one gets 400 and nothing is stored), then appends each
    /// event with its arrival to its user's partition, all in one transaction; 200 once it is committed.
    func ingest(_ request: Request, kind: Event.Kind?) async -> Response {
        let body: [UInt8]
        switch await Routes.ingestBody(request, writeKeys: writeKeys, metrics: metrics.service) {
        case .failure(let e): return e.response
        case .success(let b): body = b
        }
        let now = Processor.nowMs()
        let parsed: (events: [BoundEvent], ranges: [Range<Int>], arrival: Arrival)
        do {
            parsed = try Ingest.decode(body, kind: kind, now: now, clock: options.clock, decoder: rules.decoder)
        } catch {
            metrics.service.ingest(.rejected).increment()
            return Routes.json(.badRequest, error.json)
        }
        let entries = zip(parsed.events, parsed.ranges).map { e, r in
            var record = InputLog()
            record.arrival(parsed.arrival)
            record.event(body[r])
            return (userID: e.userID, body: record.bytes, receivedAt: now)
        }
        // (While the database has not answered the position reads for a while, at once: it is down.)
        if worker.databaseStale {
            return Routes.problem(.serviceUnavailable, "the database cannot be reached; send the events again")
        }
        do {
            let started = ContinuousClock.now
            // (An answer within the deadline whatever the database does: 503 when the append is not through by then.)
            let appender = appender
            _ = try await withDeadline(Self.ingestDeadline, "append") { try await appender.submit(entries) }
            metrics.appendSeconds.record(ContinuousClock.now - started)
            worker.faults.ok("append")
        } catch {
            worker.faults.failed("append", error)
            return Routes.problem(.serviceUnavailable, "the events could not be stored; send them again")
        }
        return Routes.json(.ok, #"{"success":true}"#)
    }

    func refuseUser(_ request: Request, _ user: String) async -> Response? {
        await Routes.refuseUser(request, user, userAuth)
    }

    /// A user's actions after a cursor, as a single service answers (a long poll looks again every 100 ms).
    func pull(_ request: Request, user: String) async throws -> Response {
        let after: Int64
        let wait: Double
        switch Routes.pullQuery(request) {
        case .failure(let e): return e.response
        case .success(let q): (after, wait) = q
        }
        let deadline = ContinuousClock.now + .milliseconds(Int64(wait * 1000))
        while true {
            let rows: [(seq: Int64, json: String)]
            do {
                rows = try await log.actions(of: user, after: after, limit: Routes.maxActions)
            } catch {
                return Routes.problem(.serviceUnavailable, "the actions cannot be read now; ask again")
            }
            if !rows.isEmpty || ContinuousClock.now >= deadline || Task.isCancelled || Task.isShuttingDownGracefully {
                return Routes.actionsResponse(rows, after: after)
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    // MARK: Privacy

    /// Waits until `partition` has processed up to `seq` (at most `seconds`); returns whether it has.
    func waitProcessed(_ partition: Int, _ seq: Int64, seconds: Int64 = 10) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while try await log.processed(partition: partition) < seq {
            if ContinuousClock.now >= deadline { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// `DELETE /v1/users/{id}`: a forget entry appended to the user's partition; its owner, having processed every
    /// entry before it, deletes the user's state, actions, outbox entries and events in one fenced statement and
    /// drops the user from memory. Answered once that is done.
    func forget(_ user: String) async -> Response {
        do {
            var known = try await log.states(of: [user])[user] != nil
            if !known { known = try await !log.entries(of: user).isEmpty }
            var record = InputLog()
            record.forget(userID: user)
            guard let entry = try await appender.submit([(user, record.bytes, Processor.nowMs())]).first,
                try await waitProcessed(entry.partition, entry.seq, seconds: 30)
            else {
                return Routes.problem(.serviceUnavailable, "the user is not forgotten yet (it is queued); ask again")
            }
            return Routes.forgotten(user, known: known)
        } catch {
            return Routes.problem(.serviceUnavailable, "the user could not be forgotten; ask again")
        }
    }

    /// `GET /v1/users/{id}/export`: as a single service's, once the user's partition has processed what was
    /// appended before the request.
    func export(_ user: String) async -> Response {
        do {
            let p = FleetLog.partition(of: user)
            guard try await waitProcessed(p, try await log.appended()[p]) else {
                return Routes.problem(.serviceUnavailable, "the user's events are still being processed; ask again")
            }
            let state = try await log.states(of: [user])[user].map { try UserState(decoding: $0) }
            let actions = try await log.actions(of: user, after: 0, limit: Int.max).map(\.json)
            let outbox = try await log.outbox(of: user).map {
                OutboxRow(
                    id: $0.id,
                    entry: OutboxEntry(
                        destination: $0.destination, actionID: $0.actionID, userID: user,
                        body: String(decoding: $0.body, as: UTF8.self), createdAt: $0.createdAt),
                    state: OutboxRow.State(rawValue: $0.state) ?? .dead, attempts: $0.attempts, nextAt: $0.nextAt,
                    doneAt: $0.doneAt, lastError: $0.lastError)
            }
            let records = try await log.entries(of: user)
            let text = try Privacy.export(
                user, state: state, actions: actions, outbox: outbox,
                records: { each in for r in records { try each(r.receivedAt, r.body) } }, at: Processor.nowMs())
            return Routes.json(.ok, text)
        } catch {
            return Routes.problem(.serviceUnavailable, "the user could not be exported; ask again")
        }
    }

    /// A user's inbox as last written by the partition's owner (`nil`: no such user).
    func inbox(of user: String) async throws -> [InboxItem]? {
        guard let bytes = try await log.states(of: [user])[user] else { return nil }
        return try UserState(decoding: bytes).inbox
    }

    /// Appends the read to the user's partition and answers once its owner has processed it (or after 10 s, with
    /// the inbox as it then stands).
    func markRead(_ user: String, _ item: String) async throws -> Response {
        guard let items = try await inbox(of: user) else { return Routes.problem(.notFound, "no such user") }
        guard items.contains(where: { $0.id == item }) else { return Routes.problem(.notFound, "no such inbox item") }
        var record = InputLog()
        let now = Processor.nowMs()
        record.markRead(userID: user, itemID: item, time: now)
        let entry: FleetLog.Entry
        do {
            guard let e = try await appender.submit([(user, record.bytes, now)]).first else {
                return Routes.problem(.internalServerError, "unexpected result")
            }
            entry = e
        } catch {
            return Routes.problem(.serviceUnavailable, "the change could not be stored; send it again")
        }
        _ = try await waitProcessed(entry.partition, entry.seq)
        return Routes.inboxResponse(user, try await inbox(of: user) ?? [])
    }
}
