import BeckonCore
import Foundation
import GRDB

/// A fired action as stored for delivery: its JSON object (as `beckon dry-run --format jsonl` prints it).
public struct LoggedAction: Sendable {
    public var userID: String
    public var actionID: String
    public var json: String
    public init(userID: String, actionID: String, json: String) {
        self.userID = userID
        self.actionID = actionID
        self.json = json
    }
}

/// What one group commit of a service writes, all in one transaction.
///
/// The service's durable record is its input log: every group's inputs (events as they arrived, inbox reads, the live
/// clock's ticks), in the order the engine took them, with the actions they fired. Users' states are written at
/// checkpoints only, with the input log's position they include; a restart loads them and runs the engine over the
/// inputs logged after it, which reproduces the same states and actions (already stored, so not stored again).
public struct ServiceCommit: Sendable {
    /// The group's inputs (an opaque record for the service), its arrival time and how many events it holds.
    public var input: (bytes: [UInt8], receivedAt: Int64, events: Int)?
    public var actions: [LoggedAction] = []
    /// The fired actions' deliveries to destinations (stored only with a new action: a fire stored once is sent once).
    public var outbox: [OutboxEntry] = []
    /// At a checkpoint: the users' states changed since the last one, the stream's state, and the rule set version
    /// (``SQLiteStateBackend/ruleVersion(digest:files:at:)``) the states and the inputs logged after them are under.
    public var checkpoint: (states: [SavedState], stream: [UInt8], rulesVersion: Int64)?
    /// Push tokens users reported in the group (``DeviceClaim``): each token's holder is its latest reporter.
    public var deviceClaims: [DeviceClaim] = []
    public init() {}
    public var isEmpty: Bool { input == nil && actions.isEmpty && checkpoint == nil && deviceClaims.isEmpty }
}

extension SQLiteStateBackend {
    /// Writes `commits` in order in one transaction (all of them or none): a writer that fell behind catches up with
    /// one sync to disk.
    public func write(_ commits: [ServiceCommit]) throws {
        try pool.write { db in
            for commit in commits { try Self.write(commit, db) }
        }
    }

    /// An outbox entry's destination and action: one entry each.
    private struct OutboxKey: Hashable {
        var destination: String
        var actionID: String
    }

    static func write(_ commit: ServiceCommit, _ db: Database) throws {
        if let input = commit.input {
            try db.execute(
                sql: "INSERT INTO input_log (received_at, events, body) VALUES (?, ?, ?)",
                arguments: [input.receivedAt, input.events, Data(input.bytes)])
        }
        if !commit.deviceClaims.isEmpty {
            // (Written when the holder changes: a user's own reports of a token they hold write nothing.)
            let claim = try db.cachedStatement(
                sql: """
                    INSERT INTO device_owner (token, user_id, seen_at) VALUES (?, ?, ?)
                    ON CONFLICT (token) DO UPDATE SET user_id = excluded.user_id, seen_at = excluded.seen_at
                    WHERE excluded.user_id <> device_owner.user_id AND excluded.seen_at >= device_owner.seen_at
                    """)
            for c in commit.deviceClaims { try claim.execute(arguments: [c.token, c.userID, c.at]) }
        }
        // An action id is stored once: the same action fired again (its messageId sent again after the dedup window)
        // is not delivered twice.
        let action = try db.cachedStatement(
            sql: "INSERT OR IGNORE INTO action_log (user_id, action_id, json) VALUES (?, ?, ?)")
        var stored: [String: Int64] = [:]  // (each stored action's position in the log)
        for a in commit.actions {
            try action.execute(arguments: [a.userID, a.actionID, a.json])
            if db.changesCount > 0 { stored[a.actionID] = db.lastInsertedRowID }
        }
        // An action goes to destinations only when it is stored now: one fired again (stored before, perhaps
        // delivered and its entry gone since) is not sent again — nor one fired twice in this commit. This is what
        // keeps an action's entry for a destination single: the outbox has no unique index (migration v8). An entry
        // holds its action's position, by which a user's entries are found.
        if !commit.outbox.isEmpty {
            let entry = try db.cachedStatement(
                sql: """
                    INSERT INTO outbox (destination, action_id, user_id, body, next_at, created_at, action_seq)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """)
            var added: [String: Int] = [:]
            var entered: Set<OutboxKey> = []
            for o in commit.outbox {
                guard let seq = stored[o.actionID],
                    entered.insert(OutboxKey(destination: o.destination, actionID: o.actionID)).inserted
                else { continue }
                try entry.execute(arguments: [
                    o.destination, o.actionID, o.userID, Data(o.body.utf8), o.createdAt, o.createdAt, seq,
                ])
                added[o.destination, default: 0] += 1
            }
            // (The pending count, once a destination: the other changes of the outbox are counted by its triggers.)
            let count = try db.cachedStatement(
                sql: """
                    INSERT INTO outbox_pending (destination, n) VALUES (?, ?)
                    ON CONFLICT (destination) DO UPDATE SET n = n + excluded.n
                    """)
            for (destination, n) in added { try count.execute(arguments: [destination, n]) }
        }
        if let checkpoint = commit.checkpoint {
            let state = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO user_state (user_id, bytes, next_due, merged_into) VALUES (?, ?, ?, ?)")
            for s in checkpoint.states {
                try state.execute(arguments: [s.userID, Data(s.bytes), s.nextDue, s.mergedInto])
            }
            try db.execute(
                sql: "INSERT OR REPLACE INTO stream_state (id, bytes) VALUES (1, ?)",
                arguments: [Data(checkpoint.stream)])
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO checkpoint (id, input_seq, rules_version)
                    VALUES (1, (SELECT coalesce(max(seq), 0) FROM input_log), ?)
                    """, arguments: [checkpoint.rulesVersion])
        }
    }

    /// The input log's position the saved states include (0: none).
    public func checkpointSeq() throws -> Int64 { try checkpoint().seq }

    /// The input log's position the saved states include (0: none), and the rule set version they and the inputs
    /// logged after them are under (`nil`: none recorded).
    public func checkpoint() throws -> (seq: Int64, rulesVersion: Int64?) {
        try pool.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT input_seq, rules_version FROM checkpoint WHERE id = 1")
            return (row?["input_seq"] ?? 0, row?["rules_version"])
        }
    }

    /// Whether the input log holds records after `seq`.
    public func hasInputs(after seq: Int64) throws -> Bool {
        try pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM input_log WHERE seq > ?)", arguments: [seq]) ?? false
        }
    }

    /// Calls `body` with every input log record after `seq`, in order, reading a page at a time (a replay, an export).
    public func eachInput(
        after seq: Int64 = 0, _ body: (_ seq: Int64, _ receivedAt: Int64, _ bytes: [UInt8]) throws -> Void
    ) throws {
        var after = seq
        while true {
            let page = try pool.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT seq, received_at, body FROM input_log WHERE seq > ? ORDER BY seq LIMIT 256",
                    arguments: [after]
                ).map { (seq: $0["seq"] as Int64, at: $0["received_at"] as Int64, bytes: [UInt8]($0["body"] as Data)) }
            }
            guard let last = page.last else { return }
            for r in page { try body(r.seq, r.at, r.bytes) }
            after = last.seq
        }
    }

    /// A user's actions after sequence number `after`, oldest first, at most `limit` (read off the caller's thread).
    public func actions(of userID: String, after: Int64, limit: Int) async throws -> [(seq: Int64, json: String)] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT seq, json FROM action_log WHERE user_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                arguments: [userID, after, limit]
            ).map { (seq: $0["seq"], json: $0["json"]) }
        }
    }
}
