import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The fleet's shared log and partition leases in PostgreSQL (docs/fleet.md): the ground on which many `beckon serve`
/// processes agree on one order of each user's events and on which process processes which users.
///
/// - **The log** is split by a hash of the user id into ``partitionCount`` partitions. Each partition's sequence is a
///   counter row that an append updates in the statement that inserts the entries: the row lock makes the next append
///   of that partition wait until this one commits, so a partition's rows become visible in sequence order, with no
///   gaps. (An identity column would hand out numbers at insert time: a transaction that took 7 and commits after the
///   one that took 8 lets a reader that saw 8 move its offset past 7 and never read it.)
/// - **Leases**: a partition is processed by the one process that holds its lease (owner, epoch, expiry). A lease is
///   taken when it is free or expired, which adds one to its epoch; its holder renews it while it lives. Every write
///   of a partition's processing (``commit(_:)``, ``forget(_:lease:through:)``) locks the lease row and checks owner,
///   epoch and expiry in the same statement: a process that was paused or cut off past its lease cannot write once
///   another holds it.
///
/// Every write while serving is a single statement: no transaction is left open (holding locks) across a stall.
public final class FleetLog: Sendable {
    /// The connection pool in use: replaced by a new one when a call passes its deadline (``timed(_:_:_:)``).
    public var client: PostgresClient { pool.withLock { $0.client } }
    private let configuration: PostgresClient.Configuration
    private struct Pool {
        var client: PostgresClient
        /// The running pool's task (`nil` until ``run()`` starts it).
        var task: Task<Void, Never>?
        var replacedAt: ContinuousClock.Instant?
        var running = false
    }
    private let pool: Mutex<Pool>
    let logger: Logger
    /// How long a call may take: an append and a poll of the positions (what ingest and the runners wait on), and
    /// every other call (a write may wait on a lock for ``lockTimeout``).
    public let shortDeadline: Duration = .milliseconds(1500)
    public let deadline: Duration
    /// Counts for the service's metrics: calls past their deadline, and pools replaced.
    public let timeouts = Atomic<Int>(0)
    public let replacements = Atomic<Int>(0)
    /// Partitions of the log, fixed when the database is first set up (changing it would move users between
    /// partitions, and so reorder their events).
    public static let partitionCount = 64

    public struct Fenced: Error, CustomStringConvertible {
        public var partition: Int
        public init(partition: Int) { self.partition = partition }
        public var description: String { "partition \(partition)'s lease is no longer this process's: nothing was written" }
    }

    /// An append whose counter rows were not all found (a database not set up for this partition count).
    public struct AppendFailed: Error {}

    public struct BadURL: Error, CustomStringConvertible {
        public var url: String
        public var description: String { "not a PostgreSQL URL like postgres://user:password@host:5432/database: \(url)" }
    }

    /// A client for `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (no TLS: for loopback and private networks).
    /// ``run()`` must run while it is used.
    public init(url: String, logger: Logger, lockTimeout: Duration = .seconds(5)) throws {
        guard let u = URLComponents(string: url), u.scheme == "postgres" || u.scheme == "postgresql", let host = u.host,
            let user = u.user
        else { throw BadURL(url: url) }
        let database = u.path.hasPrefix("/") ? String(u.path.dropFirst()) : u.path
        var configuration = PostgresClient.Configuration(
            host: host, port: u.port ?? 5432, username: user, password: u.password,
            database: database.isEmpty ? nil : database, tls: .disable)
        configuration.options.maximumConnections = 16
        // Two connections kept open (a pool below its minimum replaces one the server closed at once; above it, a
        // request may wait for one that never comes: postgres-nio #657), looked at every 5 s, made within 2 s.
        configuration.options.minimumConnections = 2
        configuration.options.keepAliveBehavior = .init(frequency: .seconds(5))
        configuration.options.connectTimeout = .seconds(2)
        // No statement waits on a lock for longer than `lockTimeout`, nor runs longer than the call's deadline (it
        // fails, and is tried again by its caller). (Every write while serving is one statement: no transaction stays
        // open across a process's stall.)
        deadline = max(lockTimeout + .seconds(2), .seconds(5))
        configuration.options.additionalStartupParameters = [
            ("lock_timeout", String(Self.milliseconds(lockTimeout))),
            ("statement_timeout", String(Self.milliseconds(deadline))),
        ]
        self.configuration = configuration
        pool = Mutex(Pool(client: PostgresClient(configuration: configuration, backgroundLogger: logger)))
        self.logger = logger
    }

