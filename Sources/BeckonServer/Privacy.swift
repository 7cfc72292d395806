import BeckonCore
import BeckonStore

/// Privacy requests (docs/operations.md, "Privacy requests"): what the service holds about a user, and forgetting it.
/// The same for `DELETE`/`GET /v1/users/{id}[/export]` and for `beckon user forget|export --db FILE`.
package enum Privacy {
    /// Everything held about `user` as one JSON object: their state (``UserState/json``: attributes, fire records
    /// and limits, history, sessions, inbox, pending delayed actions, sequences), the ids merged into them with each
    /// one's state, their stored actions, their outbox entries, and the events in the input log that name them or a
    /// merged id (as they arrived, with when; matched without the rules, so an event no rule set reads is listed too).
    package static func export(
        _ user: String, state: UserState?, merged: [(id: String, state: UserState?)], backend: SQLiteStateBackend,
        at time: Int64
    ) throws -> String {
        try export(
            user, state: state, merged: merged, actions: try ([user] + merged.map(\.id)).flatMap(backend.allActions(of:)),
            outbox: try ([user] + merged.map(\.id)).flatMap(backend.outbox(of:)),
            records: { each in try backend.eachInput { _, receivedAt, bytes in try each(receivedAt, bytes) } }, at: time)
    }

    /// ``export(_:state:merged:backend:at:)``'s object from what a store holds: the user's actions' JSON, their
    /// outbox entries, and `records`, which calls its argument with each input log record holding their events (among
    /// others'), with when it was received (read as they come: a log is not held in memory whole).
    package static func export(
        _ user: String, state: UserState?, merged: [(id: String, state: UserState?)] = [], actions: [String],
        outbox: [OutboxRow], records: ((_ receivedAt: Int64, _ bytes: [UInt8]) throws -> Void) throws -> Void,
        at time: Int64
    ) throws -> String {
        let ids = Set([user] + merged.map(\.id))
        var w = JSONWriter()
        w.beginObject()
        w.key("userId")
        w.string(user)
        w.key("exportedAt")
        w.string(Timestamp(milliseconds: time).description)
        w.key("state")
        if let state { w.raw(state.json) } else { w.value(.null) }
        w.key("mergedIds")
        w.beginArray()
        for m in merged { w.string(m.id) }
        w.endArray()
        w.key("merged")
        w.beginArray()
        for m in merged {
            w.beginObject()
            w.key("userId")
            w.string(m.id)
            w.key("state")
            if let s = m.state { w.raw(s.json) } else { w.value(.null) }
            w.endObject()
        }
        w.endArray()
        w.key("actions")
        w.beginArray()
        for json in actions { w.raw(json) }
        w.endArray()
        w.key("outbox")
        w.beginArray()
        for row in outbox { w.raw(row.json) }
        w.endArray()
        w.key("events")
        w.beginArray()
        try records { receivedAt, bytes in
            try InputLog.read(bytes) { input in
                guard case .event(let json, _) = input, InputLog.names(json, anyOf: ids) else { return }
                w.beginObject()
                w.key("receivedAt")
                w.string(Timestamp(milliseconds: receivedAt).description)
                w.key("event")
                if let valid = String(validating: json, as: UTF8.self) {
                    w.raw(valid)
                } else {
                    // (An event logged before lines were checked whole, with bytes that are not UTF-8: as text.)
                    w.string(String(decoding: json, as: UTF8.self))
                }
                w.endObject()
            }
        }
        w.endArray()
        w.endObject()
        return w.output
    }

    /// The person a privacy request for `id` is about: the user `id` names — itself, or, for an id merged into
    /// another user, the user at the end of its chain of merges (whose events its events are) — and every id merged
    /// into that user (among the database's index and the users in `engine`'s memory:
    /// ``Engine/idsMerged(into:candidates:)``). An export and a forget take all of them, whichever of the ids asks.
    package static func person(
        of id: String, engine: Engine, backend: SQLiteStateBackend
    ) throws -> (
        user: String, merged: [String]
    ) {
        let user = engine.mergedTarget(of: id) ?? id
        return (user, engine.idsMerged(into: user, candidates: try backend.idsMerged(into: user)))
    }

    /// Forgets the person `id` names (``person(of:engine:backend:)``) in the database, with a checkpoint of everyone
    /// else's state in `engine` (which must then be opened again: it still holds them). Returns whether they were
    /// known, and the ids forgotten (the user's first).
    package static func forget(
        _ id: String, in engine: Engine, under version: Int64, backend: SQLiteStateBackend
    ) throws -> (
        known: Bool, ids: [String]
    ) {
        let (user, merged) = try person(of: id, engine: engine, backend: backend)
        let ids = [user] + merged
        let known = engine.profile(of: user) != nil || !merged.isEmpty
        try backend.forget(ids, checkpoint: engine.checkpoint(under: version, without: Set(ids)))
        return (known, ids)
    }

    /// Removes the events of `users` (those that name one of the ids, read without the rules) from the input log
    /// records that their forgets cover (``SQLiteStateBackend/forget(_:checkpoint:)`` noted them), in one pass.
    /// Returns how many records were rewritten.
    package static func scrub(_ users: [String], backend: SQLiteStateBackend) throws -> Int {
        let ids = Set(users)
        return try backend.scrub(userIDs: users) { bytes in
            guard let kept = try? InputLog.without(userIDs: ids, in: bytes) else { return nil }
            return (kept.bytes, kept.events)
        }
    }
}
