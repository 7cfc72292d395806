import ArgumentParser
import BeckonCore
import BeckonFleet
import BeckonPostgres
import BeckonServer
import BeckonStore
import BeckonYAML
import Foundation

/// `beckon outbox --db FILE` or `--postgres URL`: the actions waiting for, or given up on by, the destinations
/// (docs/operations.md), of a single service or of a fleet.
struct Outbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the outbox's pending and dead actions; retry or drop them (also while a service runs).")

    @Option(help: "The service's SQLite database.")
    var db: String?

    @Option(help: "Or the fleet's database, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.")
    var postgres: String?

    @Flag(help: "Also list delivered actions.")
    var all = false

    @Flag(help: "One JSON object a line.")
    var json = false

    @Option(help: "Make this dead action pending again, its attempts counted from zero (repeatable).")
    var retry: [String] = []

    @Flag(help: "Make every dead action pending again.")
    var retryDead = false

    @Option(help: "Delete this undelivered action from the outbox (repeatable).")
    var drop: [String] = []

    @Flag(help: "Delete every dead action.")
    var dropDead = false

    /// What the command asks of the outbox, on either store.
    enum Request: Sendable {
        case retry([String]?), drop([String]?), list([OutboxRow.State])
    }
    enum Answer: Sendable {
        case count(Int), rows([OutboxRow])
    }

    func run() async throws {
        let now = Processor.nowMs()
        let request: Request =
            if !retry.isEmpty || retryDead {
                .retry(retryDead ? nil : retry)
            } else if !drop.isEmpty || dropDead {
                .drop(dropDead ? nil : drop)
            } else {
                .list(all ? [.pending, .dead, .delivered] : [.pending, .dead])
            }
        let answer: Answer
        switch (db, postgres) {
        case (let db?, nil):
            guard FileManager.default.fileExists(atPath: db) else { throw fail("no database at \(db)") }
            let backend = try SQLiteStateBackend(path: db)
            answer =
                switch request {
                case .retry(let ids): .count(try backend.retryOutbox(actionIDs: ids, now: now))
                case .drop(let ids): .count(try backend.dropOutbox(actionIDs: ids))
                case .list(let states): .rows(try backend.outbox(states: states))
                }
        case (nil, let url?):
            answer = try await Fleet.with(url, needsSetUp: true) { log in
                switch request {
                case .retry(let ids): .count(try await log.retryOutbox(actionIDs: ids, now: now))
                case .drop(let ids): .count(try await log.dropOutbox(actionIDs: ids))
                case .list(let states): .rows(try await log.outbox(states: states.map(\.rawValue)).map(OutboxRow.init))
                }
            }
        default:
            throw fail("give the service's database: --db FILE, or --postgres URL for a fleet")
        }
        let rows: [OutboxRow]
        switch (request, answer) {
        case (.retry, .count(let n)):
            print("\(n) action(s) pending again")
            return
        case (.drop, .count(let n)):
            print("\(n) action(s) dropped")
            return
        case (_, .rows(let r)): rows = r
        default: return
        }
        if json {
            for r in rows { print(r.json) }
            return
        }
        if rows.isEmpty {
            print("the outbox is empty")
            return
        }
        let header = ["action id", "destination", "state", "attempts", "next attempt", "last error"]
        let lines = rows.map { r in
            [
                r.entry.actionID, r.entry.destination, r.state.description, String(r.attempts),
                r.state == .pending ? Timestamp(milliseconds: r.nextAt).description : "-", r.lastError ?? "",
            ]
        }
        let widths = header.indices.map { i in ([header] + lines).map { $0[i].count }.max() ?? 0 }
        for line in [header] + lines {
            let padded = line.indices.map { i in line[i].padding(toLength: widths[i], withPad: " ", startingAt: 0) }
            let text = padded.joined(separator: "  ")
            print(String(text.reversed().drop(while: { $0 == " " }).reversed()))
        }
        let counts = Dictionary(grouping: rows, by: \.state).mapValues(\.count)
        print(
            "\(counts[.pending] ?? 0) pending, \(counts[.dead] ?? 0) dead" + (all ? ", \(counts[.delivered] ?? 0) delivered" : "")
        )
    }
}

