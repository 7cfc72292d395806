import BeckonCore
import BeckonStore

/// Privacy requests (docs/operations.md, "Privacy requests"): what the service holds about a user, and forgetting it.
/// The same for `DELETE`/`GET /v1/users/{id}[/export]` and for `beckon user forget|export --db FILE`.
enum Privacy {
    /// Everything held about `user` as one JSON object: their state (``UserState/json``: attributes, fire records
    /// and limits, history, sessions, inbox, pending delayed actions, sequences), their stored actions, their outbox
    /// entries, and their events in the input log (as they arrived, with when).
    static func export(
        _ user: String, state: UserState?, backend: SQLiteStateBackend, decoder: SegmentDecoder, at time: Int64
    ) throws -> String {
        try export(
            user, state: state, actions: try backend.allActions(of: user), outbox: try backend.outbox(of: user),
            records: { each in try backend.eachInput { _, receivedAt, bytes in try each(receivedAt, bytes) } },
            decoder: decoder, at: time)
    }

    /// ``export(_:state:backend:decoder:at:)``'s object from what a store holds: the user's actions' JSON, their
    /// outbox entries, and `records`, which calls its argument with each input log record holding their events (among
    /// others'), with when it was received (read as they come: a log is not held in memory whole).
    static func export(
        _ user: String, state: UserState?, actions: [String], outbox: [OutboxRow],
        records: ((_ receivedAt: Int64, _ bytes: [UInt8]) throws -> Void) throws -> Void, decoder: SegmentDecoder,
        at time: Int64
    ) throws -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("userId")
        w.string(user)
        w.key("exportedAt")
        w.string(Timestamp(milliseconds: time).description)
        w.key("state")
        if let state { w.raw(state.json) } else { w.value(.null) }
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
            try InputLog.events(in: bytes, decoder: decoder) { e, json in
                guard e.userID == user else { return }
                w.beginObject()
                w.key("receivedAt")
                w.string(Timestamp(milliseconds: receivedAt).description)
                w.key("event")
                w.raw(String(decoding: json, as: UTF8.self))
                w.endObject()
            }
        }
        w.endArray()
        w.endObject()
        return w.output
    }

    /// Forgets `user` in the database, with a checkpoint of everyone else's state in `engine` (which must then be
    /// opened again: it still holds the user). Returns whether the user was known.
    static func forget(_ user: String, in engine: Engine, under version: Int64, backend: SQLiteStateBackend) throws -> Bool {
        let known = engine.profile(of: user) != nil
        try backend.forget(user, checkpoint: engine.checkpoint(under: version, without: user))
        return known
    }

    /// Removes `user`'s events from the input log records that their forget covers (``SQLiteStateBackend/forget(_:checkpoint:)``
    /// noted them). Returns how many records were rewritten.
    static func scrub(_ user: String, backend: SQLiteStateBackend, decoder: SegmentDecoder) throws -> Int {
        try backend.scrub(userID: user) { bytes in
            guard let kept = try? InputLog.without(userID: user, in: bytes, decoder: decoder) else { return nil }
            return (kept.bytes, kept.events)
        }
    }
}
