/// Why an event line could not be read.
public struct DecodeError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// 1-based byte column, when known.
    public var column: Int?
    public init(_ message: String, column: Int? = nil) {
        self.message = message
        self.column = column
    }
    public var description: String { column.map { "column \($0): \(message)" } ?? message }
}

/// Decodes one line of newline-delimited JSON in the Segment spec's shape straight into a ``BoundEvent``.
///
/// Reads `type`, `event`/`name`, `userId`/`anonymousId` (and an alias's `previousId`), `timestamp` (or `originalTimestamp`, `sentAt`,
/// `receivedAt`), `messageId`, `properties`, `traits` and `context`. Keeps only the properties and context fields
/// the rule set reads; skips everything else without building values. A hand-written byte scanner: Foundation's
/// decoders are an order of magnitude slower.
///
/// Limits: a line is at most ``maxLineBytes`` bytes and nests at most ``maxDepth`` levels; an id or an event name is
/// at most ``maxIDBytes`` bytes. Every string Beckon keeps must be valid UTF-8 (nothing is replaced), and ids are kept
/// exactly as sent: a number by its literal text.
///
/// The time of an event is `timestamp`, else `originalTimestamp`, else `receivedAt`, else `sentAt`. When the line has
/// `sentAt` and `receivedAt` and its time is the device's own (`originalTimestamp`, or `timestamp` without
/// `originalTimestamp` beside it), the device's clock error is taken out as Segment does:
/// `time + (receivedAt − sentAt)`. (`timestamp` beside `originalTimestamp` is Segment's corrected time already.)
public struct SegmentDecoder: Sendable {
    public static let maxLineBytes = 1 << 20
    public static let maxDepth = 64
    public static let maxIDBytes = 1024

    /// Why an id cannot be taken, whatever its length: it holds U+0000 (`\u0000`), which SQLite's text binding would
    /// cut the id at (merging it with another) and PostgreSQL's text refuses. `nil`: it can.
    public static func idProblem(_ id: String) -> String? {
        id.utf8.contains(0) ? "holds U+0000 (NUL), which no id may hold" : nil
    }

    /// Why an id is too long for ``maxIDBytes``, `nil` when it is not (an event's and a path's, worded alike).
    @inline(__always) public static func lengthProblem(_ id: String) -> String? {
        id.utf8.count > maxIDBytes ? "is \(id.utf8.count) bytes long; the limit is \(maxIDBytes)" : nil
    }

    let ruleSet: CompiledRuleSet
    let propertyKeys: KeyTable
    let contextKeys: KeyTable
    /// Event ids of track names and of screen names (`screen:NAME` keys without the prefix), looked up by bytes.
    let trackIDs: KeyTable
    let screenIDs: KeyTable
    /// By event id: whether the tracking plans list the event (``PlanNames/has(event:)``; all, without plans).
    let listedIDs: [Bool]
    /// The text of each event id's name as an event carries it (a screen's without `screen:`): an event whose name the
    /// rules know takes this string, so no string is made or checked for it.
    let nameTexts: [String]
    /// With a push destination, the context's keys with `device`, `os` and `app` after the rules' own (their slots
    /// ``deviceSlots``), for the push device an event reports; `nil` otherwise (nothing more is read).
    let contextWithDevice: KeyTable?
    let deviceSlots: (device: Int, os: Int, app: Int)

    /// A decoder that keeps no property or context value, for a service that only logs the events and decodes them
    /// again where the rules run (a fleet's ingest). It accepts and refuses exactly the lines a rule set's decoder
    /// does, with the same errors, since a line's fate never depends on which values the rules read
    /// (``JSONScanner/skipString()``); its events carry the ids, the kind, the name, the time and the traits.
    public static let logging = SegmentDecoder(ruleSet: RuleSetCompiler.compile([]).0!)

    public init(ruleSet: CompiledRuleSet) {
        self.ruleSet = ruleSet
        propertyKeys = KeyTable(ruleSet.propertySlots)
        contextKeys = KeyTable(ruleSet.contextSlots)
        var track: [String: Int] = [:]
        var screen: [String: Int] = [:]
        var texts = ruleSet.eventNames
        for (key, id) in ruleSet.eventIDs {
            if key.hasPrefix("screen:") {
                texts[Int(id)] = String(key.dropFirst(7))
                screen[texts[Int(id)]] = Int(id)
            } else {
                track[key] = Int(id)
            }
        }
        nameTexts = texts
        listedIDs = ruleSet.eventNames.map { ruleSet.plan?.has(event: $0) ?? true }
        trackIDs = KeyTable(track)
        screenIDs = KeyTable(screen)
        var slots = ruleSet.contextSlots
        let n = ruleSet.contextNames.count
        // (A rule that reads `context.device` has its slot: the device is read from there.)
        deviceSlots = (slots["device"] ?? n, slots["os"] ?? n + 1, slots["app"] ?? n + 2)
        if ruleSet.settings.destinations.contains(where: { $0.apns != nil || $0.fcm != nil }) {
            slots["device"] = deviceSlots.device
            slots["os"] = deviceSlots.os
            slots["app"] = deviceSlots.app
            contextWithDevice = KeyTable(slots)
        } else {
            contextWithDevice = nil
        }
    }

    /// The push device of an event's `context` (docs/push.md): `device.token`, the platform from `device.type` or
    /// `os.name`, `app.namespace`, and `device.pushEnabled` (absent: allowed). `nil` without a token or a platform
    /// Beckon sends to.
    static func device(_ device: Value?, os: Value?, app: Value?, at time: Int64) -> Device? {
        func field(_ v: Value?, _ key: String) -> Value? {
            guard case .map(let m)? = v else { return nil }
            return m[string: key]
        }
        guard case .string(let token)? = field(device, "token"), !token.isEmpty, token.utf8.count <= Device.maxTokenBytes
        else { return nil }
        var platform: Device.Platform?
        for case .string(let name)? in [field(device, "type"), field(os, "name")] where platform == nil {
            switch name.lowercased() {
            case "ios", "ipados": platform = .ios
            case "android": platform = .android
            default: break
            }
        }
        guard let platform else { return nil }
        var namespace: String?
        if case .string(let a)? = field(app, "namespace") { namespace = a }
        var enabled = true
        if case .bool(let b)? = field(device, "pushEnabled") { enabled = b }
        return Device(
            token: token, platform: platform, app: namespace, firstSeen: time, lastSeen: time, pushEnabled: enabled)
    }

