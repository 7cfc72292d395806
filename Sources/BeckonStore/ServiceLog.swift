import BeckonCore
import Foundation
import GRDB

/// An event a service accepted, as stored in its event log.
public struct LoggedEvent: Sendable {
    public var userID: String
    public var messageID: String?
    /// The service's clock when the request arrived, in ms since 1970.
    public var receivedAt: Int64
    /// The event's JSON as the client sent it.
    public var body: [UInt8]
    public init(userID: String, messageID: String?, receivedAt: Int64, body: [UInt8]) {
        self.userID = userID
        self.messageID = messageID
        self.receivedAt = receivedAt
        self.body = body
    }
}

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

/// What one group commit of a service writes, all in one transaction: the events accepted, the users' states they
/// changed, the actions they fired and the stream's state.
public struct ServiceCommit: Sendable {
    public var events: [LoggedEvent] = []
    public var states: [SavedState] = []
    public var actions: [LoggedAction] = []
    public var stream: [UInt8]?
    public init() {}
    public var isEmpty: Bool { events.isEmpty && states.isEmpty && actions.isEmpty && stream == nil }
}

extension SQLiteStateBackend {
    /// Writes `commit` in one transaction (all of it or none); returns the sequence number of each action in order,
    /// the cursor a client pulls after.
    @discardableResult
    public func write(_ commit: ServiceCommit) throws -> [Int64] {
        try pool.write { db in
            let event = try db.cachedStatement(
                sql: "INSERT INTO event_log (user_id, message_id, received_at, body) VALUES (?, ?, ?, ?)")
            for e in commit.events {
                try event.execute(arguments: [e.userID, e.messageID, e.receivedAt, Data(e.body)])
            }
            let state = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO user_state (user_id, bytes, next_due) VALUES (?, ?, ?)")
            for s in commit.states { try state.execute(arguments: [s.userID, Data(s.bytes), s.nextDue]) }
            var seqs: [Int64] = []
            seqs.reserveCapacity(commit.actions.count)
            let action = try db.cachedStatement(sql: "INSERT INTO action_log (user_id, action_id, json) VALUES (?, ?, ?)")
            for a in commit.actions {
                try action.execute(arguments: [a.userID, a.actionID, a.json])
                seqs.append(db.lastInsertedRowID)
            }
            if let stream = commit.stream {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO stream_state (id, bytes) VALUES (1, ?)", arguments: [Data(stream)])
            }
            return seqs
        }
    }

    /// A user's actions after sequence number `after`, oldest first, at most `limit`.
    public func actions(of userID: String, after: Int64, limit: Int) throws -> [(seq: Int64, json: String)] {
        try pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT seq, json FROM action_log WHERE user_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                arguments: [userID, after, limit]
            ).map { (seq: $0["seq"], json: $0["json"]) }
        }
    }

    /// Every stored action, in order (tests and `beckon` tools).
    public func allActions() throws -> [(seq: Int64, userID: String, actionID: String, json: String)] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT seq, user_id, action_id, json FROM action_log ORDER BY seq").map {
                (seq: $0["seq"], userID: $0["user_id"], actionID: $0["action_id"], json: $0["json"])
            }
        }
    }

    /// Events in the log.
    public func eventCount() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM event_log") ?? 0 }
    }

    /// The message ids in the event log with how often each was stored (tests of exactly-once ingest).
    public func loggedMessageIDs() throws -> [String: Int] {
        try pool.read { db in
            var out: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT message_id, count(*) AS n FROM event_log GROUP BY message_id") {
                if let id: String = row["message_id"] { out[id] = row["n"] }
            }
            return out
        }
    }
}
