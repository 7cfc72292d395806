import BeckonCore
import BeckonStore
import BeckonYAML
import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

/// `beckon serve` as a library type: rule sets loaded and validated, the database opened, the processing thread and
/// the HTTP server, run until SIGTERM or SIGINT, which drain in-flight requests, commit and close.
///
/// ```swift
/// let service = try await BeckonService(options)   // throws ServiceError.rules with the diagnostics
/// try await service.run()
/// ```
public final class BeckonService: Sendable {
    /// What a single service is started with: the options every service has (``ServiceOptions``, read and set as its
    /// own), and its SQLite file.
    public struct Options: StoreOptions {
        public var common: ServiceOptions
        /// The SQLite file (created on first start).
        public var database: String = "beckon.sqlite"
        public init(paths: [String]) { common = ServiceOptions(paths: paths) }
        public init(_ common: ServiceOptions, database: String) {
            self.common = common
            self.database = database
        }
    }

    public enum ServiceError: Error, CustomStringConvertible {
        /// The rules have errors: the diagnostics as `beckon validate` prints them.
        case rules(String)
        case noWriteKey
        case shortUserSecret
        case adminKeyIsWriteKey
        /// A write key with `:` could never be sent as HTTP Basic's user name.
        case colonInWriteKey
        public var description: String {
            switch self {
            case .colonInWriteKey:
                "a write key must not contain ':' (it is sent as HTTP Basic's user name, which ends at the first ':')"
            case .adminKeyIsWriteKey: "an admin key must not also be a write key"
            case .shortUserSecret: "the user secret must be at least 32 bytes (HS256 keys are as long as the hash)"
            case .rules(let text): text
            case .noWriteKey: "no write key: pass --write-key KEY, or set BECKON_WRITE_KEYS (comma-separated)"
            }
        }

        /// The write and admin key rings of a service (single or fleet), or the error that refuses its keys.
        package static func keyRings(
            write: [String], admin: [String], userSecret: String?
        ) throws -> (write: KeyRing, admin: KeyRing) {
            guard !write.isEmpty else { throw ServiceError.noWriteKey }
            guard !write.contains(where: { $0.contains(":") }) else { throw ServiceError.colonInWriteKey }
            if let s = userSecret, s.utf8.count < 32 { throw ServiceError.shortUserSecret }
            let writeKeys = KeyRing(keys: write)
            guard !admin.contains(where: writeKeys.contains) else { throw ServiceError.adminKeyIsWriteKey }
            return (writeKeys, KeyRing(keys: admin))
        }
    }

    let options: Options
    let processor: Processor
    let api: API
    let single: SingleBackend
    let current: CurrentRules
    let lock: DatabaseLock
    let logger: Logger
    public let metrics: ServiceMetrics
    public let backend: SQLiteStateBackend
    /// Warnings of the loaded rules, as `beckon validate` prints them (empty when there are none).
    public let warnings: String

    public static let version = BeckonRelease.version

    public init(_ options: Options, logger: Logger = Logger(label: "beckon")) async throws {
        let loaded = RuleLoader.load(paths: options.paths)
        guard loaded.ruleSet != nil, loaded.errorCount == 0 else {
            throw ServiceError.rules(loaded.rendered() + "\(loaded.errorCount) error(s) in the rules; not started\n")
        }
        let (writeKeys, adminKeys) = try ServiceError.keyRings(
            write: options.writeKeys, admin: options.adminKeys, userSecret: options.userSecret)
        warnings = loaded.warningCount > 0 ? loaded.rendered() : ""
        self.options = options
        self.logger = logger
        metrics = ServiceMetrics(version: Self.version)
        lock = try DatabaseLock(database: options.database)
        let backend = try SQLiteStateBackend(path: options.database, service: true)
        self.backend = backend
        let now = Processor.nowMs()
        let serving = try ServingRules.make(loaded, environment: ProcessInfo.processInfo.environment, at: now) {
            digest, files in try backend.ruleVersion(digest: digest, files: files, at: now)
        }
        serving.warnPaused(logger)
        current = CurrentRules(serving)
        let feed = ActionFeed()
        processor = try Processor(
            current: current, backend: backend, clock: options.clock, metrics: metrics, feed: feed, logger: logger)
        var userAuth: UserAuth?
        if let s = options.userSecret { userAuth = await UserAuth(secret: s) }
        let deliverer = Deliverer(
            backend: backend, devices: SingleBackend.Devices(processor: processor, database: backend), current: current,
            metrics: metrics, activity: processor.activity, logger: logger)
        let reloader = Reloader(
            paths: options.paths, store: SingleRuleStore(backend: backend, processor: processor), current: current,
            metrics: metrics, logger: logger)
        single = SingleBackend(
            processor: processor, database: backend, current: current, reloader: reloader, deliverer: deliverer,
            feed: feed, clock: options.clock, metrics: metrics,
            console: WebConsole(
                store: SingleConsoleStore(processor: processor, backend: backend), current: current, reloader: reloader,
                adminKeys: adminKeys, clock: options.clock, logger: logger))
        api = API(backend: single, writeKeys: writeKeys, adminKeys: adminKeys, userAuth: userAuth, logger: logger)
    }

