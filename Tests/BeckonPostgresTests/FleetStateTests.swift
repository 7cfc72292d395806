import Foundation
import Logging
import PostgresNIO
import Testing

@testable import BeckonPostgres

/// What a partition's owner writes per batch (``FleetLog/commit(_:lease:)``), against a real PostgreSQL.
@Suite(.enabled(if: postgresURL != nil, "needs BECKON_TEST_POSTGRES (scripts/test.sh starts one)"))
struct FleetStateTests {
    static func batch(
        processed: Int64, actions: [String], user: String = "ana", state: [UInt8] = [1, 2]
    )
        -> FleetLog
        .PartitionCommit
    {
        var c = FleetLog.PartitionCommit(processed: processed)
        c.states = [(user, state, 1_000, nil), ("bo", [9], nil, nil)]
        c.stream = [7, 7]
        c.actions = actions.map {
            FleetLog.FiredRow(
                actionID: $0, userID: user, json: "{\"id\":\"\($0)\"}",
                outbox: [(destination: "meta", body: Array($0.utf8), nextAt: 5, createdAt: 5)])
        }
        return c
    }

    static func count(_ log: FleetLog, _ sql: String) async throws -> Int64 {
        for try await n in try await log.client.query(PostgresQuery(unsafeSQL: sql), logger: log.logger).decode(
            Int64.self)
        {
            return n
        }
        return -1
    }

    @Test func aBatchIsWrittenWholeAndAnActionOnce() async throws {
        try await withFleet { log in
            let p = FleetLog.partition(of: "ana")
            let lease = try #require(try await log.acquire(partition: p, owner: "a", ttl: .seconds(30)))
            #expect(try await log.commit(Self.batch(processed: 4, actions: ["x1", "x2"]), lease: lease) == 2)
            #expect(try await log.processed(partition: p) == 4)
            #expect(try await log.states(of: ["ana", "bo", "cy"]) == ["ana": [1, 2], "bo": [9]])
            #expect(try await log.streamState(partition: p) == [7, 7])
            #expect(try await log.pendingStates(partition: p).map(\.userID) == ["ana"])
            #expect(try await log.actions(of: "ana", after: 0, limit: 10).map(\.json) == [#"{"id":"x1"}"#, #"{"id":"x2"}"#])
            // A batch processed again (a new owner after a crash before the old one's commit was known) fires the same
            // action ids: stored once, sent once.
            #expect(try await log.commit(Self.batch(processed: 6, actions: ["x2", "x3"], state: [3]), lease: lease) == 1)
            #expect(try await Self.count(log, "SELECT count(*) FROM beckon_action") == 3)
            #expect(try await Self.count(log, "SELECT count(*) FROM beckon_outbox") == 3)
            #expect(try await log.states(of: ["ana"]) == ["ana": [3]])
            let cursor = try await log.actions(of: "ana", after: 0, limit: 1)[0].seq
            #expect(try await log.actions(of: "ana", after: cursor, limit: 10).map(\.json) == [#"{"id":"x2"}"#, #"{"id":"x3"}"#])
        }
    }

