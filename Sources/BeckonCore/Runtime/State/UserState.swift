/// Everything an engine keeps about one user, named by stable ids instead of load order: rules by `unit/id`,
/// history series by what they count (``SeriesKey``), attributes and context fields by name. State taken under one
/// rule set restores under an edited one (``Engine/restore(_:)``), and ``encoded()`` / ``init(decoding:)`` turn it
/// into compact, versioned bytes for a database (docs/state.md).
public struct UserState: Sendable {
    public var userID: String
    /// The latest time processed for the user (ms since 1970).
    public var clock: Int64
    /// Events processed for the user (the key of action ids when an event has no messageId).
    public var eventCount: UInt32
    public var session: UserProfile.Session
    /// Every attribute, those no rule reads included, sorted by name.
    public var attributes: [(name: String, value: Value)]
    /// The last value of each context field the rules read, sorted by name.
    public var context: [(name: String, value: Value)]
    /// Fire records, by rule.
    public var records: [Record]
    /// The global in-app cap's record (`nil`: nothing counted yet).
    public var messages: Record?
    /// History, by series.
    public var series: [Series]
    /// The `messageId`s within the de-duplication window: each one's 64-bit hash and arrival time, oldest first.
    public var messageIDs: [(hash: UInt64, time: Int64)]
    /// Ids older than the window that the engine has forgotten but not dropped yet, oldest first (all older than
    /// ``messageIDs``): never a duplicate again, kept so that the saved bytes change at one end only until the window
    /// compacts (docs/state.md). A merge leaves them out; the JSON form has them as `expiredMessageIds`.
    public var expiredMessageIDs: [(hash: UInt64, time: Int64)] = []
    public var inbox: [InboxItem]
    /// Delayed actions waiting for their due time.
    public var pending: [Pending]
    /// Partial matches of sequence triggers.
    public var sequences: [Sequence]
    /// Set when this id was merged into another user (an identify's `anonymousId`, an alias's `previousId`): the
    /// state is otherwise empty, and the id's later events go to that user (``Engine/merge(_:into:)``).
    public var mergedInto: String? = nil
    /// The devices the user gets push on.
    public var devices: [Device] = []
    /// Whether an event named this id as its `userId` (format 5): a known user is never merged into another.
    public var known = false

    /// A rule's counters for the user (see ``RuleRecord``); `rule` is its `unit/id`.
    public struct Record: Sendable, Hashable {
        public var rule: String
        public var occurrences: UInt32
        public var fires: UInt32
        public var sessionFires: UInt16
        public var sessionID: UInt32
        public var lastFire: Int64
    }

    /// One history series: occurrence times (oldest first), lifetime facts, numeric values for `sum`.
    public struct Series: Sendable {
        public var key: String
        public var times: [Int64]
        public var lifetime: (count: UInt32, first: Int64, last: Int64)?
        public var values: [(time: Int64, value: Double)]
    }

    /// A delayed action (see ``PendingAction``), with its rule by `unit/id` and its triggering event by names.
    public struct Pending: Sendable {
        public var id: UInt64
        public var rule: String
        public var due: Int64
        public var scheduledAt: Int64
        public var held: Bool
        public var keyMessageID: String?
        public var keyEventCount: UInt32
        public var keySuffix: String
        public var trigger: String
        public var event: Event?
        public var change: AttributeChange?
    }

    /// A sequence rule's partial matches for one correlation key: `best[k]`, the latest start of a match at step `k`.
    public struct Sequence: Sendable, Hashable {
        public var rule: String
        public var key: String
        public var best: [Int64]
    }
}

/// The stream's own state, beside its users': its clock (which brings every user's delayed actions due), the
/// events waiting to confirm a jump of it, and the next timer id. A service keeps it with the users' states.
public struct StreamState: Sendable, Hashable {
    public var clock: Int64
    public var latestTime: Int64
    public var nextTimerID: UInt64
    public var ahead: [Ahead]
    /// Each `rate:` rule's current window (format version 2).
    public var rates: [Rate] = []

    public struct Ahead: Sendable, Hashable {
        public var time: Int64
        public var user: UInt64
    }

    /// A paced schedule's window: the rule's qualified id, when its window started and how many runs fired in it.
    public struct Rate: Sendable, Hashable {
        public var rule: String
        public var start: Int64
        public var fired: UInt64
    }
}

// MARK: Bytes

extension UserState {
    /// The first bytes of every encoded state: "BKS" and the format's version.
    static let magic: [UInt8] = Array("BKS".utf8)
    /// 2 adds ``mergedInto`` at the end, 3 ``devices`` after it, 4 moves the `messageId`s to the end, newest first, with
    /// the expired ones kept, 5 ``known`` after the devices; versions 1 to 4 are still read.
    public static let formatVersion: UInt8 = 5

