import Logging
import NIOCore
import PostgresNIO

/// What the processing of a partition reads and writes besides the log: users' states, the partition's stream
/// state, fired actions and their outbox entries, and the processes of the fleet (docs/fleet.md).
extension FleetLog {
    // MARK: Reading a partition's state

    /// The stored states of `users` (a user with none is absent from the answer).
    public func states(of users: [String]) async throws -> [String: [UInt8]] {
        try await timed("states", nil) { [self] in
            var out: [String: [UInt8]] = [:]
            guard !users.isEmpty else { return out }
            for row in try await prepared(
                Statements.States.self, "SELECT user_id, bytes FROM beckon_user_state WHERE user_id = ANY(\(users)::text[])")
            {
                let (u, b) = try row.decode((String, ByteBuffer).self)
                out[u] = Array(b.readableBytesView)
            }
            return out
        }
    }

    /// A page of stored states in user id order (every partition's, or `partition`'s): the first `limit` after
    /// `after`.
    public func states(after: String?, limit: Int, partition: Int? = nil) async throws -> [(userID: String, bytes: [UInt8])] {
        try await timed("statesPage", nil) { [self] in
            var out: [(userID: String, bytes: [UInt8])] = []
            let rows =
                if let partition {
                    try await client.query(
                        """
                        SELECT user_id, bytes FROM beckon_user_state WHERE partition = \(partition) AND user_id > \(after ?? "")
                        ORDER BY user_id LIMIT \(limit)
                        """, logger: logger)
                } else {
                    try await client.query(
                        """
                        SELECT user_id, bytes FROM beckon_user_state WHERE user_id > \(after ?? "") ORDER BY user_id
                        LIMIT \(limit)
                        """, logger: logger)
                }
            for try await (u, b) in rows.decode((String, ByteBuffer).self) { out.append((u, Array(b.readableBytesView))) }
            return out
        }
    }

    /// The users of `partition` whose states hold delayed actions: their soonest due time and their state.
    public func pendingStates(partition: Int) async throws -> [(userID: String, due: Int64, bytes: [UInt8])] {
        try await timed("pendingStates", nil) { [self] in
            var out: [(userID: String, due: Int64, bytes: [UInt8])] = []
            let rows = try await client.query(
                """
                SELECT user_id, next_due, bytes FROM beckon_user_state
                WHERE partition = \(partition) AND next_due IS NOT NULL ORDER BY user_id
                """, logger: logger)
            for try await (u, d, b) in rows.decode((String, Int64, ByteBuffer).self) {
                out.append((u, d, Array(b.readableBytesView)))
            }
            return out
        }
    }

    /// A partition's stream state (its clock and timer ids), if it has been processed.
    public func streamState(partition: Int) async throws -> [UInt8]? {
        try await timed("streamState", nil) { [self] in
            for try await b in try await client.query(
                "SELECT bytes FROM beckon_stream_state WHERE partition = \(partition)", logger: logger
            ).decode(ByteBuffer.self) {
                return Array(b.readableBytesView)
            }
            return nil
        }
    }

    // MARK: Writing what a batch did

    /// An action fired, as stored; its outbox entries go with it.
    public struct FiredRow: Sendable {
        public var actionID: String
        public var userID: String
        public var json: String
        public var outbox: [(destination: String, body: [UInt8], nextAt: Int64, createdAt: Int64)]
        public init(
            actionID: String, userID: String, json: String,
            outbox: [(destination: String, body: [UInt8], nextAt: Int64, createdAt: Int64)]
        ) {
            self.actionID = actionID
            self.userID = userID
            self.json = json
            self.outbox = outbox
        }
    }

    /// Everything one batch of a partition changed: written in one fenced statement (``commit(_:)``).
    public struct PartitionCommit: Sendable {
        /// Users' states; `mergedInto` is the user a merged id points to (a forget of that user finds it by it).
        public var states: [(userID: String, bytes: [UInt8], nextDue: Int64?, mergedInto: String?)] = []
        /// States handed over to another partition's user (``handOvers(_:)``; `nil`: nothing to bring).
        public var handOvers: [(from: String, to: String, bytes: [UInt8]?)] = []
        /// Hand-overs this batch took over (by id): deleted with it.
        public var takenOver: [Int64] = []
        /// Push tokens the batch's users reported: each token's holder is its latest reporter (docs/push.md).
        public var deviceClaims: [(token: String, userID: String, at: Int64)] = []
        public var stream: [UInt8] = []
        public var actions: [FiredRow] = []
        /// The last log entry the batch includes.
        public var processed: Int64
        /// The rule set version the partition runs as of `processed` (``FleetLog/rulesVersion(partition:)``).
        public var rulesVersion: Int64 = 0
        public init(processed: Int64, rulesVersion: Int64 = 0) {
            self.processed = processed
            self.rulesVersion = rulesVersion
        }
    }

