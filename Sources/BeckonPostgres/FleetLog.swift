import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The fleet's shared log and partition leases in PostgreSQL (docs/fleet.md): the ground on which many `beckon serve`
/// processes agree on one order of each user's events and on which process processes which users.
///
/// - **The log** is split by a hash of the user id into ``partitionCount`` partitions. Each partition's sequence is a
///   counter row that an append updates in its own transaction: the row lock makes the next append of that partition
///   wait until this one commits, so a partition's rows become visible in sequence order, with no gaps. (An identity
///   column would hand out numbers at insert time: a transaction that took 7 and commits after the one that took 8 lets
///   a reader that saw 8 move its offset past 7 and never read it.)
/// - **Leases**: a partition is processed by the one process that holds its lease (owner, epoch, expiry). A lease is
///   taken when it is free or expired, which adds one to its epoch; its holder renews it while it lives. Every
///   processing transaction starts with ``fenced(_:logger:_:)``, which locks the lease row and checks owner, epoch
///   and expiry: a process that was paused or cut off past its lease cannot write once another holds it.
public final class FleetLog: Sendable {
    public let client: PostgresClient
    let logger: Logger
    /// Partitions of the log, fixed when the database is first set up (changing it would move users between
    /// partitions, and so reorder their events).
    public static let partitionCount = 64

    public struct Fenced: Error, CustomStringConvertible {
        public var partition: Int
        public var description: String { "partition \(partition)'s lease is no longer this process's: nothing was written" }
    }

    public struct BadURL: Error, CustomStringConvertible {
        public var url: String
        public var description: String { "not a PostgreSQL URL like postgres://user:password@host:5432/database: \(url)" }
    }

    /// A client for `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (no TLS: for loopback and private networks).
    /// ``run()`` must run while it is used.
    public init(url: String, logger: Logger) throws {
        guard let u = URLComponents(string: url), u.scheme == "postgres" || u.scheme == "postgresql", let host = u.host,
            let user = u.user
        else { throw BadURL(url: url) }
        let database = u.path.hasPrefix("/") ? String(u.path.dropFirst()) : u.path
        var configuration = PostgresClient.Configuration(
            host: host, port: u.port ?? 5432, username: user, password: u.password,
            database: database.isEmpty ? nil : database, tls: .disable)
        configuration.options.maximumConnections = 16
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.logger = logger
    }

