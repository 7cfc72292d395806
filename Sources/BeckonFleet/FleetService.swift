import BeckonCore
import BeckonPostgres
import BeckonServer
import BeckonStore
import BeckonYAML
import Foundation
import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle
import Synchronization
import UnixSignals

/// `beckon serve --postgres URL`: one process of a fleet that shares a PostgreSQL database (docs/fleet.md). The same
/// HTTP API as a single service: ingest appends to the fleet's partitioned log and answers once the append is
/// committed; each process processes the partitions it holds the lease of (``FleetWorker``); pulls and inboxes read
/// what any process wrote.
public final class FleetService: ServiceBackend {
    /// What a fleet process is started with: the options every service has (``ServiceOptions``, read and set as its
    /// own), its database and its lease.
    public struct Options: StoreOptions {
        public var common: ServiceOptions
        /// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE
        public var postgres: String
        /// How long a lease lasts without renewal: how long a dead process's partitions wait before another takes them.
        public var leaseTime: Duration = .seconds(10)
        /// This process's name in the leases (default host:pid).
        public var owner: String?
        public init(paths: [String], postgres: String) { self.init(ServiceOptions(paths: paths), postgres: postgres) }
        public init(_ common: ServiceOptions, postgres: String) {
            self.common = common
            self.postgres = postgres
        }
    }

    package let options: Options
    package let log: FleetLog
    /// The newest rule set this process knows (``FleetRules``): ingest decodes under it.
    let current: CurrentRules
    package var rules: ServingRules { current.value }
    let fleetRules: FleetRules
    let reloader: Reloader
    let worker: FleetWorker
    let appender: Appender
    package let deliverer: Deliverer
    let fleetMetrics: FleetMetrics
    package var metrics: ServiceMetrics { fleetMetrics.service }
    package var messages: MessageCounts { MessageCounts(metrics: fleetMetrics.service, activity: activity) }
    package let writeKeys: KeyRing
    package let adminKeys: KeyRing
    package let userAuth: UserAuth?
    package let logger: Logger
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
        // (Version 0 until the worker has stored the files or read the fleet's latest: ``FleetRules/start()``.)
        let rules = try ServingRules.make(loaded, environment: ProcessInfo.processInfo.environment, at: Processor.nowMs()) {
            _, _ in 0
        }
        rules.warnPaused(logger)
        current = CurrentRules(rules)
        log = try FleetLog(url: options.postgres, logger: logger, lockTimeout: options.leaseTime / 2)
        appender = Appender(log: log)
        fleetMetrics = FleetMetrics(ServiceMetrics(version: BeckonService.version))
        owner = options.owner ?? "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)"
        fleetRules = FleetRules(log: log, current: current, logger: logger)
        reloader = Reloader(
            paths: options.paths, store: fleetRules, current: current, metrics: fleetMetrics.service, logger: logger)
        worker = FleetWorker(
            log: log, rules: fleetRules, clock: options.clock, owner: owner, ttl: options.leaseTime, metrics: fleetMetrics,
            activity: activity, logger: logger)
        console = WebConsole(
            store: FleetConsoleStore(log: log, activity: activity, owner: owner), current: current, reloader: reloader,
            adminKeys: adminKeys, clock: options.clock, logger: logger)
        deliverer = Deliverer(
            backend: FleetOutbox(log: log, current: current),
            devices: FleetDevices(log: log, appender: appender), current: current, metrics: fleetMetrics.service,
            activity: activity, logger: logger)
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
        let connections = options.connections.table(logger: logger)
        let app = Application(
            router: API(
                backend: self, writeKeys: writeKeys, adminKeys: adminKeys, userAuth: userAuth, logger: logger
            ).router(),
            server: options.connections.server(table: connections),
            configuration: options.connections.configuration(host: options.host, port: options.port),
            onServerRunning: { channel in await onRunning("http://\(host):\(channel.localAddress?.port ?? 0)") },
            logger: logger)
        var configuration = ServiceGroupConfiguration(
            services: [
                .init(service: Pool(log: log)), .init(service: worker),
                .init(service: AfterReady(worker: worker, service: deliverer)),
                .init(service: HangupReloads(reloader: reloader)),
                .init(service: metrics.memory),
                .init(service: ActionNotices(log: log, feed: worker.feed, listening: listening)),
                .init(service: worker.notices),
                .init(
                    service: AfterReady(
                        worker: worker,
                        service: FleetActivity(log: log, activity: activity, owner: owner, faults: worker.faults))),
            ]
                + (options.retentionDays.map { days in
                    [
                        .init(
                            service: AfterReady(
                                worker: worker,
                                service: FleetRetention(
                                    log: log, retention: Retention(days: days, logger: logger), faults: worker.faults)))
                    ]
                } ?? [])
                + (options.watch ? [.init(service: AfterReady(worker: worker, service: WatchReloads(reloader: reloader)))] : [])
                + [.init(service: app), .init(service: ConnectionDrain(table: connections))],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // A stop ends within a bound whatever the database does: what has not stopped gracefully by then is cancelled,
        // and what a cancellation cannot end (a call into a dead connection) is left behind.
        configuration.maximumGracefulShutdownDuration = Self.stopWithin
        configuration.maximumCancellationDuration = .seconds(1)
        try await ServiceGroup(configuration: configuration).run()
    }