    /// Writes one partition's batch, fenced by `lease` (``commit(_:)`` of one): returns how many actions were new, or
    /// throws ``Fenced`` when the lease has moved (and nothing was written).
    @discardableResult
    public func commit(_ batch: PartitionCommit, lease: Lease) async throws -> Int {
        guard let new = try await commit([(lease, batch)])[lease.partition], let n = new else {
            throw Fenced(partition: lease.partition)
        }
        return n
    }

    /// Writes batches of several partitions (each with the lease it was processed under) in one statement, so one
    /// round trip and one commit: for each partition whose lease still holds, its users' changed states, its stream
    /// state, its fired actions (an action id stored before is not stored again, and its outbox entries are queued
    /// only when new) and its new position; nothing of a partition whose lease has moved. Returns, by partition, how
    /// many actions were new, or `nil` for a partition that was fenced.
    ///
    /// The statement's first part locks the lease rows in ascending partition order and keeps those whose owner,
    /// epoch and expiry still hold — the fence; every write is conditional on its partition being among them, and the
    /// rows stay locked until the commit, so no lease changes hands in the middle.
    ///
    /// A stored user's state is written by an `UPDATE` and a new user's by an `INSERT`, not by an upsert: `ON CONFLICT
    /// DO UPDATE` locks the row before it updates it, one more WAL record per state (about 50 bytes, 6% of an event's
    /// WAL on `scripts/bench-fleet.sh`). Only the partition's holder writes its users, under the fence, so no other
    /// transaction inserts one of them in between.
    public func commit(_ batches: [(lease: Lease, batch: PartitionCommit)]) async throws -> [Int: Int?] {
        try await timed("commit", nil) { [self] in
            guard !batches.isEmpty else { return [:] }
            let leasePartitions = batches.map(\.lease.partition)
            let owners = batches.map(\.lease.owner)
            let epochs = batches.map(\.lease.epoch)
            let positions = batches.map(\.batch.processed)
            let versions = batches.map(\.batch.rulesVersion)
            let streams = batches.map { ByteBuffer(bytes: $0.batch.stream) }
            let states = batches.flatMap { b in b.batch.states.map { (b.lease.partition, $0) } }
            let statePartitions = states.map(\.0)
            let users = states.map(\.1.userID)
            let bytes = states.map { ByteBuffer(bytes: $0.1.bytes) }
            // (Arrays of optionals do not encode: none is Int64.min, made NULL again in the statement.)
            let dues = states.map { $0.1.nextDue ?? Int64.min }
            let pointers = states.map { $0.1.mergedInto ?? "" }
            let handOvers = batches.flatMap { b in b.batch.handOvers.map { (b.lease.partition, $0) } }
            let handOverPartitions = handOvers.map(\.0)
            let handOverFrom = handOvers.map(\.1.from)
            let handOverTo = handOvers.map(\.1.to)
            // (A state's bytes are never empty: none is empty bytes, made NULL again in the statement.)
            let handOverBytes = handOvers.map { ByteBuffer(bytes: $0.1.bytes ?? []) }
            let takenOver = batches.flatMap { b in b.batch.takenOver.map { (b.lease.partition, $0) } }
            let takenPartitions = takenOver.map(\.0)
            let takenIDs = takenOver.map(\.1)
            // (A token's holder is written when it changes; of two partitions' claims of one token, the later one.)
            let claims = batches.flatMap { b in b.batch.deviceClaims.map { (b.lease.partition, $0) } }
            let claimPartitions = claims.map(\.0)
            let claimTokens = claims.map(\.1.token)
            let claimUsers = claims.map(\.1.userID)
            let claimTimes = claims.map(\.1.at)
            let actions = batches.flatMap { b in b.batch.actions.map { (b.lease.partition, $0) } }
            let actionPartitions = actions.map(\.0)
            let ids = actions.map(\.1.actionID)
            let actionUsers = actions.map(\.1.userID)
            let json = actions.map(\.1.json)
            let entries = actions.flatMap { _, a in a.outbox.map { (a, $0) } }
            let destinations = entries.map(\.1.destination)
            let outboxActions = entries.map(\.0.actionID)
            let outboxUsers = entries.map(\.0.userID)
            let bodies = entries.map { ByteBuffer(bytes: $0.1.body) }
            let next = entries.map(\.1.nextAt)
            let created = entries.map(\.1.createdAt)
            let rows = try await prepared(
                Statements.Commit.self,
                """
                WITH batch AS (
                    SELECT * FROM unnest(\(leasePartitions)::int[], \(owners)::text[], \(epochs)::bigint[],
                        \(positions)::bigint[], \(streams)::bytea[], \(versions)::bigint[])
                        AS t(p, owner, epoch, position, stream, rules)
                ), lease AS (
                    SELECT l.partition FROM beckon_lease l JOIN batch b ON b.p = l.partition
                    WHERE l.owner = b.owner AND l.epoch = b.epoch AND l.expires_at >= clock_timestamp()
                    ORDER BY l.partition
                    FOR UPDATE OF l
                ), changed AS (
                    SELECT u, p, b, nullif(d, \(Int64.min)) AS d, nullif(m, '') AS m
                    FROM unnest(\(statePartitions)::int[], \(users)::text[], \(bytes)::bytea[], \(dues)::bigint[],
                        \(pointers)::text[]) AS t(p, u, b, d, m)
                    WHERE p IN (SELECT partition FROM lease)
                ), updated AS (
                    UPDATE beckon_user_state s SET bytes = c.b, next_due = c.d, merged_into = c.m
                    FROM changed c WHERE s.user_id = c.u
                    RETURNING s.user_id
                ), states AS (
                    INSERT INTO beckon_user_state (user_id, partition, bytes, next_due, merged_into)
                    SELECT u, p, b, d, m FROM changed WHERE u NOT IN (SELECT user_id FROM updated)
                ), handed AS (
                    INSERT INTO beckon_handover (from_id, to_id, bytes)
                    SELECT f, t, nullif(b, ''::bytea)
                    FROM unnest(\(handOverPartitions)::int[], \(handOverFrom)::text[], \(handOverTo)::text[],
                        \(handOverBytes)::bytea[]) WITH ORDINALITY AS h(p, f, t, b, n)
                    WHERE p IN (SELECT partition FROM lease) ORDER BY n
                ), taken AS (
                    DELETE FROM beckon_handover WHERE id IN (
                        SELECT i FROM unnest(\(takenPartitions)::int[], \(takenIDs)::bigint[]) AS k(p, i)
                        WHERE p IN (SELECT partition FROM lease))
                ), claims AS (
                    INSERT INTO beckon_device_owner (token, user_id, seen_at)
                    SELECT DISTINCT ON (k) k, u, t FROM unnest(\(claimPartitions)::int[], \(claimTokens)::text[],
                        \(claimUsers)::text[], \(claimTimes)::bigint[]) AS c(p, k, u, t)
                    WHERE p IN (SELECT partition FROM lease) ORDER BY k, t DESC
                    ON CONFLICT (token) DO UPDATE SET user_id = excluded.user_id, seen_at = excluded.seen_at
                    WHERE excluded.user_id <> beckon_device_owner.user_id
                        AND excluded.seen_at >= beckon_device_owner.seen_at
                ), stream AS (
                    INSERT INTO beckon_stream_state (partition, bytes)
                    SELECT p, stream FROM batch WHERE p IN (SELECT partition FROM lease)
                    ON CONFLICT (partition) DO UPDATE SET bytes = excluded.bytes
                ), actions AS (
                    INSERT INTO beckon_action (action_id, user_id, partition, json)
                    SELECT a, u, p, j FROM unnest(\(actionPartitions)::int[], \(ids)::text[], \(actionUsers)::text[],
                        \(json)::text[]) WITH ORDINALITY AS t(p, a, u, j, n)
                    WHERE p IN (SELECT partition FROM lease) ORDER BY n
                    ON CONFLICT (action_id) DO NOTHING RETURNING seq, action_id, partition
                ), outbox AS (
                    INSERT INTO beckon_outbox (destination, action_id, user_id, body, next_at, created_at, action_seq)
                    SELECT d, a, u, b, n, c, s FROM (
                        SELECT DISTINCT ON (t.d, t.a) t.*, actions.seq AS s
                        FROM unnest(\(destinations)::text[], \(outboxActions)::text[], \(outboxUsers)::text[],
                            \(bodies)::bytea[], \(next)::bigint[], \(created)::bigint[]) WITH ORDINALITY
                            AS t(d, a, u, b, n, c, o)
                        JOIN actions ON actions.action_id = t.a
                        ORDER BY t.d, t.a, t.o
                    ) AS e ORDER BY o
                ), position AS (
                    UPDATE beckon_lease l SET processed_seq = b.position, rules_version = b.rules FROM batch b
                    WHERE l.partition = b.p AND b.p IN (SELECT partition FROM lease)
                )
                SELECT partition, (SELECT count(*) FROM actions a WHERE a.partition = lease.partition) FROM lease
                """)
            var out: [Int: Int?] = [:]
            for p in leasePartitions { out[p] = .some(nil) }
            for row in rows {
                let (p, new) = try row.decode((Int, Int64).self)
                out[p] = Int(new)
            }
            return out
        }
    }

