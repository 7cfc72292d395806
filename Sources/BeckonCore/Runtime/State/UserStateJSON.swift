/// A user's state as one JSON object: everything Beckon holds about them, for a person to read (a GDPR export) and
/// for ``UserState/init(json:)`` to read back exactly.
///
/// ```json
/// {"version":4,"userId":"ada","clock":"2026-03-02T09:07:00Z","eventCount":8,
///  "session":{"id":2,"start":"2026-03-02T09:02:00Z","lastActivity":"2026-03-02T09:07:00Z"},
///  "attributes":{"leveled":true,"plan":"gold","timezone":"Europe/Paris","vip":true},"context":{},
///  "records":[{"rule":"everything/capped","occurrences":0,"fires":1,"sessionFires":1,"sessionId":1,
///              "lastFire":"2026-03-02T09:01:00Z"}],
///  "messages":{"occurrences":0,"fires":1,"sessionFires":1,"sessionId":1,"lastFire":"2026-03-02T09:01:00Z"},
///  "series":[{"key":"e:Signed Up","times":[],"lifetime":{"count":1,"first":"2026-03-02T09:05:00Z",
///                                                       "last":"2026-03-02T09:05:00Z"},"values":[]},
///            {"key":"e:Purchase|sum:price","times":[],"lifetime":null,
///             "values":[{"time":"2026-03-02T09:04:00Z","value":12.25}]}],
///  "messageIds":[{"hash":"12251341931833130398","time":"2026-03-02T09:02:00Z"}],"expiredMessageIds":[],
///  "inbox":[{"id":"plan_gold","sender":null,"message":"Now gold","link":null,"createdAt":"2026-03-02T09:07:00Z",
///            "read":false,"readAt":null,"rule":"everything/plan_changed"}],
///  "pending":[{"id":"1","rule":"everything/remind","due":"2026-03-03T09:02:00Z","scheduledAt":"2026-03-02T09:02:00Z",
///              "held":false,"keyMessageId":"a2","keyEventCount":3,"keySuffix":"|t0","trigger":"Signed In",
///              "event":{"type":"track","name":"Signed In","timestamp":"2026-03-02T09:02:00Z","messageId":"a2",
///                       "properties":{"stamp":"gold"},"traits":{},"context":{}},"change":null}],
///  "sequences":[{"rule":"everything/stuck","key":"7","best":["2026-03-02T09:03:00Z",null]}],"mergedInto":null}
/// ```
///
/// (Shortened, and broken here to read: it is written on one line. Tests/BeckonCoreTests/Fixtures/user-state-v2.json
/// is a whole one.) Every member is always there, `null` when it holds nothing; members are in this order.
///
/// - Times (``clock``, `start`, `due`, `times`, …) are RFC 3339 strings in UTC, exact to the millisecond
///   (`Timestamp(milliseconds:).description`: `2026-03-02T09:07:00Z`, `…09:07:00.25Z`); `null` is the engine's
///   "never" (`Int64.min`). A time outside years 1–9999 is its milliseconds since 1970 as a JSON integer (a state's
///   times are within ±2⁵³ ms, which JSON numbers hold exactly).
/// - Counts are JSON integers. 64-bit ids and hashes (a delayed action's `id`, a `messageIds` `hash`) are decimal
///   strings: JSON numbers hold 53 bits exactly.
/// - Attributes and context fields are an object by name; if a name were repeated (no engine writes that) they would be
///   an array of `[name, value]` pairs, so that nothing is lost.
/// - A ``Value`` is its natural JSON: `null`, `true`, `"text"`, `[…]`, `{…}` (a map with string keys), an `int` as an
///   integer (`42`), a `double` as a number with a fraction or an exponent (`42.0`, `0.1`, `1e+20`). What JSON cannot
///   hold exactly is an object with one member whose key starts with `$`:
///
///   | value | JSON |
///   |---|---|
///   | `int` beyond ±2⁵³ | `{"$int": "-9007199254740993"}` |
///   | `uint` (always: JSON has no unsigned integers) | `{"$uint": "7"}` |
///   | `double` −0.0, ±∞, NaN | `{"$double": "-0.0"}`, `"Infinity"`, `"-Infinity"`, `"NaN"` |
///   | `double`, any other NaN | `{"$double": "0x7ff8000000000001"}` (its bits) |
///   | `bytes` | `{"$bytes": "AAEC/w=="}` (base64) |
///   | `timestamp` | `{"$timestamp": "2026-03-02T09:07:00.123456789Z"}` |
///   | `duration` | `{"$duration": "-1.5s"}` |
///   | `type` | `{"$type": "google.protobuf.Timestamp"}` |
///   | `map` with a key not a string, or starting with `$` | `{"$map": [[1, "a"], [{"$uint": "2"}, "b"], ["$x", true]]}` |
///
///   A history `value` that is not a finite number (or is −0.0) is written as a `double` is. An error value, which no
///   state keeps, is `null` (as in ``encoded()``).
///
/// Reading it back gives the same state: `try UserState(json: Array(s.json.utf8)).encoded() == s.encoded()`.
extension UserState {
    /// The version of the JSON form ``json`` writes and ``init(json:)`` reads (its `"version"` member).
    /// 2 adds `mergedInto`, 3 `devices`, 4 `expiredMessageIds`, 5 `known`; versions 1 to 4 are still read.
    public static let jsonFormatVersion = 5

