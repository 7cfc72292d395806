import Foundation
import Logging
import PostgresNIO
import Testing

@testable import BeckonPostgres

/// The log's rows of several entries (``LogPages``) against a real PostgreSQL: how many rows an append writes, a
/// read that starts within a page, and the entries a forget, a merge's sending on and retention take out of pages.
@Suite(.enabled(if: postgresURL != nil, "needs BECKON_TEST_POSTGRES (scripts/test.sh starts one)"))
struct LogPagesTests {
    /// `n` users of partition `p`.
    static func users(_ n: Int, of p: Int) -> [String] {
        Array((0..<100_000).lazy.map { "u\($0)" }.filter { FleetLog.partition(of: $0) == p }.prefix(n))
    }

    static func record(_ user: String, _ k: Int) -> [UInt8] { LogBodyTests.record(k) + Array(user.utf8) }

    static func rows(_ log: FleetLog, _ p: Int) async throws -> [(seq: Int64, last: Int64?)] {
        var out: [(seq: Int64, last: Int64?)] = []
        for try await (s, l) in try await log.client.query(
            "SELECT seq, last_seq FROM beckon_log WHERE partition = \(p) ORDER BY seq", logger: log.logger
        ).decode((Int64, Int64?).self) {
            out.append((s, l))
        }
        return out
    }

    @Test func aPartitionsEntriesOfOneAppendShareARowAndReadBackInOrder() async throws {
        try await withFleet { log in
            let (a, b) = (Self.users(3, of: 4), Self.users(1, of: 9))
            var events: [(userID: String, body: [UInt8], receivedAt: Int64)] = []
            for k in 0..<10 { events.append((a[k % 3], Self.record(a[k % 3], k), 100 + Int64(k))) }
            events.append((b[0], Self.record(b[0], 99), 50))
            let entries = try await log.append(events)
            #expect(entries.map(\.body) == events.map(\.body))
            // Partition 4's ten entries are one page, numbered 1–10; partition 9's one entry is a row of its own.
            #expect(try await Self.rows(log, 4).map { "\($0.seq)-\($0.last ?? 0)" } == ["1-10"])
            #expect(try await Self.rows(log, 9).map { "\($0.seq)-\($0.last ?? 0)" } == ["1-0"])
            let read = try await log.read(partition: 4, after: 0, limit: 100)
            #expect(read.map(\.seq) == Array(1...10))
            #expect(read.map(\.userID) == events.prefix(10).map(\.userID))
            #expect(read.map(\.receivedAt) == events.prefix(10).map(\.receivedAt))
            #expect(read.map(\.body) == events.prefix(10).map(\.body))
            // A read after an entry within the page, and one that stops within it.
            #expect(try await log.read(partition: 4, after: 6, limit: 100).map(\.seq) == [7, 8, 9, 10])
            #expect(try await log.read(partition: 4, after: 2, limit: 3).map(\.seq) == [3, 4, 5])
            #expect(try await log.read(partition: 4, after: 10, limit: 100).isEmpty)
            #expect(try await log.read(partition: 9, after: 0, limit: 100).map(\.body) == [events[10].body])
        }
    }

    /// More than a page holds takes several rows, numbered on from each other.
    @Test func aLongAppendTakesSeveralPages() async throws {
        try await withFleet { log in
            let u = Self.users(1, of: 2)[0]
            let n = LogPages.maxEntries * 2 + 5
            try await log.append((0..<n).map { (u, Self.record(u, $0), 7) })
            let rows = try await Self.rows(log, 2)
            #expect(rows.map(\.seq) == [1, 257, 513])
            #expect(rows.map(\.last) == [256, 512, 517])
            #expect(try await log.read(partition: 2, after: 0, limit: 10_000).map(\.seq) == Array(1...Int64(n)))
        }
    }

    @Test func aForgetTakesTheUsersEntriesOutOfPagesUpToItsOwn() async throws {
        try await withFleet { log in
            let (ana, bo) = (Self.users(2, of: 6)[0], Self.users(2, of: 6)[1])
            // Two pages: ana, bo, ana and then ana alone twice; and one more of ana's after the forget's position.
            try await log.append([(ana, [1], 1), (bo, [2], 1), (ana, [3], 1)])
            try await log.append([(ana, [4], 2), (ana, [5], 2)])
            try await log.append([(ana, [6], 3)])
            let lease = try #require(try await log.acquire(partition: 6, owner: "a", ttl: .seconds(30)))
            try await log.forget(ana, lease: lease, through: 5)
            // bo's entry keeps its number; ana's second page is gone; the entry after the forget's position stays.
            let left = try await log.read(partition: 6, after: 0, limit: 100)
            #expect(left.map(\.seq) == [2, 6])
            #expect(left.map(\.userID) == [bo, ana])
            #expect(try await Self.rows(log, 6).map(\.seq) == [1, 6])
            // Past the numbers taken out, to the next entry there is: from within the page, and from after it.
            #expect(try await log.read(partition: 6, after: 2, limit: 1).map(\.seq) == [6])
            #expect(try await log.read(partition: 6, after: 3, limit: 2).map(\.seq) == [6])
            #expect(try await log.entries(of: ana).map(\.body) == [[6]])
            #expect(try await log.entries(of: bo).map(\.body) == [[2]])
            #expect(try await log.processed(partition: 6) == 5)
            // The page's `users` is rewritten with it: a forget of bo finds it through them.
            try await log.forget(bo, lease: lease, through: 5)
            #expect(try await Self.rows(log, 6).map(\.seq) == [6])
        }
    }