    /// Runs the connection pool until the task is cancelled.
    public func run() async { await client.run() }

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
        )
    ]

    public struct PartitionCountChanged: Error, CustomStringConvertible {
        public var stored: Int
        public var description: String {
            "the database was set up with \(stored) partitions, this Beckon uses \(FleetLog.partitionCount)"
        }
    }

    /// Brings the schema up to date (every process may call it at start: an advisory lock makes them take turns)
    /// and sets up the partitions' rows on first use.
    public func migrate() async throws {
        try await client.withTransaction(logger: logger) { c in
            try await c.query("SELECT pg_advisory_xact_lock(7201)", logger: logger)
            try await c.query(
                "CREATE TABLE IF NOT EXISTS beckon_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL)",
                logger: logger)
            var applied: Set<String> = []
            for try await name in try await c.query("SELECT name FROM beckon_migrations", logger: logger).decode(String.self) {
                applied.insert(name)
            }
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
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in userID.utf8 {
            h ^= UInt64(b)
            h = h &* 0x100_0000_01b3
        }
        return Int(h % UInt64(partitionCount))
    }

    /// An event as the log keeps it.
    public struct Entry: Sendable, Equatable {
        public var partition: Int
        public var seq: Int64
        public var userID: String
        public var receivedAt: Int64
        public var body: [UInt8]
    }

    /// Appends events (each a user id and the bytes to keep), in one transaction: all of them or none. Returns the
    /// entries with their partitions and sequence numbers, in the order given. Within a partition the order is the
    /// order given; partitions are locked in ascending order (two appends never wait on each other in a cycle).
    @discardableResult
    public func append(_ events: [(userID: String, body: [UInt8])], receivedAt: Int64) async throws -> [Entry] {
        guard !events.isEmpty else { return [] }
        var byPartition: [Int: [Int]] = [:]
        for (i, e) in events.enumerated() { byPartition[Self.partition(of: e.userID), default: []].append(i) }
        let logger = logger
        return try await client.withTransaction(logger: logger) { c in
            var out = [Entry?](repeating: nil, count: events.count)
            for p in byPartition.keys.sorted() {
                let indices = byPartition[p]!
                let n = Int64(indices.count)
                var first: Int64 = 0
                for try await start in try await c.query(
                    "UPDATE beckon_sequence SET next_seq = next_seq + \(n) WHERE partition = \(p) RETURNING next_seq - \(n)",
                    logger: logger
                ).decode(Int64.self) {
                    first = start
                }
                let seqs = (0..<n).map { first + $0 }
                let users = indices.map { events[$0].userID }
                let bodies = indices.map { ByteBuffer(bytes: events[$0].body) }
                try await c.query(
                    """
                    INSERT INTO beckon_log (partition, seq, user_id, received_at, body)
                    SELECT \(p), s, u, \(receivedAt), b FROM unnest(\(seqs)::bigint[], \(users)::text[], \(bodies)::bytea[]) AS t(s, u, b)
                    """, logger: logger)
                for (k, i) in indices.enumerated() {
                    out[i] = Entry(
                        partition: p, seq: seqs[k], userID: events[i].userID, receivedAt: receivedAt, body: events[i].body)
                }
            }
            return out.map { $0! }
        }
    }

    /// A partition's entries after `seq`, in order, at most `limit`.
    public func read(partition: Int, after seq: Int64, limit: Int) async throws -> [Entry] {
        var out: [Entry] = []
        let rows = try await client.query(
            """
            SELECT seq, user_id, received_at, body FROM beckon_log WHERE partition = \(partition) AND seq > \(seq)
            ORDER BY seq LIMIT \(limit)
            """, logger: logger)
        for try await (s, u, r, b) in rows.decode((Int64, String, Int64, ByteBuffer).self) {
            out.append(Entry(partition: partition, seq: s, userID: u, receivedAt: r, body: Array(b.readableBytesView)))
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

    /// Extends a lease its holder still holds (same owner and epoch, not expired). Returns whether it did.
    public func renew(_ lease: Lease, ttl: Duration) async throws -> Bool {
        let ms = Self.milliseconds(ttl)
        let rows = try await client.query(
            """
            UPDATE beckon_lease SET expires_at = clock_timestamp() + \(ms) * interval '1 millisecond'
            WHERE partition = \(lease.partition) AND owner = \(lease.owner) AND epoch = \(lease.epoch)
                AND expires_at >= clock_timestamp()
            RETURNING epoch
            """, logger: logger)
        for try await _ in rows.decode(Int64.self) { return true }
        return false
    }

    /// Gives a lease up (a process that stops hands its partitions over at once rather than at expiry).
    public func release(_ lease: Lease) async throws {
        try await client.query(
            """
            UPDATE beckon_lease SET owner = NULL, expires_at = NULL
            WHERE partition = \(lease.partition) AND owner = \(lease.owner) AND epoch = \(lease.epoch)
            """, logger: logger)
    }

    /// Runs `body` in a transaction that first locks the lease row and checks that `lease` still holds (owner, epoch,
    /// not expired); otherwise nothing of `body` runs and ``Fenced`` is thrown. The row stays locked until the commit,
    /// so the lease cannot move to another process while the transaction writes.
    public func fenced<T: Sendable>(
        _ lease: Lease, logger: Logger, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            return try await fencedTransaction(lease, logger: logger, body)
        } catch let e as PostgresTransactionError {
            // (The refusal, not the transaction's wrapper of it: callers tell a fence from a failure.)
            if let fenced = e.closureError as? Fenced { throw fenced }
            throw e
        }
    }

    private func fencedTransaction<T: Sendable>(
        _ lease: Lease, logger: Logger, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await client.withTransaction(logger: logger) { c in
            var holds = false
            for try await _ in try await c.query(
                """
                SELECT epoch FROM beckon_lease WHERE partition = \(lease.partition) AND owner = \(lease.owner)
                    AND epoch = \(lease.epoch) AND expires_at >= clock_timestamp()
                FOR UPDATE
                """, logger: logger
            ).decode(Int64.self) {
                holds = true
            }
            guard holds else { throw Fenced(partition: lease.partition) }
            return try await body(c)
        }
    }

    /// Moves a partition's processed position, inside a ``fenced(_:logger:_:)`` transaction.
    public static func setProcessed(_ seq: Int64, of partition: Int, on c: PostgresConnection, logger: Logger) async throws {
        try await c.query(
            "UPDATE beckon_lease SET processed_seq = \(seq) WHERE partition = \(partition)", logger: logger)
    }

    /// A partition's processed position.
    public func processed(partition: Int) async throws -> Int64 {
        for try await s in try await client.query(
            "SELECT processed_seq FROM beckon_lease WHERE partition = \(partition)", logger: logger
        ).decode(Int64.self) {
            return s
        }
        return 0
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
                s.next_seq - 1, l.processed_seq
            FROM beckon_lease l JOIN beckon_sequence s USING (partition) ORDER BY l.partition
            """, logger: logger)
        for try await (p, owner, epoch, left, appended, processed) in rows.decode(
            (Int, String?, Int64, Int64?, Int64, Int64).self)
        {
            out.append(
                PartitionStatus(
                    partition: p, owner: owner, epoch: epoch, leaseLeftMs: owner == nil ? nil : left, appended: appended,
                    processed: processed))
        }
        return out
    }

    static func milliseconds(_ d: Duration) -> Int64 {
        d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }
}
