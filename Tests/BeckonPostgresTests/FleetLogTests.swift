import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import BeckonPostgres

/// Against a real PostgreSQL: scripts/test.sh starts a throw-away cluster (scripts/postgres.sh) and sets
/// BECKON_TEST_POSTGRES; each test makes a database of its own in it.
let postgresURL = ProcessInfo.processInfo.environment["BECKON_TEST_POSTGRES"]

func withFleet<T: Sendable>(_ body: @escaping @Sendable (FleetLog) async throws -> T) async throws -> T {
    let base = try #require(postgresURL)
    let logger = Logger(label: "beckon-test")
    let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    let admin = try FleetLog(url: base, logger: logger)
    let root = String(base[..<base.range(of: "/", options: .backwards)!.lowerBound])
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await admin.run() }
        try await admin.client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        let log = try FleetLog(url: root + "/" + name, logger: logger)
        group.addTask { await log.run() }
        defer { group.cancelAll() }
        try await log.migrate()
        return try await body(log)
    }
}

/// Lets a lease lapse now, as it does for a holder stopped past it: renewed for 1 ms, then 50 ms go by. (Not a short
/// lease and a sleep past it: on 2 cores, under the whole suite at once, the steps before the lapse once took longer
/// than a lease of 400 ms, and the holder's own write was refused.)
func lapse(_ lease: FleetLog.Lease, in log: FleetLog) async throws {
    #expect(try await log.renew(lease, ttl: .milliseconds(1)))
    try await Task.sleep(for: .milliseconds(50))
}

@Suite(.enabled(if: postgresURL != nil, "needs BECKON_TEST_POSTGRES (scripts/test.sh starts one)"))
struct FleetLogTests {
    @Test func migrationsRunOnceAndSetUpEveryPartition() async throws {
        try await withFleet { log in
            try await log.migrate()
            try await log.migrate()
            var n = 0
            for try await c in try await log.client.query("SELECT count(*) FROM beckon_lease").decode(Int.self) { n = c }
            #expect(n == FleetLog.partitionCount)
            // The storage the WAL figures in docs/fleet.md were measured with.
            var options: [String: String] = [:]
            for try await (t, o) in try await log.client.query(
                """
                SELECT relname, array_to_string(reloptions, ',') FROM pg_class
                WHERE relname IN ('beckon_log', 'beckon_user_state')
                """
            ).decode((String, String).self) {
                options[t] = o
            }
            #expect(options == ["beckon_log": "toast_tuple_target=8160", "beckon_user_state": "fillfactor=70"])
        }
    }

    /// A database a later version migrated (its log may hold what this one would misread), or one set up with
    /// another partition count, is refused and named (a process retries other failures to set up, not these).
    @Test(arguments: [
        ("INSERT INTO beckon_migrations VALUES ('10: later', now())", "set up by a later Beckon (migrations 10: later)"),
        ("UPDATE beckon_settings SET partitions = 32", "set up with 32 partitions"),
    ])
    func aWrongDatabaseIsRefused(change: String, says: String) async throws {
        try await withFleet { log in
            try await log.client.query(PostgresQuery(unsafeSQL: change))
            do {
                try await log.migrate()
                Issue.record("migrated after: \(change)")
            } catch let e as any FleetLog.WrongDatabase {
                #expect(e.description.contains(says))
            }
        }
    }

    enum Probe: StatementName { static let name = "beckon_test_probe" }