    // MARK: Identity merge across partitions

    /// A state handed over from an earlier id's partition to the user it merges into (`bytes` `nil`: nothing to bring).
    public typealias HandOver = (id: Int64, from: String, to: String, bytes: [UInt8]?)

    /// The hand-overs waiting for the pairs `pairs` (an earlier id and the user it merges into), oldest first: their
    /// ids and the states handed over (`nil`: nothing to bring). A pair's hand-overs and sign-ins are appended together
    /// and processed in order on both sides, so the n-th sign-in of a pair takes the n-th hand-over.
    public func handOvers(_ pairs: [(from: String, to: String)]) async throws -> [HandOver] {
        try await timed("handOvers", nil) { [self] in
            var out: [HandOver] = []
            guard !pairs.isEmpty else { return out }
            for try await (i, f, t, b) in try await client.query(
                """
                SELECT h.id, h.from_id, h.to_id, h.bytes FROM beckon_handover h
                JOIN unnest(\(pairs.map(\.from))::text[], \(pairs.map(\.to))::text[]) AS p(f, t)
                    ON h.from_id = p.f AND h.to_id = p.t
                ORDER BY h.id
                """, logger: logger
            ).decode((Int64, String, String, ByteBuffer?).self) {
                out.append((i, f, t, b.map { Array($0.readableBytesView) }))
            }
            return out
        }
    }