    /// The state as bytes (format version 5, docs/state.md). Times are written relative to ``clock``; a `messageId`'s
    /// relative to the next newer one.
    ///
    /// The `messageId`s come last, newest first, so that from one save to the next the bytes change at their start
    /// (the clock, counters, history) and where the new ids go, and the older ids after them stay as they were. A
    /// database that logs only the changed middle of a row (PostgreSQL's update of a row on the same page) then logs
    /// a few dozen bytes a save instead of the whole window: docs/fleet.md.
    public func encoded() -> [UInt8] {
        // (Room for the usual state at once: a `messageId` takes ~10 bytes, most other parts fewer than 24.)
        let parts = attributes.count + context.count + records.count + series.count + pending.count + devices.count
        var w = StateWriter(capacity: 64 + userID.utf8.count + 24 * parts + 11 * (messageIDs.count + expiredMessageIDs.count))
        for b in UserState.magic { w.byte(b) }
        w.byte(UserState.formatVersion)
        w.string(userID)
        let c = clock
        w.time(clock, from: 0)
        w.uint(UInt64(eventCount))
        w.time(session.start, from: c)
        w.time(session.lastActivity, from: c)
        w.uint(UInt64(session.id))
        for list in [attributes, context] {
            w.uint(UInt64(list.count))
            for (name, value) in list {
                w.string(name)
                w.value(value)
            }
        }
        func record(_ r: Record) {
            w.uint(UInt64(r.occurrences))
            w.uint(UInt64(r.fires))
            w.uint(UInt64(r.sessionFires))
            w.uint(UInt64(r.sessionID))
            w.time(r.lastFire, from: c)
        }
        w.uint(UInt64(records.count))
        for r in records {
            w.string(r.rule)
            record(r)
        }
        if let messages {
            w.byte(1)
            record(messages)
        } else {
            w.byte(0)
        }
        w.uint(UInt64(series.count))
        for s in series {
            w.string(s.key)
            // Oldest first: each time after the first is its distance from the one before.
            w.uint(UInt64(s.times.count))
            var previous = c
            for t in s.times {
                w.time(t, from: previous)
                previous = t
            }
            if let l = s.lifetime {
                w.byte(1)
                w.uint(UInt64(l.count))
                w.time(l.first, from: c)
                w.time(l.last, from: c)
            } else {
                w.byte(0)
            }
            w.uint(UInt64(s.values.count))
            for v in s.values {
                w.time(v.time, from: c)
                w.fixed64(v.value.bitPattern)
            }
        }
        w.uint(UInt64(inbox.count))
        for item in inbox {
            w.string(item.id)
            w.optionalString(item.sender)
            w.string(item.message)
            w.optionalString(item.link)
            w.time(item.createdAt, from: c)
            w.byte(item.read ? 1 : 0)
            w.time(item.readAt ?? Int64.min, from: c)
            w.string(item.rule)
        }
        w.uint(UInt64(pending.count))
        for p in pending {
            w.uint(p.id)
            w.string(p.rule)
            w.time(p.due, from: c)
            w.time(p.scheduledAt, from: c)
            w.byte(p.held ? 1 : 0)
            w.optionalString(p.keyMessageID)
            w.uint(UInt64(p.keyEventCount))
            w.string(p.keySuffix)
            w.string(p.trigger)
            if let e = p.event {
                w.byte(1)
                w.byte(e.kind.rawValue)
                w.string(e.name)
                w.time(e.timestamp, from: c)
                w.optionalString(e.messageID)
                for m in [e.properties, e.traits, e.context] {
                    w.uint(UInt64(m.count))
                    for (k, v) in m.entries {
                        w.value(k)
                        w.value(v)
                    }
                }
            } else {
                w.byte(0)
            }
            if let ch = p.change {
                w.byte(1)
                w.string(ch.attribute)
                w.value(ch.from)
                w.value(ch.to)
            } else {
                w.byte(0)
            }
        }
        w.uint(UInt64(sequences.count))
        for q in sequences {
            w.string(q.rule)
            w.string(q.key)
            w.uint(UInt64(q.best.count))
            for b in q.best { w.time(b, from: c) }
        }
        w.optionalString(mergedInto)
        w.uint(UInt64(devices.count))
        for d in devices {
            w.string(d.token)
            w.string(d.platform.rawValue)
            w.optionalString(d.app)
            // (Absolute: a device may be registered before the user's first event, when there is no clock.)
            w.time(d.firstSeen, from: 0)
            w.time(d.lastSeen, from: 0)
            w.byte(d.pushEnabled ? 1 : 0)
        }
        w.byte(known ? 1 : 0)
        w.uint(UInt64(messageIDs.count))
        w.uint(UInt64(expiredMessageIDs.count))
        var newer = c
        for ids in [messageIDs, expiredMessageIDs] {
            for m in ids.reversed() {
                w.time(m.time, from: newer)
                w.fixed64(m.hash)
                newer = m.time
            }
        }
        return w.bytes
    }