    /// Outbox claims and outcomes are on the database's clock, and an outcome counts only under the claim it was
    /// made in: a process paused past its claim, whose entry another process took since, writes nothing over it
    /// (found by an attack: the paused one's 503 made the entry due at once, a third attempt in the second's).
    @Test func anOutcomeIsRecordedOnlyUnderItsClaim() async throws {
        try await withFleet { log in
            let p = FleetLog.partition(of: "ana")
            let lease = try #require(try await log.acquire(partition: p, owner: "a", ttl: .seconds(30)))
            _ = try await log.commit(Self.batch(processed: 1, actions: ["c1"]), lease: lease)
            // (Due at 5 ms since 1970: due now by any clock.)
            let first = try await log.claimDueOutbox(destinations: ["meta"], limit: 10, claimMs: 60_000)
            #expect(first.map(\.actionID) == ["c1"])
            #expect(try await log.claimDueOutbox(destinations: ["meta"], limit: 10, claimMs: 60_000).isEmpty, "taken twice")
            // The first claim lapses (its process was paused past it; set here, not waited for): another takes the entry.
            _ = try await Self.count(log, "UPDATE beckon_outbox SET next_at = 5 RETURNING 0::bigint")
            let second = try await log.claimDueOutbox(destinations: ["meta"], limit: 10, claimMs: 120_000)
            #expect(second.map(\.id) == first.map(\.id))
            #expect(second[0].claimedUntil > first[0].claimedUntil)
            // The first process's late outcome is refused; the second's is recorded, due again a minute from the
            // database's now.
            let stale = try await log.recordOutbox([(first[0].id, 0, 0, "503 from the paused one", first[0].claimedUntil)])
            #expect(stale.isEmpty)
            let fresh = try await log.recordOutbox([(second[0].id, 0, 60_000, "503", second[0].claimedUntil)])
            #expect(fresh == [second[0].id])
            #expect(try await Self.count(log, "SELECT attempts FROM beckon_outbox") == 1)
            #expect(
                try await Self.count(
                    log,
                    "SELECT next_at - (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM beckon_outbox") > 30_000)
            #expect(try await log.claimDueOutbox(destinations: ["meta"], limit: 10, claimMs: 60_000).isEmpty)
        }
    }

    /// The pending entries the database counts per destination (migration 10) follow every way an entry comes and
    /// goes: a commit, a claim, an outcome, a retry, a drop, a forget; and the rows of a connection that is gone are
    /// folded into one without changing the sum.
    @Test func thePendingCountFollowsEveryWayAnEntryComesAndGoes() async throws {
        try await withFleet { log in
            func counted() async throws -> [String: Int] {
                var out: [String: Int] = [:]
                for try await (d, n) in try await log.client.query(
                    "SELECT destination, count(*)::bigint FROM beckon_outbox WHERE state = 0 GROUP BY destination",
                    logger: log.logger
                ).decode((String, Int).self) {
                    out[d] = n
                }
                return out
            }
            var steps: [[String: Int]] = []
            func check() async throws {
                let kept = try await log.pendingOutboxCounts()
                #expect(kept == (try await counted()))
                steps.append(kept)
            }
            let ana = try #require(try await log.acquire(partition: FleetLog.partition(of: "ana"), owner: "a", ttl: .seconds(30)))
            let cy = try #require(try await log.acquire(partition: FleetLog.partition(of: "cy"), owner: "a", ttl: .seconds(30)))
            var b = Self.batch(processed: 3, actions: ["a1", "a2", "a3"])
            b.actions[0].outbox.append((destination: "mail", body: [1], nextAt: 5, createdAt: 5))
            _ = try await log.commit(b, lease: ana)
            _ = try await log.commit(Self.batch(processed: 1, actions: ["c1"], user: "cy"), lease: cy)
            try await check()
            let claimed = try await log.claimDueOutbox(destinations: ["meta", "mail"], limit: 10, claimMs: 60_000)
            #expect(claimed.count == 5)
            try await check()  // (a claim moves the due time only)
            func entry(_ action: String, _ destination: String) throws -> FleetLog.OutboxClaim {
                try #require(claimed.first { $0.actionID == action && $0.destination == destination })
            }
            let delivered = try entry("a1", "meta")
            let dead = try entry("a2", "meta")
            let again = try entry("a1", "mail")
            _ = try await log.recordOutbox([
                (delivered.id, 1, 0, nil, delivered.claimedUntil), (dead.id, 2, 0, "400", dead.claimedUntil),
                (again.id, 0, 60_000, "503", again.claimedUntil),
            ])
            try await check()
            #expect(try await log.retryOutbox(actionIDs: ["a2"], now: 9) == 1)
            try await check()
            #expect(try await log.dropOutbox(actionIDs: ["a3"]) == 1)
            try await check()
            try await log.forget("cy", lease: cy, through: 1)
            try await check()
            #expect(
                steps == [
                    ["meta": 4, "mail": 1], ["meta": 4, "mail": 1], ["meta": 2, "mail": 1], ["meta": 3, "mail": 1],
                    ["meta": 2, "mail": 1], ["meta": 1, "mail": 1],
                ])
            // A connection that is gone (no backend has this pid) left its rows: folded into shard 0 when read.
            _ = try await Self.count(
                log, "INSERT INTO beckon_outbox_pending VALUES ('meta', -7, 5), ('meta', -8, -5) RETURNING 0::bigint")
            #expect(try await log.pendingOutboxCounts() == ["meta": 1, "mail": 1])
            #expect(try await Self.count(log, "SELECT count(*) FROM beckon_outbox_pending WHERE shard < 0") == 0)
        }
    }

    /// An action's entry for a destination is single however often the action comes in one commit (the outbox has no
    /// unique index since migration 11: the commit keeps the first of each destination and action, in the order they
    /// fired), and none is added for an action stored before.
    @Test func anActionGetsOneEntryADestinationHoweverOftenItIsFired() async throws {
        try await withFleet { log in
            let lease = try #require(
                try await log.acquire(partition: FleetLog.partition(of: "ana"), owner: "a", ttl: .seconds(30)))
            var b = Self.batch(processed: 3, actions: ["a1", "a2", "a1"])
            b.actions[0].outbox.append((destination: "mail", body: [1], nextAt: 5, createdAt: 5))
            b.actions[2].outbox = [(destination: "meta", body: [2], nextAt: 5, createdAt: 5)]
            _ = try await log.commit(b, lease: lease)
            _ = try await log.commit(Self.batch(processed: 4, actions: ["a2", "a4"]), lease: lease)
            #expect(
                try await log.outbox(of: "ana").map { "\($0.destination)/\($0.actionID)/\($0.body)" } == [
                    "meta/a1/\(Array("a1".utf8))", "mail/a1/[1]", "meta/a2/\(Array("a2".utf8))", "meta/a4/\(Array("a4".utf8))",
                ])
        }
    }

    /// Entries from before migration 11 get their action's position from it, and a forget, an export, a retry and a
    /// drop find them by it.
    @Test func entriesFromBeforeTheirActionsPositionAreFoundByIt() async throws {
        try await withFleet { log in
            let ana = try #require(
                try await log.acquire(partition: FleetLog.partition(of: "ana"), owner: "a", ttl: .seconds(30)))
            _ = try await log.commit(Self.batch(processed: 3, actions: ["a1", "a2", "a3"]), lease: ana)
            // As an older Beckon left them: no position.
            #expect(
                try await Self.count(
                    log, "WITH u AS (UPDATE beckon_outbox SET action_seq = NULL RETURNING 1) SELECT count(*) FROM u") == 3)
            #expect(try await log.outbox(of: "ana").isEmpty)
            let backfill = try #require(FleetLog.migrations.first { $0.name.hasPrefix("11:") }?.sql[1])
            _ = try await log.client.query(PostgresQuery(unsafeSQL: backfill), logger: log.logger)
            #expect(try await log.outbox(of: "ana").map(\.actionID) == ["a1", "a2", "a3"])
            _ = try await Self.count(log, "WITH u AS (UPDATE beckon_outbox SET state = 2 RETURNING 1) SELECT count(*) FROM u")
            #expect(try await log.retryOutbox(actionIDs: ["a2"], now: 9) == 1)
            #expect(try await log.dropOutbox(actionIDs: ["a3"]) == 1)
            #expect(try await log.outbox(of: "ana").map { "\($0.actionID)/\($0.state)" } == ["a1/2", "a2/0"])
            try await log.forget("ana", lease: ana, through: 3)
            #expect(try await Self.count(log, "SELECT count(*) FROM beckon_outbox") == 0)
        }
    }

    /// A stored user's state is written over whole (bytes, due time, merge pointer) and a new user's added, in one
    /// batch: the update for stored users and the insert for new ones (``FleetLog/commit(_:)``) split them rightly.
    @Test func storedStatesAreReplacedAndNewOnesAdded() async throws {
        try await withFleet { log in
            let p = FleetLog.partition(of: "ana")
            let lease = try #require(try await log.acquire(partition: p, owner: "a", ttl: .seconds(30)))
            try await log.commit(Self.batch(processed: 2, actions: []), lease: lease)
            #expect(try await log.pendingStates(partition: p).map(\.userID) == ["ana"])
            var next = FleetLog.PartitionCommit(processed: 3)
            next.states = [("ana", [5], nil, "zed"), ("dee", [6], 2_000, nil)]
            try await log.commit(next, lease: lease)
            #expect(try await log.states(of: ["ana", "bo", "dee"]) == ["ana": [5], "bo": [9], "dee": [6]])
            #expect(try await log.mergedIDs(into: "zed", hops: 16) == ["ana"])
            // Asked by the merged id, the person is the user it points to.
            #expect(try await log.person(of: "ana", hops: 16) == ("zed", ["ana"]))
            #expect(try await log.person(of: "zed", hops: 16) == ("zed", ["ana"]))
            let pending = try await log.pendingStates(partition: p).map(\.userID)
            #expect(!pending.contains("ana"))
            #expect(try await Self.count(log, "SELECT count(*) FROM beckon_user_state") == 3)
        }
    }

    /// A process stopped past its lease resumes and tries to write its batch: refused, and nothing of it is stored —
    /// not the states, the actions, the outbox entries nor the position.
    @Test func aStaleOwnersBatchIsRefusedWhole() async throws {
        try await withFleet { log in
            let p = FleetLog.partition(of: "ana")
            let old = try #require(try await log.acquire(partition: p, owner: "a", ttl: .seconds(30)))
            try await log.commit(Self.batch(processed: 2, actions: ["x1"]), lease: old)
            try await lapse(old, in: log)
            let new = try #require(try await log.acquire(partition: p, owner: "b", ttl: .seconds(30)))
            await #expect(throws: FleetLog.Fenced.self) {
                try await log.commit(Self.batch(processed: 9, actions: ["stale"], state: [6]), lease: old)
            }
            #expect(try await log.processed(partition: p) == 2)
            #expect(try await log.states(of: ["ana"]) == ["ana": [1, 2]])
            #expect(try await Self.count(log, "SELECT count(*) FROM beckon_action WHERE action_id = 'stale'") == 0)
            #expect(try await Self.count(log, "SELECT count(*) FROM beckon_outbox WHERE action_id = 'stale'") == 0)
            // The new owner writes.
            try await log.commit(Self.batch(processed: 3, actions: ["x4"]), lease: new)
            #expect(try await log.processed(partition: p) == 3)
        }
    }

    /// Batches of several partitions in one statement: the one whose lease moved writes nothing, the others write.
    @Test func aGroupOfBatchesFencesOnlyTheStaleOne() async throws {
        try await withFleet { log in
            let (pa, pc) = (FleetLog.partition(of: "ana"), FleetLog.partition(of: "cy"))
            try #require(pa != pc)
            let a = try #require(try await log.acquire(partition: pa, owner: "me", ttl: .seconds(30)))
            let c = try #require(try await log.acquire(partition: pc, owner: "me", ttl: .seconds(30)))
            try await lapse(a, in: log)
            _ = try #require(try await log.acquire(partition: pa, owner: "other", ttl: .seconds(30)))
            let result = try await log.commit([
                (a, Self.batch(processed: 5, actions: ["from-ana"])),
                (c, Self.batch(processed: 7, actions: ["from-cy"], user: "cy")),
            ])
            #expect(result[pa] == .some(nil))
            #expect(result[pc] == 1)
            #expect(try await log.processed(partition: pa) == 0)
            #expect(try await log.processed(partition: pc) == 7)
            #expect(try await log.states(of: ["ana", "cy"]).keys.sorted() == ["cy"])
            #expect(try await Self.count(log, "SELECT count(*) FROM beckon_action") == 1)
            #expect(try await Self.count(log, "SELECT count(*) FROM beckon_outbox WHERE action_id = 'from-cy'") == 1)
        }
    }

    @Test func entriesComeOutInEachPartitionsOrderInterleavedByTime() async throws {
        try await withFleet { log in
            try await log.append([("a", [1], 30), ("b", [2], 10), ("a", [3], 20), ("c", [4], 40)])
            var out: [[UInt8]] = []
            try await log.eachEntry { out.append($0.body) }
            #expect(out.count == 4)
            // Each partition's order is kept (a's 30 before a's 20); b (10) comes before both when a and b differ.
            #expect(out.firstIndex(of: [1])! < out.firstIndex(of: [3])!)
            #expect(out.last == [4])
        }
    }

    @Test func membersCountTheLiveProcesses() async throws {
        try await withFleet { log in
            #expect(try await log.heartbeat(owner: "a", rulesDigest: "d1", ttl: .seconds(30)) == (1, ["d1"]))
            let two = try await log.heartbeat(owner: "b", rulesDigest: "d2", ttl: .seconds(30))
            #expect(two.members == 2 && two.digests == ["d1", "d2"])
            try await log.leave(owner: "a")
            #expect(try await log.heartbeat(owner: "b", rulesDigest: "d2", ttl: .seconds(30)).members == 1)
        }
    }
}