    /// The state as one line of JSON (see the extension's documentation for the shape and the encodings).
    public var json: String {
        var w = JSONWriter()
        w.beginObject()
        w.key(static: "version")
        w.raw(String(UserState.jsonFormatVersion))
        w.key(static: "userId")
        w.string(userID)
        w.key(static: "clock")
        StateJSON.time(clock, &w)
        w.key(static: "eventCount")
        w.raw(String(eventCount))
        w.key(static: "session")
        w.beginObject()
        w.key(static: "id")
        w.raw(String(session.id))
        w.key(static: "start")
        StateJSON.time(session.start, &w)
        w.key(static: "lastActivity")
        StateJSON.time(session.lastActivity, &w)
        w.endObject()
        w.key(static: "attributes")
        StateJSON.pairs(attributes, &w)
        w.key(static: "context")
        StateJSON.pairs(context, &w)
        w.key(static: "records")
        w.beginArray()
        for r in records { StateJSON.record(r, named: true, &w) }
        w.endArray()
        w.key(static: "messages")
        if let messages { StateJSON.record(messages, named: false, &w) } else { w.raw("null") }
        w.key(static: "series")
        w.beginArray()
        for s in series {
            w.beginObject()
            w.key(static: "key")
            w.string(s.key)
            w.key(static: "times")
            w.beginArray()
            for t in s.times { StateJSON.time(t, &w) }
            w.endArray()
            w.key(static: "lifetime")
            if let l = s.lifetime {
                w.beginObject()
                w.key(static: "count")
                w.raw(String(l.count))
                w.key(static: "first")
                StateJSON.time(l.first, &w)
                w.key(static: "last")
                StateJSON.time(l.last, &w)
                w.endObject()
            } else {
                w.raw("null")
            }
            w.key(static: "values")
            w.beginArray()
            for v in s.values {
                w.beginObject()
                w.key(static: "time")
                StateJSON.time(v.time, &w)
                w.key(static: "value")
                StateJSON.double(v.value, &w)
                w.endObject()
            }
            w.endArray()
            w.endObject()
        }
        w.endArray()
        for (key, ids) in [("messageIds", messageIDs), ("expiredMessageIds", expiredMessageIDs)] {
            w.key(static: key)
            w.beginArray()
            for m in ids {
                w.beginObject()
                w.key(static: "hash")
                w.string(String(m.hash))
                w.key(static: "time")
                StateJSON.time(m.time, &w)
                w.endObject()
            }
            w.endArray()
        }
        w.key(static: "inbox")
        w.beginArray()
        for item in inbox {
            w.beginObject()
            w.key(static: "id")
            w.string(item.id)
            w.key(static: "sender")
            StateJSON.optionalString(item.sender, &w)
            w.key(static: "message")
            w.string(item.message)
            w.key(static: "link")
            StateJSON.optionalString(item.link, &w)
            w.key(static: "createdAt")
            StateJSON.time(item.createdAt, &w)
            w.key(static: "read")
            w.raw(item.read ? "true" : "false")
            w.key(static: "readAt")
            StateJSON.time(item.readAt ?? Int64.min, &w)
            w.key(static: "rule")
            w.string(item.rule)
            w.endObject()
        }
        w.endArray()
        w.key(static: "pending")
        w.beginArray()
        for p in pending { StateJSON.pending(p, &w) }
        w.endArray()
        w.key(static: "sequences")
        w.beginArray()
        for q in sequences {
            w.beginObject()
            w.key(static: "rule")
            w.string(q.rule)
            w.key(static: "key")
            w.string(q.key)
            w.key(static: "best")
            w.beginArray()
            for b in q.best { StateJSON.time(b, &w) }
            w.endArray()
            w.endObject()
        }
        w.endArray()
        w.key(static: "mergedInto")
        StateJSON.optionalString(mergedInto, &w)
        w.key(static: "devices")
        w.beginArray()
        for d in devices {
            w.beginObject()
            w.key(static: "token")
            w.string(d.token)
            w.key(static: "platform")
            w.string(d.platform.rawValue)
            w.key(static: "app")
            StateJSON.optionalString(d.app, &w)
            w.key(static: "firstSeen")
            StateJSON.time(d.firstSeen, &w)
            w.key(static: "lastSeen")
            StateJSON.time(d.lastSeen, &w)
            w.key(static: "pushEnabled")
            w.raw(d.pushEnabled ? "true" : "false")
            w.endObject()
        }
        w.endArray()
        w.key(static: "known")
        w.raw(known ? "true" : "false")
        w.endObject()
        return w.output
    }