    /// How long an ingest request waits for its append at most (then 503), and a stop for the services to end.
    package static let ingestDeadline = Duration.milliseconds(1500)
    package static let stopWithin = Duration.seconds(7)

    /// A service started once the worker has set the schema up (deliveries read tables the migrations make).
    struct AfterReady<S: Service>: Service {
        let worker: FleetWorker
        let service: S
        func run() async throws {
            await cancelWhenGracefulShutdown { await worker.untilReady() }
            guard worker.ready, !Task.isShuttingDownGracefully, !Task.isCancelled else { return }
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

    // MARK: Store

    package var clock: ClockMode { options.clock }
    package let console: WebConsole?
    /// This process's live counts of its partitions' rules (written for every process's console by ``FleetActivity``).
    let activity = RuleActivity()
    package var stopping: Bool { Task.isShuttingDownGracefully }
    package func stopWaiting() { worker.feed.close() }

    /// The partitions decode each event again from the log under their rules: a request reads only its ids.
    package func ingestDecoder(_ rules: ServingRules) -> SegmentDecoder { .logging }

    /// Appends each event with its arrival to its user's partition, all in one transaction; returns once it is
    /// committed, within ``ingestDeadline`` whatever the database does (else 503).
    package func store(
        _ body: [UInt8], _ request: SegmentRequest.Decoded, decodedUnder rules: ServingRules, now: Int64
    ) async throws {
        var entries: [(userID: String, body: [UInt8], receivedAt: Int64)] = []
        entries.reserveCapacity(request.events.count)
        // (The arrival's line is made once a request, and each record in one allocation: the line's text and the
        // record's growth were 4.6% of a fleet process's time at ingest.)
        var arrival = InputLog()
        arrival.arrival(request.arrival)
        for (e, r) in zip(request.events, request.ranges) {
            var record = InputLog(capacity: arrival.bytes.count + r.count + 16)
            // A sign-in: the earlier id's partition hands its state over (an entry appended with the event, before it,
            // so that the hand-over precedes the sign-in in every order a runner can wait in: docs/fleet.md).
            if let before = e.previousID {
                if FleetLog.partition(of: before) != FleetLog.partition(of: e.userID) {
                    var handOver = InputLog()
                    handOver.handOver(from: before, to: e.userID)
                    entries.append((userID: before, body: handOver.bytes, receivedAt: now))
                }
                record.takeOver(from: before, to: e.userID)
            }
            record.append(arrival)
            record.event(body[r])
            entries.append((userID: e.userID, body: record.bytes, receivedAt: now))
        }
        // (While the database has not answered the position reads for a while, at once: it is down.)
        if worker.databaseStale { throw APIError.unavailable("the database cannot be reached; send the events again") }
        do {
            let started = ContinuousClock.now
            let appender = appender
            let appended = entries
            _ = try await withDeadline(Self.ingestDeadline, "append") { try await appender.submit(appended) }
            fleetMetrics.appendSeconds.record(ContinuousClock.now - started)
            worker.faults.ok("append")
        } catch {
            worker.faults.failed("append", error)
            throw APIError.unavailable("the events could not be stored; send them again")
        }
    }

    package func actions(of user: String, after: Int64, limit: Int) async throws -> [(seq: Int64, json: String)] {
        try await log.actions(of: user, after: after, limit: limit)
    }

    /// A long poll is woken by this process's runner when it holds the user's partition (at once, as in a single
    /// service); another process's writes are looked for every 100 ms, and every second while this one holds it (its
    /// lease may move).
    package func actionsMark(of user: String) -> UInt64 { worker.feed.version(of: user) }
    package func waitForActions(of user: String, seen: UInt64, seconds: Double) async {
        // Notices wake the poll when any process stores actions for the user; it looks again each second all the
        // same (its partition may move), and every 100 ms while this process cannot listen for the notices.
        let told = worker.holds(FleetLog.partition(of: user)) || listening.value.load(ordering: .relaxed)
        await worker.feed.wait(for: user, seen: seen, seconds: min(seconds, told ? 1 : 0.1))
    }

    /// Whether this process listens for other processes' notices of new actions (``ActionNotices``).
    let listening = ActionNotices.Listening()

    /// Waits until `partition` has processed up to `seq` (at most `seconds`); returns whether it has. (Woken by the
    /// process's read of the positions, every ``Poller/interval``, and at once by its own runner of the partition.)
    package func waitProcessed(_ partition: Int, _ seq: Int64, seconds: Int64 = 10) async -> Bool {
        await worker.poller.waitProcessed(partition, seq, timeout: .seconds(seconds))
    }

    /// The person `user` stands for (the user an id was merged into, at the end of its chain) and every id merged
    /// into them, once each partition on the way has processed what was appended before the request: a merge that
    /// extends the chain (an alias of its last id) is written by two partitions, and may be half written when the
    /// request comes. `nil`: a partition did not catch up within 10 s.
    private func settledPerson(of user: String) async throws -> (user: String, merged: [String])? {
        let appended = try await log.appended()
        var waited: Set<Int> = []
        func caughtUp(_ ids: [String]) async -> Bool {
            for q in Set(ids.map(FleetLog.partition(of:))).sorted() where waited.insert(q).inserted {
                guard await waitProcessed(q, appended[q]) else { return false }
            }
            return true
        }
        guard await caughtUp([user]) else { return nil }
        var found = try await log.person(of: user, hops: Engine.maxMergeHops)
        for _ in 0..<Engine.maxMergeHops {
            let before = waited.count
            guard await caughtUp([found.user] + found.merged) else { return nil }
            if waited.count == before { break }
            found = try await log.person(of: user, hops: Engine.maxMergeHops)
        }
        return found
    }

    /// `DELETE /v1/users/{id}`: a forget entry appended to the partition of the user and of each id merged into them;
    /// each owner, having processed every entry before it, deletes that id's state, actions, outbox entries and
    /// events in one fenced statement and drops it from memory. Answered once all are done.
    package func forget(_ user: String) async throws -> Bool {
        var processed = true
        let known: Bool
        do {
            // (An id merged into another user stands for that user: the whole person is forgotten.)
            guard let (person, merged) = try await settledPerson(of: user) else {
                throw APIError.unavailable("the user's events are still being processed; ask again")
            }
            var k = try await log.states(of: [person])[person] != nil || !merged.isEmpty
            if !k { k = try await !log.entries(of: person).isEmpty }
            known = k
            let ids = [person] + merged
            let now = Processor.nowMs()
            let forgets = ids.map { id in
                var record = InputLog()
                record.forget(userID: id)
                return (userID: id, body: record.bytes, receivedAt: now)
            }
            for entry in try await appender.submit(forgets) where processed {
                processed = await waitProcessed(entry.partition, entry.seq, seconds: 30)
            }
        } catch let e as APIError {
            throw e
        } catch {
            throw APIError.unavailable("the user could not be forgotten; ask again")
        }
        guard processed else { throw APIError.unavailable("the user is not forgotten yet (it is queued); ask again") }
        return known
    }

    /// `GET /v1/users/{id}/export`: as a single service's (the user and every id merged into them), once the
    /// partitions of their ids have processed what was appended before the request.
    package func export(_ user: String) async throws -> StoredJSON {
        let failed = APIError.unavailable("the user could not be exported; ask again")
        // (An id merged into another user stands for that user: the export is theirs, under their id.)
        let settled: (user: String, merged: [String])?
        do { settled = try await settledPerson(of: user) } catch { throw failed }
        guard let (person, mergedIDs) = settled else {
            throw APIError.unavailable("the user's events are still being processed; ask again")
        }
        do {
            let ids = [person] + mergedIDs
            let states = try await log.states(of: ids).mapValues { try UserState(decoding: $0) }
            var actions: [String] = []
            var outbox: [OutboxRow] = []
            var records: [(receivedAt: Int64, body: [UInt8])] = []
            for id in ids {
                actions += try await log.actions(of: id, after: 0, limit: Int.max).map(\.json)
                outbox += try await log.outbox(of: id).map(OutboxRow.init)
                records += try await log.entries(of: id)
            }
            return StoredJSON(
                text: try Privacy.export(
                    person, state: states[person], merged: mergedIDs.map { (id: $0, state: states[$0]) }, actions: actions,
                    outbox: outbox, records: { each in for r in records { try each(r.receivedAt, r.body) } },
                    at: Processor.nowMs()))
        } catch {
            throw failed
        }
    }

    package func storedStates(after: String?, limit: Int) async throws -> [(userID: String, bytes: [UInt8])] {
        try await log.states(after: after, limit: limit)
    }

    /// A user's inbox as last written by the partition's owner (`nil`: no such user).
    package func inbox(of user: String) async throws -> [InboxItem]? {
        let bytes: [UInt8]?
        do { bytes = try await log.states(of: [user])[user] } catch {
            throw APIError.unavailable("the inbox cannot be read now; ask again")
        }
        do {
            return try bytes.map { try UserState(decoding: $0).inbox }
        } catch {
            throw APIError.unavailable("the user's state cannot be read; ask again")
        }
    }

    /// Appends the registration to the user's partition (answered once it is in the log, as events are).
    package func registerDevice(_ user: String, _ device: Device) async throws {
        var d = device
        d.firstSeen = Processor.nowMs()
        d.lastSeen = d.firstSeen
        var record = InputLog()
        record.device(userID: user, d)
        try await appendInput(user, record, "the device could not be stored; send it again")
    }

    package func removeDevice(_ user: String, token: String) async throws {
        do { try await FleetDevices(log: log, appender: appender).removing(token: token, of: user) } catch {
            throw APIError.unavailable("the change could not be stored; send it again")
        }
    }

    private func appendInput(_ user: String, _ record: InputLog, _ failure: String) async throws {
        do {
            _ = try await appender.submit([(user, record.bytes, Processor.nowMs())])
        } catch {
            throw APIError.unavailable(failure)
        }
    }

    /// Appends the read to the user's partition and answers once its owner has processed it (or after 10 s, with
    /// the inbox as it then stands).
    package func markRead(_ user: String, item: String) async throws -> Bool? {
        guard let items = try await inbox(of: user) else { return nil }
        guard items.contains(where: { $0.id == item }) else { return false }
        var record = InputLog()
        let now = Processor.nowMs()
        record.markRead(userID: user, itemID: item, time: now)
        let entry: FleetLog.Entry
        do {
            guard let e = try await appender.submit([(user, record.bytes, now)]).first else { throw APIError.unexpected }
            entry = e
        } catch {
            throw APIError.unavailable("the change could not be stored; send it again")
        }
        _ = await waitProcessed(entry.partition, entry.seq)
        return true
    }

    /// A fleet-wide reload (docs/fleet.md, "Reloads"): the files of this process stored as a new version, which
    /// every partition switches to at an entry of its log.
    package func reload(by who: String) async throws -> Reloaded { try Reloader.answer(await reloader.reload(by: who)) }

    package func notReady() -> String? { worker.notReady() }
    package func metricsText() -> String { fleetMetrics.text(log) }
}

/// Retention in a fleet (``Retention``): every process deletes, every minute, the entries every partition has processed
/// that are older than the period (in short statements of at most 10,000 rows; deleting what another process deleted
/// already is nothing).
struct FleetRetention: Service {
    let log: FleetLog
    let retention: Retention
    let faults: FaultLog
    static let limit = 10_000

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                var total = (inputs: 0, delivered: 0)
                while !Task.isShuttingDownGracefully {
                    let n = try await log.deleteOlder(than: retention.cutoff(at: Processor.nowMs()), limit: Self.limit)
                    total = (total.inputs + n.entries, total.delivered + n.delivered)
                    if n.entries < Self.limit && n.delivered < Self.limit { break }
                }
                retention.deleted(total)
                faults.ok("retention")
            } catch {
                faults.failed("retention", error)
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Retention.every) }
        }
    }
}