/// `beckon user export|forget --db FILE USER`: privacy requests with the service stopped.
struct User: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export or forget everything held about a user (the service stopped; while it runs use the API).",
        subcommands: [Export.self, Forget.self])

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print everything held about a user as JSON.")
        @Option(help: "The service's SQLite database.") var db: String
        @Argument(help: "The user id.") var user: String
        func run() throws {
            print(try User.run { try DatabaseCommands.export(database: db, user: user) })
        }
    }

    struct Forget: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget a user: state, timers, inbox, stored actions, undelivered outbox entries, stored events.")
        @Option(help: "The service's SQLite database.") var db: String
        @Argument(help: "The user id.") var user: String
        func run() throws {
            let known = try User.run { try DatabaseCommands.forget(database: db, user: user) }
            print(known ? "forgot \(user)" : "nothing was held about \(user)")
        }
    }

    static func run<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let e as DatabaseLock.Held {
            throw fail("\(e); stop it, or use DELETE /v1/users/ID or GET /v1/users/ID/export")
        } catch let e as DatabaseLock.CannotOpen {
            throw fail("\(e)")
        } catch let e as DatabaseCommands.Failure {
            throw fail("\(e)")
        }
    }
}

/// `beckon audience --db FILE RULE`: how many stored users a rule's `audience` and `if` select now, as
/// `GET /admin/audience` answers, from the command line (docs/operations.md).
struct Audience: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Count the stored users a rule would reach now, firing nothing (also while a service runs).")

    @Option(help: "The service's SQLite database.")
    var db: String?

    @Option(help: "Or the fleet's database, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.")
    var postgres: String?

    @Option(
        name: .customLong("rules"),
        help: "Judge these rule files or folders instead of the rule set the database serves: what an edit would reach.")
    var rulePaths: [String] = []

    @Option(help: "Judge at this time (RFC 3339) instead of now.")
    var at: String?

    @Flag(help: "One JSON object, as GET /admin/audience answers.")
    var json = false

    @Argument(help: "The rule: CAMPAIGN/RULE, or its id alone when no other rule has it.")
    var rule: String

    func run() async throws {
        var now = Processor.nowMs()
        if let at {
            guard let t = Timestamp.parse(at) else { throw fail("--at expects an RFC 3339 time, found '\(at)'") }
            now = t.milliseconds
        }
        let counter: AudienceCounter
        switch (db, postgres) {
        case (let db?, nil):
            guard FileManager.default.fileExists(atPath: db) else { throw fail("no database at \(db)") }
            let backend = try SQLiteStateBackend(path: db)
            // The rule set served: the last checkpoint's (a service that has not checkpointed yet: the newest stored).
            counter = try await count(
                at: now,
                served: {
                    guard let v = try backend.checkpoint().rulesVersion ?? backend.latestRuleVersion() else { return nil }
                    return try backend.ruleFiles(version: v)
                }, pages: { try backend.states(after: $0, limit: $1) })
        case (nil, let url?):
            // The rule set served: the newest stored, which every partition switches to.
            let now = now
            counter = try await Fleet.with(url, needsSetUp: true) { log in
                try await count(
                    at: now, served: { try await log.rules(version: nil)?.files },
                    pages: { try await log.states(after: $0, limit: $1) })
            }
        default:
            throw fail("give the service's database: --db FILE, or --postgres URL for a fleet")
        }
        let when = Timestamp(milliseconds: now).description
        let size = counter.size
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let answer = AudienceAnswer(rule: counter.rule.qualifiedID, size, at: when)
            print(String(decoding: try encoder.encode(answer), as: UTF8.self))
            return
        }
        var line = "\(counter.rule.qualifiedID): \(size.users) of \(size.stored) stored users selected at \(when)"
        if size.undecodable > 0 { line += " (\(size.undecodable) saved states did not decode)" }
        print(line)
    }

    /// The rule's counter over every stored state, a page at a time, under `--rules` or the files the store serves.
    private func count(
        at now: Int64, served: () async throws -> [(path: String, text: String)]?,
        pages: (_ after: String?, _ limit: Int) async throws -> [(userID: String, bytes: [UInt8])]
    ) async throws -> AudienceCounter {
        let loaded: LoadResult
        if rulePaths.isEmpty {
            guard let files = try await served() else {
                throw fail("the database holds no rule set yet; name the rules with --rules PATH")
            }
            loaded = RuleLoader.load(texts: files)
        } else {
            loaded = RuleLoader.load(paths: rulePaths)
        }
        guard let ruleSet = loaded.ruleSet else {
            FileHandle.standardError.write(Data(loaded.rendered().utf8))
            throw fail("the rules do not load")
        }
        guard var counter = AudienceCounter(ruleSet: ruleSet, rule: rule, now: now) else {
            let hint = Suggest.nearest(rule, in: ruleSet.rules.map(\.qualifiedID)).map { "; did you mean '\($0)'?" } ?? ""
            throw fail("no rule '\(rule)' in the rules\(hint)")
        }
        var after: String?
        while true {
            let page = try await pages(after, AudienceCounter.pageSize)
            guard let last = page.last else { return counter }
            counter.add(page)
            after = last.userID
        }
    }
}