    /// Reads what ``json`` wrote (UTF-8). Anything else is a ``StateDecodingError`` whose `offset` is the byte of the
    /// JSON text where the problem is and whose reason names the member (`pending[0].due must be a time, not null`): text that is not JSON
    /// (RFC 8259, strictly: no `NaN`, no leading zeros, no repeated key in an object, no trailing text), JSON nested
    /// more than 256 levels deep, a member missing or unknown, a member of the wrong type, a number out of its
    /// range, a time that is not exact to the millisecond or is beyond ±2⁵³ ms, a `$` tag that is unknown or not alone
    /// in its object, history out of order, a value nested more than 64 levels deep or an attribute over
    /// ``ValueLimits/maxAttributeBytes``. Last, what was read must be a state ``init(decoding:)`` accepts.
    public init(json: some Collection<UInt8>) throws(StateDecodingError) {
        let root = try StateJSON.Field(node: StateJSON.parse(Array(json)), path: "")
        // The version decides the members: version 1 has no `mergedInto`.
        let version = try root.object(nil)("version").integer(Int.self)
        guard (1...UserState.jsonFormatVersion).contains(version) else {
            throw try root.object(nil)("version").error(
                "is \(version); this build reads versions 1 to \(UserState.jsonFormatVersion)")
        }
        let o = try root.object(
            [
                "version", "userId", "clock", "eventCount", "session", "attributes", "context", "records", "messages",
                "series", "messageIds", "inbox", "pending", "sequences",
            ] + (version >= 2 ? ["mergedInto"] : []) + (version >= 3 ? ["devices"] : [])
                + (version >= 4 ? ["expiredMessageIds"] : []) + (version >= 5 ? ["known"] : []))
        let userID = try o("userId").string()
        let clock = try o("clock").time()
        let eventCount = try o("eventCount").integer(UInt32.self)
        let so = try o("session").object(["id", "start", "lastActivity"])
        var session = UserProfile.Session()
        session.id = try so("id").integer(UInt32.self)
        session.start = try so("start").time()
        session.lastActivity = try so("lastActivity").time()
        let attributes = try o("attributes").pairs()
        let context = try o("context").pairs()
        var records: [Record] = []
        for f in try o("records").array() { records.append(try f.record(named: true)) }
        let messagesField = try o("messages")
        let messages = try messagesField.isNull ? nil : messagesField.record(named: false)
        var series: [Series] = []
        for f in try o("series").array() { series.append(try f.series()) }
        // Expired ids first: both lists are oldest first, and every expired id is older than the kept ones.
        var ids: [(hash: UInt64, time: Int64)] = []
        var expiredCount = 0
        for key in version >= 4 ? ["expiredMessageIds", "messageIds"] : ["messageIds"] {
            for f in try o(key).array() {
                let m = try f.object(["hash", "time"])
                let t = try m("time").time()
                guard t >= (ids.last?.time ?? Int64.min) else { throw try m("time").error("is before the one before it") }
                ids.append((try m("hash").decimal(UInt64.self), t))
            }
            if key == "expiredMessageIds" { expiredCount = ids.count }
        }
        let messageIDs = Array(ids[expiredCount...])
        var inbox: [InboxItem] = []
        for f in try o("inbox").array() {
            let m = try f.object(["id", "sender", "message", "link", "createdAt", "read", "readAt", "rule"])
            let readAt = try m("readAt").time()
            inbox.append(
                InboxItem(
                    id: try m("id").string(), sender: try m("sender").optionalString(), message: try m("message").string(),
                    link: try m("link").optionalString(), createdAt: try m("createdAt").time(), read: try m("read").bool(),
                    readAt: readAt == Int64.min ? nil : readAt, rule: try m("rule").string()))
        }
        var pending: [Pending] = []
        for f in try o("pending").array() { pending.append(try f.pending(userID: userID)) }
        var sequences: [Sequence] = []
        for f in try o("sequences").array() {
            let m = try f.object(["rule", "key", "best"])
            var best: [Int64] = []
            for b in try m("best").array() { best.append(try b.time()) }
            sequences.append(Sequence(rule: try m("rule").string(), key: try m("key").string(), best: best))
        }
        var devices: [Device] = []
        if version >= 3 {
            for f in try o("devices").array() {
                let m = try f.object(["token", "platform", "app", "firstSeen", "lastSeen", "pushEnabled"])
                let name = try m("platform").string()
                guard let platform = Device.Platform(rawValue: name) else {
                    throw try m("platform").error("is \(name); it must be ios or android")
                }
                devices.append(
                    Device(
                        token: try m("token").string(), platform: platform, app: try m("app").optionalString(),
                        firstSeen: try m("firstSeen").time(), lastSeen: try m("lastSeen").time(),
                        pushEnabled: try m("pushEnabled").bool()))
            }
        }
        let state = UserState(
            userID: userID, clock: clock, eventCount: eventCount, session: session, attributes: attributes,
            context: context, records: records, messages: messages, series: series, messageIDs: messageIDs,
            expiredMessageIDs: Array(ids[..<expiredCount]), inbox: inbox,
            pending: pending, sequences: sequences, mergedInto: version >= 2 ? try o("mergedInto").optionalString() : nil,
            devices: devices, known: version >= 5 ? try o("known").bool() : false)
        // What is read here must be what the bytes' decoder accepts (it checks what relates fields, as times relative
        // to the clock): a check added there holds here too.
        do {
            _ = try UserState(decoding: state.encoded())
        } catch {
            throw StateDecodingError(reason: "the state is not one Beckon keeps: \(error.reason)", offset: 0)
        }
        self = state
    }
}