    /// Reads bytes ``encoded()`` wrote; anything else — truncated, a later format version, trailing bytes, a count
    /// beyond the bytes, invalid UTF-8, a time out of range — is a ``StateDecodingError``.
    public init(decoding bytes: [UInt8]) throws(StateDecodingError) {
        var r = StateReader(bytes)
        for b in UserState.magic where try r.byte() != b { throw r.error("it does not start with \"BKS\"") }
        let version = try r.byte()
        guard (1...UserState.formatVersion).contains(version) else {
            throw r.error("format version \(version); this build reads versions 1 to \(UserState.formatVersion)")
        }
        userID = try r.string()
        let c = try r.time(from: 0)
        clock = c
        eventCount = try r.uint32()
        session = UserProfile.Session()
        session.start = try r.time(from: c)
        session.lastActivity = try r.time(from: c)
        session.id = try r.uint32()
        func pairs() throws(StateDecodingError) -> [(name: String, value: Value)] {
            var list: [(name: String, value: Value)] = []
            for _ in 0..<(try r.count(minBytes: 2)) {
                let name = try r.string()
                let value = try r.value()
                guard value.byteSize(upTo: ValueLimits.maxAttributeBytes) <= ValueLimits.maxAttributeBytes else {
                    throw r.error("'\(name)' is over \(ValueLimits.maxAttributeBytes) bytes")
                }
                list.append((name, value))
            }
            return list
        }
        attributes = try pairs()
        context = try pairs()
        func record(_ rule: String) throws(StateDecodingError) -> Record {
            let occurrences = try r.uint32()
            let fires = try r.uint32()
            guard let sessionFires = UInt16(exactly: try r.uint()) else { throw r.error("a session count is over 16 bits") }
            return Record(
                rule: rule, occurrences: occurrences, fires: fires, sessionFires: sessionFires, sessionID: try r.uint32(),
                lastFire: try r.time(from: c))
        }
        records = []
        for _ in 0..<(try r.count(minBytes: 6)) { records.append(try record(try r.string())) }
        messages = try r.bool() ? try record("") : nil
        series = []
        for _ in 0..<(try r.count(minBytes: 4)) {
            let key = try r.string()
            var times: [Int64] = []
            var previous = c
            for _ in 0..<(try r.count()) {
                let t = try r.time(from: previous)
                guard t >= 0, t < 1 << 44, t >= (times.last ?? 0) else { throw r.error("history times out of order or range") }
                times.append(t)
                previous = t
            }
            var lifetime: (count: UInt32, first: Int64, last: Int64)?
            if try r.bool() { lifetime = (try r.uint32(), try r.time(from: c), try r.time(from: c)) }
            var values: [(time: Int64, value: Double)] = []
            for _ in 0..<(try r.count(minBytes: 9)) {
                let t = try r.time(from: c)
                guard t >= 0, t < 1 << 44, t >= (values.last?.time ?? 0) else {
                    throw r.error("history values out of order or range")
                }
                values.append((t, Double(bitPattern: try r.fixed64())))
            }
            series.append(Series(key: key, times: times, lifetime: lifetime, values: values))
        }
        messageIDs = []
        if version < 4 {
            for _ in 0..<(try r.count(minBytes: 9)) {
                let h = try r.fixed64()
                let t = try r.time(from: c)
                guard t >= (messageIDs.last?.time ?? Int64.min) else { throw r.error("messageId times out of order") }
                messageIDs.append((h, t))
            }
        }
        inbox = []
        for _ in 0..<(try r.count(minBytes: 8)) {
            let id = try r.string()
            let sender = try r.optionalString()
            let message = try r.string()
            let link = try r.optionalString()
            let created = try r.time(from: c)
            let read = try r.bool()
            let readAt = try r.time(from: c)
            inbox.append(
                InboxItem(
                    id: id, sender: sender, message: message, link: link, createdAt: created, read: read,
                    readAt: readAt == Int64.min ? nil : readAt, rule: try r.string()))
        }
        pending = []
        for _ in 0..<(try r.count(minBytes: 12)) {
            let id = try r.uint()
            let rule = try r.string()
            let due = try r.time(from: c)
            let scheduledAt = try r.time(from: c)
            let held = try r.bool()
            let keyMessageID = try r.optionalString()
            let keyEventCount = try r.uint32()
            let keySuffix = try r.string()
            let trigger = try r.string()
            var event: Event?
            if try r.bool() {
                let k = try r.byte()
                guard let kind = Event.Kind(rawValue: k) else { throw r.error("unknown event kind \(k)") }
                let name = try r.string()
                let timestamp = try r.time(from: c)
                let messageID = try r.optionalString()
                var maps: [ValueMap] = []
                for _ in 0..<3 {
                    var entries: [(Value, Value)] = []
                    for _ in 0..<(try r.count(minBytes: 2)) { entries.append((try r.value(), try r.value())) }
                    do {
                        maps.append(try ValueMap(checking: entries))
                    } catch {
                        throw r.error("an event's fields: \(error.message)")
                    }
                }
                event = Event(
                    kind: kind, name: name, userID: userID, timestamp: timestamp, messageID: messageID, properties: maps[0],
                    traits: maps[1], context: maps[2])
            }
            var change: AttributeChange?
            if try r.bool() { change = AttributeChange(attribute: try r.string(), from: try r.value(), to: try r.value()) }
            guard due != Int64.min, scheduledAt != Int64.min else { throw r.error("a delayed action has no due time") }
            pending.append(
                Pending(
                    id: id, rule: rule, due: due, scheduledAt: scheduledAt, held: held, keyMessageID: keyMessageID,
                    keyEventCount: keyEventCount, keySuffix: keySuffix, trigger: trigger, event: event, change: change))
        }
        sequences = []
        for _ in 0..<(try r.count(minBytes: 3)) {
            let rule = try r.string()
            let key = try r.string()
            var best: [Int64] = []
            for _ in 0..<(try r.count()) { best.append(try r.time(from: c)) }
            sequences.append(Sequence(rule: rule, key: key, best: best))
        }
        mergedInto = version >= 2 ? try r.optionalString() : nil
        devices = []
        if version >= 3 {
            for _ in 0..<(try r.count(minBytes: 5)) {
                let token = try r.string()
                let name = try r.string()
                guard let platform = Device.Platform(rawValue: name) else { throw r.error("a device's platform is \(name)") }
                let app = try r.optionalString()
                let first = try r.time(from: 0)
                let last = try r.time(from: 0)
                devices.append(
                    Device(
                        token: token, platform: platform, app: app, firstSeen: first, lastSeen: last, pushEnabled: try r.bool()
                    ))
            }
        }
        known = version >= 5 ? try r.bool() : false
        if version >= 4 {
            let live = try r.count(minBytes: 9)
            let expired = try r.count(minBytes: 9)
            guard live + expired <= r.remaining / 9 else { throw r.error("a count is larger than the bytes") }
            // Newest first, each relative to the one before it (the first to the clock): read back to oldest first.
            var ids: [(hash: UInt64, time: Int64)] = []
            ids.reserveCapacity(live + expired)
            var newer = c
            for _ in 0..<(live + expired) {
                let t = try r.time(from: newer)
                guard ids.isEmpty || t <= newer else { throw r.error("messageId times out of order") }
                ids.append((try r.fixed64(), t))
                newer = t
            }
            messageIDs = ids[..<live].reversed()
            expiredMessageIDs = ids[live...].reversed()
        }
        guard r.isAtEnd else { throw r.error("bytes after the end of the state") }
    }
}