    /// The top-level keys the decoder reads.
    enum Key: Int, CaseIterable {
        case type, event, name, userId, anonymousId, messageId, timestamp, originalTimestamp, sentAt, receivedAt
        case properties, context, traits, previousId
        static let table = KeyTable(Dictionary(uniqueKeysWithValues: allCases.map { ("\($0)", $0.rawValue) }))
    }

    public func decode(_ line: String) throws(DecodeError) -> BoundEvent {
        var s = line
        let result: Result<BoundEvent, DecodeError> = s.withUTF8 { buf in
            do throws(DecodeError) { return .success(try decode(buf)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Decodes one event that arrived at a service (`beckon serve`): see ``Arrival``.
    public func decode(_ bytes: ArraySlice<UInt8>, arrival: Arrival) throws(DecodeError) -> BoundEvent {
        let result: Result<BoundEvent, DecodeError> = bytes.withUnsafeBufferPointer { buf in
            do throws(DecodeError) { return .success(try decode(buf, arrival: arrival)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    public func decode(_ bytes: UnsafeBufferPointer<UInt8>, arrival: Arrival? = nil) throws(DecodeError) -> BoundEvent {
        if bytes.count > SegmentDecoder.maxLineBytes {
            throw SegmentDecoder.overlong(bytes.count)
        }
        var p = JSONScanner(bytes)
        p.skipSpace()
        guard p.peek() == UInt8(ascii: "{") else { throw p.error("expected a JSON object ('{')") }
        let objectColumn = p.i + 1
        p.i += 1

        var kind: Event.Kind?
        var kindText: (text: String, column: Int)?
        var name: (text: String, column: Int)?
        // A name without escapes, read in place (then `name` is nil; the last of `event` and `name` counts).
        var nameBytes: (bytes: UnsafeBufferPointer<UInt8>, column: Int)?
        var userID: (text: String, column: Int)?
        var anonymousID: String?
        var previousID: String?
        var times = EventTimes()
        var messageID: String?
        // Handed to the event at the end (freed with it, or here if the line turns out bad).
        let props = SlotRow(count: ruleSet.propertyNames.count)
        let ctx = SlotRow(count: ruleSet.contextNames.count)
        var traits: [(name: String, value: Value)] = []
        var allProps: ValueMap?
        var sawProperties = false
        var deviceValue: Value?
        var osValue: Value?
        var appValue: Value?

        // The members one by one, in a loop rather than through closures (the top-level object of every event).
        // The keys read so far, a bit each (a key given twice is a bad line, whatever the rules).
        var keysSeen: UInt32 = 0
        if try p.beginMembers() {
            repeat {
                let code = try p.key(in: Key.table)
                guard let code, let key = Key(rawValue: code) else {
                    try p.skipValue(depth: 0)
                    continue
                }
                guard keysSeen & (1 << code) == 0 else { throw JSONScanner.repeated("\(key)", p.i + 1) }
                keysSeen |= 1 << code
                switch key {
                case .type:
                    // The common case read in place: an unescaped `track` or `identify` makes no string.
                    let start = p.i
                    if let raw = p.plainStringBytes(), let k = Event.Kind(raw) {
                        kind = k
                        continue
                    }
                    p.i = start
                    kindText = (try p.string(for: "type"), start + 1)
                case .event, .name:
                    if key == .name && p.peek() == UInt8(ascii: "n") {
                        try p.skipValue(depth: 0)
                        continue
                    }
                    let start = p.i
                    let length: Int
                    if let raw = p.plainStringBytes() {
                        length = raw.count
                        nameBytes = (raw, start + 1)
                        name = nil
                    } else {
                        let n = try p.string(for: "\(key)")
                        length = n.utf8.count
                        name = (n, start + 1)
                        nameBytes = nil
                    }
                    if length > SegmentDecoder.maxIDBytes {
                        throw DecodeError(
                            "'\(key)' is \(length) bytes long; the limit is \(SegmentDecoder.maxIDBytes)", column: start + 1)
                    }
                case .userId:
                    let start = p.i
                    userID = try p.idString(for: "userId").map { ($0, start + 1) }
                case .anonymousId: anonymousID = try p.idString(for: "anonymousId")
                case .previousId: previousID = try p.idString(for: "previousId")
                case .messageId: messageID = try p.idString(for: "messageId")
                case .timestamp, .originalTimestamp, .sentAt, .receivedAt:
                    if key != .timestamp && p.peek() == UInt8(ascii: "n") {
                        try p.skipValue(depth: 0)
                        continue
                    }
                    let start = p.i
                    var ms: Int64
                    if let raw = p.plainStringBytes(), let t = SegmentDecoder.parseTime(bytes: raw) {
                        ms = t
                    } else {
                        p.i = start
                        let t = try p.string(for: "\(key)")
                        guard let parsed = SegmentDecoder.parseTime(t) else {
                            if let why = Timestamp.offsetProblem(t) {
                                throw DecodeError("'\(key)' '\(t)': \(why)", column: start + 1)
                            }
                            throw DecodeError(
                                "'\(key)' is not an ISO-8601 time between 1970 and \(SegmentDecoder.lastYear): '\(t)'",
                                column: start + 1)
                        }
                        ms = parsed
                    }
                    switch key {
                    case .timestamp: times.timestamp = ms
                    case .originalTimestamp: times.original = ms
                    case .sentAt: times.sent = ms
                    default: times.received = ms
                    }
                case .properties:
                    sawProperties = true
                    if ruleSet.needsAllProperties {
                        // (At the depth of `slots` below, and `null` as there: which lines decode is the same either way.)
                        if p.peek() == UInt8(ascii: "n") {
                            try p.skipValue(depth: 0)
                            continue
                        }
                        // (Refused at its first byte, as `slots` refuses it, before it is read.)
                        guard p.peek() == UInt8(ascii: "{") else { throw p.error("'properties' must be an object") }
                        guard case .map(let m) = try p.value(depth: 0) else { continue }
                        for (k, v) in m.entries {
                            if case .string(let ks) = k, let slot = ruleSet.propertySlots[ks] { props[slot] = v }
                        }
                        allProps = m
                    } else {
                        try p.slots(into: props, propertyKeys, what: "properties")
                    }
                case .context:
                    if let table = contextWithDevice {
                        try p.slots(into: ctx, table, what: "context") { slot, value in
                            if slot == deviceSlots.device { deviceValue = value }
                            if slot == deviceSlots.os { osValue = value }
                            if slot == deviceSlots.app { appValue = value }
                            return slot < ruleSet.contextNames.count
                        }
                    } else {
                        try p.slots(into: ctx, contextKeys, what: "context")
                    }
                case .traits:
                    guard p.peek() == UInt8(ascii: "{") else {
                        if p.peek() == UInt8(ascii: "n") {
                            try p.skipValue(depth: 0)
                            continue
                        }
                        throw p.error("'traits' must be an object")
                    }
                    let start = p.i
                    // (Traits are read whole whatever the rules, so a key given twice in them is refused whatever the
                    // rules too; in `properties` and `context`, which are read as far as the rules read them, the last
                    // of a repeated key is taken: a line must decode alike under every rule set, as a service replays
                    // its log under later rules.)
                    p.refusesRepeatedKeys = true
                    let v = try p.value(depth: 1)
                    p.refusesRepeatedKeys = false
                    if case .map(let m) = v {
                        for (k, v) in m.entries {
                            guard case .string(let ks) = k else { continue }
                            guard ks.utf8.count <= SegmentDecoder.maxIDBytes else {
                                throw DecodeError(
                                    "a trait name is over \(SegmentDecoder.maxIDBytes) bytes (the limit of a name)",
                                    column: start + 1
                                )
                            }
                            if v.byteSize(upTo: ValueLimits.maxAttributeBytes) > ValueLimits.maxAttributeBytes {
                                throw DecodeError(
                                    "trait '\(ks)' is over \(ValueLimits.maxAttributeBytes) bytes (the limit of an attribute)",
                                    column: start + 1)
                            }
                            traits.append((ks, v))
                        }
                    }
                }
            } while try p.nextMember()
        }
        p.skipSpace()
        guard p.atEnd else { throw p.error("unexpected text after the JSON object") }
        _ = sawProperties

        // A field that is missing is reported at the object's first column; one that is wrong, at its value.
        if kind == nil, let kindText {
            kind = Event.Kind(kindText.text.utf8)
            guard kind != nil else {
                throw DecodeError(
                    "unknown 'type' '\(kindText.text)'; expected track, identify, screen, page, group or alias",
                    column: kindText.column)
            }
        }
        if kind == nil { kind = arrival?.kind }
        guard let kind else {
            throw DecodeError("missing 'type' (track, identify, screen or page)", column: objectColumn)
        }
        if kind == .track {
            guard name.map({ !$0.text.isEmpty }) ?? nameBytes.map({ $0.bytes.count > 0 }) ?? false else {
                throw DecodeError(
                    "a track event needs a non-empty 'event' name", column: name?.column ?? nameBytes?.column ?? objectColumn)
            }
        }
        guard
            let user = (userID?.text.isEmpty == false ? userID?.text : nil)
                ?? (anonymousID?.isEmpty == false ? anonymousID : nil)
        else {
            throw DecodeError(
                "missing 'userId' (or 'anonymousId'); an empty one is missing too", column: userID?.column ?? objectColumn)
        }
        // An identify with both ids, or an alias, names the id the user had before: the engine merges the two.
        let before: String?
        switch kind {
        case .identify: before = userID?.text.isEmpty == false ? anonymousID : nil
        case .alias:
            guard userID?.text.isEmpty == false, previousID?.isEmpty == false else {
                throw DecodeError("an alias needs both 'userId' and 'previousId'", column: objectColumn)
            }
            before = previousID
        default: before = nil
        }
        if let arrival { times.arrived(arrival) }
        guard let time = try times.eventTime(column: objectColumn, notAfter: arrival?.latest) else {
            throw DecodeError("missing 'timestamp' (ISO-8601, like 2026-01-05T09:00:00Z)", column: objectColumn)
        }
        let table = kind == .screen || kind == .page ? screenIDs : trackIDs
        var eventName = ""
        var id: Int32 = -1
        if kind != .identify {
            if let raw = nameBytes?.bytes {
                if let known = table.lookup(raw) {
                    id = Int32(known)
                    eventName = nameTexts[known]
                } else {
                    eventName = String(decoding: raw, as: UTF8.self)  // (checked UTF-8 by plainStringBytes)
                }
            } else if let text = name?.text {
                eventName = text
                id = eventName.withUTF8 { table.lookup($0) }.map(Int32.init) ?? -1
            }
        }
        // (With a tracking plan: what converts without loss is converted, what does not fit is named.)
        let fit =
            ruleSet.plan?.conform(
                kind: kind, name: eventName, listed: id >= 0 ? listedIDs[Int(id)] : nil, properties: props,
                traits: &traits) ?? .fits
        return BoundEvent(
            kind: kind, nameID: id, name: eventName, userID: user, timestamp: time, messageID: messageID,
            propertySlots: props, contextSlots: ctx, traits: traits, allProperties: allProps, previousID: before,
            identified: userID?.text.isEmpty == false,
            device: contextWithDevice == nil ? nil : Self.device(deviceValue, os: osValue, app: appValue, at: time),
            fit: fit)
    }

    /// The error for a line longer than ``maxLineBytes`` (the column where it passed the limit).
    public static func overlong(_ count: Int) -> DecodeError {
        DecodeError("the line is \(count) bytes long; the limit is \(maxLineBytes)", column: maxLineBytes + 1)
    }

    /// Times are 1970 to 2527 (44-bit milliseconds).
    public static let maxTimeMs: Int64 = 17_592_186_044_000
    /// The last year an event's time may be in (2527), for messages.
    public static let lastYear = Int(Timestamp(milliseconds: maxTimeMs).description.prefix(4))!

    /// RFC 3339 / ISO-8601 to ms since 1970; a number is taken as seconds (fractional allowed) since 1970.
    static func parseTime(_ s: String) -> Int64? {
        var s = s
        return s.withUTF8 { parseTime(bytes: $0) }
    }

    static func parseTime(bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard let t = Timestamp.parse(bytes: bytes) else { return nil }
        guard t.seconds >= 0, t.milliseconds <= maxTimeMs else { return nil }
        return t.milliseconds
    }
}

/// The times a Segment line may carry, in ms.
struct EventTimes {
    var timestamp: Int64?
    var original: Int64?
    var sent: Int64?
    var received: Int64?

    /// The service's clock replaces any `receivedAt` the client sent; a batch's `sentAt` stands for an event's own.
    mutating func arrived(_ arrival: Arrival) {
        if let r = arrival.receivedAt { received = r }
        if sent == nil { sent = arrival.sentAt }
    }

    /// The event's time, with the device's clock error taken out (see ``SegmentDecoder``), and no later than
    /// `notAfter` when given.
    func eventTime(column: Int, notAfter: Int64? = nil) throws(DecodeError) -> Int64? {
        guard let t = try deviceCorrected(column: column) else { return nil }
        return notAfter.map { min(t, $0) } ?? t
    }

    func deviceCorrected(column: Int) throws(DecodeError) -> Int64? {
        if let timestamp, original != nil { return timestamp }
        guard let device = timestamp ?? original else { return received ?? sent }
        guard let sent, let received else { return device }
        let corrected = device + (received - sent)
        guard corrected >= 0, corrected <= SegmentDecoder.maxTimeMs else {
            throw DecodeError(
                "the time corrected by receivedAt − sentAt falls outside 1970 to \(SegmentDecoder.lastYear)", column: column)
        }
        return corrected
    }
}

/// How an event reached a service, which sets its time (docs/service.md, "Event time"):
///
/// - `receivedAt` is the service's clock when the request arrived; it replaces any `receivedAt` the client sent
///   (`nil` when replaying a recorded stream: the events' own times stand, as in a file).
/// - `sentAt` is the batch's own `sentAt` (Segment's libraries set it on the batch), used for an event without one.
/// - An event's time is then as for a file (``SegmentDecoder``): its `timestamp`, corrected by `receivedAt − sentAt`
///   when it has a `sentAt`; without a `timestamp`, `receivedAt`.
/// - `latest`, when set, is the latest time an event may have: a later one is taken as `latest` (the live clock sets
///   it to `receivedAt`, so that no device clock ahead of the service's moves anyone's time forward).
/// - `kind` is the type of an event without `type` (`/v1/track` takes bodies without one).
public struct Arrival: Sendable {
    public var kind: Event.Kind?
    public var receivedAt: Int64?
    public var sentAt: Int64?
    public var latest: Int64?
    public init(kind: Event.Kind? = nil, receivedAt: Int64?, sentAt: Int64? = nil, latest: Int64? = nil) {
        self.kind = kind
        self.receivedAt = receivedAt
        self.sentAt = sentAt
        self.latest = latest
    }
}

/// A Segment batch request body (`{"batch": [...], "sentAt": ...}`): the byte range of each event, and the batch's
/// `sentAt`. Other top-level fields (`context`, `integrations`) are read past.
public struct SegmentBatch: Sendable {
    public var events: [Range<Int>]
    public var sentAt: Int64?

    public init(_ body: ArraySlice<UInt8>) throws(DecodeError) {
        let base = body.startIndex
        let result: Result<SegmentBatch, DecodeError> = body.withUnsafeBufferPointer { buf in
            do throws(DecodeError) { return .success(try SegmentBatch(buf, base: base)) } catch { return .failure(error) }
        }
        self = try result.get()
    }

    init(_ buf: UnsafeBufferPointer<UInt8>, base: Int) throws(DecodeError) {
        var p = JSONScanner(buf)
        var events: [Range<Int>]?
        var sentAt: Int64?
        try p.expect(UInt8(ascii: "{"))
        try p.members { (p, key) throws(DecodeError) in
            p.skipSpace()
            switch key {
            case "batch":
                guard events == nil else { throw JSONScanner.repeated(key, p.i + 1) }
                try p.expect(UInt8(ascii: "["))
                var list: [Range<Int>] = []
                p.skipSpace()
                if p.peek() == UInt8(ascii: "]") {
                    p.i += 1
                } else {
                    while true {
                        p.skipSpace()
                        let start = p.i
                        guard p.peek() == UInt8(ascii: "{") else { throw p.error("each entry of 'batch' must be an object") }
                        // (An event may nest as deep here as in `/v1/track` or a file's line: its decoder does not
                        // count the event's own object nor the `properties`, `traits` or `context` object a value is
                        // in, so neither does this skip; the decoder checks the event's own bound after.)
                        do throws(DecodeError) { try p.skipValue(depth: -2) } catch {
                            throw DecodeError("event \(list.count) of 'batch': \(error.message)", column: error.column)
                        }
                        list.append(base + start..<base + p.i)
                        p.skipSpace()
                        if p.peek() == UInt8(ascii: ",") { p.i += 1; continue }
                        try p.expect(UInt8(ascii: "]"))
                        break
                    }
                }
                events = list
            case "sentAt":
                guard sentAt == nil else { throw JSONScanner.repeated(key, p.i + 1) }
                let start = p.i
                let t = try p.string(for: "sentAt")
                guard let ms = SegmentDecoder.parseTime(t) else {
                    throw DecodeError("'sentAt' is not an ISO-8601 time: '\(t)'", column: start + 1)
                }
                sentAt = ms
            default:
                try p.skipValue(depth: 0)
            }
        }
        p.skipSpace()
        guard p.atEnd else { throw p.error("unexpected text after the JSON object") }
        guard let events else { throw DecodeError("missing 'batch' (a list of events)", column: 1) }
        self.events = events
        self.sentAt = sentAt
    }
}

/// A forward-only JSON scanner over UTF-8 bytes.
struct JSONScanner {
    /// Whether an object read by ``value(depth:)`` refuses a key given twice (``repeated(_:_:)``); otherwise the last
    /// of them is kept.
    var refusesRepeatedKeys = false
    let b: UnsafeBufferPointer<UInt8>
    var i = 0

    init(_ b: UnsafeBufferPointer<UInt8>) { self.b = b }

    var atEnd: Bool { i >= b.count }

    @inline(__always) func peek() -> UInt8? { i < b.count ? b[i] : nil }

    func error(_ message: String) -> DecodeError { DecodeError(message, column: i + 1) }

    @inline(__always) mutating func skipSpace() {
        while i < b.count {
            let c = b[i]
            if c == 32 || c == 9 || c == 10 || c == 13 { i += 1 } else { return }
        }
    }

    mutating func expect(_ c: UInt8) throws(DecodeError) {
        skipSpace()
        guard i < b.count, b[i] == c else {
            throw error("expected '\(Character(Unicode.Scalar(c)))'" + (i < b.count ? "" : " before the end of the line"))
        }
        i += 1
    }

    /// Calls `body` with each key of an object; `body` must consume the value.
    mutating func members(_ body: (inout JSONScanner, String) throws(DecodeError) -> Void) throws(DecodeError) {
        guard try beginMembers() else { return }
        repeat {
            try expectKey()
            let key = try rawString()
            try endKey()
            try body(&self, key)
        } while try nextMember()
    }

    /// Like ``members(_:)``, with each key looked up in `table` by its bytes (no `String` is made for a plain key):
    /// `body` gets the key's value in the table, `nil` for a key not in it.
    mutating func members(in table: KeyTable, _ body: (inout JSONScanner, Int?) throws(DecodeError) -> Void) throws(DecodeError) {
        guard try beginMembers() else { return }
        repeat { try body(&self, try key(in: table)) } while try nextMember()
    }

    // An object's members, read in a loop: `if try beginMembers() { repeat { key…; value… } while try nextMember() }`.

    /// Just past an object's `{`: false (past the `}`) when it has no member.
    @inline(__always) mutating func beginMembers() throws(DecodeError) -> Bool {
        skipSpace()
        if peek() == UInt8(ascii: "}") {
            i += 1
            return false
        }
        return true
    }

    /// A member's key looked up in `table` by its bytes (`nil`: not in it), and the `:` after it.
    @inline(__always) mutating func key(in table: KeyTable) throws(DecodeError) -> Int? {
        try expectKey()
        let key: Int?
        if let raw = plainStringBytes() {
            key = table.lookup(raw)
        } else {
            // (A key written with escapes, by its bytes too: not by `String` equality, which would take a decomposed
            // `e\u0301` for a rule's `é`, as its unescaped bytes are not.)
            var text = try rawString()
            key = text.withUTF8 { table.lookup($0) }
        }
        try endKey()
        return key
    }

    @inline(__always) private mutating func expectKey() throws(DecodeError) {
        skipSpace()
        guard peek() == UInt8(ascii: "\"") else { throw error("expected a key in quotes") }
    }

    @inline(__always) private mutating func endKey() throws(DecodeError) {
        try expect(UInt8(ascii: ":"))
        skipSpace()
    }

    /// After a member's value: true past a `,` (another member follows), false past the closing `}`.
    @inline(__always) mutating func nextMember() throws(DecodeError) -> Bool {
        skipSpace()
        guard let c = peek() else { throw error("the object is not closed ('}' missing)") }
        i += 1
        if c == UInt8(ascii: "}") { return false }
        guard c == UInt8(ascii: ",") else { throw DecodeError("expected ',' or '}'", column: i) }
        return true
    }

    /// Past the start of a value that must be an object or null: true at the object's first member, false past a
    /// null (`what` names it in the error).
    @inline(__always) mutating func openObject(_ what: String) throws(DecodeError) -> Bool {
        skipSpace()
        if peek() == UInt8(ascii: "n") {
            try skipValue(depth: 0)
            return false
        }
        guard peek() == UInt8(ascii: "{") else { throw error("'\(what)' must be an object") }
        i += 1
        return true
    }

    /// Reads an object, keeping only the keys that have a slot.
    mutating func slots(into out: borrowing SlotRow, _ table: KeyTable, what: String) throws(DecodeError) {
        guard try openObject(what) else { return }
        if table.isEmpty {
            try skipObjectBody(depth: 1)
            return
        }
        guard try beginMembers() else { return }
        repeat {
            if let slot = try key(in: table) { out[slot] = try value(depth: 1) } else { try skipValue(depth: 1) }
        } while try nextMember()
    }

    /// ``slots(into:_:what:)`` where `table` may name slots beyond `out`'s: each value read is handed to `seen`, and
    /// kept in `out` when it answers true.
    mutating func slots(
        into out: borrowing SlotRow, _ table: KeyTable, what: String, _ seen: (Int, Value) -> Bool
    ) throws(DecodeError) {
        guard try openObject(what) else { return }
        try members(in: table) { (p, slot) throws(DecodeError) in
            guard let slot else { return try p.skipValue(depth: 1) }
            let v = try p.value(depth: 1)
            if seen(slot, v) { out[slot] = v }
        }
    }

    /// A key given twice in an object whose keys are checked (the event's own, `traits`, a batch body's): a bad line,
    /// as which of the two values is meant cannot be told (a JSON parser may take either; RFC 8259 leaves it open).
    /// `column`: the second value's.
    static func repeated(_ key: String, _ column: Int) -> DecodeError {
        DecodeError("the key '\(shown(key))' is given twice in one object; which value is meant cannot be told", column: column)
    }

    mutating func string(for key: @autoclosure () -> String) throws(DecodeError) -> String {
        skipSpace()
        guard peek() == UInt8(ascii: "\"") else { throw error("'\(key())' must be a string") }
        return try rawString()
    }

    /// Ids may be strings or numbers in exports: a number is kept as its literal text (`12345678901234567890`, not a
    /// rounded double), so that no two ids merge. At most ``SegmentDecoder/maxIDBytes`` bytes.
    mutating func idString(for key: @autoclosure () -> String) throws(DecodeError) -> String? {
        skipSpace()
        let start = i
        guard let c = peek() else { throw error("'\(key())' has no value") }
        let id: String
        var escaped = false
        if c == UInt8(ascii: "\"") {
            id = try rawString(escaped: &escaped)
        } else if c == UInt8(ascii: "n") {
            try skipValue(depth: 0)
            return nil
        } else if c == UInt8(ascii: "-") || (c >= 48 && c <= 57) {
            _ = try number()
            id = String(decoding: bytes(start, i), as: UTF8.self)
        } else {
            throw error("'\(key())' must be a string or a number")
        }
        if let why = SegmentDecoder.lengthProblem(id) { throw DecodeError("'\(key())' \(why)", column: start + 1) }
        if escaped, let why = SegmentDecoder.idProblem(id) { throw DecodeError("'\(key())' \(why)", column: start + 1) }
        return id
    }

    /// The end of the run of plain string bytes from `k`: the index of the first quote, backslash or control
    /// character (`b.count` when there is none), and whether every byte of the run is ASCII. Eight bytes are tested
    /// at a time (SWAR, as simdjson's fallback kernel does): a zero byte of `w ^ c` marks a byte equal to `c`, and
    /// `(x - 0x01…) & ~x & 0x80…` finds zero bytes, exact up to the lowest one found (a borrow only runs upwards).
    @inline(__always) func plainRun(from start: Int, ascii: inout Bool) -> Int {
        var k = start
        let n = b.count
        if k + 8 <= n, let base = UnsafeRawPointer(b.baseAddress) {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            var seen: UInt64 = 0
            repeat {
                let w = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: k, as: UInt64.self))
                let quote = w ^ (ones &* 0x22)
                let slash = w ^ (ones &* 0x5C)
                let stop = ((quote &- ones) & ~quote | (slash &- ones) & ~slash | (w &- ones &* 0x20) & ~w) & highs
                if stop != 0 {
                    let bits = stop.trailingZeroBitCount & ~7
                    if bits > 0 { seen |= w & (UInt64.max >> (64 - bits)) }
                    if seen & highs != 0 { ascii = false }
                    return k + (bits >> 3)
                }
                seen |= w
                k += 8
            } while k + 8 <= n
            if seen & highs != 0 { ascii = false }
        }
        while k < n {
            let c = b[k]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 32 { return k }
            if c >= 0x80 { ascii = false }
            k += 1
        }
        return k
    }

    /// `b[from..<to]` in place.
    @inline(__always) func bytes(_ from: Int, _ to: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: b.baseAddress.map { $0 + from }, count: to - from)
    }

    /// The bytes of a string value with no escapes, without making a `String` (`nil`, and nothing consumed, otherwise).
    /// Bytes that are not UTF-8 give `nil` too: ``rawString()`` then reports them.
    mutating func plainStringBytes() -> UnsafeBufferPointer<UInt8>? {
        skipSpace()
        guard peek() == UInt8(ascii: "\"") else { return nil }
        var ascii = true
        let end = plainRun(from: i + 1, ascii: &ascii)
        guard end < b.count, b[end] == UInt8(ascii: "\"") else { return nil }
        let out = bytes(i + 1, end)
        if !ascii, String(validating: out, as: UTF8.self) == nil { return nil }
        i = end + 1
        return out
    }

    /// A string at `i` (which is a quote), unescaped. Its bytes must be valid UTF-8: nothing is replaced.
    mutating func rawString() throws(DecodeError) -> String {
        var escaped = false
        return try rawString(escaped: &escaped)
    }

    /// ``rawString()``, telling whether the string had an escape (only an escape can put a control character, U+0000
    /// among them, into it: the plain run stops at one).
    mutating func rawString(escaped: inout Bool) throws(DecodeError) -> String {
        i += 1
        let start = i
        // Fast path: no escapes. ASCII text (every byte below 0x80, the common case) is valid UTF-8 as it is; only
        // other text is validated (String(validating:) costs a generic call per string).
        var ascii = true
        i = plainRun(from: start, ascii: &ascii)
        if i < b.count && b[i] == UInt8(ascii: "\"") {
            let s: String
            if ascii {
                s = String(decoding: bytes(start, i), as: UTF8.self)
            } else {
                guard let v = String(validating: bytes(start, i), as: UTF8.self) else { throw invalidUTF8(from: start) }
                s = v
            }
            i += 1
            return s
        }
        if i < b.count && b[i] < 32 { throw error("control character in a string") }
        var out = Array(bytes(start, i))
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                guard let s = String(validating: out, as: UTF8.self) else { throw invalidUTF8(from: start) }
                return s
            }
            if c == UInt8(ascii: "\\") {
                i += 1
                escaped = true
                let scalar = try escape()
                if scalar.isASCII {
                    out.append(UInt8(scalar.value))
                } else {
                    out.append(contentsOf: Array(String(scalar).utf8))
                }
                continue
            }
            if c < 32 { throw error("control character in a string") }
            out.append(c)
            i += 1
        }
        throw error("unterminated string")
    }

    /// The error for a string starting at `start` whose bytes are not valid UTF-8, at its first bad byte.
    func invalidUTF8(from start: Int) -> DecodeError {
        var k = start
        while k < b.count {
            let c = b[k]
            let n = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0
            guard n > 0, k + n <= b.count,
                String(validating: UnsafeBufferPointer(rebasing: b[k..<(k + n)]), as: UTF8.self) != nil
            else { break }
            k += n
        }
        let byte = k < b.count ? " (byte 0x\(String(b[k], radix: 16, uppercase: true)))" : ""
        return DecodeError("a string is not valid UTF-8\(byte); Beckon reads UTF-8 only", column: k + 1)
    }

    /// The scalar an escape stands for, `i` just past its backslash (and past the escape on return): what
    /// ``rawString()`` writes and ``skipString()`` checks. A bad escape, a lone surrogate or the line's end is an error.
    mutating func escape() throws(DecodeError) -> Unicode.Scalar {
        guard i < b.count else { throw error("unterminated string") }
        let e = b[i]
        i += 1
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): return Unicode.Scalar(e)
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            var code = try hex4()
            if code >= 0xD800 && code < 0xDC00 {
                // A surrogate pair.
                guard i + 1 < b.count && b[i] == UInt8(ascii: "\\") && b[i + 1] == UInt8(ascii: "u") else {
                    throw error("lone surrogate in \\u escape")
                }
                i += 2
                let low = try hex4()
                guard low >= 0xDC00 && low < 0xE000 else { throw error("invalid surrogate pair") }
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
            return scalar
        default: throw error("invalid escape '\\\(Character(Unicode.Scalar(e)))'")
        }
    }

    private mutating func hex4() throws(DecodeError) -> UInt32 {
        guard i + 4 <= b.count else { throw error("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = b[i]
            let d: UInt32
            switch c {
            case 48...57: d = UInt32(c - 48)
            case 97...102: d = UInt32(c - 87)
            case 65...70: d = UInt32(c - 55)
            default: throw error("invalid hex digit in \\u escape")
            }
            v = v * 16 + d
            i += 1
        }
        return v
    }

    /// A number as JSON (RFC 8259) writes one: `-`, then `0` or digits not starting with `0`, then `.` and at least
    /// one digit, then `e` and at least one digit. Anything else is a bad line, not read as a guess: the event is kept
    /// as it arrived, and an export must give it back as JSON. A number too large for a 64-bit float is refused too
    /// (it would be infinity, written out as `null`).
    mutating func number() throws(DecodeError) -> Value {
        let start = i
        var isDouble = false
        if peek() == UInt8(ascii: "-") { i += 1 }
        @inline(__always) func digitsHere() -> Int {
            let from = i
            while i < b.count, b[i] >= 48 && b[i] <= 57 { i += 1 }
            return i - from
        }
        let first = i
        let digits = digitsHere()
        guard digits > 0 else { throw DecodeError("invalid number", column: start + 1) }
        if digits > 1 && b[first] == UInt8(ascii: "0") {
            throw DecodeError("invalid number: a number does not start with 0 (write 7, not 07)", column: start + 1)
        }
        if i < b.count && b[i] == UInt8(ascii: ".") {
            isDouble = true
            i += 1
            guard digitsHere() > 0 else {
                throw DecodeError("invalid number: a '.' needs a digit after it (write 1.0, not 1.)", column: start + 1)
            }
        }
        if i < b.count && (b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E")) {
            isDouble = true
            i += 1
            if i < b.count && (b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-")) { i += 1 }
            guard digitsHere() > 0 else {
                throw DecodeError("invalid number: an exponent needs digits (write 1e5)", column: start + 1)
            }
        }
        if !isDouble && digits <= 18 {
            var v: Int64 = 0
            var k = start
            let neg = b[k] == UInt8(ascii: "-")
            if neg { k += 1 }
            while k < i {
                v = v * 10 + Int64(b[k] - 48)
                k += 1
            }
            return .int(neg ? -v : v)
        }
        let text = String(decoding: bytes(start, i), as: UTF8.self)
        if !isDouble, let v = Int64(text) { return .int(v) }
        guard let d = Double(text) else { throw DecodeError("invalid number '\(Self.shown(text))'", column: start + 1) }
        guard d.isFinite else {
            throw DecodeError(
                "the number \(Self.shown(text)) is beyond a 64-bit float's range (about ±1.8e308)", column: start + 1)
        }
        return .double(d)
    }

    /// A number's or key's text as a report shows it: its first 32 code points and its length in bytes when it is
    /// longer than 40 bytes (a line may hold a megabyte of digits, or of combining marks on one letter).
    static func shown(_ text: String) -> String {
        guard text.utf8.count > 40 else { return text }
        var start = ""
        start.unicodeScalars.append(contentsOf: text.unicodeScalars.prefix(32))
        return "\(start)… (\(text.utf8.count) bytes)"
    }

    mutating func value(depth: Int) throws(DecodeError) -> Value {
        guard depth < SegmentDecoder.maxDepth else { throw error("nested more than \(SegmentDecoder.maxDepth) levels deep") }
        skipSpace()
        guard let c = peek() else { throw error("a value is missing") }
        switch c {
        case UInt8(ascii: "\""): return .string(try rawString())
        case UInt8(ascii: "{"):
            i += 1
            var m = ValueMap()
            try members { (p, key) throws(DecodeError) in
                guard p.refusesRepeatedKeys else { return m[string: key] = try p.value(depth: depth + 1) }
                let column = p.i + 1
                guard m.insertNew(string: key, try p.value(depth: depth + 1)) else { throw Self.repeated(key, column) }
            }
            return .map(m)
        case UInt8(ascii: "["):
            i += 1
            var out: [Value] = []
            skipSpace()
            if peek() == UInt8(ascii: "]") {
                i += 1
                return .list(out)
            }
            while true {
                out.append(try value(depth: depth + 1))
                skipSpace()
                guard let d = peek() else { throw error("the list is not closed (']' missing)") }
                i += 1
                if d == UInt8(ascii: "]") { return .list(out) }
                guard d == UInt8(ascii: ",") else { throw DecodeError("expected ',' or ']'", column: i) }
            }
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default:
            if c == UInt8(ascii: "-") || (c >= 48 && c <= 57) { return try number() }
            throw error("unexpected character '\(Character(Unicode.Scalar(c)))'")
        }
    }

    private mutating func literal(_ word: StaticString) throws(DecodeError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= b.count else { throw error("invalid literal") }
        for k in 0..<n where b[i + k] != word.utf8Start[k] { throw error("invalid literal") }
        i += n
    }

    /// Skips a value without building it.
    mutating func skipValue(depth: Int) throws(DecodeError) {
        guard depth < SegmentDecoder.maxDepth else { throw error("nested more than \(SegmentDecoder.maxDepth) levels deep") }
        skipSpace()
        guard let c = peek() else { throw error("a value is missing") }
        switch c {
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "{"):
            i += 1
            try skipObjectBody(depth: depth + 1)
        case UInt8(ascii: "["):
            i += 1
            skipSpace()
            if peek() == UInt8(ascii: "]") { i += 1; return }
            while true {
                try skipValue(depth: depth + 1)
                skipSpace()
                guard let d = peek() else { throw error("the list is not closed (']' missing)") }
                i += 1
                if d == UInt8(ascii: "]") { return }
                guard d == UInt8(ascii: ",") else { throw DecodeError("expected ',' or ']'", column: i) }
            }
        default:
            _ = try value(depth: depth)
        }
    }

    /// Skips an object's members, past its `}`. A key is skipped as a value's string is, without making it (a `String`
    /// a key was 2% of a fleet process's time, skipping the events' `context` at ingest): ``skipString()`` refuses
    /// exactly what ``rawString()`` does.
    mutating func skipObjectBody(depth: Int) throws(DecodeError) {
        guard try beginMembers() else { return }
        repeat {
            try expectKey()
            try skipString()
            try endKey()
            try skipValue(depth: depth)
        } while try nextMember()
    }

    /// Skips a string at `i` (a quote) without making it, refusing exactly what ``rawString()`` refuses: bytes that are
    /// not UTF-8, a control character, a bad escape, a lone surrogate. So whether a line decodes never depends on
    /// which of its values the rules read: a service that accepted an event under one rule set decodes it under any
    /// other (docs/events.md, "Bad lines").
    mutating func skipString() throws(DecodeError) {
        i += 1
        let start = i
        var ascii = true
        while true {
            i = plainRun(from: i, ascii: &ascii)
            guard i < b.count else { throw error("unterminated string") }
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                if !ascii, String(validating: bytes(start, i), as: UTF8.self) == nil { throw invalidUTF8(from: start) }
                i += 1
                return
            }
            if c < 32 { throw error("control character in a string") }
            i += 1
            _ = try escape()
        }
    }
}

/// Any JSON text as a ``Value`` (numbers without a fraction or exponent are `int`), with the decoder's depth limit;
/// `refusingRepeatedKeys`: a key given twice in an object is an error, as in an event (else the last is kept).
public enum JSONValue {
    public static func parse(_ text: String, refusingRepeatedKeys: Bool = false) throws(DecodeError) -> Value {
        var s = text
        let result: Result<Value, DecodeError> = s.withUTF8 { buf in
            var p = JSONScanner(buf)
            p.refusesRepeatedKeys = refusingRepeatedKeys
            do throws(DecodeError) {
                let v = try p.value(depth: 0)
                p.skipSpace()
                guard p.atEnd else { throw p.error("unexpected text after the JSON value") }
                return .success(v)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

extension JSONValue {
    /// The top-level members of a JSON object line, each as its key and the byte range of its raw value.
    public static func members(_ line: UnsafeBufferPointer<UInt8>) throws(DecodeError) -> [(key: String, range: Range<Int>)] {
        var p = JSONScanner(line)
        var out: [(key: String, range: Range<Int>)] = []
        try p.expect(UInt8(ascii: "{"))
        try p.members { (p, key) throws(DecodeError) in
            p.skipSpace()
            let start = p.i
            try p.skipValue(depth: 0)
            out.append((key, start..<p.i))
        }
        return out
    }
}

extension SegmentDecoder {
    /// The keys of a line's top-level object (`nil`: not a JSON object).
    public static func topLevelKeys(in line: ArraySlice<UInt8>) -> Set<String>? {
        Array(line).withUnsafeBufferPointer { buf in (try? JSONValue.members(buf)).map { Set($0.map(\.key)) } }
    }

    /// The ids a line names at its top level (`userId`, `anonymousId`, `previousId`; a number as its literal text),
    /// read without the rules: what a forget and an export match a stored event on. `nil` when the line is not a JSON
    /// object (a caller then matches the id's quoted text in the bytes).
    public static func ids(in line: ArraySlice<UInt8>) -> [String]? {
        let bytes = Array(line)
        return bytes.withUnsafeBufferPointer { buf -> [String]? in
            guard let members = try? JSONValue.members(buf) else { return nil }
            var out: [String] = []
            for (key, range) in members where key == "userId" || key == "anonymousId" || key == "previousId" {
                let raw = UnsafeBufferPointer(rebasing: buf[range])
                guard let first = raw.first else { continue }
                if first == UInt8(ascii: "\"") {
                    var p = JSONScanner(raw)
                    if let s = try? p.rawString(), !s.isEmpty { out.append(s) }
                } else if first == UInt8(ascii: "-") || (first >= 48 && first <= 57) {
                    out.append(String(decoding: raw, as: UTF8.self))
                }
            }
            return out
        }
    }
}