    /// Moves entries of `lease`'s partition (`from`, their sequence numbers) on to other partitions (events of ids
    /// merged into another partition's user: `userID` is that user), as `entries`, and moves the partition's position
    /// to `seq`, in one transaction fenced by `lease` (``Fenced`` when it has moved; then nothing is sent). The entries
    /// sent on are deleted where they were: an event is in one partition's log, for an export or the report.
    public func forward(
        _ entries: [(userID: String, body: [UInt8], receivedAt: Int64)], from: [Int64], lease: Lease, through seq: Int64
    ) async throws {
        try await timed("forward", nil) { [self] in
            try await transaction { c in
                var held = false
                for try await _ in try await c.query(
                    """
                    SELECT partition FROM beckon_lease WHERE partition = \(lease.partition) AND owner = \(lease.owner)
                        AND epoch = \(lease.epoch) AND expires_at >= clock_timestamp()
                    FOR UPDATE
                    """, logger: logger
                ).decode(Int.self) {
                    held = true
                }
                guard held else { throw Fenced(partition: lease.partition) }
                _ = try await append(entries, in: entries.map { Self.partition(of: $0.userID) }) { query in
                    try await allRows(c.query(query, logger: logger))
                }
                try await c.query(
                    """
                    DELETE FROM beckon_log WHERE partition = \(lease.partition) AND seq = ANY(\(from)::bigint[])
                        AND last_seq IS NULL
                    """, logger: logger)
                if let low = from.min(), let high = from.max() {
                    let sent = Set(from)
                    try await LogPages.remove(
                        in: lease.partition,
                        where: "seq > \(low - Int64(LogPages.maxEntries)) AND seq <= \(high) AND last_seq >= \(low)",
                        drop: { sent.contains($0.seq) }, log: self, on: c)
                }
                try await c.query(
                    "UPDATE beckon_lease SET processed_seq = \(seq) WHERE partition = \(lease.partition)", logger: logger)
            }
        }
    }

    /// The person a privacy request for `id` is about, as a single service has it (`Privacy.person`): the user `id`
    /// names — itself, or the end of its chain of merges (its state a pointer to the next) — and every id merged into
    /// that user. Chains are followed for at most `hops` merges (the engine's bound, `Engine.maxMergeHops`).
    public func person(of id: String, hops: Int) async throws -> (user: String, merged: [String]) {
        let user = try await timed("mergedTarget", nil) { [self] in
            var at = id
            var seen: Set<String> = [id]
            for _ in 0..<hops {
                let rows = try await client.query(
                    "SELECT merged_into FROM beckon_user_state WHERE user_id = \(at) AND merged_into IS NOT NULL",
                    logger: logger)
                var next: String?
                for try await into in rows.decode(String.self) { next = into }
                guard let next, seen.insert(next).inserted else { break }
                at = next
            }
            return at
        }
        return (user, try await mergedIDs(into: user, hops: hops))
    }