extension StreamState {
    /// The stream state's own format version (it did not change when the users' did). 2 adds ``rates`` at the end;
    /// version 1 is still read.
    public static let formatVersion: UInt8 = 2

    /// The stream's state as bytes ("BKC", version, then the fields; docs/state.md).
    public func encoded() -> [UInt8] {
        var w = StateWriter(capacity: 32)
        for b in "BKC".utf8 { w.byte(b) }
        w.byte(StreamState.formatVersion)
        w.time(clock, from: 0)
        w.time(latestTime, from: 0)
        w.uint(nextTimerID)
        w.uint(UInt64(ahead.count))
        for a in ahead {
            w.time(a.time, from: 0)
            w.fixed64(a.user)
        }
        w.uint(UInt64(rates.count))
        for r in rates {
            w.string(r.rule)
            w.time(r.start, from: 0)
            w.uint(r.fired)
        }
        return w.bytes
    }

    public init(decoding bytes: [UInt8]) throws(StateDecodingError) {
        var r = StateReader(bytes)
        for b in "BKC".utf8 where try r.byte() != b { throw r.error("it does not start with \"BKC\"") }
        let version = try r.byte()
        guard version == 1 || version == StreamState.formatVersion else {
            throw r.error("format version \(version); this build reads version \(StreamState.formatVersion)")
        }
        clock = try r.time(from: 0)
        latestTime = try r.time(from: 0)
        nextTimerID = try r.uint()
        ahead = []
        for _ in 0..<(try r.count(minBytes: 9)) { ahead.append(Ahead(time: try r.time(from: 0), user: try r.fixed64())) }
        rates = []
        if version >= 2 {
            for _ in 0..<(try r.count(minBytes: 3)) {
                rates.append(Rate(rule: try r.string(), start: try r.time(from: 0), fired: try r.uint()))
            }
        }
        guard r.isAtEnd else { throw r.error("bytes after the end of the stream state") }
    }
}
