import ArgumentParser
import BeckonCore
import BeckonFleet
import BeckonServer
import BeckonStore
import Foundation
import Logging

/// `beckon serve PATH...`: the rules live over HTTP (docs/service.md).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the rules live: Segment-compatible ingest, durable state in SQLite, pull delivery.")

    @Argument(help: "Rule set folders or files.")
    var paths: [String]

    @Option(help: "The SQLite database file (created on first start).")
    var db = "beckon.sqlite"

    @Option(help: "The address to listen on (loopback by default).")
    var host = "127.0.0.1"

    @Option(help: "The port (0: any free one; the one chosen is printed).")
    var port = 8080

    @Option(help: "A write key for ingest (repeatable; also BECKON_WRITE_KEYS, comma-separated, or --write-keys-file).")
    var writeKey: [String] = []

    @Option(help: "A file of write keys, one a line.")
    var writeKeysFile: String?

    @Option(help: "A key of the admin endpoints (repeatable; also BECKON_ADMIN_KEYS, comma-separated).")
    var adminKey: [String] = []

    @Option(help: "The HS256 secret of users' tokens (also BECKON_USER_SECRET).")
    var userSecret: String?

    @Option(help: "wall: delayed actions come due on the machine's clock; events: the events' times only (replays).")
    var clock: ClockMode = .wall

    @Option(help: "Days to keep stored events (the input log); default: for ever.")
    var retentionDays: Int?

    @Flag(help: "Reload the rules when a file under PATH changes (as POST /admin/reload).")
    var watch = false

    @Option(help: "Seconds a client has to send a request's head (from connecting, or from its first byte).")
    var headTimeout = ServiceLimits.headTimeoutSeconds

    @Option(help: "Seconds a client has to send a request's body once its head is in.")
    var bodyTimeout = ServiceLimits.bodyTimeoutSeconds

    @Option(help: "Seconds a kept-alive connection may wait for another request (above a load balancer's 60).")
    var keepAliveTimeout = ServiceLimits.keepAliveTimeoutSeconds

    @Option(help: "The most client connections at once (default: the descriptor limit less 256).")
    var maxConnections: Int?

    @Option(help: "MiB of request bodies all connections may hold at once (past it: 503, the connection closed).")
    var maxBodyMemory = ServiceLimits.bodyMemoryBytes >> 20

    @Option(help: "Run as one process of a fleet sharing this PostgreSQL database (docs/fleet.md) instead of --db.")
    var postgres: String?

    @Option(help: "With --postgres: seconds a partition's lease lasts without renewal (a dead process's wait).")
    var leaseSeconds = 10.0

    @Option(help: "With --postgres: this process's name in the leases (default HOST:PID).")
    var owner: String?

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        if let d = retentionDays, d < 0 { throw fail("--retention-days must be 0 or more") }
        var options = BeckonService.Options(paths: paths)
        options.database = db
        options.host = host
        options.port = port
        options.clock = clock
        options.retentionDays = retentionDays
        options.watch = watch
        options.connections = try connectionLimits()
        options.writeKeys = writeKey
        if let keys = env["BECKON_WRITE_KEYS"] {
            options.writeKeys += keys.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        if let file = writeKeysFile {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw fail("cannot read write keys file '\(file)'")
            }
            options.writeKeys += text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        }
        options.writeKeys = options.writeKeys.filter { !$0.isEmpty }
        options.adminKeys = adminKey
        if let keys = env["BECKON_ADMIN_KEYS"] {
            options.adminKeys += keys.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        options.adminKeys = options.adminKeys.filter { !$0.isEmpty }
        options.userSecret = userSecret ?? env["BECKON_USER_SECRET"]
        var logger = Logger(label: "beckon")
        logger.logLevel = env["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        if let postgres { return try await serveFleet(options, postgres: postgres, logger: logger) }
        let service = try await Self.starting(
            { try await BeckonService(options, logger: logger) }, warnings: \.warnings,
            oneLine: { $0 is DatabaseLock.Held || $0 is DatabaseLock.CannotOpen })
        let db = options.database
        let console =
            options.adminKeys.isEmpty ? "no admin key: the console at /console cannot be signed in to" : "console at /console"
        try await service.run { address in
            FileHandle.standardOutput.write(Data("beckon serve: listening on \(address) (database \(db); \(console))\n".utf8))
        }
    }

    /// The connection bounds the options give (each time between 0.1 s and an hour; a cap of at least 1).
    private func connectionLimits() throws -> ConnectionLimits {
        var limits = ConnectionLimits()
        for (name, seconds) in [
            ("--head-timeout", headTimeout), ("--body-timeout", bodyTimeout), ("--keep-alive-timeout", keepAliveTimeout),
        ] {
            guard seconds.isFinite, seconds >= 0.1, seconds <= 3600 else {
                throw fail("\(name) must be between 0.1 and 3600 seconds")
            }
        }
        limits.headTimeout = .milliseconds(Int64(headTimeout * 1000))
        limits.bodyTimeout = .milliseconds(Int64(bodyTimeout * 1000))
        limits.keepAliveTimeout = .milliseconds(Int64(keepAliveTimeout * 1000))
        if let m = maxConnections {
            guard m >= 1 else { throw fail("--max-connections must be 1 or more") }
            limits.maxConnections = m
        }
        guard maxBodyMemory >= 1, maxBodyMemory <= 1 << 20 else { throw fail("--max-body-memory must be 1 to 1048576 MiB") }
        limits.maxBodyBytes = maxBodyMemory << 20
        return limits
    }

    /// A service made by `make`, its rules' warnings printed; errors in the rules are printed as `beckon validate`
    /// prints them (exit 1), and errors `oneLine` accepts as one line (other errors are thrown as they are).
    private static func starting<S>(
        _ make: () async throws -> S, warnings: (S) -> String, oneLine: (any Error) -> Bool
    ) async throws -> S {
        let service: S
        do {
            service = try await make()
        } catch let e as BeckonService.ServiceError {
            FileHandle.standardError.write(Data(e.description.utf8))
            if !e.description.hasSuffix("\n") { FileHandle.standardError.write(Data("\n".utf8)) }
            throw ExitCode(1)
        } catch  where oneLine(error) {
            throw fail("\(error)")
        }
        if !warnings(service).isEmpty { FileHandle.standardError.write(Data(warnings(service).utf8)) }
        return service
    }

    /// One process of a fleet: the options a fleet has in common with a single service, the database PostgreSQL.
    private func serveFleet(_ single: BeckonService.Options, postgres: String, logger: Logger) async throws {
        guard leaseSeconds >= 1, leaseSeconds <= 600 else { throw fail("--lease-seconds must be between 1 and 600") }
        var options = FleetService.Options(single.common, postgres: postgres)
        options.leaseTime = .milliseconds(Int64(leaseSeconds * 1000))
        options.owner = owner
        let service = try await Self.starting(
            { try await FleetService(options, logger: logger) }, warnings: \.warnings, oneLine: { _ in true })
        let owner = service.owner
        try await service.run { address in
            FileHandle.standardOutput.write(Data("beckon serve: listening on \(address) (fleet process \(owner))\n".utf8))
        }
    }
}

extension ClockMode: ExpressibleByArgument {}
