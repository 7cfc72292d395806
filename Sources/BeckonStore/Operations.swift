import BeckonCore
import Foundation
import GRDB

/// A fired action to be sent to a destination, as the outbox stores it.
public struct OutboxEntry: Sendable, Hashable {
    public var destination: String
    public var actionID: String
    public var userID: String
    /// What is sent: the action's JSON object, or an emit's payload.
    public var body: String
    /// When it was fired (ms since 1970): also its first attempt's time.
    public var createdAt: Int64
    public init(destination: String, actionID: String, userID: String, body: String, createdAt: Int64) {
        self.destination = destination
        self.actionID = actionID
        self.userID = userID
        self.body = body
        self.createdAt = createdAt
    }
}

/// An outbox row: an entry with its delivery state.
public struct OutboxRow: Sendable {
    public enum State: Int, Sendable, CustomStringConvertible {
        case pending = 0, delivered = 1, dead = 2
        public var description: String {
            switch self {
            case .pending: "pending"
            case .delivered: "delivered"
            case .dead: "dead"
            }
        }
    }

    public var id: Int64
    public var entry: OutboxEntry
    public var state: State
    public var attempts: Int
    /// The next attempt (pending), or when it was delivered or given up (`doneAt`).
    public var nextAt: Int64
    public var doneAt: Int64?
    public var lastError: String?

    public init(
        id: Int64, entry: OutboxEntry, state: State, attempts: Int, nextAt: Int64, doneAt: Int64? = nil,
        lastError: String? = nil
    ) {
        self.id = id
        self.entry = entry
        self.state = state
        self.attempts = attempts
        self.nextAt = nextAt
        self.doneAt = doneAt
        self.lastError = lastError
    }

    init(_ row: Row) {
        id = row["id"]
        entry = OutboxEntry(
            destination: row["destination"], actionID: row["action_id"], userID: row["user_id"],
            body: String(decoding: row["body"] as Data, as: UTF8.self), createdAt: row["created_at"])
        state = State(rawValue: row["state"]) ?? .dead
        attempts = row["attempts"]
        nextAt = row["next_at"]
        doneAt = row["done_at"]
        lastError = row["last_error"]
    }

    /// One JSON object (`beckon outbox --json`, a user's export).
    public var json: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("actionId")
        w.string(entry.actionID)
        w.key("destination")
        w.string(entry.destination)
        w.key("userId")
        w.string(entry.userID)
        w.key("state")
        w.string(state.description)
        w.key("attempts")
        w.value(.int(Int64(attempts)))
        w.key("createdAt")
        w.string(Timestamp(milliseconds: entry.createdAt).description)
        w.key("nextAttempt")
        if state == .pending { w.string(Timestamp(milliseconds: nextAt).description) } else { w.value(.null) }
        for (key, s) in [("deliveredAt", State.delivered), ("deadAt", .dead)] {
            w.key(key)
            if let doneAt, state == s { w.string(Timestamp(milliseconds: doneAt).description) } else { w.value(.null) }
        }
        w.key("lastError")
        if let lastError { w.string(lastError) } else { w.value(.null) }
        w.endObject()
        return w.output
    }
}

/// An attempt's outcome, for ``SQLiteStateBackend/recordAttempts(_:at:)``.
public struct OutboxAttempt: Sendable {
    public var id: Int64
    public var state: OutboxRow.State
    /// The next attempt, when pending again.
    public var nextAt: Int64
    public var error: String?
    /// The due time the entry had when it was taken for the attempt (``OutboxRow/nextAt``): where several processes
    /// take entries (a fleet), the outcome is recorded only while the entry is still so taken, so a process paused past
    /// its claim cannot write over another's later attempt.
    public var claim: Int64?
    public init(id: Int64, state: OutboxRow.State, nextAt: Int64, error: String?, claim: Int64? = nil) {
        self.id = id
        self.state = state
        self.nextAt = nextAt
        self.error = error
        self.claim = claim
    }
}

// MARK: Rule set versions

