import ArgumentParser
import BeckonCore
import BeckonFleet
import BeckonPostgres
import BeckonServer
import Foundation
import Logging

/// `beckon fleet status --postgres URL`: the partitions of a fleet's database, who holds each and how far behind
/// it is (docs/fleet.md).
struct Fleet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A fleet of Beckon processes on PostgreSQL.",
        subcommands: [Status.self, Migrate.self, Events.self, Actions.self])

    /// Runs `body` with a client of `url` (its pool running meanwhile); a bad URL or an unreachable or unset-up
    /// database is an error message, not a trace.
    static func with<T: Sendable>(
        _ url: String, needsSetUp: Bool, _ body: @escaping @Sendable (FleetLog) async throws -> T
    ) async throws -> T {
        var logger = Logger(label: "beckon")
        logger.logLevel = .error
        let log: FleetLog
        do {
            log = try FleetLog(url: url, logger: logger)
        } catch {
            throw fail("\(error)")
        }
        do {
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    await log.run()
                    return nil
                }
                group.addTask {
                    if needsSetUp, try await !log.isSetUp() {
                        throw ValidationError(
                            "the database is not a Beckon fleet's yet: processes set it up when they start, or run "
                                + "`beckon fleet migrate`")
                    }
                    return try await body(log)
                }
                defer { group.cancelAll() }
                while let result = try await group.next() {
                    if let value = result { return value }
                }
                throw CancellationError()
            }
        } catch let e as ValidationError {
            throw fail(e.message)
        } catch let e as ExitCode {
            throw e  // (said already: `fail`)
        } catch {
            throw fail("cannot use the database: \(String(reflecting: error))")
        }
    }

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set up or bring up to date the fleet's tables (processes also do it when they start).")

        @Option(help: "The fleet's database, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.")
        var postgres: String

        func run() async throws {
            try await Fleet.with(postgres, needsSetUp: false) { log in try await log.migrate() }
            print("the fleet's tables are up to date")
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Each partition's owner, lease and lag (events appended and not yet processed).")

        @Option(help: "The fleet's database, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.")
        var postgres: String

        @Flag(help: "One JSON object a line.")
        var json = false

        func run() async throws {
            let status = try await Fleet.with(postgres, needsSetUp: true) { log in try await log.status() }
            if json {
                for p in status {
                    var w = JSONWriter()
                    w.beginObject()
                    w.key("partition")
                    w.value(.int(Int64(p.partition)))
                    w.key("owner")
                    if let o = p.owner { w.string(o) } else { w.value(.null) }
                    w.key("epoch")
                    w.value(.int(p.epoch))
                    w.key("leaseLeftMs")
                    if let l = p.leaseLeftMs { w.value(.int(l)) } else { w.value(.null) }
                    for (k, v) in [
                        ("appended", p.appended), ("processed", p.processed), ("lag", p.lag), ("timersDue", p.timersDue),
                    ] {
                        w.key(k)
                        w.value(.int(v))
                    }
                    w.endObject()
                    print(w.output)
                }
                return
            }
            print("partition  owner                 epoch  lease left  appended  processed  lag       timers due")
            for p in status {
                let owner = (p.owner ?? "-").padding(toLength: 20, withPad: " ", startingAt: 0)
                let left = p.leaseLeftMs.map { $0 < 0 ? "expired" : "\($0) ms" } ?? "-"
                print(
                    String(p.partition).padding(toLength: 9, withPad: " ", startingAt: 0) + "  " + owner + "  "
                        + String(p.epoch).padding(toLength: 5, withPad: " ", startingAt: 0) + "  "
                        + left.padding(toLength: 10, withPad: " ", startingAt: 0) + "  "
                        + String(p.appended).padding(toLength: 8, withPad: " ", startingAt: 0) + "  "
                        + String(p.processed).padding(toLength: 9, withPad: " ", startingAt: 0) + "  "
                        + String(p.lag).padding(toLength: 8, withPad: " ", startingAt: 0) + "  " + String(p.timersDue))
            }
            let owners = Set(status.compactMap(\.owner))
            print(
                "\(status.count) partitions, \(status.count { $0.owner != nil }) held by \(owners.count) process(es), "
                    + "lag \(status.reduce(0) { $0 + $1.lag }) events, \(status.reduce(0) { $0 + $1.timersDue }) users' "
                    + "timers due")
        }
    }

    struct Events: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the events in the fleet's log as JSON lines: each partition in its order, by time received.",
            discussion: """
                Each line is an event as it was accepted (a batch sent twice is there twice, as the processes saw \
                it): `beckon dry-run --events` of this output gives the actions the fleet fired.
                """)

        @Option(help: "The fleet's database, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.")
        var postgres: String

        func run() async throws {
            try await Fleet.with(postgres, needsSetUp: true) { log in
                try await log.eachEntry { entry in
                    for json in try FleetService.events(inEntry: entry.body) { print(json) }
                }
            }
        }
    }

    struct Actions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every action the fleet fired, as JSON lines (as `beckon dry-run --format jsonl`).")

        @Option(help: "The fleet's database, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.")
        var postgres: String

        func run() async throws {
            try await Fleet.with(postgres, needsSetUp: true) { log in
                try await log.eachAction { json in print(json) }
            }
        }
    }
}