    /// The ids merged into `user` (their states are pointers to it), following chains of at most `hops` merges.
    func mergedIDs(into user: String, hops: Int) async throws -> [String] {
        try await timed("mergedIDs", nil) { [self] in
            var found: [String] = []
            var seen: Set<String> = [user]
            var next = [user]
            for _ in 0..<hops where !next.isEmpty {
                var more: [String] = []
                for try await id in try await client.query(
                    "SELECT user_id FROM beckon_user_state WHERE merged_into = ANY(\(next)::text[]) ORDER BY user_id",
                    logger: logger
                ).decode(String.self) where seen.insert(id).inserted {
                    more.append(id)
                }
                found += more
                next = more
            }
            return found
        }
    }

    // MARK: Privacy

    /// Deletes everything of `user` — state, actions, outbox entries, and their log entries up to `seq` (the forget's
    /// own) — and moves the partition's position to `seq`, in one statement fenced by `lease` (``Fenced`` when it has
    /// moved; then nothing is deleted).
    public func forget(_ user: String, lease: Lease, through seq: Int64) async throws {
        try await timed("forget", nil) { [self] in
            let p = lease.partition
            try await transaction { c in
                for try await held in try await c.query(
                    """
                    WITH lease AS (
                        SELECT partition FROM beckon_lease WHERE partition = \(p) AND owner = \(lease.owner)
                            AND epoch = \(lease.epoch) AND expires_at >= clock_timestamp()
                        FOR UPDATE
                    ), state AS (
                        DELETE FROM beckon_user_state WHERE user_id = \(user) AND EXISTS (SELECT 1 FROM lease)
                    ), actions AS (
                        DELETE FROM beckon_action WHERE user_id = \(user) AND EXISTS (SELECT 1 FROM lease)
                    ), outbox AS (
                        DELETE FROM beckon_outbox
                        WHERE action_seq IN (SELECT seq FROM beckon_action WHERE user_id = \(user))
                            AND EXISTS (SELECT 1 FROM lease)
                    ), devices AS (
                        DELETE FROM beckon_device_owner WHERE user_id = \(user) AND EXISTS (SELECT 1 FROM lease)
                    ), entries AS (
                        DELETE FROM beckon_log WHERE partition = \(p) AND user_id = \(user) AND seq <= \(seq)
                            AND last_seq IS NULL AND EXISTS (SELECT 1 FROM lease)
                    ), position AS (
                        UPDATE beckon_lease SET processed_seq = \(seq) WHERE partition = \(p) AND EXISTS (SELECT 1 FROM lease)
                    )
                    SELECT count(*) FROM lease
                    """, logger: logger
                ).decode(Int64.self) where held != 1 {
                    throw Fenced(partition: p)
                }
                // (The lease's row stays locked until this transaction commits.)
                try await LogPages.remove(
                    in: p, where: "seq <= \(seq) AND \(LogPages.userHash(user)) = ANY(users)",
                    drop: { $0.userID == user && $0.seq <= seq }, log: self, on: c)
            }
        }
    }

    /// The latest claim of each of `tokens` that has one: who holds it, and since when (docs/push.md).
    public func deviceOwners(_ tokens: [String]) async throws -> [String: (userID: String, at: Int64)] {
        try await timed("deviceOwners", nil) { [self] in
            var out: [String: (userID: String, at: Int64)] = [:]
            guard !tokens.isEmpty else { return out }
            for try await (t, u, at) in try await client.query(
                "SELECT token, user_id, seen_at FROM beckon_device_owner WHERE token = ANY(\(tokens)::text[])",
                logger: logger
            ).decode((String, String, Int64).self) {
                out[t] = (u, at)
            }
            return out
        }
    }

    /// A user's entries in the log (as appended: the single service's input log records), in order, with when each
    /// was received.
    public func entries(of user: String) async throws -> [(receivedAt: Int64, body: [UInt8])] {
        try await timed("entries", nil) { [self] in
            let p = Self.partition(of: user)
            let rows = try await readRows(
                p, "(user_id = \(user) OR last_seq IS NOT NULL AND \(LogPages.userHash(user)) = ANY(users)) ORDER BY seq")
            return rows.flatMap { $0.entries(partition: p) }.filter { $0.userID == user }.map { ($0.receivedAt, $0.body) }
        }
    }

    /// An outbox entry as stored (`state`: 0 pending, 1 delivered, 2 dead).
    public struct StoredOutbox: Sendable {
        public var id: Int64
        public var destination: String
        public var actionID: String
        public var userID: String
        public var body: [UInt8]
        public var state: Int
        public var attempts: Int
        public var nextAt: Int64
        public var createdAt: Int64
        public var doneAt: Int64?
        public var lastError: String?
    }