    /// A prepared statement is parsed once a connection, under its name and with its text, and run again with new
    /// values; a query of another text under the same name is refused rather than run as the first.
    @Test func aPreparedStatementIsParsedOnceAConnection() async throws {
        try await withFleet { log in
            let (sums, prepared) = try await log.transaction { c in
                var sums: [Int64] = []
                for n in Int64(1)...7 {
                    for try await row in try await c.execute(try Prepared<Probe>("SELECT \(n)::bigint + 1"), logger: log.logger) {
                        sums.append(try row.decode(Int64.self))
                    }
                }
                var prepared: [(String, Int64)] = []
                for try await p in try await c.query(
                    "SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements WHERE name = \(Probe.name)",
                    logger: log.logger
                ).decode((String, Int64).self) {
                    prepared.append(p)
                }
                return (sums, prepared)
            }
            #expect(sums == [2, 3, 4, 5, 6, 7, 8])
            #expect(prepared.map(\.0) == ["SELECT $1::bigint + 1"])
            #expect(prepared.map(\.1) == [7])
            #expect(throws: Prepared<Probe>.TextChanged.self) { try Prepared<Probe>("SELECT \(Int64(1))::bigint + 2") }
        }
    }

    enum Late: StatementName { static let name = "beckon_test_late" }

    /// A statement that could not be prepared (its table was not there yet) runs once it can, whichever connection
    /// runs it: the connections it failed on are closed, not kept with the failure.
    @Test func aStatementThatFailedToPrepareRunsOnceItCan() async throws {
        try await withFleet { log in
            let failed = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<16 {
                    group.addTask { (try? await log.prepared(Late.self, "SELECT count(*) FROM beckon_test_late")) == nil }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(failed == 16)
            try await log.client.query("CREATE TABLE beckon_test_late (n int)")
            for _ in 0..<32 {
                let rows = try await log.prepared(Late.self, "SELECT count(*) FROM beckon_test_late")
                #expect(try rows.map { try $0.decode(Int64.self) } == [0])
            }
        }
    }

    @Test func thePartitionOfAUserNeverChanges() {
        // (Pinned values: a change would reorder every stored user's events.)
        #expect(FleetLog.partition(of: "") == 37)  // (0xcbf29ce484222325, the FNV offset basis, mod 64)
        #expect((0..<1000).map { FleetLog.partition(of: "u\($0)") }.reduce(0, +) == 32_252)
        #expect(Set((0..<1000).map { FleetLog.partition(of: "u\($0)") }).count == 64)
    }

    /// Eight appenders at once into one partition while a reader follows its offset: the reader sees every entry,
    /// in sequence order, with no gap at any read (a late commit never lands under its offset).
    @Test func appendsBecomeVisibleInSequenceOrder() async throws {
        try await withFleet { log in
            let users = (0..<10_000).map { "u\($0)" }.filter { FleetLog.partition(of: $0) == 5 }.prefix(8).map { $0 }
            let total = 8 * 40 * 5
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<8 {
                    group.addTask {
                        for b in 0..<40 {
                            let events = (0..<5).map { i in
                                (userID: users[(w + i) % users.count], body: Array("\(w)-\(b)-\(i)".utf8))
                            }
                            try await log.append(events, receivedAt: 1_000)
                        }
                    }
                }
                group.addTask {
                    var offset: Int64 = 0
                    var gaps = 0
                    while offset < Int64(total) {
                        let page = try await log.read(partition: 5, after: offset, limit: 97)
                        for (k, e) in page.enumerated() where e.seq != offset + Int64(k) + 1 { gaps += 1 }
                        offset = page.last?.seq ?? offset
                    }
                    #expect(gaps == 0)
                }
                try await group.waitForAll()
            }
            let all = try await log.read(partition: 5, after: 0, limit: 10_000)
            #expect(all.map(\.seq) == (1...Int64(total)).map { $0 })
        }
    }

    @Test func anAppendIsAllOrNothingAndKeepsOrderWithinAPartition() async throws {
        try await withFleet { log in
            let entries = try await log.append([("a", [1]), ("b", [2]), ("a", [3])], receivedAt: 7)
            #expect(entries.map(\.body) == [[1], [2], [3]])
            let pa = FleetLog.partition(of: "a")
            #expect(try await log.read(partition: pa, after: 0, limit: 10).filter { $0.userID == "a" }.map(\.body) == [[1], [3]])
        }
    }