/// The writing and reading behind ``UserState/json`` and ``UserState/init(json:)``.
private enum StateJSON {
    // MARK: Writing

    static func time(_ t: Int64, _ w: inout JSONWriter) {
        if t == Int64.min {
            w.raw("null")
        } else if t >= Timestamp.minSeconds * 1000 && t <= Timestamp.maxSeconds * 1000 + 999 {
            w.plainString { out, _ in Timestamp(milliseconds: t).appendRFC3339(to: &out) }
        } else {
            w.raw(String(t))
        }
    }

    static func optionalString(_ s: String?, _ w: inout JSONWriter) {
        if let s { w.string(s) } else { w.raw("null") }
    }

    static func tagged(_ tag: String, _ text: String, _ w: inout JSONWriter) {
        w.beginObject()
        w.key(static: tag)
        w.string(text)
        w.endObject()
    }

    /// A number with a fraction or an exponent when it is finite and not −0.0; `{"$double": …}` otherwise.
    static func double(_ d: Double, _ w: inout JSONWriter) {
        guard !d.isFinite || (d == 0 && d.sign == .minus) else { return w.raw(JSONWriter.formatDouble(d)) }
        let text: String
        if d.isInfinite {
            text = d < 0 ? "-Infinity" : "Infinity"
        } else if d.isNaN {
            // (Every NaN's top hex digit is 7 or f: always 16 digits.)
            text = d.bitPattern == Double.nan.bitPattern ? "NaN" : "0x" + String(d.bitPattern, radix: 16)
        } else {
            text = "-0.0"
        }
        tagged("$double", text, &w)
    }

    /// Largest magnitude of an `int` written as a JSON number (beyond it, `{"$int": …}`).
    static let exactInteger: UInt64 = 1 << 53

    static func value(_ v: Value, _ w: inout JSONWriter) {
        switch v {
        case .null, .error: w.raw("null")
        case .bool(let b): w.raw(b ? "true" : "false")
        case .string(let s): w.string(s)
        case .int(let i):
            if i.magnitude <= exactInteger { w.raw(String(i)) } else { tagged("$int", String(i), &w) }
        case .uint(let u): tagged("$uint", String(u), &w)
        case .double(let d): double(d, &w)
        case .bytes(let b): tagged("$bytes", Base64.encode(b), &w)
        case .timestamp(let t): tagged("$timestamp", t.description, &w)
        case .duration(let d): tagged("$duration", d.description, &w)
        case .type(let name): tagged("$type", name, &w)
        case .list(let xs):
            w.beginArray()
            for x in xs { value(x, &w) }
            w.endArray()
        case .map(let m): map(m, &w)
        }
    }

    /// A map: an object when every key is a string that does not start with `$`, else `{"$map": [[key, value], …]}`.
    static func map(_ m: ValueMap, _ w: inout JSONWriter) {
        var plain = true
        for (k, _) in m.entries {
            guard case .string(let s) = k, s.utf8.first != UInt8(ascii: "$") else {
                plain = false
                break
            }
        }
        if plain {
            w.beginObject()
            for (k, x) in m.entries {
                if case .string(let s) = k { w.key(s) }
                value(x, &w)
            }
            w.endObject()
            return
        }
        w.beginObject()
        w.key(static: "$map")
        w.beginArray()
        for (k, x) in m.entries {
            w.beginArray()
            value(k, &w)
            value(x, &w)
            w.endArray()
        }
        w.endArray()
        w.endObject()
    }