    @Test func entriesSentOnAreTakenOutOfTheirPageAndTheRestKept() async throws {
        try await withFleet { log in
            let (ana, bo) = (Self.users(2, of: 3)[0], Self.users(2, of: 3)[1])
            let cy = Self.users(1, of: 8)[0]
            try await log.append([(ana, [1], 1), (bo, [2], 1), (ana, [3], 1), (bo, [4], 1)])
            let lease = try #require(try await log.acquire(partition: 3, owner: "a", ttl: .seconds(30)))
            // ana was merged into cy: ana's first entry is sent on (the batch ends at bo's, which is not).
            try await log.forward([(cy, [1], 1)], from: [1], lease: lease, through: 1)
            #expect(try await log.read(partition: 3, after: 0, limit: 10).map(\.seq) == [2, 3, 4])
            #expect(try await log.read(partition: 3, after: 1, limit: 10).map(\.body) == [[2], [3], [4]])
            #expect(try await log.read(partition: 8, after: 0, limit: 10).map(\.body) == [[1]])
            try await log.forward([(cy, [3], 1)], from: [3], lease: lease, through: 3)
            #expect(try await log.read(partition: 3, after: 0, limit: 10).map(\.seq) == [2, 4])
            #expect(try await log.entries(of: ana).isEmpty)
        }
    }

    /// A forget and a sending-on under a lease that has moved throw ``FleetLog/Fenced`` itself (the runner tells a
    /// lost lease apart by it; postgres-nio wraps what a transaction's body throws) and change nothing.
    @Test func aForgetAndASendingOnUnderAMovedLeaseAreFenced() async throws {
        try await withFleet { log in
            let u = Self.users(1, of: 6)[0]
            let cy = Self.users(1, of: 8)[0]
            try await log.append([(u, [1], 1), (u, [2], 1)])
            let old = try #require(try await log.acquire(partition: 6, owner: "a", ttl: .seconds(30)))
            try await lapse(old, in: log)
            _ = try #require(try await log.acquire(partition: 6, owner: "b", ttl: .seconds(30)))
            await #expect(throws: FleetLog.Fenced.self) { try await log.forget(u, lease: old, through: 2) }
            await #expect(throws: FleetLog.Fenced.self) {
                try await log.forward([(cy, [1], 1)], from: [1], lease: old, through: 1)
            }
            #expect(try await log.read(partition: 6, after: 0, limit: 10).map(\.seq) == [1, 2])
            #expect(try await log.read(partition: 8, after: 0, limit: 10).isEmpty)
            #expect(try await log.processed(partition: 6) == 0)
        }
    }

    /// Retention deletes a page once every entry of it is processed, and counts its entries.
    @Test func retentionDeletesAPageOnlyWhenItIsProcessedWhole() async throws {
        try await withFleet { log in
            let u = Self.users(1, of: 1)[0]
            try await log.append([(u, [1], 10), (u, [2], 10), (u, [3], 10)])
            let lease = try #require(try await log.acquire(partition: 1, owner: "a", ttl: .seconds(30)))
            _ = try await log.commit(FleetLog.PartitionCommit(processed: 2), lease: lease)
            #expect(try await log.deleteOlder(than: 1_000).entries == 0)
            _ = try await log.commit(FleetLog.PartitionCommit(processed: 3), lease: lease)
            #expect(try await log.deleteOlder(than: 1_000).entries == 3)
            #expect(try await Self.rows(log, 1).isEmpty)
        }
    }

    /// A page that does not read back is one entry, numbered as its last, holding the stored bytes: a reader stops
    /// at it and never skips into the page's middle.
    @Test func aDamagedPageIsOneEntryAtItsEnd() async throws {
        try await withFleet { log in
            let u = Self.users(1, of: 7)[0]
            try await log.append((0..<4).map { (u, Self.record(u, $0), 5) })
            try await log.client.query(
                "UPDATE beckon_log SET body = '\\x02ffffff7f00'::bytea WHERE partition = 7", logger: log.logger)
            let read = try await log.read(partition: 7, after: 0, limit: 10)
            #expect(read.map(\.seq) == [4])
            #expect(read.first?.body == [0x02, 0xFF, 0xFF, 0xFF, 0x7F, 0x00])
        }
    }
}
