import BeckonCore
import Foundation
import GRDB

/// Users' encoded states in an embedded SQLite database (through GRDB), for a ``SavedStateStore``: the durable state
/// of `beckon serve` by default.
///
/// One file, in write-ahead-log mode (readers do not block the writer). A batch of states is one transaction, so a
/// crash leaves either all of it or none ("200 means durable" rests on this). Users with delayed actions are indexed
/// by their soonest due time, so that a restarted service finds them without reading every row. The stream's own
/// state (its clock and timer ids) is one more row.
///
/// The schema is versioned with GRDB's migrator: a database made by an older Beckon is brought up to date when it is
/// opened; one made by a newer Beckon is refused.
public final class SQLiteStateBackend: StateBackend, Sendable {
    let pool: DatabasePool
    public let path: String
    /// Folds the write-ahead log into the file on a thread of its own (a service's database: ``init(path:service:)``).
    let checkpointer: WALCheckpointer?

    /// The log's size in pages at which the writer folds it in itself when it commits, with checkpoints in the
    /// background (``ServiceLimits/logBackstopBytes`` of 4 KiB pages; SQLite's default, without them, is 1,000 pages).
    public static let backstopLogPages = ServiceLimits.logBackstopBytes / 4096

    /// Opens (or creates) the database at `path`. A `service` (`beckon serve`) folds the write-ahead log into the file
    /// on a thread of its own (``WALCheckpointer``), so that its commits only append to the log.
    public init(path: String, service: Bool = false) throws {
        self.path = path
        var config = Configuration()
        config.label = "beckon-state"
        config.prepareDatabase { db in
            // A commit is on disk when it returns (fsync of the log), not only in the OS's cache: "200 means durable"
            // holds across a power cut, not only a crash of the process.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            if service {
                // (And the log's file is cut back to that size when the writer starts it again.)
                try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.backstopLogPages)")
                try db.execute(sql: "PRAGMA journal_size_limit = \(ServiceLimits.logBackstopBytes)")
            }
        }
        // A command (`beckon outbox`) may write while a service runs: wait for the other's transaction.
        config.busyMode = .timeout(10)
        pool = try DatabasePool(path: path, configuration: config)
        try Self.migrator.migrate(pool)
        checkpointer = service ? try WALCheckpointer(path: path) : nil
    }

    /// An integer setting of the database's connections (`PRAGMA name`), for tests.
    package func pragma(_ name: String) throws -> Int? {
        try pool.read { db in try Int.fetchOne(db, sql: "PRAGMA \(name)") }
    }

    /// Frames of the write-ahead log folded into the file by the background checkpoints (0 without them).
    public var framesFoldedInBackground: Int { checkpointer?.framesFolded ?? 0 }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1: user states and the stream") { db in
            try db.execute(
                sql: """
                    CREATE TABLE user_state (
                        user_id TEXT PRIMARY KEY NOT NULL,
                        bytes BLOB NOT NULL,
                        next_due INTEGER
                    ) WITHOUT ROWID;
                    CREATE INDEX user_state_next_due ON user_state(next_due) WHERE next_due IS NOT NULL;
                    CREATE TABLE stream_state (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        bytes BLOB NOT NULL
                    );
                    """)
        }
        m.registerMigration("v2: the service's input log, action log and checkpoint") { db in
            try db.execute(
                sql: """
                    CREATE TABLE input_log (
                        seq INTEGER PRIMARY KEY,
                        received_at INTEGER NOT NULL,
                        events INTEGER NOT NULL,
                        body BLOB NOT NULL
                    );
                    CREATE TABLE action_log (
                        seq INTEGER PRIMARY KEY,
                        user_id TEXT NOT NULL,
                        action_id TEXT NOT NULL,
                        json TEXT NOT NULL
                    );
                    CREATE INDEX action_log_user ON action_log(user_id, seq);
                    CREATE UNIQUE INDEX action_log_id ON action_log(action_id);
                    CREATE TABLE checkpoint (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        input_seq INTEGER NOT NULL
                    );
                    """)
        }
        m.registerMigration("v3: rule set versions, the outbox, forgotten users") { db in
            try db.execute(
                sql: """
                    CREATE TABLE rule_files (
                        version INTEGER NOT NULL,
                        ord INTEGER NOT NULL,
                        path TEXT NOT NULL,
                        text TEXT NOT NULL,
                        PRIMARY KEY (version, ord)
                    );
                    CREATE TABLE rule_versions (
                        version INTEGER PRIMARY KEY,
                        digest TEXT NOT NULL,
                        loaded_at INTEGER NOT NULL
                    );
                    ALTER TABLE checkpoint ADD COLUMN rules_version INTEGER;
                    CREATE TABLE outbox (
                        id INTEGER PRIMARY KEY,
                        destination TEXT NOT NULL,
                        action_id TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        body BLOB NOT NULL,
                        state INTEGER NOT NULL DEFAULT 0,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_at INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        done_at INTEGER,
                        last_error TEXT
                    );
                    CREATE UNIQUE INDEX outbox_action ON outbox(destination, action_id);
                    CREATE INDEX outbox_due ON outbox(next_at) WHERE state = 0;
                    CREATE INDEX outbox_user ON outbox(user_id);
                    CREATE TABLE pending_scrub (
                        user_id TEXT PRIMARY KEY NOT NULL,
                        up_to_seq INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    """)
            // Sequence numbers are never used again once rows can be deleted (retention, forget): a plain INTEGER
            // PRIMARY KEY takes max + 1, so a new record could number below a checkpoint's position (never replayed)
            // or a new action below a client's pull cursor (never seen).
            for (table, columns) in [
                ("input_log", "received_at INTEGER NOT NULL, events INTEGER NOT NULL, body BLOB NOT NULL"),
                ("action_log", "user_id TEXT NOT NULL, action_id TEXT NOT NULL, json TEXT NOT NULL"),
            ] {
                try db.execute(
                    sql: """
                        CREATE TABLE \(table)_new (seq INTEGER PRIMARY KEY AUTOINCREMENT, \(columns));
                        INSERT INTO \(table)_new SELECT * FROM \(table);
                        DROP TABLE \(table);
                        ALTER TABLE \(table)_new RENAME TO \(table);
                        """)
            }
            try db.execute(
                sql: """
                    CREATE INDEX action_log_user ON action_log(user_id, seq);
                    CREATE UNIQUE INDEX action_log_id ON action_log(action_id);
                    """)
        }
        m.registerMigration("v4: ids merged into a user, the write probe") { db in
            try db.execute(
                sql: """
                    ALTER TABLE user_state ADD COLUMN merged_into TEXT;
                    CREATE TABLE write_probe (id INTEGER PRIMARY KEY CHECK (id = 1), bytes BLOB NOT NULL);
                    """)
            // (States written before hold their pointer in their bytes only: read a row at a time, not all at once.)
            var pointers: [(String, String)] = []
            let rows = try Row.fetchCursor(db, sql: "SELECT user_id, bytes FROM user_state")
            while let row = try rows.next() {
                let bytes = [UInt8](row["bytes"] as Data)
                guard let into = (try? UserState(decoding: bytes))?.mergedInto else { continue }
                pointers.append((row["user_id"], into))
            }
            for (user, into) in pointers {
                try db.execute(sql: "UPDATE user_state SET merged_into = ? WHERE user_id = ?", arguments: [into, user])
            }
            try db.execute(sql: "CREATE INDEX user_state_merged ON user_state(merged_into) WHERE merged_into IS NOT NULL")
        }
        m.registerMigration("v5: who holds each push token") { db in
            try db.execute(
                sql: """
                    CREATE TABLE device_owner (
                        token TEXT PRIMARY KEY NOT NULL,
                        user_id TEXT NOT NULL,
                        seen_at INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX device_owner_user ON device_owner(user_id);
                    """)
        }
        m.registerMigration("v6: how far schedules have reached the stored users") { db in
            try db.execute(
                sql: """
                    CREATE TABLE reach_progress (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        rules_version INTEGER NOT NULL,
                        after_user TEXT,
                        done INTEGER NOT NULL
                    );
                    """)
        }
        m.registerMigration("v7: pending outbox entries counted per destination") { db in
            // The count the pending gauge reads every few seconds, kept in each transaction that adds, settles,
            // retries or deletes an entry: reading it costs one row a destination, where counting the entries read
            // every pending entry — a paused destination's backlog of millions, every 5 s, with a snapshot held
            // meanwhile. The commit that adds entries (``write(_:_:)``, the only one) adds to it once a destination;
            // triggers take the rest (deliveries, `beckon outbox`, a forget, retention), where rows are few. (A
            // trigger on insert cost the write ceiling 12%: bench-service/ceiling.c, 105,221 → 119,891 events/s.)
            try db.execute(
                sql: """
                    CREATE TABLE outbox_pending (
                        destination TEXT PRIMARY KEY NOT NULL,
                        n INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    INSERT INTO outbox_pending (destination, n)
                        SELECT destination, count(*) FROM outbox WHERE state = 0 GROUP BY destination;
                    CREATE TRIGGER outbox_pending_deleted AFTER DELETE ON outbox WHEN OLD.state = 0 BEGIN
                        UPDATE outbox_pending SET n = n - 1 WHERE destination = OLD.destination;
                    END;
                    CREATE TRIGGER outbox_pending_changed AFTER UPDATE OF state, destination ON outbox
                    WHEN (OLD.state = 0) != (NEW.state = 0) OR (NEW.state = 0 AND OLD.destination != NEW.destination)
                    BEGIN
                        UPDATE outbox_pending SET n = n - 1 WHERE OLD.state = 0 AND destination = OLD.destination;
                        INSERT INTO outbox_pending (destination, n) SELECT NEW.destination, 1 WHERE NEW.state = 0
                            ON CONFLICT (destination) DO UPDATE SET n = n + 1;
                    END;
                    """)
        }
        m.registerMigration("v8: the outbox's entries found by their action's position, not indexed by key") { db in
            // The commit's random-key indexes cost it most of its writing: each dirties a leaf page a key, a 4 KiB
            // frame in the log (bench-service/ceiling.c on one run's rows: 125,704–129,490 events/s with every index,
            // 544,000 with none). Two go:
            // - `outbox_action`, unique (destination, action_id): an entry is added only with its action, by the
            //   transaction that stores the action (``write(_:_:)``), and an action id is stored once
            //   (`action_log_id`), so it kept nothing out that those do not, and no read used it (171,301–176,519
            //   without it);
            // - `outbox_user`, for a forget and a user's export: an entry now holds its action's position in the action
            //   log (`action_seq`, rising as entries are added: the index is appended to), and a user's entries are
            //   those of the user's actions (`action_log_user`).
            try db.execute(
                sql: """
                    DROP INDEX outbox_action;
                    ALTER TABLE outbox ADD COLUMN action_seq INTEGER;
                    UPDATE outbox SET action_seq = (SELECT seq FROM action_log WHERE action_log.action_id = outbox.action_id);
                    CREATE INDEX outbox_action_seq ON outbox(action_seq);
                    DROP INDEX outbox_user;
                    """)
        }
        return m
    }

    /// A small write (256 KiB, written and deleted in one transaction): whether the database can be written, for a
    /// service whose last commit failed (a full disk, a read-only file).
    public func probeWrite() throws {
        try pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO write_probe (id, bytes) VALUES (1, zeroblob(262144))")
            try db.execute(sql: "DELETE FROM write_probe")
        }
    }

    /// Folds the write-ahead log into the database and truncates it to nothing: what a clean stop leaves. The
    /// background checkpoints stop first: this is the last write.
    public func truncateLog() throws {
        checkpointer?.stop()
        try pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
    }

    /// The ids merged into `userID`, directly or through other merged ids, as the stored states have them.
    public func idsMerged(into userID: String) throws -> [String] {
        try pool.read { db in
            var found: [String] = []
            var seen: Set<String> = [userID]
            var frontier = [userID]
            while let id = frontier.popLast() {
                for m in try String.fetchAll(db, sql: "SELECT user_id FROM user_state WHERE merged_into = ?", arguments: [id])
                where seen.insert(m).inserted {
                    found.append(m)
                    frontier.append(m)
                }
            }
            return found
        }
    }

    /// A user's saved state. The engine's thread asks it for each user it has not seen since it started (every new
    /// user): one prepared statement, without a transaction around it (one statement reads one snapshot).
    public func read(_ userID: String) throws -> [UInt8]? {
        try pool.unsafeRead { db in
            let statement = try db.cachedStatement(sql: "SELECT bytes FROM user_state WHERE user_id = ?")
            return try Data.fetchOne(statement, arguments: [userID]).map { [UInt8]($0) }
        }
    }

    public func write(_ batch: [SavedState]) throws {
        guard !batch.isEmpty else { return }
        try pool.write { db in
            let statement = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO user_state (user_id, bytes, next_due, merged_into) VALUES (?, ?, ?, ?)")
            for s in batch {
                try statement.execute(arguments: [s.userID, Data(s.bytes), s.nextDue, s.mergedInto])
            }
        }
    }

    public func usersWithPendingActions() throws -> [(userID: String, due: Int64)] {
        try pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT user_id, next_due FROM user_state WHERE next_due IS NOT NULL ORDER BY user_id"
            ).map { (userID: $0["user_id"], due: $0["next_due"]) }
        }
    }

    /// The stream's state last written (``Engine/streamState``, encoded), if any.
    public func readStream() throws -> [UInt8]? {
        try pool.read { db in
            try Data.fetchOne(db, sql: "SELECT bytes FROM stream_state WHERE id = 1").map { [UInt8]($0) }
        }
    }

    /// Stores the stream's state (its clock and timer ids).
    public func writeStream(_ bytes: [UInt8]) throws {
        try pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO stream_state (id, bytes) VALUES (1, ?)", arguments: [Data(bytes)])
        }
    }

    /// A page of stored states in user id order: the first `limit` after `after` (from the first with `nil`).
    public func states(after: String?, limit: Int) throws -> [(userID: String, bytes: [UInt8])] {
        try pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT user_id, bytes FROM user_state WHERE user_id > ? ORDER BY user_id LIMIT ?",
                arguments: [after ?? "", limit]
            ).map { (userID: $0["user_id"], bytes: [UInt8]($0["bytes"] as Data)) }
        }
    }

    /// A page of stored user ids in order: the first `limit` after `after` (from the first with `nil`).
    public func userIDs(after: String?, limit: Int) throws -> [String] {
        try pool.read { db in
            try String.fetchAll(
                db, sql: "SELECT user_id FROM user_state WHERE user_id > ? ORDER BY user_id LIMIT ?",
                arguments: [after ?? "", limit])
        }
    }

    /// How far the schedules of rule set `version` have reached the stored users: the last user id reached (`nil`:
    /// none yet), and whether every stored user has been. A rule set with no record has reached nobody.
    public func reachProgress(version: Int64) throws -> (after: String?, done: Bool) {
        try pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT after_user, done FROM reach_progress WHERE id = 1 AND rules_version = ?",
                    arguments: [version])
            else { return (nil, false) }
            return (row["after_user"], (row["done"] as Int) != 0)
        }
    }

    /// Records how far the schedules of rule set `version` have reached (see ``reachProgress(version:)``).
    public func recordReach(version: Int64, after: String?, done: Bool) throws {
        try pool.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO reach_progress (id, rules_version, after_user, done) VALUES (1, ?, ?, ?)",
                arguments: [version, after, done ? 1 : 0])
        }
    }

    /// Users stored.
    public func userCount() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM user_state") ?? 0 }
    }
}