    /// Runs the connection pool (and the pools that replace it) until the task is cancelled.
    public func run() async {
        pool.withLock { p in
            p.running = true
            let client = p.client
            p.task = Task { await client.run() }
        }
        while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(200)) }
        let task = pool.withLock { p in
            p.running = false
            return p.task
        }
        guard let task else { return }
        task.cancel()
        // (Bounded: postgres-nio's pool, cancelled, closes its connections at once, but its `run()` has been seen not
        // to return with none left open, holding a test, or a process's shutdown, for good. Waited on from a task
        // of its own: this one is cancelled, which would end the wait at once.)
        let stopped = await Task { (try? await withDeadline(Self.stopWithin, "stop") { await task.value }) != nil }.value
        if !stopped { logger.warning("the connection pool did not stop within \(Self.stopWithin) of the shutdown: left") }
    }

    /// How long ``run()``, cancelled, waits for the connection pool to stop.
    public static let stopWithin = Duration.seconds(5)

    /// Runs one database call with a deadline. Past it, the call fails with ``DeadlineExceeded``; if it has still not
    /// ended ``hungAfter`` later, the pool is replaced by a new one (at most once a second) and the old one shut down:
    /// a connection the server closed can swallow a query for good, holding its connection, and postgres-nio's pool
    /// may never hand out another (a slow call that ends late leaves the pool alone).
    public func timed<T: Sendable>(
        _ call: String, _ limit: Duration? = nil, _ body: @escaping @Sendable () async throws -> T
    )
        async throws -> T
    {
        let limit = limit ?? deadline
        do {
            return try await withDeadline(limit, call, body)
        } catch let e as DeadlineExceeded {
            timeouts.add(1, ordering: .relaxed)
            Task { [self] in
                try? await Task.sleep(for: Self.hungAfter)
                if !e.ended() { replacePool() }
            }
            throw e
        }
    }

    /// Runs `body` in one transaction on a connection of the pool. What `body` throws is thrown as it is (postgres-nio
    /// wraps it in a `PostgresTransactionError`): a caller tells ``Fenced`` and ``WrongDatabase`` apart.
    func transaction<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await client.withTransaction(logger: logger) { c in try await body(c) }
        } catch let e as PostgresTransactionError {
            if let thrown = e.closureError { throw thrown }
            throw e
        }
    }

    /// How long past its deadline a call that has not ended is taken as hung (its pool is replaced).
    public static let hungAfter = Duration.seconds(3)

    private func replacePool() {
        let now = ContinuousClock.now
        let old: Task<Void, Never>? = pool.withLock { p in
            guard p.running, p.replacedAt.map({ now - $0 >= .seconds(1) }) ?? true else { return nil }
            let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
            let previous = p.task
            p.client = client
            p.task = Task { await client.run() }
            p.replacedAt = now
            return previous
        }
        guard let old else { return }
        replacements.add(1, ordering: .relaxed)
        logger.warning("a database call did not answer in time: the connection pool was replaced")
        old.cancel()
    }

    // MARK: Schema

    /// The schema's migrations, in order; each runs once, recorded in `beckon_migrations`.
    static let migrations: [(name: String, sql: [String])] = [
        (
            "1: log, sequences, leases",
            [
                """
                CREATE TABLE beckon_settings (
                    id int PRIMARY KEY CHECK (id = 1),
                    partitions int NOT NULL
                )
                """,
                """
                CREATE TABLE beckon_sequence (
                    partition int PRIMARY KEY,
                    next_seq bigint NOT NULL
                )
                """,
                """
                CREATE TABLE beckon_log (
                    partition int NOT NULL,
                    seq bigint NOT NULL,
                    user_id text NOT NULL,
                    received_at bigint NOT NULL,
                    body bytea NOT NULL,
                    PRIMARY KEY (partition, seq)
                )
                """,
                """
                CREATE TABLE beckon_lease (
                    partition int PRIMARY KEY,
                    owner text,
                    epoch bigint NOT NULL DEFAULT 0,
                    expires_at timestamptz,
                    processed_seq bigint NOT NULL DEFAULT 0
                )
                """,
            ]
        ),
        (
            "2: users' states, actions, outbox, members",
            [
                """
                CREATE TABLE beckon_user_state (
                    user_id text PRIMARY KEY,
                    partition int NOT NULL,
                    bytes bytea NOT NULL,
                    next_due bigint
                )
                """,
                "CREATE INDEX beckon_user_state_due ON beckon_user_state (partition, next_due) WHERE next_due IS NOT NULL",
                """
                CREATE TABLE beckon_stream_state (
                    partition int PRIMARY KEY,
                    bytes bytea NOT NULL
                )
                """,
                """
                CREATE TABLE beckon_action (
                    seq bigserial PRIMARY KEY,
                    action_id text NOT NULL UNIQUE,
                    user_id text NOT NULL,
                    partition int NOT NULL,
                    json text NOT NULL
                )
                """,
                "CREATE INDEX beckon_action_user ON beckon_action (user_id, seq)",
                """
                CREATE TABLE beckon_outbox (
                    id bigserial PRIMARY KEY,
                    destination text NOT NULL,
                    action_id text NOT NULL,
                    user_id text NOT NULL,
                    body bytea NOT NULL,
                    state int NOT NULL DEFAULT 0,
                    attempts int NOT NULL DEFAULT 0,
                    next_at bigint NOT NULL,
                    created_at bigint NOT NULL,
                    done_at bigint,
                    last_error text,
                    UNIQUE (destination, action_id)
                )
                """,
                """
                CREATE TABLE beckon_member (
                    owner text PRIMARY KEY,
                    expires_at timestamptz NOT NULL,
                    rules_digest text NOT NULL
                )
                """,
            ]
        ),
        (
            "3: rule set versions, each partition's version",
            [
                """
                CREATE TABLE beckon_rules (
                    version bigserial PRIMARY KEY,
                    digest text NOT NULL,
                    files bytea NOT NULL,
                    created_at bigint NOT NULL
                )
                """,
                // (0: the first version stored, for partitions that have not switched since.)
                "ALTER TABLE beckon_lease ADD COLUMN rules_version bigint NOT NULL DEFAULT 0",
            ]
        ),
        (
            "4: rules' live counts per process",
            [
                """
                CREATE TABLE beckon_activity (
                    owner text NOT NULL,
                    rule text NOT NULL,
                    bucket bigint NOT NULL,
                    triggered bigint NOT NULL,
                    fired bigint NOT NULL,
                    scheduled bigint NOT NULL,
                    held_back bigint NOT NULL,
                    blocked text NOT NULL,
                    PRIMARY KEY (owner, rule, bucket)
                )
                """
            ]
        ),
        (
            "5: identity merge across partitions",
            [
                "ALTER TABLE beckon_user_state ADD COLUMN merged_into text",
                """
                CREATE INDEX beckon_user_state_merged ON beckon_user_state (merged_into) WHERE merged_into IS NOT NULL
                """,
                """
                CREATE TABLE beckon_handover (
                    id bigserial PRIMARY KEY,
                    from_id text NOT NULL,
                    to_id text NOT NULL,
                    bytes bytea
                )
                """,
                "CREATE INDEX beckon_handover_pair ON beckon_handover (from_id, to_id, id)",
            ]
        ),
        (
            "6: who holds each push token",
            [
                """
                CREATE TABLE beckon_device_owner (
                    token text PRIMARY KEY,
                    user_id text NOT NULL,
                    seen_at bigint NOT NULL
                )
                """,
                "CREATE INDEX beckon_device_owner_user ON beckon_device_owner (user_id)",
            ]
        ),
        (
            "7: pushes and emails in the live counts",
            ["ALTER TABLE beckon_activity ADD COLUMN messages text NOT NULL DEFAULT '{}'"]
        ),
        (
            // (A row written before holds one entry and leaves both empty.)
            "8: rows of several entries (pages)",
            [
                "ALTER TABLE beckon_log ADD COLUMN last_seq bigint, ADD COLUMN users int[]",
                // A page up to 8 KB stays in its row (no TOAST pointer, chunk rows and index entries for it), and a
                // larger one is moved out without PostgreSQL trying to compress what is deflated already.
                "ALTER TABLE beckon_log SET (toast_tuple_target = 8160), ALTER COLUMN body SET STORAGE EXTERNAL",
            ]
        ),
        (
            // Room on each page for a state's next version: a rewrite that stays on its page logs only what changed
            // and adds no index entry (docs/fleet.md, "What took the WAL down").
            "9: users' states rewritten in place",
            ["ALTER TABLE beckon_user_state SET (fillfactor = 70)"]
        ),
        (
            // Pending entries per destination, counted by the database as entries come and go, so that the pending
            // gauge reads a few rows rather than every pending entry (a paused destination's backlog, every 5 s, in
            // every process). Each connection adds to rows of its own (`shard`: its backend's pid), so that two
            // processes' commits never wait on one count; ``FleetState/pendingOutboxCounts()`` folds the rows of
            // connections gone into shard 0. The due entries and a user's entries get the indexes their reads need.
            "10: pending outbox entries counted, the outbox's indexes",
            [
                """
                CREATE TABLE beckon_outbox_pending (
                    destination text NOT NULL,
                    shard int NOT NULL,
                    n bigint NOT NULL,
                    PRIMARY KEY (destination, shard)
                )
                """,
                """
                INSERT INTO beckon_outbox_pending (destination, shard, n)
                SELECT destination, 0, count(*) FROM beckon_outbox WHERE state = 0 GROUP BY destination
                """,
                """
                CREATE FUNCTION beckon_outbox_pending_count() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF TG_OP = 'INSERT' THEN
                        INSERT INTO beckon_outbox_pending AS p (destination, shard, n)
                        SELECT destination, pg_backend_pid(), count(*) FROM added WHERE state = 0
                        GROUP BY destination ORDER BY destination
                        ON CONFLICT (destination, shard) DO UPDATE SET n = p.n + excluded.n;
                    ELSIF TG_OP = 'DELETE' THEN
                        INSERT INTO beckon_outbox_pending AS p (destination, shard, n)
                        SELECT destination, pg_backend_pid(), -count(*) FROM removed WHERE state = 0
                        GROUP BY destination ORDER BY destination
                        ON CONFLICT (destination, shard) DO UPDATE SET n = p.n + excluded.n;
                    ELSE
                        INSERT INTO beckon_outbox_pending AS p (destination, shard, n)
                        SELECT destination, pg_backend_pid(), sum(d) FROM (
                            SELECT destination, 1 AS d FROM added WHERE state = 0
                            UNION ALL SELECT destination, -1 FROM removed WHERE state = 0
                        ) AS c GROUP BY destination HAVING sum(d) <> 0 ORDER BY destination
                        ON CONFLICT (destination, shard) DO UPDATE SET n = p.n + excluded.n;
                    END IF;
                    RETURN NULL;
                END
                $$
                """,
                """
                CREATE TRIGGER beckon_outbox_pending_added AFTER INSERT ON beckon_outbox
                REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION beckon_outbox_pending_count()
                """,
                """
                CREATE TRIGGER beckon_outbox_pending_removed AFTER DELETE ON beckon_outbox
                REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION beckon_outbox_pending_count()
                """,
                """
                CREATE TRIGGER beckon_outbox_pending_changed AFTER UPDATE ON beckon_outbox
                REFERENCING OLD TABLE AS removed NEW TABLE AS added
                FOR EACH STATEMENT EXECUTE FUNCTION beckon_outbox_pending_count()
                """,
                "CREATE INDEX beckon_outbox_due ON beckon_outbox (next_at, id) WHERE state = 0",
                "CREATE INDEX beckon_outbox_user ON beckon_outbox (user_id)",
            ]
        ),
        (
            // The commit's outbox entries dirtied two indexes on random keys: the unique (destination, action_id),
            // which kept nothing out (an entry is added only with its action, by the statement that stores it, and
            // the statement adds one entry a destination an action: ``FleetLog/commit(_:)``), and the one by user.
            // An entry now holds its action's position (`beckon_action.seq`, rising, so its index is appended to), by
            // which a user's entries (a forget, an export) and an action's (`beckon outbox retry/drop`) are found.
            "11: the outbox's entries found by their action's position",
            [
                "ALTER TABLE beckon_outbox ADD COLUMN action_seq bigint",
                "UPDATE beckon_outbox o SET action_seq = a.seq FROM beckon_action a WHERE a.action_id = o.action_id",
                "CREATE INDEX beckon_outbox_action ON beckon_outbox (action_seq)",
                "DROP INDEX beckon_outbox_user",
                "ALTER TABLE beckon_outbox DROP CONSTRAINT beckon_outbox_destination_action_id_key",
            ]
        ),
        (
            // The log's bodies are written as zstd frames (``LogBody``: 0x04, 0x05), which earlier versions read as
            // damaged entries. No table changes: the migration marks the database, so that an earlier version refuses
            // it at start (``SetUpByALaterVersion``) rather than stop at the first such row of each partition it holds.
            "12: the log's bodies in zstd", []
        ),
    ]

    /// A database this process must not run on: starting again does not help.
    public protocol WrongDatabase: Error, CustomStringConvertible {}

    public struct PartitionCountChanged: WrongDatabase {
        public var stored: Int
        public var description: String {
            "the database was set up with \(stored) partitions, this Beckon uses \(FleetLog.partitionCount)"
        }
    }

    /// The database holds a migration this version does not know: a later Beckon set it up, and may have written
    /// what this one would misread (the log's pages were such a change).
    public struct SetUpByALaterVersion: WrongDatabase {
        public var migrations: [String]
        public var description: String {
            "the database was set up by a later Beckon (migrations \(migrations.joined(separator: ", "))): run that version"
        }
    }

    /// Brings the schema up to date (every process may call it at start: an advisory lock makes them take turns)
    /// and sets up the partitions' rows on first use. Refuses a database a later version has migrated.
    public func migrate() async throws {
        try await transaction { c in
            try await c.query("SELECT pg_advisory_xact_lock(7201)", logger: logger)
            try await c.query(
                "CREATE TABLE IF NOT EXISTS beckon_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL)",
                logger: logger)
            var applied: Set<String> = []
            for try await name in try await c.query("SELECT name FROM beckon_migrations", logger: logger).decode(String.self) {
                applied.insert(name)
            }
            let unknown = applied.subtracting(Self.migrations.map(\.name))
            guard unknown.isEmpty else { throw SetUpByALaterVersion(migrations: unknown.sorted()) }
            for m in Self.migrations where !applied.contains(m.name) {
                for statement in m.sql { try await c.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await c.query("INSERT INTO beckon_migrations VALUES (\(m.name), now())", logger: logger)
            }
            let n = Self.partitionCount
            try await c.query(
                "INSERT INTO beckon_settings (id, partitions) VALUES (1, \(n)) ON CONFLICT (id) DO NOTHING", logger: logger)
            for try await stored in try await c.query("SELECT partitions FROM beckon_settings", logger: logger).decode(Int.self)
            where stored != n {
                throw PartitionCountChanged(stored: stored)
            }
            try await c.query(
                """
                INSERT INTO beckon_sequence (partition, next_seq) SELECT p, 1 FROM generate_series(0, \(n - 1)) AS p
                ON CONFLICT (partition) DO NOTHING
                """, logger: logger)
            try await c.query(
                """
                INSERT INTO beckon_lease (partition) SELECT p FROM generate_series(0, \(n - 1)) AS p
                ON CONFLICT (partition) DO NOTHING
                """, logger: logger)
        }
    }

    // MARK: The log

    /// The partition of a user: FNV-1a (64-bit) of the id's UTF-8 bytes, modulo ``partitionCount``. It must never
    /// change: a user's events are ordered within their partition.
    public static func partition(of userID: String) -> Int {
        Int(fnv(userID) % UInt64(partitionCount))
    }

    /// FNV-1a (64-bit) of a user id's UTF-8 bytes.
    static func fnv(_ userID: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in userID.utf8 {
            h ^= UInt64(b)
            h = h &* 0x100_0000_01b3
        }
        return h
    }

    /// An event as the log keeps it.
    public struct Entry: Sendable, Equatable {
        public var partition: Int
        public var seq: Int64
        public var userID: String
        public var receivedAt: Int64
        public var body: [UInt8]
    }

    /// Appends events (each a user id and the bytes to keep), received at `receivedAt`: ``append(_:)``.
    @discardableResult
    public func append(_ events: [(userID: String, body: [UInt8])], receivedAt: Int64) async throws -> [Entry] {
        try await append(events.map { ($0.userID, $0.body, receivedAt) })
    }

    /// Appends events (each a user id, the record to keep and when it was received), in one transaction: all of them
    /// or none. Returns the entries with their partitions and sequence numbers, in the order given. Within a partition
    /// the order is the order given. A partition's entries of one append share rows (``LogPages``), deflated together.
    ///
    /// One statement whatever the number of events or partitions: the partitions' counter rows are locked in
    /// ascending order (two appends never wait on each other in a cycle), moved on by each partition's count, and the
    /// entries inserted with the numbers that frees. The rows stay locked until the statement commits, which is what
    /// makes a partition's entries visible in sequence order.
    @discardableResult
    public func append(_ events: [(userID: String, body: [UInt8], receivedAt: Int64)]) async throws -> [Entry] {
        try await append(events, in: events.map { Self.partition(of: $0.userID) })
    }

    /// Appends `body(version)` to every partition (a change every partition makes at a position of its log: a new rule
    /// set), in one transaction, only if `version` is still the latest stored rule set: returns whether it did. The
    /// rule-set lock (``storeRules(digest:files:at:)`` takes it too) makes two processes' reloads take turns, so the
    /// partitions switch in the order the versions were stored and end on the latest. The entries name no user.
    public func switchRules(to version: Int64, body: [UInt8], receivedAt: Int64) async throws -> Bool {
        try await timed("switch rules", nil) { [self] in
            try await transaction { c in
                try await c.query("SELECT pg_advisory_xact_lock(\(Self.rulesLock))", logger: logger)
                var latest: Int64 = 0
                for try await v in try await c.query("SELECT coalesce(max(version), 0) FROM beckon_rules", logger: logger)
                    .decode(Int64.self)
                {
                    latest = v
                }
                guard latest == version else { return false }
                let partitions = Array(0..<Self.partitionCount)
                _ = try await append(partitions.map { _ in ("", body, receivedAt) }, in: partitions) { query in
                    try await allRows(c.query(query, logger: logger))
                }
                return true
            }
        }
    }

    /// The advisory lock that stores and switches of rule sets take in turn.
    static let rulesLock = 7202

    private func append(
        _ events: [(userID: String, body: [UInt8], receivedAt: Int64)], in partitionOf: [Int]
    ) async throws -> [Entry] {
        try await timed("append", shortDeadline) { [self] in
            try await append(events, in: partitionOf) { query in try await prepared(Statements.Append.self, query) }
        }
    }

    /// ``append(_:)``'s statement, run by `run` (the pool, prepared, or a transaction's connection).
    func append(
        _ events: [(userID: String, body: [UInt8], receivedAt: Int64)], in partitionOf: [Int],
        run: (PostgresQuery) async throws -> [PostgresRow]
    ) async throws -> [Entry] {
        do {
            guard !events.isEmpty else { return [] }
            var counts: [Int: Int64] = [:]
            // Each event's rank within its partition in this append: its sequence number is the partition's first + rank.
            var ranks: [Int64] = []
            ranks.reserveCapacity(events.count)
            for p in partitionOf {
                ranks.append(counts[p, default: 0])
                counts[p, default: 0] += 1
            }
            let partitions = counts.keys.sorted()
            let sizes = partitions.map { counts[$0]! }
            let rows = await LogPages.rows(events, partitionOf: partitionOf, ranks: ranks)
            // One statement (no transaction left open between statements, so a process stopped mid-append holds no lock):
            // `locked` takes the counter rows in ascending order and, having waited for any append holding them, reads
            // their latest numbers; the update moves each on by its partition's count; the rows take the numbers from
            // there (their first entry's rank within the partition added to its first; a page's last likewise).
            var firsts: [Int: Int64] = [:]
            for row in try await run(
                """
                WITH locked AS MATERIALIZED (
                    SELECT partition, next_seq FROM beckon_sequence WHERE partition = ANY(\(partitions)::int[])
                    ORDER BY partition FOR UPDATE
                ), moved AS (
                    UPDATE beckon_sequence s SET next_seq = l.next_seq + c.n
                    FROM locked l JOIN unnest(\(partitions)::int[], \(sizes)::bigint[]) AS c(p, n) ON c.p = l.partition
                    WHERE s.partition = l.partition
                    RETURNING s.partition, l.next_seq AS first
                ), entries AS (
                    INSERT INTO beckon_log (partition, seq, user_id, received_at, body, last_seq, users)
                    SELECT t.p, m.first + t.k, t.u, t.r, t.b, CASE WHEN t.l < 0 THEN NULL ELSE m.first + t.l END,
                        NULLIF(t.h, '')::int[]
                    FROM unnest(\(rows.partitions)::int[], \(rows.firsts)::bigint[], \(rows.users)::text[],
                        \(rows.times)::bigint[], \(rows.bodies)::bytea[], \(rows.lasts)::bigint[], \(rows.hashes)::text[])
                        AS t(p, k, u, r, b, l, h)
                    JOIN moved m ON m.partition = t.p
                )
                SELECT partition, first FROM moved
                """
            ) {
                let (p, first) = try row.decode((Int, Int64).self)
                firsts[p] = first
            }
            guard firsts.count == partitions.count else { throw AppendFailed() }
            return events.indices.map { i in
                Entry(
                    partition: partitionOf[i], seq: firsts[partitionOf[i]]! + ranks[i], userID: events[i].userID,
                    receivedAt: events[i].receivedAt, body: events[i].body)
            }
        }
    }

    /// A partition's entries after `seq`, in order, at most `limit`.
    ///
    /// Short statements, each planned in a few tens of µs (a runner reads after every batch): the rows whose first
    /// entry is within `limit` numbers of `seq`; when the entry after `seq` does not start one of them, the row before
    /// (a batch can end inside a page); and when that finds nothing, the next row there is (numbers are missing where
    /// entries were taken out).
    public func read(partition: Int, after seq: Int64, limit: Int) async throws -> [Entry] {
        try await timed("read", nil) { [self] in
            var rows = try await readRows(
                partition, "seq > \(seq) AND seq <= \(seq + Int64(limit)) ORDER BY seq", Statements.Read.self)
            if rows.first?.seq != seq + 1 {
                rows =
                    try await readRows(partition, "seq <= \(seq) ORDER BY seq DESC LIMIT 1", Statements.ReadBefore.self)
                    .filter { ($0.last ?? 0) > seq } + rows
            }
            var entries = rows.flatMap { $0.entries(partition: partition) }.filter { $0.seq > seq }
            if entries.isEmpty {
                entries = try await readRows(partition, "seq > \(seq) ORDER BY seq LIMIT 1", Statements.ReadNext.self)
                    .flatMap { $0.entries(partition: partition) }
            }
            return Array(entries.prefix(limit))
        }
    }

    /// The log's rows of `partition` that `condition` (SQL after `WHERE partition = … AND`) selects, read by `run`
    /// (a transaction's connection), or on the pool: as the prepared statement `name` when given.
    func readRows(
        _ partition: Int, _ condition: PostgresQuery, _ name: (any StatementName.Type)? = nil,
        run: ((PostgresQuery) async throws -> [PostgresRow])? = nil
    ) async throws -> [LogPages.Row] {
        // (The partition is bound after the condition's own parameters, which keep their numbers.)
        var query = condition
        query.binds.append(partition, context: .default)
        query.sql =
            "SELECT seq, user_id, received_at, last_seq, body FROM beckon_log WHERE partition = $\(query.binds.count) AND "
            + condition.sql
        let rows =
            if let run { try await run(query) } else if let name { try await prepared(name, query) } else {
                try await allRows(client.query(query, logger: logger))
            }
        var out: [LogPages.Row] = []
        for row in rows {
            let (s, u, r, last, b) = try row.decode((Int64, String, Int64, Int64?, ByteBuffer).self)
            out.append(LogPages.Row(seq: s, userID: u, receivedAt: r, last: last, body: Array(b.readableBytesView)))
        }
        return out
    }

    // MARK: Leases

    /// A partition held by a process, as of one epoch.
    public struct Lease: Sendable, Equatable {
        public var partition: Int
        public var owner: String
        public var epoch: Int64
    }

    /// Takes `partition`'s lease for `owner` if it is free or expired (its epoch goes up by one), for `ttl`.
    public func acquire(partition: Int, owner: String, ttl: Duration) async throws -> Lease? {
        try await timed("acquire", nil) { [self] in
            let ms = Self.milliseconds(ttl)
            let rows = try await client.query(
                """
                UPDATE beckon_lease SET owner = \(owner), epoch = epoch + 1,
                    expires_at = clock_timestamp() + \(ms) * interval '1 millisecond'
                WHERE partition = \(partition) AND (owner IS NULL OR expires_at < clock_timestamp())
                RETURNING epoch
                """, logger: logger)
            for try await epoch in rows.decode(Int64.self) { return Lease(partition: partition, owner: owner, epoch: epoch) }
            return nil
        }
    }

    /// Extends a lease its holder still holds (same owner and epoch, not expired). Returns whether it did.
    public func renew(_ lease: Lease, ttl: Duration) async throws -> Bool {
        try await timed("renew", nil) { [self] in
            let ms = Self.milliseconds(ttl)
            let rows = try await prepared(
                Statements.Renew.self,
                """
                UPDATE beckon_lease SET expires_at = clock_timestamp() + \(ms) * interval '1 millisecond'
                WHERE partition = \(lease.partition) AND owner = \(lease.owner) AND epoch = \(lease.epoch)
                    AND expires_at >= clock_timestamp()
                RETURNING epoch
                """)
            return !rows.isEmpty
        }
    }

    /// Gives a lease up (a process that stops hands its partitions over at once rather than at expiry).
    public func release(_ lease: Lease) async throws {
        try await timed("release", nil) { [self] in
            try await client.query(
                """
                UPDATE beckon_lease SET owner = NULL, expires_at = NULL
                WHERE partition = \(lease.partition) AND owner = \(lease.owner) AND epoch = \(lease.epoch)
                """, logger: logger)
        }
    }

    /// A partition's processed position.
    public func processed(partition: Int) async throws -> Int64 {
        try await timed("processed", nil) { [self] in
            for try await s in try await client.query(
                "SELECT processed_seq FROM beckon_lease WHERE partition = \(partition)", logger: logger
            ).decode(Int64.self) {
                return s
            }
            return 0
        }
    }

    // MARK: Retention

    /// Deletes log entries received before `cutoff` that their partition has processed, and delivered outbox entries
    /// done before it, at most `limit` of each per call (a call is one short statement; call again while it deletes
    /// as many as `limit`; a page of the log counts as its entries). Returns how many of each.
    public func deleteOlder(than cutoff: Int64, limit: Int = 10_000) async throws -> (entries: Int, delivered: Int) {
        try await timed("retention", nil) { [self] in
            for try await (e, o) in try await client.query(
                """
                WITH e AS (
                    DELETE FROM beckon_log WHERE (partition, seq) IN (
                        SELECT l.partition, l.seq FROM beckon_log l JOIN beckon_lease p USING (partition)
                        WHERE l.received_at < \(cutoff) AND coalesce(l.last_seq, l.seq) <= p.processed_seq LIMIT \(limit))
                    RETURNING coalesce(cardinality(users), 1) AS n
                ), o AS (
                    DELETE FROM beckon_outbox WHERE id IN (
                        SELECT id FROM beckon_outbox WHERE state = 1 AND done_at < \(cutoff) LIMIT \(limit))
                    RETURNING 1
                )
                SELECT (SELECT coalesce(sum(n), 0)::bigint FROM e), (SELECT count(*) FROM o)
                """, logger: logger
            ).decode((Int64, Int64).self) {
                return (Int(e), Int(o))
            }
            return (0, 0)
        }
    }

    // MARK: Rules' live counts

    /// One rule's counts in one 5-minute bucket, as one process counted them (`blocked`: JSON, by verdict code).
    public struct ActivityRow: Sendable {
        public var rule: String
        public var bucket: Int64
        public var triggered, fired, scheduled, heldBack: Int64
        public var blocked: String
        /// The pushes and emails sent for the rule, by result (JSON, as `blocked`).
        public var messages: String
        public init(
            rule: String, bucket: Int64, triggered: Int64, fired: Int64, scheduled: Int64, heldBack: Int64, blocked: String,
            messages: String = "{}"
        ) {
            self.messages = messages
            self.rule = rule
            self.bucket = bucket
            self.triggered = triggered
            self.fired = fired
            self.scheduled = scheduled
            self.heldBack = heldBack
            self.blocked = blocked
        }
    }

    /// Stores this process's counts (its latest buckets, replacing what it stored of them before) and deletes every
    /// process's buckets older than `oldest`.
    public func writeActivity(owner: String, _ rows: [ActivityRow], oldest: Int64) async throws {
        try await timed("activity", nil) { [self] in
            try await client.query(
                """
                WITH up AS (
                    INSERT INTO beckon_activity
                        (owner, rule, bucket, triggered, fired, scheduled, held_back, blocked, messages)
                    SELECT \(owner), * FROM unnest(\(rows.map(\.rule))::text[], \(rows.map(\.bucket))::bigint[],
                        \(rows.map(\.triggered))::bigint[], \(rows.map(\.fired))::bigint[], \(rows.map(\.scheduled))::bigint[],
                        \(rows.map(\.heldBack))::bigint[], \(rows.map(\.blocked))::text[], \(rows.map(\.messages))::text[])
                    ON CONFLICT (owner, rule, bucket) DO UPDATE SET triggered = excluded.triggered,
                        fired = excluded.fired, scheduled = excluded.scheduled, held_back = excluded.held_back,
                        blocked = excluded.blocked, messages = excluded.messages
                )
                DELETE FROM beckon_activity WHERE bucket < \(oldest)
                """, logger: logger)
        }
    }

    /// Every process's counts from bucket `oldest` on, but those of `owner` (`nil`: every process's).
    public func activity(since oldest: Int64, except owner: String? = nil) async throws -> [ActivityRow] {
        try await timed("activity", nil) { [self] in
            var out: [ActivityRow] = []
            for try await (r, b, t, f, s, h, x, m) in try await client.query(
                """
                SELECT rule, bucket, triggered, fired, scheduled, held_back, blocked, messages FROM beckon_activity
                WHERE bucket >= \(oldest) AND owner IS DISTINCT FROM \(owner)
                """, logger: logger
            ).decode((String, Int64, Int64, Int64, Int64, Int64, String, String).self) {
                out.append(
                    ActivityRow(rule: r, bucket: b, triggered: t, fired: f, scheduled: s, heldBack: h, blocked: x, messages: m))
            }
            return out
        }
    }

    // MARK: Rule sets

    /// A rule set as the fleet stores it: its files (paths and texts, in load order) and their digest.
    public struct StoredRules: Sendable, Equatable {
        public var version: Int64
        public var digest: String
        public var files: [(path: String, text: String)]
        public init(version: Int64, digest: String, files: [(path: String, text: String)]) {
            self.version = version
            self.digest = digest
            self.files = files
        }
        public static func == (a: StoredRules, b: StoredRules) -> Bool {
            a.version == b.version && a.digest == b.digest && a.files.elementsEqual(b.files, by: { $0 == $1 })
        }
    }

    private struct StoredFile: Codable {
        var path: String
        var text: String
    }

    /// Stores a rule set as a new version (the next number, whatever versions had the same files before); returns
    /// the version.
    public func storeRules(digest: String, files: [(path: String, text: String)], at time: Int64) async throws -> Int64 {
        let encoded = ByteBuffer(bytes: try JSONEncoder().encode(files.map { StoredFile(path: $0.path, text: $0.text) }))
        return try await timed("store rules", nil) { [self] in
            try await transaction { c in
                try await c.query("SELECT pg_advisory_xact_lock(\(Self.rulesLock))", logger: logger)
                for try await v in try await c.query(
                    """
                    INSERT INTO beckon_rules (digest, files, created_at) VALUES (\(digest), \(encoded), \(time))
                    RETURNING version
                    """, logger: logger
                ).decode(Int64.self) {
                    return v
                }
                throw AppendFailed()
            }
        }
    }

    /// A stored rule set: `version`, or the latest (`nil`), or the first (`0`); `nil` when there is none.
    public func rules(version: Int64?) async throws -> StoredRules? {
        try await timed("rules", nil) { [self] in
            let query: PostgresQuery =
                switch version {
                case nil: "SELECT version, digest, files FROM beckon_rules ORDER BY version DESC LIMIT 1"
                case 0?: "SELECT version, digest, files FROM beckon_rules ORDER BY version LIMIT 1"
                case let v?: "SELECT version, digest, files FROM beckon_rules WHERE version = \(v)"
                }
            for try await (v, digest, files) in try await client.query(query, logger: logger).decode(
                (Int64, String, ByteBuffer).self)
            {
                let decoded = try JSONDecoder().decode([StoredFile].self, from: Data(files.readableBytesView))
                return StoredRules(version: v, digest: digest, files: decoded.map { ($0.path, $0.text) })
            }
            return nil
        }
    }

    /// The latest stored version's number (0: none stored).
    public func latestRulesVersion() async throws -> Int64 {
        try await timed("rules", nil) { [self] in
            for try await v in try await client.query(
                "SELECT coalesce(max(version), 0) FROM beckon_rules", logger: logger
            ).decode(Int64.self) {
                return v
            }
            return 0
        }
    }

    /// The rule set version a partition runs as of its processed position (0: the first stored).
    public func rulesVersion(partition: Int) async throws -> Int64 {
        try await timed("processed", nil) { [self] in
            for try await v in try await client.query(
                "SELECT rules_version FROM beckon_lease WHERE partition = \(partition)", logger: logger
            ).decode(Int64.self) {
                return v
            }
            return 0
        }
    }

    // MARK: Status

    /// A partition as `beckon fleet status` shows it.
    public struct PartitionStatus: Sendable, Equatable {
        public var partition: Int
        /// The process holding its lease, if any holds one that has not expired.
        public var owner: String?
        public var epoch: Int64
        /// Milliseconds the lease has left (negative: expired), if held.
        public var leaseLeftMs: Int64?
        /// The last sequence number appended, and the last processed.
        public var appended: Int64
        public var processed: Int64
        /// Users whose delayed actions are due by the database's clock and not yet fired (a lagging owner's backlog).
        public var timersDue: Int64 = 0
        public var lag: Int64 { appended - processed }
    }

    /// Whether the database has been set up as a fleet's (a process or `beckon fleet migrate` has migrated it).
    public func isSetUp() async throws -> Bool {
        for try await set in try await client.query(
            "SELECT to_regclass('beckon_lease') IS NOT NULL", logger: logger
        ).decode(Bool.self) {
            return set
        }
        return false
    }

    /// Every partition's lease and progress, in partition order.
    public func status() async throws -> [PartitionStatus] {
        var out: [PartitionStatus] = []
        let rows = try await client.query(
            """
            SELECT l.partition, l.owner, l.epoch,
                (extract(epoch FROM (l.expires_at - clock_timestamp())) * 1000)::bigint,
                s.next_seq - 1, l.processed_seq, coalesce(t.due, 0)
            FROM beckon_lease l JOIN beckon_sequence s USING (partition)
            LEFT JOIN (
                SELECT partition, count(*) AS due FROM beckon_user_state
                WHERE next_due <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint GROUP BY partition
            ) t USING (partition)
            ORDER BY l.partition
            """, logger: logger)
        for try await (p, owner, epoch, left, appended, processed, due) in rows.decode(
            (Int, String?, Int64, Int64?, Int64, Int64, Int64).self)
        {
            out.append(
                PartitionStatus(
                    partition: p, owner: owner, epoch: epoch, leaseLeftMs: owner == nil ? nil : left, appended: appended,
                    processed: processed, timersDue: due))
        }
        return out
    }

    static func milliseconds(_ d: Duration) -> Int64 {
        d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }
}