extension SQLiteStateBackend {
    /// The version number of a rule set's files (path and text, in load order), stored once per distinct digest in a
    /// row: a service records under which rule set its checkpoint's states and the inputs logged after it were
    /// processed, so that a restart replays them under that rule set even if the files changed in between.
    public func ruleVersion(digest: String, files: [(path: String, text: String)], at time: Int64) throws -> Int64 {
        try pool.write { db in
            if let v = try Int64.fetchOne(
                db, sql: "SELECT version FROM rule_versions WHERE digest = ? ORDER BY version DESC LIMIT 1",
                arguments: [digest])
            {
                return v
            }
            try db.execute(sql: "INSERT INTO rule_versions (digest, loaded_at) VALUES (?, ?)", arguments: [digest, time])
            let v = db.lastInsertedRowID
            for (i, f) in files.enumerated() {
                try db.execute(
                    sql: "INSERT INTO rule_files (version, ord, path, text) VALUES (?, ?, ?, ?)",
                    arguments: [v, i, f.path, f.text])
            }
            return v
        }
    }

    /// Deletes the rule set versions no one needs any more: all but the checkpoint's (a restart replays the inputs
    /// after it under that one) and the newest stored (the one being served, or being swapped in). So a service that
    /// is reloaded for ever keeps two or three rows, not one per reload.
    public func pruneRuleVersions() throws {
        try pool.write { db in
            let keep = """
                SELECT rules_version FROM checkpoint WHERE rules_version IS NOT NULL
                UNION SELECT max(version) FROM rule_versions
                """
            try db.execute(sql: "DELETE FROM rule_files WHERE version NOT IN (\(keep))")
            try db.execute(sql: "DELETE FROM rule_versions WHERE version NOT IN (\(keep))")
        }
    }

    /// The files of a rule set version, in load order (empty: no such version).
    public func ruleFiles(version: Int64) throws -> [(path: String, text: String)] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT path, text FROM rule_files WHERE version = ? ORDER BY ord", arguments: [version])
                .map { (path: $0["path"], text: $0["text"]) }
        }
    }

    /// The newest rule set version stored, if any.
    public func latestRuleVersion() throws -> Int64? {
        try pool.read { db in try Int64.fetchOne(db, sql: "SELECT max(version) FROM rule_versions") }
    }

    /// Writes a commit on its own (a checkpoint taken outside the committer: at a reload, a forget, a start).
    public func write(_ commit: ServiceCommit) throws {
        try pool.write { db in try Self.write(commit, db) }
    }
}

// MARK: The outbox