    /// A lease expires and moves on; the old holder's writes are refused from then on and write nothing.
    @Test func aStaleHolderIsFencedOut() async throws {
        try await withFleet { log in
            func setProcessed(_ seq: Int64, _ lease: FleetLog.Lease) async throws {
                try await log.commit(FleetLog.PartitionCommit(processed: seq), lease: lease)
            }
            let a = try #require(try await log.acquire(partition: 3, owner: "a", ttl: .seconds(30)))
            #expect(try await log.acquire(partition: 3, owner: "b", ttl: .seconds(30)) == nil)
            #expect(try await log.renew(a, ttl: .seconds(30)))
            try await setProcessed(10, a)
            #expect(try await log.processed(partition: 3) == 10)
            try await lapse(a, in: log)  // a paused (SIGSTOPped) holder, past its lease
            let b = try #require(try await log.acquire(partition: 3, owner: "b", ttl: .seconds(30)))
            #expect(b.epoch == a.epoch + 1)
            #expect(try await log.renew(a, ttl: .seconds(30)) == false)
            await #expect(throws: FleetLog.Fenced.self) {
                try await setProcessed(99, a)
            }
            #expect(try await log.processed(partition: 3) == 10)
            try await setProcessed(11, b)
            #expect(try await log.processed(partition: 3) == 11)
            // What each process's poller reads: every partition's processed position, in partition order.
            let positions = try await log.positions()
            #expect(positions.processed.count == FleetLog.partitionCount)
            #expect(positions.processed[3] == 11)
            #expect(positions.appended == (try await log.appended()))
            // Released, it is free at once.
            try await log.release(b)
            #expect(try await log.acquire(partition: 3, owner: "a", ttl: .seconds(30))?.epoch == b.epoch + 1)
        }
    }

    @Test func statusShowsOwnersAndLag() async throws {
        try await withFleet { log in
            let users = (0..<1000).map { "u\($0)" }.filter { FleetLog.partition(of: $0) == 9 }
            try await log.append(users.prefix(3).map { (userID: $0, body: [1]) }, receivedAt: 1)
            let lease = try #require(try await log.acquire(partition: 9, owner: "host-a:1", ttl: .seconds(30)))
            try await log.commit(FleetLog.PartitionCommit(processed: 1), lease: lease)
            let status = try await log.status()
            #expect(status.count == FleetLog.partitionCount)
            let p = status[9]
            #expect((p.owner, p.epoch, p.appended, p.processed, p.lag) == ("host-a:1", 1, 3, 1, 2))
            #expect((25_000...30_000).contains(p.leaseLeftMs ?? 0))
            #expect(status[8].owner == nil && status[8].leaseLeftMs == nil && status[8].lag == 0)
        }
    }
}

/// The notices of new actions (docs/fleet.md, "Pulls"): what one process sends, every listener gets, in as many
/// notices as the payload limit needs.
@Suite(.enabled(if: postgresURL != nil, "needs BECKON_TEST_POSTGRES (scripts/test.sh starts one)"))
struct ActionNoticeTests {
    final class Heard: Sendable {
        let users = Mutex<[String]>([])
        let listening = Mutex(false)
    }

    @Test func everyListenerHearsWhoGotActions() async throws {
        try await withFleet { log in
            let heard = Heard()
            let listener = Task {
                await log.listenForActions(listening: { l in heard.listening.withLock { $0 = l } }) { users in
                    heard.users.withLock { $0 += users }
                }
            }
            defer { listener.cancel() }
            for _ in 0..<100 where !heard.listening.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(50)) }
            #expect(heard.listening.withLock { $0 })
            // 2,000 ids of 20 bytes: over the payload limit, so several notices.
            let many = (0..<2000).map { String(format: "user-%015d", $0) }
            try await log.noticeActions(for: ["ann", "bob"])
            try await log.noticeActions(for: many)
            for _ in 0..<100 where heard.users.withLock({ $0.count }) < 2002 {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(heard.users.withLock { Set($0) } == Set(["ann", "bob"] + many))
        }
    }
}