    /// Attributes or context fields: an object by name, or `[[name, value], …]` when a name repeats.
    static func pairs(_ list: [(name: String, value: Value)], _ w: inout JSONWriter) {
        var names: Set<ExactString> = []
        let unique = list.allSatisfy { names.insert(ExactString($0.name)).inserted }
        if unique {
            w.beginObject()
            for (name, v) in list {
                w.key(name)
                value(v, &w)
            }
            w.endObject()
        } else {
            w.beginArray()
            for (name, v) in list {
                w.beginArray()
                w.string(name)
                value(v, &w)
                w.endArray()
            }
            w.endArray()
        }
    }

    /// A fire record; the global cap's has no `rule`.
    static func record(_ r: UserState.Record, named: Bool, _ w: inout JSONWriter) {
        w.beginObject()
        if named {
            w.key(static: "rule")
            w.string(r.rule)
        }
        w.key(static: "occurrences")
        w.raw(String(r.occurrences))
        w.key(static: "fires")
        w.raw(String(r.fires))
        w.key(static: "sessionFires")
        w.raw(String(r.sessionFires))
        w.key(static: "sessionId")
        w.raw(String(r.sessionID))
        w.key(static: "lastFire")
        time(r.lastFire, &w)
        w.endObject()
    }

    static func pending(_ p: UserState.Pending, _ w: inout JSONWriter) {
        w.beginObject()
        w.key(static: "id")
        w.string(String(p.id))
        w.key(static: "rule")
        w.string(p.rule)
        w.key(static: "due")
        time(p.due, &w)
        w.key(static: "scheduledAt")
        time(p.scheduledAt, &w)
        w.key(static: "held")
        w.raw(p.held ? "true" : "false")
        w.key(static: "keyMessageId")
        optionalString(p.keyMessageID, &w)
        w.key(static: "keyEventCount")
        w.raw(String(p.keyEventCount))
        w.key(static: "keySuffix")
        w.string(p.keySuffix)
        w.key(static: "trigger")
        w.string(p.trigger)
        w.key(static: "event")
        if let e = p.event {
            // Not its userId: the state's.
            w.beginObject()
            w.key(static: "type")
            w.string(e.kind.description)
            w.key(static: "name")
            w.string(e.name)
            w.key(static: "timestamp")
            time(e.timestamp, &w)
            w.key(static: "messageId")
            optionalString(e.messageID, &w)
            w.key(static: "properties")
            map(e.properties, &w)
            w.key(static: "traits")
            map(e.traits, &w)
            w.key(static: "context")
            map(e.context, &w)
            w.endObject()
        } else {
            w.raw("null")
        }
        w.key(static: "change")
        if let ch = p.change {
            w.beginObject()
            w.key(static: "attribute")
            w.string(ch.attribute)
            w.key(static: "from")
            value(ch.from, &w)
            w.key(static: "to")
            value(ch.to, &w)
            w.endObject()
        } else {
            w.raw("null")
        }
        w.endObject()
    }

    // MARK: Parsing

    /// Deepest nesting of the JSON text: a value 64 levels deep, each level a `$map` (three levels of JSON), inside a
    /// delayed action's event fits.
    static let maxDepth = 256

    typealias Node = JSONTree.Node

    /// The JSON text as a tree (``JSONTree``).
    static func parse(_ bytes: [UInt8]) throws(StateDecodingError) -> Node {
        do throws(DecodeError) {
            return try JSONTree.parse(bytes, maxDepth: maxDepth)
        } catch {
            throw StateDecodingError(reason: "not JSON: \(error.message)", offset: max(0, (error.column ?? 1) - 1))
        }
    }