    /// A user's outbox entries, oldest first (what an export shows).
    public func outbox(of user: String) async throws -> [StoredOutbox] {
        try await timed("outbox", nil) { [self] in
            try await Self.outboxRows(
                client.query(
                    """
                    SELECT id, destination, action_id, user_id, body, state, attempts, next_at, created_at, done_at,
                        last_error
                    FROM beckon_outbox WHERE action_seq IN (SELECT seq FROM beckon_action WHERE user_id = \(user))
                    ORDER BY id
                    """, logger: logger))
        }
    }

    /// The outbox's entries in `states`, oldest first, at most `limit` (what `beckon outbox` lists).
    public func outbox(states: [Int], limit: Int = 10_000) async throws -> [StoredOutbox] {
        try await timed("outbox", nil) { [self] in
            try await Self.outboxRows(
                client.query(
                    """
                    SELECT id, destination, action_id, user_id, body, state, attempts, next_at, created_at, done_at,
                        last_error
                    FROM beckon_outbox WHERE state = ANY(\(states)::int[]) ORDER BY id LIMIT \(limit)
                    """, logger: logger))
        }
    }

    private static func outboxRows(_ rows: PostgresRowSequence) async throws -> [StoredOutbox] {
        var out: [StoredOutbox] = []
        for try await (id, d, a, u, b, s, n, next, c, done, e) in rows.decode(
            (Int64, String, String, String, ByteBuffer, Int, Int, Int64, Int64, Int64?, String?).self)
        {
            out.append(
                StoredOutbox(
                    id: id, destination: d, actionID: a, userID: u, body: Array(b.readableBytesView), state: s,
                    attempts: n, nextAt: next, createdAt: c, doneAt: done, lastError: e))
        }
        return out
    }

    /// Makes dead entries (those of `actionIDs`, or every dead one when `nil`) pending again, due `now`, their
    /// attempts counted from zero. Returns how many.
    public func retryOutbox(actionIDs: [String]?, now: Int64) async throws -> Int {
        let (all, ids) = (actionIDs == nil, actionIDs ?? [])
        return try await count(
            "retryOutbox",
            """
            WITH u AS (
                UPDATE beckon_outbox SET state = 0, attempts = 0, next_at = \(now), done_at = NULL
                WHERE state = 2
                    AND (\(all) OR action_seq IN (SELECT seq FROM beckon_action WHERE action_id = ANY(\(ids)::text[])))
                RETURNING 1)
            SELECT count(*) FROM u
            """)
    }

    /// Deletes undelivered entries (those of `actionIDs`), or every dead one when `nil`. Returns how many.
    public func dropOutbox(actionIDs: [String]?) async throws -> Int {
        let (all, ids) = (actionIDs == nil, actionIDs ?? [])
        return try await count(
            "dropOutbox",
            """
            WITH d AS (
                DELETE FROM beckon_outbox
                WHERE CASE WHEN \(all) THEN state = 2
                    ELSE state <> 1
                        AND action_seq IN (SELECT seq FROM beckon_action WHERE action_id = ANY(\(ids)::text[])) END
                RETURNING 1)
            SELECT count(*) FROM d
            """)
    }

    /// The count a statement that changes rows answers (`… SELECT count(*) FROM` what it returned), timed as `call`.
    private func count(_ call: String, _ query: PostgresQuery) async throws -> Int {
        try await timed(call, nil) { [self] in
            for try await n in try await client.query(query, logger: logger).decode(Int.self) { return n }
            return 0
        }
    }

    // MARK: Reading what was fired

    /// A user's actions after `seq` (a cursor: a user's actions are written by one partition's transactions, one at a
    /// time, so their sequence numbers grow in commit order), at most `limit`.
    public func actions(of user: String, after seq: Int64, limit: Int) async throws -> [(seq: Int64, json: String)] {
        try await timed("actions", nil) { [self] in
            var out: [(seq: Int64, json: String)] = []
            let rows = try await client.query(
                """
                SELECT seq, json FROM beckon_action WHERE user_id = \(user) AND seq > \(seq) ORDER BY seq LIMIT \(limit)
                """, logger: logger)
            for try await (s, j) in rows.decode((Int64, String).self) { out.append((s, j)) }
            return out
        }
    }

    /// Every stored action's JSON, by partition then in the order stored (`beckon fleet actions`).
    public func eachAction(_ body: (String) throws -> Void) async throws {
        var after: Int64 = 0
        while true {
            var last: Int64?
            for try await (s, j) in try await client.query(
                "SELECT seq, json FROM beckon_action WHERE seq > \(after) ORDER BY seq LIMIT 10000", logger: logger
            ).decode((Int64, String).self) {
                try body(j)
                last = s
            }
            guard let last else { return }
            after = last
        }
    }