extension SQLiteStateBackend {
    /// Pending entries for `destinations` due by `now`, soonest first, at most `limit`, leaving out `busy` ids
    /// (attempts in flight). (By the index of pending entries by due time: the planner would otherwise take the
    /// destination's index and read every entry the destination ever had.)
    public func dueOutbox(now: Int64, destinations: [String], limit: Int, excluding busy: Set<Int64>) throws -> [OutboxRow] {
        try pool.read { db in
            var arguments = StatementArguments([now])
            arguments += StatementArguments(destinations)
            arguments += StatementArguments(Array(busy))
            arguments += [limit]
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM outbox INDEXED BY outbox_due WHERE state = 0 AND next_at <= ?
                        AND destination IN (\(databaseQuestionMarks(count: destinations.count)))
                        AND id NOT IN (\(databaseQuestionMarks(count: busy.count)))
                    ORDER BY next_at, id LIMIT ?
                    """,
                arguments: arguments
            ).map(OutboxRow.init)
        }
    }

    /// Records attempts' outcomes in one transaction: each entry delivered, dead, or pending again at its `nextAt`,
    /// its attempts counted. An entry no longer pending (dropped, forgotten, retried from the command line meanwhile)
    /// is left as it is. Returns, for each, whether it was recorded.
    public func recordAttempts(_ attempts: [OutboxAttempt], at time: Int64) async throws -> [Bool] {
        try await pool.write { db in
            let update = try db.cachedStatement(
                sql: """
                    UPDATE outbox SET attempts = attempts + 1, state = ?, next_at = ?, last_error = ?,
                        done_at = CASE WHEN ? = 0 THEN NULL ELSE ? END
                    WHERE id = ? AND state = 0
                    """)
            return try attempts.map { a in
                try update.execute(arguments: [a.state.rawValue, a.nextAt, a.error, a.state.rawValue, time, a.id])
                return db.changesCount > 0
            }
        }
    }

    /// Outbox rows in `states`, oldest first (at most `limit`).
    public func outbox(states: [OutboxRow.State], limit: Int = 10_000) throws -> [OutboxRow] {
        try pool.read { db in
            let list = states.map { String($0.rawValue) }.joined(separator: ",")
            return try Row.fetchAll(
                db, sql: "SELECT * FROM outbox WHERE state IN (\(list)) ORDER BY id LIMIT ?", arguments: [limit]
            ).map(OutboxRow.init)
        }
    }

    /// Makes dead entries (those with `actionIDs`, or every dead one when `nil`) pending again, due now, with their
    /// attempts counted from zero. Returns how many.
    public func retryOutbox(actionIDs: [String]?, now: Int64) throws -> Int {
        try pool.write { db in
            let set = "state = 0, attempts = 0, next_at = ?, done_at = NULL"
            var n = 0
            if let ids = actionIDs {
                for id in ids {
                    try db.execute(
                        sql: "UPDATE outbox SET \(set) WHERE action_seq = (\(Self.actionWithID)) AND state = 2",
                        arguments: [now, id])
                    n += db.changesCount
                }
            } else {
                try db.execute(sql: "UPDATE outbox SET \(set) WHERE state = 2", arguments: [now])
                n = db.changesCount
            }
            return n
        }
    }

    /// Deletes undelivered entries (those with `actionIDs`, or every dead one when `nil`). Returns how many.
    public func dropOutbox(actionIDs: [String]?) throws -> Int {
        try pool.write { db in
            var n = 0
            if let ids = actionIDs {
                for id in ids {
                    try db.execute(
                        sql: "DELETE FROM outbox WHERE action_seq = (\(Self.actionWithID)) AND state != 1", arguments: [id])
                    n += db.changesCount
                }
            } else {
                try db.execute(sql: "DELETE FROM outbox WHERE state = 2")
                n = db.changesCount
            }
            return n
        }
    }

    /// Pending entries per destination: the count the database keeps as entries come and go (migration v7), one row a
    /// destination to read however long a backlog is.
    public func pendingOutboxCounts() throws -> [String: Int] {
        try pool.read { db in
            var out: [String: Int] = [:]
            for r in try Row.fetchAll(db, sql: "SELECT destination, n FROM outbox_pending WHERE n != 0") {
                out[r["destination"]] = r["n"]
            }
            return out
        }
    }
}

// MARK: Privacy

extension SQLiteStateBackend {
    /// Forgets users (a user and the ids merged into them), in one transaction with `checkpoint` (every other user's
    /// state at this point, so that nothing logged before it is ever replayed): their state rows, stored actions and
    /// outbox entries; their events in the input log up to this point are noted for ``scrub(userID:rewrite:)``.
    public func forget(_ userIDs: [String], checkpoint: ServiceCommit) throws {
        try pool.write { db in
            try Self.write(checkpoint, db)
            for userID in userIDs {
                try db.execute(sql: "DELETE FROM user_state WHERE user_id = ?", arguments: [userID])
                // (The entries by their actions' positions, before the actions.)
                try db.execute(sql: "DELETE FROM outbox WHERE action_seq IN (\(Self.actionsOfUser))", arguments: [userID])
                try db.execute(sql: "DELETE FROM action_log WHERE user_id = ?", arguments: [userID])
                try db.execute(sql: "DELETE FROM device_owner WHERE user_id = ?", arguments: [userID])
                try db.execute(
                    sql:
                        "INSERT OR REPLACE INTO pending_scrub (user_id, up_to_seq) VALUES (?, (SELECT coalesce(max(seq), 0) FROM input_log))",
                    arguments: [userID])
            }
        }
    }

    /// The latest claim of each of `tokens` (``DeviceClaim``), for those that have one.
    public func deviceOwners(_ tokens: [String]) throws -> [String: DeviceClaim] {
        try pool.read { db in
            var out: [String: DeviceClaim] = [:]
            let holder = try db.cachedStatement(sql: "SELECT user_id, seen_at FROM device_owner WHERE token = ?")
            for t in tokens {
                guard let row = try Row.fetchOne(holder, arguments: [t]) else { continue }
                out[t] = DeviceClaim(token: t, userID: row[0], at: row[1])
            }
            return out
        }
    }

    /// Users whose events are still to be removed from the input log.
    public func pendingScrubs() throws -> [String] {
        try pool.read { db in try String.fetchAll(db, sql: "SELECT user_id FROM pending_scrub ORDER BY user_id") }
    }

    /// Rewrites the input log records up to the forgets' positions so that they hold none of the events of `userIDs`
    /// (`rewrite` returns a record without them, or `nil` when it holds none), in one pass, a page per transaction,
    /// then drops the notes. Records before the checkpoint are never replayed, so rewriting them changes nothing anyone
    /// computes. Returns how many records were rewritten.
    public func scrub(userIDs: [String], rewrite: ([UInt8]) -> (bytes: [UInt8], events: Int)?) throws -> Int {
        guard
            let upTo = try pool.read({ db in
                try userIDs.compactMap { id in
                    try Int64.fetchOne(db, sql: "SELECT up_to_seq FROM pending_scrub WHERE user_id = ?", arguments: [id])
                }.max()
            })
        else { return 0 }
        var after: Int64 = 0
        var rewritten = 0
        // Each page is read, rewritten and written in one transaction: two forgets scrubbing the same record at once
        // each rewrite what the other wrote, never a stale copy.
        while true {
            let (last, changed) = try pool.write { db in
                let page = try Row.fetchAll(
                    db, sql: "SELECT seq, body FROM input_log WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 256",
                    arguments: [after, upTo]
                ).map { (seq: $0["seq"] as Int64, bytes: [UInt8]($0["body"] as Data)) }
                var changed = 0
                for r in page {
                    guard let kept = rewrite(r.bytes) else { continue }
                    try db.execute(
                        sql: "UPDATE input_log SET body = ?, events = ? WHERE seq = ?",
                        arguments: [Data(kept.bytes), kept.events, r.seq])
                    changed += 1
                }
                return (page.last?.seq, changed)
            }
            guard let last else { break }
            rewritten += changed
            after = last
        }
        try pool.write { db in
            for id in userIDs { try db.execute(sql: "DELETE FROM pending_scrub WHERE user_id = ?", arguments: [id]) }
        }
        return rewritten
    }

    /// A user's stored actions (all of them, oldest first).
    public func allActions(of userID: String) throws -> [String] {
        try pool.read { db in
            try String.fetchAll(db, sql: "SELECT json FROM action_log WHERE user_id = ? ORDER BY seq", arguments: [userID])
        }
    }

    /// The positions of a user's actions (one argument, the user id): their outbox entries are those with these
    /// `action_seq`s (migration v8).
    static let actionsOfUser = "SELECT seq FROM action_log WHERE user_id = ?"
    /// The position of the action with an id (one argument), by which its outbox entries are found.
    static let actionWithID = "SELECT seq FROM action_log WHERE action_id = ?"

    /// A user's outbox entries, oldest first.
    public func outbox(of userID: String) throws -> [OutboxRow] {
        try pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM outbox WHERE action_seq IN (\(Self.actionsOfUser)) ORDER BY id", arguments: [userID]
            ).map(OutboxRow.init)
        }
    }

    /// Retention: deletes input log records received before `cutoff` that the checkpoint includes (a restart never
    /// needs them), and outbox entries delivered before it. Returns how many records and entries.
    public func deleteOlder(than cutoff: Int64) throws -> (inputs: Int, delivered: Int) {
        try pool.write { db in
            try db.execute(
                sql: """
                    DELETE FROM input_log WHERE received_at < ?
                        AND seq <= (SELECT coalesce(max(input_seq), 0) FROM checkpoint)
                    """, arguments: [cutoff])
            let inputs = db.changesCount
            try db.execute(sql: "DELETE FROM outbox WHERE state = 1 AND done_at < ?", arguments: [cutoff])
            return (inputs, db.changesCount)
        }
    }
}
