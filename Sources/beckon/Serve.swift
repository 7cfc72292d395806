import ArgumentParser
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
        let service: BeckonService
        do {
            service = try await BeckonService(options, logger: logger)
        } catch let e as BeckonService.ServiceError {
            FileHandle.standardError.write(Data(e.description.utf8))
            if !e.description.hasSuffix("\n") { FileHandle.standardError.write(Data("\n".utf8)) }
            throw ExitCode(1)
        } catch let e as DatabaseLock.Held {
            throw fail("\(e)")
        } catch let e as DatabaseLock.CannotOpen {
            throw fail("\(e)")
        }
        if !service.warnings.isEmpty { FileHandle.standardError.write(Data(service.warnings.utf8)) }
        let db = options.database
        try await service.run { address in
            FileHandle.standardOutput.write(Data("beckon serve: listening on \(address) (database \(db))\n".utf8))
        }
    }
}

extension ClockMode: ExpressibleByArgument {}