    /// Every entry of the log in one order that keeps each partition's: partitions interleaved by the time their
    /// entries were received (`beckon fleet events`; a dry-run of it runs each user's events in the order the fleet did).
    public func eachEntry(_ body: (Entry) throws -> Void) async throws {
        let page = 5000
        var heads: [[Entry]] = []
        var next: [Int] = []
        for p in 0..<Self.partitionCount {
            heads.append(try await read(partition: p, after: 0, limit: page))
            next.append(0)
        }
        while true {
            var best: Int?
            for p in heads.indices where next[p] < heads[p].count {
                if let b = best, heads[b][next[b]].receivedAt <= heads[p][next[p]].receivedAt { continue }
                best = p
            }
            guard let p = best else { return }
            let e = heads[p][next[p]]
            try body(e)
            next[p] += 1
            // (A read can hold fewer than `page` entries with more after them: numbers missing, a page cut.)
            if next[p] == heads[p].count {
                heads[p] = try await read(partition: p, after: e.seq, limit: page)
                next[p] = 0
            }
        }
    }

    // MARK: The outbox

    /// An outbox entry taken for an attempt.
    public struct OutboxClaim: Sendable {
        public var id: Int64
        public var destination: String
        public var actionID: String
        public var userID: String
        public var body: [UInt8]
        public var attempts: Int
        public var createdAt: Int64
        /// The due time the claim set: the claim's mark, which its outcome is recorded under (``recordOutbox(_:)``).
        public var claimedUntil: Int64
    }

    /// The database's clock in ms, in SQL: the one clock every process's claims and due times are read against (the
    /// processes' own clocks do not have to agree).
    static let databaseNowMs = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

    /// Takes pending entries of `destinations` due by the database's clock, soonest first, at most `limit`, for one
    /// process's attempts: `FOR UPDATE SKIP LOCKED` lets every process take entries at once without two taking the
    /// same, and a taken entry's due time moves `claimMs` on, so that an attempt cut short by a crash is made again
    /// then (at least once, with the same idempotency key).
    public func claimDueOutbox(destinations: [String], limit: Int, claimMs: Int64) async throws -> [OutboxClaim] {
        try await timed("claimDueOutbox", nil) { [self] in
            var out: [OutboxClaim] = []
            let rows = try await client.query(
                """
                UPDATE beckon_outbox SET next_at = \(unescaped: Self.databaseNowMs) + \(claimMs)
                WHERE id IN (
                    SELECT id FROM beckon_outbox
                    WHERE state = 0 AND next_at <= \(unescaped: Self.databaseNowMs)
                        AND destination = ANY(\(destinations)::text[])
                    ORDER BY next_at, id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                )
                RETURNING id, destination, action_id, user_id, body, attempts, created_at, next_at
                """, logger: logger)
            for try await (id, d, a, u, b, n, c, until) in rows.decode(
                (Int64, String, String, String, ByteBuffer, Int, Int64, Int64).self)
            {
                out.append(
                    OutboxClaim(
                        id: id, destination: d, actionID: a, userID: u, body: Array(b.readableBytesView), attempts: n,
                        createdAt: c, claimedUntil: until))
            }
            return out.sorted { $0.id < $1.id }
        }
    }

    /// Records attempts (each an entry id, its new state 0 pending / 1 delivered / 2 dead, how long until its next
    /// attempt, the error if any, and the claim it was made under: ``OutboxClaim/claimedUntil``) in one statement, on
    /// the database's clock. An entry no longer pending, or taken again since (its claim lapsed while this process was
    /// paused, and another took it), is left alone. Returns the ids recorded.
    public func recordOutbox(
        _ attempts: [(id: Int64, state: Int, delayMs: Int64, error: String?, claim: Int64)]
    ) async throws -> Set<Int64> {
        try await timed("recordOutbox", nil) { [self] in
            guard !attempts.isEmpty else { return [] }
            let ids = attempts.map(\.id)
            let states = attempts.map(\.state)
            let delays = attempts.map(\.delayMs)
            let errors = attempts.map { $0.error ?? "" }
            let claims = attempts.map(\.claim)
            var recorded: Set<Int64> = []
            for try await id in try await client.query(
                """
                UPDATE beckon_outbox o SET attempts = o.attempts + 1, state = t.s,
                    next_at = \(unescaped: Self.databaseNowMs) + t.d, last_error = nullif(t.e, ''),
                    done_at = CASE WHEN t.s = 0 THEN NULL ELSE \(unescaped: Self.databaseNowMs) END
                FROM unnest(\(ids)::bigint[], \(states)::int[], \(delays)::bigint[], \(errors)::text[], \(claims)::bigint[])
                    AS t(id, s, d, e, c)
                WHERE o.id = t.id AND o.state = 0 AND o.next_at = t.c
                RETURNING o.id
                """, logger: logger
            ).decode(Int64.self) {
                recorded.insert(id)
            }
            return recorded
        }
    }