    /// Whether a number's text is an integer (no fraction, no exponent).
    static func isInteger(_ text: String) -> Bool {
        !text.utf8.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }
    }

    // MARK: Reading

    /// A JSON value with where it is in the state (`pending[0].event.timestamp`), for messages.
    struct Field {
        let node: Node
        let path: String

        func error(_ problem: String) -> StateDecodingError {
            StateDecodingError(reason: (path.isEmpty ? "the state" : path) + " " + problem, offset: node.offset)
        }

        func child(_ key: String, _ node: Node) -> Field { Field(node: node, path: path.isEmpty ? key : path + "." + key) }

        var isNull: Bool { if case .null = node.kind { true } else { false } }

        /// The members of an object that must have exactly `keys` (`nil`: any members, to read one before knowing which
        /// the object must have).
        func object(_ keys: [String]?) throws(StateDecodingError) -> Members {
            guard case .object(let members) = node.kind else { throw error("must be an object") }
            var byKey: [String: Field] = [:]
            for (k, v) in members {
                guard keys?.contains(where: { Value.sameBytes($0, k) }) ?? true else {
                    throw child(k, v).error("is not a member Beckon knows")
                }
                byKey[k] = child(k, v)
            }
            for k in keys ?? [] where byKey[k] == nil { throw error("has no '\(k)'") }
            return Members(byKey: byKey, parent: self)
        }

        struct Members {
            let byKey: [String: Field]
            let parent: Field
            func callAsFunction(_ key: String) throws(StateDecodingError) -> Field {
                guard let f = byKey[key] else { throw parent.error("has no '\(key)'") }
                return f
            }
        }

        func array() throws(StateDecodingError) -> [Field] {
            guard case .array(let xs) = node.kind else { throw error("must be an array") }
            return xs.indices.map { Field(node: xs[$0], path: path + "[\($0)]") }
        }

        func string() throws(StateDecodingError) -> String {
            guard case .string(let s) = node.kind else { throw error("must be a string") }
            return s
        }

        func optionalString() throws(StateDecodingError) -> String? { isNull ? nil : try string() }

        func bool() throws(StateDecodingError) -> Bool {
            guard case .bool(let b) = node.kind else { throw error("must be true or false") }
            return b
        }

        /// A JSON integer that `T` holds.
        func integer<T: FixedWidthInteger>(_: T.Type) throws(StateDecodingError) -> T {
            guard case .number(let text) = node.kind, StateJSON.isInteger(text) else { throw error("must be an integer") }
            guard let v = T(text, radix: 10) else { throw error("is out of range (\(T.min) to \(T.max))") }
            return v
        }

        /// An integer written as a decimal string, exactly as `String(v)` writes it.
        func decimal<T: FixedWidthInteger>(_: T.Type) throws(StateDecodingError) -> T {
            let text = try string()
            guard let v = T(text, radix: 10), String(v) == text else {
                throw error("must be a decimal integer from \(T.min) to \(T.max) in a string")
            }
            return v
        }

        /// A time: `null` (never), an RFC 3339 string exact to the millisecond, or milliseconds as an integer.
        func time() throws(StateDecodingError) -> Int64 {
            let t: Int64
            switch node.kind {
            case .null: return Int64.min
            case .string(let s):
                guard let ts = Timestamp.parse(bytes: Array(s.utf8)) else {
                    throw error("must be a time like 2026-03-02T09:07:00.250Z, found '\(s)'")
                }
                guard ts.nanos % 1_000_000 == 0 else { throw error("is finer than a millisecond") }
                t = ts.milliseconds
            case .number: t = try integer(Int64.self)
            default: throw error("must be a time (a string like 2026-03-02T09:07:00Z, or null)")
            }
            guard t >= -StateReader.timeBound, t <= StateReader.timeBound else { throw error("is out of range") }
            return t
        }

        /// A number, or `{"$double": …}`.
        func double() throws(StateDecodingError) -> Double {
            switch node.kind {
            case .number(let text):
                guard let d = Double(text), d.isFinite else { throw error("is out of the range of a double") }
                return d
            case .object(let members) where members.count == 1 && members[0].key == "$double":
                let f = child("$double", members[0].value)
                let text = try f.string()
                switch text {
                case "NaN": return Double.nan
                case "Infinity": return Double.infinity
                case "-Infinity": return -Double.infinity
                case "-0.0": return -0.0
                default:
                    guard text.utf8.starts(with: "0x".utf8),
                        let bits = UInt64(String(decoding: text.utf8.dropFirst(2), as: UTF8.self), radix: 16),
                        Double(bitPattern: bits).isNaN, "0x" + String(bits, radix: 16) == text
                    else { throw f.error("must be NaN, Infinity, -Infinity, -0.0 or a NaN's bits (0x and 16 hex digits)") }
                    return Double(bitPattern: bits)
                }
            default: throw error("must be a number")
            }
        }

        /// A ``Value`` (see ``UserState/json`` for the encodings).
        func value(depth: Int) throws(StateDecodingError) -> Value {
            guard depth < StateReader.maxDepth else { throw error("nests more than \(StateReader.maxDepth) levels deep") }
            switch node.kind {
            case .null: return .null
            case .bool(let b): return .bool(b)
            case .string(let s): return .string(s)
            case .number(let text):
                guard StateJSON.isInteger(text) else { return .double(try double()) }
                guard let i = Int64(text, radix: 10) else { throw error("is an integer beyond 64 bits") }
                return .int(i)
            case .array:
                var xs: [Value] = []
                for x in try array() { xs.append(try x.value(depth: depth + 1)) }
                return .list(xs)
            case .object(let members):
                guard members.contains(where: { $0.key.utf8.first == UInt8(ascii: "$") }) else {
                    return .map(try valueMap(depth: depth + 1))
                }
                guard members.count == 1 else { throw error("has a key starting with '$' (a tag) beside other keys") }
                let (tag, node) = members[0]
                let f = child(tag, node)
                switch tag {
                case "$int": return .int(try f.decimal(Int64.self))
                case "$uint": return .uint(try f.decimal(UInt64.self))
                case "$double": return .double(try double())
                case "$bytes":
                    guard let b = StateJSON.base64(try f.string()) else { throw f.error("must be base64 (RFC 4648, padded)") }
                    return .bytes(b)
                case "$timestamp":
                    let text = try f.string()
                    guard let t = Timestamp.parse(bytes: Array(text.utf8)) else {
                        throw f.error("must be a timestamp from year 1 to 9999, like 2026-03-02T09:07:00.123456789Z")
                    }
                    return .timestamp(t)
                case "$duration":
                    guard let d = StateJSON.duration(try f.string()) else {
                        throw f.error("must be a duration in seconds, like 3600s or -1.5s, within ±\(TimeDuration.maxSeconds)s")
                    }
                    return .duration(d)
                case "$type": return .type(try f.string())
                case "$map": return .map(try valueMap(depth: depth + 1))
                default:
                    throw f.error("is not a tag Beckon knows ($int, $uint, $double, $bytes, $timestamp, $duration, $type, $map)")
                }
            }
        }

        /// A map whose keys and values are values at `depth`: an object with string keys, or `{"$map": [[k, v], …]}`.
        func valueMap(depth: Int) throws(StateDecodingError) -> ValueMap {
            guard depth <= StateReader.maxDepth else { throw error("nests more than \(StateReader.maxDepth) levels deep") }
            var pairs: [(Value, Value)] = []
            guard case .object(let members) = node.kind else { throw error("must be an object") }
            if members.count == 1, members[0].key == "$map" {
                let list = child("$map", members[0].value)
                for pair in try list.array() {
                    let kv = try pair.array()
                    guard kv.count == 2 else { throw pair.error("must be a [key, value] pair") }
                    pairs.append((try kv[0].value(depth: depth), try kv[1].value(depth: depth)))
                }
            } else {
                for (k, v) in members {
                    guard k.utf8.first != UInt8(ascii: "$") else {
                        throw child(k, v).error("is a tag: a key starting with '$' is written in a $map")
                    }
                    pairs.append((.string(k), try child(k, v).value(depth: depth)))
                }
            }
            do {
                return try ValueMap(checking: pairs)
            } catch {
                throw self.error("has an invalid key: \(error.message)")
            }
        }

        /// Attributes or context fields: an object by name, or an array of `[name, value]` pairs.
        func pairs() throws(StateDecodingError) -> [(name: String, value: Value)] {
            var out: [(name: String, value: Value, field: Field)] = []
            switch node.kind {
            case .object(let members):
                for (k, v) in members {
                    let f = child(k, v)
                    out.append((k, try f.value(depth: 0), f))
                }
            case .array:
                for pair in try array() {
                    let kv = try pair.array()
                    guard kv.count == 2 else { throw pair.error("must be a [name, value] pair") }
                    out.append((try kv[0].string(), try kv[1].value(depth: 0), kv[1]))
                }
            default: throw error("must be an object")
            }
            for (_, value, f) in out where value.byteSize(upTo: ValueLimits.maxAttributeBytes) > ValueLimits.maxAttributeBytes {
                throw f.error("is over \(ValueLimits.maxAttributeBytes) bytes")
            }
            return out.map { ($0.name, $0.value) }
        }

        func record(named: Bool) throws(StateDecodingError) -> UserState.Record {
            let keys = ["occurrences", "fires", "sessionFires", "sessionId", "lastFire"]
            let m = try object(named ? ["rule"] + keys : keys)
            let rule = try named ? m("rule").string() : ""
            return UserState.Record(
                rule: rule, occurrences: try m("occurrences").integer(UInt32.self),
                fires: try m("fires").integer(UInt32.self), sessionFires: try m("sessionFires").integer(UInt16.self),
                sessionID: try m("sessionId").integer(UInt32.self), lastFire: try m("lastFire").time())
        }

        func series() throws(StateDecodingError) -> UserState.Series {
            let m = try object(["key", "times", "lifetime", "values"])
            // History times are 1970 to 2527 (44 bits of milliseconds), oldest first.
            func historyTime(_ f: Field, after previous: Int64?) throws(StateDecodingError) -> Int64 {
                let t = try f.time()
                guard t >= 0, t < 1 << 44 else { throw f.error("is out of the range of history (1970 to 2527)") }
                guard t >= (previous ?? 0) else { throw f.error("is before the one before it") }
                return t
            }
            var times: [Int64] = []
            for f in try m("times").array() { times.append(try historyTime(f, after: times.last)) }
            var lifetime: (count: UInt32, first: Int64, last: Int64)?
            let lf = try m("lifetime")
            if !lf.isNull {
                let l = try lf.object(["count", "first", "last"])
                lifetime = (try l("count").integer(UInt32.self), try l("first").time(), try l("last").time())
            }
            var values: [(time: Int64, value: Double)] = []
            for f in try m("values").array() {
                let v = try f.object(["time", "value"])
                values.append((try historyTime(v("time"), after: values.last?.time), try v("value").double()))
            }
            return UserState.Series(key: try m("key").string(), times: times, lifetime: lifetime, values: values)
        }

        func pending(userID: String) throws(StateDecodingError) -> UserState.Pending {
            let m = try object([
                "id", "rule", "due", "scheduledAt", "held", "keyMessageId", "keyEventCount", "keySuffix", "trigger", "event",
                "change",
            ])
            var event: Event?
            let ef = try m("event")
            if !ef.isNull {
                let e = try ef.object(["type", "name", "timestamp", "messageId", "properties", "traits", "context"])
                let type = try e("type").string()
                guard let kind = Event.Kind(type.utf8) else {
                    throw try e("type").error("must be track, identify, screen, page, group or alias; found '\(type)'")
                }
                event = Event(
                    kind: kind, name: try e("name").string(), userID: userID, timestamp: try e("timestamp").time(),
                    messageID: try e("messageId").optionalString(), properties: try e("properties").valueMap(depth: 0),
                    traits: try e("traits").valueMap(depth: 0), context: try e("context").valueMap(depth: 0))
            }
            var change: AttributeChange?
            let cf = try m("change")
            if !cf.isNull {
                let c = try cf.object(["attribute", "from", "to"])
                change = AttributeChange(
                    attribute: try c("attribute").string(), from: try c("from").value(depth: 0), to: try c("to").value(depth: 0))
            }
            let due = try m("due").time()
            let scheduledAt = try m("scheduledAt").time()
            guard due != Int64.min else { throw try m("due").error("must be a time, not null") }
            guard scheduledAt != Int64.min else { throw try m("scheduledAt").error("must be a time, not null") }
            return UserState.Pending(
                id: try m("id").decimal(UInt64.self), rule: try m("rule").string(), due: due, scheduledAt: scheduledAt,
                held: try m("held").bool(), keyMessageID: try m("keyMessageId").optionalString(),
                keyEventCount: try m("keyEventCount").integer(UInt32.self), keySuffix: try m("keySuffix").string(),
                trigger: try m("trigger").string(), event: event, change: change)
        }
    }

    /// Bytes of padded base64 as ``Base64/encode(_:)`` writes it (`nil` for anything else, as bits after the data).
    static func base64(_ text: String) -> [UInt8]? {
        let t = Array(text.utf8)
        guard t.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(t.count / 4 * 3)
        var i = 0
        while i < t.count {
            var n: UInt32 = 0
            var padding = 0
            for k in 0..<4 {
                let c = t[i + k]
                let d: UInt32
                switch c {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): d = UInt32(c - UInt8(ascii: "A"))
                case UInt8(ascii: "a")...UInt8(ascii: "z"): d = UInt32(c - UInt8(ascii: "a")) + 26
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0")) + 52
                case UInt8(ascii: "+"): d = 62
                case UInt8(ascii: "/"): d = 63
                case UInt8(ascii: "=") where i + 4 == t.count && k >= 2:
                    padding += 1
                    d = 0
                default: return nil
                }
                guard padding == 0 || c == UInt8(ascii: "=") else { return nil }
                n = n << 6 | d
            }
            out.append(UInt8(truncatingIfNeeded: n >> 16))
            if padding < 2 { out.append(UInt8(truncatingIfNeeded: n >> 8)) }
            if padding < 1 { out.append(UInt8(truncatingIfNeeded: n)) }
            i += 4
        }
        // The same text again: no stray bits in the last character.
        return Base64.encode(out) == text ? out : nil
    }

    /// A duration as ``TimeDuration/description`` writes it: `-`, whole seconds, up to nine decimals, `s`.
    static func duration(_ text: String) -> TimeDuration? {
        var t = Array(text.utf8)[...]
        let negative = t.first == UInt8(ascii: "-")
        if negative { t = t.dropFirst() }
        guard t.last == UInt8(ascii: "s") else { return nil }
        t = t.dropLast()
        let dot = t.firstIndex(of: UInt8(ascii: "."))
        let whole = t[..<(dot ?? t.endIndex)]
        let fraction = dot.map { t[($0 + 1)...] } ?? []
        guard !whole.isEmpty, whole.count <= 19, fraction.count <= 9, dot == nil || !fraction.isEmpty,
            whole.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            fraction.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let seconds = Int64(String(decoding: whole, as: UTF8.self))
        else { return nil }
        var nanos: Int32 = 0
        for k in 0..<9 { nanos = nanos * 10 + (k < fraction.count ? Int32(fraction[fraction.startIndex + k] - 48) : 0) }
        do {
            let d = try TimeDuration(seconds: negative ? -seconds : seconds, nanos: negative ? -nanos : nanos)
            return d.description == text ? d : nil
        } catch {
            return nil
        }
    }
}