    /// The HTTP application (the service's processing thread must be started to answer ingest), its connections in
    /// `table`.
    func application(
        table: ConnectionTable, onRunning: @escaping @Sendable (String) async -> Void
    ) -> some ApplicationProtocol {
        let host = options.host
        return Application(
            router: api.router(),
            server: options.connections.server(table: table),
            configuration: options.connections.configuration(host: options.host, port: options.port),
            onServerRunning: { channel in await onRunning("http://\(host):\(channel.localAddress?.port ?? 0)") },
            logger: logger)
    }

    /// Serves until SIGTERM or SIGINT; `onRunning` gets the address it listens on.
    public func run(onRunning: @escaping @Sendable (String) async -> Void = { _ in }) async throws {
        processor.start()
        let connections = options.connections.table(logger: logger)
        let watcher: [ServiceGroupConfiguration.ServiceConfiguration] =
            options.watch ? [.init(service: WatchReloads(reloader: single.reloader))] : []
        let group = ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: ProcessorService(processor: processor)),
                    .init(
                        service: ScheduleReach(
                            processor: processor, backend: backend, current: current, metrics: metrics, logger: logger)),
                    .init(service: single.deliverer),
                    .init(
                        service: Maintenance(
                            backend: backend, current: current,
                            retention: options.retentionDays.map { Retention(days: $0, logger: logger) }, logger: logger)),
                    .init(service: HangupReloads(reloader: single.reloader)),
                    .init(service: metrics.memory),
                ] + watcher + [
                    .init(service: application(table: connections, onRunning: onRunning)),
                    .init(service: ConnectionDrain(table: connections)),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// The processing thread within the service group: it stops last (services stop in reverse order), after the
    /// HTTP server has answered what was in flight, committing what is queued.
    struct ProcessorService: Service {
        let processor: Processor
        func run() async throws {
            try? await gracefulShutdown()
            // (The stop waits on a condition: on the blocking pool, not on the cooperative one.)
            try? await Blocking.run { processor.stop() }
        }
    }
}

/// A store's service options: the common ones read and set as its own (`options.port`).
@dynamicMemberLookup
public protocol StoreOptions: Sendable {
    var common: ServiceOptions { get set }
}

extension StoreOptions {
    public subscript<T>(dynamicMember key: WritableKeyPath<ServiceOptions, T>) -> T {
        get { common[keyPath: key] }
        set { common[keyPath: key] = newValue }
    }
}

/// The options of every service, on either store (the single service's ``BeckonService/Options`` and a fleet
/// process's add their store's own): one definition, so that a fleet takes each option as a single service does.
public struct ServiceOptions: Sendable {
    /// Rule set folders or files, as `beckon validate`.
    public var paths: [String]
    public var host: String = "127.0.0.1"
    /// 0: any free port (the one chosen is printed).
    public var port: Int = 8080
    public var writeKeys: [String] = []
    /// Keys of the admin endpoints (`Authorization: Bearer KEY`); none: the admin endpoints answer 401.
    public var adminKeys: [String] = []
    /// The HS256 secret that signs users' tokens; without it the user endpoints answer 401.
    public var userSecret: String?
    public var clock: ClockMode = .wall
    /// Days the input log is kept (`nil`: for ever); what is deleted has been processed and checkpointed.
    public var retentionDays: Int?
    /// Reload when a rule file changes.
    public var watch = false
    /// Bounds of the clients' connections: time to send a head and a body, keep-alive, how many at once.
    public var connections = ConnectionLimits()
    public init(paths: [String]) { self.paths = paths }
}