    /// Pending entries per destination: the counts the database keeps as entries come and go (migration 10), a few
    /// rows a destination however long a backlog is. The rows of connections that are gone are folded into shard 0
    /// first (in destination order, as the triggers take them, so that two processes folding at once cannot deadlock).
    public func pendingOutboxCounts() async throws -> [String: Int] {
        try await timed("pendingOutboxCounts", nil) { [self] in
            try await client.query(
                """
                WITH gone AS (
                    DELETE FROM beckon_outbox_pending WHERE shard <> 0
                        AND shard NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL)
                    RETURNING destination, n
                )
                INSERT INTO beckon_outbox_pending AS p (destination, shard, n)
                SELECT destination, 0, sum(n) FROM gone GROUP BY destination ORDER BY destination
                ON CONFLICT (destination, shard) DO UPDATE SET n = p.n + excluded.n
                """, logger: logger)
            var out: [String: Int] = [:]
            for try await (d, n) in try await client.query(
                "SELECT destination, sum(n)::bigint FROM beckon_outbox_pending GROUP BY destination HAVING sum(n) <> 0",
                logger: logger
            ).decode((String, Int).self) {
                out[d] = n
            }
            return out
        }
    }

    // MARK: Members

    /// Says that `owner` is alive for `ttl` more (its share of partitions is counted from the live members), with the
    /// digest of the rules it runs. Returns the live members' count and their digests.
    public func heartbeat(
        owner: String, rulesDigest: String, ttl: Duration
    ) async throws -> (
        members: Int, digests: Set<String>
    ) {
        try await timed("heartbeat", nil) { [self] in
            let ms = Self.milliseconds(ttl)
            try await client.query(
                """
                INSERT INTO beckon_member (owner, expires_at, rules_digest)
                VALUES (\(owner), clock_timestamp() + \(ms) * interval '1 millisecond', \(rulesDigest))
                ON CONFLICT (owner) DO UPDATE SET expires_at = excluded.expires_at, rules_digest = excluded.rules_digest
                """, logger: logger)
            var n = 0
            var digests: Set<String> = []
            for try await d in try await client.query(
                "SELECT rules_digest FROM beckon_member WHERE expires_at >= clock_timestamp()", logger: logger
            ).decode(String.self) {
                n += 1
                digests.insert(d)
            }
            try await client.query(
                "DELETE FROM beckon_member WHERE expires_at < clock_timestamp() - interval '1 hour'", logger: logger)
            return (max(n, 1), digests)
        }
    }

    /// A process leaving the fleet (its partitions released): the others count one member less at once.
    public func leave(owner: String) async throws {
        try await timed("leave", nil) { [self] in
            try await client.query("DELETE FROM beckon_member WHERE owner = \(owner)", logger: logger)
        }
    }

    /// Partitions no live process holds (free, or their lease expired).
    public func unheldPartitions() async throws -> [Int] {
        try await timed("unheldPartitions", nil) { [self] in
            var out: [Int] = []
            for try await p in try await client.query(
                """
                SELECT partition FROM beckon_lease WHERE owner IS NULL OR expires_at < clock_timestamp() ORDER BY partition
                """, logger: logger
            ).decode(Int.self) {
                out.append(p)
            }
            return out
        }
    }

    /// Each partition's last appended sequence number, in partition order (what the workers poll for new entries).
    public func appended() async throws -> [Int64] { try await positions().appended }

    /// Each partition's last appended and last processed sequence numbers, in partition order, in one read: what a
    /// process's poller reads for its runners (new entries) and for requests that wait for an entry to be processed.
    public func positions() async throws -> (appended: [Int64], processed: [Int64]) {
        try await timed("appended", shortDeadline) { [self] in
            var appended = [Int64](repeating: 0, count: Self.partitionCount)
            var processed = appended
            for row in try await prepared(
                Statements.Positions.self,
                """
                SELECT s.partition, s.next_seq - 1, COALESCE(l.processed_seq, 0)
                FROM beckon_sequence s LEFT JOIN beckon_lease l USING (partition) ORDER BY s.partition
                """)
            {
                let (p, a, d) = try row.decode((Int, Int64, Int64).self)
                guard p < appended.count else { continue }
                appended[p] = a
                processed[p] = d
            }
            return (appended, processed)
        }
    }
}
