import BeckonCore

/// A group's inputs as the service's input log keeps them, in the order the engine took them: each event's JSON as
/// it arrived with its ``Arrival``, each inbox read with its time, and the live clock's tick. Replaying a record
/// through an engine in the state it had before does exactly what the engine did (docs/service.md, "Durability").
///
/// The format is text headers and raw bytes, so that a person (or a test) can read it:
///
/// ```
/// A KIND|- RECEIVED|- SENT|- LATEST|-\n     the arrival of the events that follow (one per request)
/// E LENGTH\n                               then LENGTH bytes of an event's JSON and \n
/// R TIME USERBYTES ITEMBYTES\n             then the user id, the item id and \n
/// T TIME\n
/// F USERBYTES\n                           then the user id and \n: forget them (a fleet's log only)
/// V VERSION\n                             from here on, rule set VERSION (a fleet's log only)
/// P TIME USERBYTES TOKENBYTES APPBYTES|- PLATFORM 0|1\n   then the user id, token and app and \n: a device registered
/// U USERBYTES TOKENBYTES [SEENBY]\n       then the user id, token and \n: a device's token removed (with SEENBY: only
///                                         if the user reported it no later, as another user reported it then)
/// H FROMBYTES TOBYTES\n                   then both ids and \n: hand FROM's state over to TO (a fleet's log only)
/// W FROMBYTES TOBYTES\n                   then both ids and \n: the next event merges FROM into TO, taking over what
///                                         FROM's partition handed over (a fleet's log only)
/// M IDBYTES TOBYTES\n                     then both ids and \n: the next event's id was merged into TO, and its
///                                         partition sent it on to TO's (a fleet's log only)
/// ```
/// Times are ms since 1970; `-` is none; KIND is Segment's type name.
package struct InputLog: Sendable {
    package private(set) var bytes: [UInt8] = []
    package private(set) var events = 0

    package init() {}

    /// An empty record with room for `capacity` bytes (one allocation for a record whose size is known).
    package init(capacity: Int) { bytes.reserveCapacity(capacity) }

    package enum Input {
        case event(ArraySlice<UInt8>, Arrival)
        case markRead(userID: String, itemID: String, time: Int64)
        case tick(Int64)
        /// A privacy request to forget a user, in a fleet's log: its partition's owner deletes everything of theirs
        /// when it reaches it (docs/fleet.md).
        case forget(userID: String)
        /// A new rule set, in a fleet's log: from this entry on its partition runs the stored version (docs/fleet.md,
        /// "Reloads").
        case rules(version: Int64)
        /// In a fleet's log, in the earlier id's partition: its state is handed over to `to`'s partition and it becomes
        /// a pointer (docs/fleet.md, "Identity merge").
        case handOver(from: String, to: String)
        /// In a fleet's log, before the sign-in that merges `from` into `to`: what `from`'s partition handed over is
        /// taken over first.
        case takeOver(from: String, to: String)
        /// In a fleet's log, before an event sent on from `id`'s partition: `id` was merged into `into`.
        case merged(id: String, into: String)
        /// A push device registered for a user (docs/push.md).
        case device(userID: String, Device)
        /// A push device's token removed from a user (the provider said it is no longer valid, or the app asked; with
        /// `seenBy`, another user reported it then: ``Engine/removeDevice(token:of:seenBy:)``).
        case deviceRemoved(userID: String, token: String, seenBy: Int64?)
    }

    struct Damaged: Error, CustomStringConvertible {
        var offset: Int
        var description: String { "the input log record at byte \(offset) is damaged" }
    }

    package var isEmpty: Bool { bytes.isEmpty }

    /// The arrival of the events appended after it.
    package mutating func arrival(_ a: Arrival) {
        func field(_ v: Int64?) -> String { v.map(String.init) ?? "-" }
        header("A \(a.kind.map(\.description) ?? "-") \(field(a.receivedAt)) \(field(a.sentAt)) \(field(a.latest))")
    }

    /// An event, which arrived as the last ``arrival(_:)`` says.
    package mutating func event(_ json: ArraySlice<UInt8>) {
        bytes.append(UInt8(ascii: "E"))
        bytes.append(UInt8(ascii: " "))
        bytes += String(json.count).utf8
        bytes.append(10)
        bytes += json
        bytes.append(10)
        events += 1
    }

    package mutating func markRead(userID: String, itemID: String, time: Int64) {
        header("R \(time) \(userID.utf8.count) \(itemID.utf8.count)")
        bytes += userID.utf8
        bytes += itemID.utf8
        bytes.append(10)
    }

    package mutating func tick(_ time: Int64) { header("T \(time)") }

    package mutating func forget(userID: String) {
        header("F \(userID.utf8.count)")
        bytes += userID.utf8
        bytes.append(10)
    }

    package mutating func rules(version: Int64) { header("V \(version)") }

    package mutating func device(userID: String, _ d: Device) {
        header(
            "P \(d.lastSeen) \(userID.utf8.count) \(d.token.utf8.count) \(d.app.map { String($0.utf8.count) } ?? "-") "
                + "\(d.platform.rawValue) \(d.pushEnabled ? 1 : 0)")
        bytes += userID.utf8
        bytes += d.token.utf8
        if let app = d.app { bytes += app.utf8 }
        bytes.append(10)
    }

    package mutating func deviceRemoved(userID: String, token: String, seenBy: Int64? = nil) {
        header("U \(userID.utf8.count) \(token.utf8.count)" + (seenBy.map { " \($0)" } ?? ""))
        bytes += userID.utf8
        bytes += token.utf8
        bytes.append(10)
    }

    package mutating func handOver(from: String, to: String) { pair("H", from, to) }
    package mutating func takeOver(from: String, to: String) { pair("W", from, to) }
    package mutating func merged(id: String, into: String) { pair("M", id, into) }

    private mutating func pair(_ kind: String, _ a: String, _ b: String) {
        header("\(kind) \(a.utf8.count) \(b.utf8.count)")
        bytes += a.utf8
        bytes += b.utf8
        bytes.append(10)
    }

    package mutating func append(_ other: InputLog) {
        bytes += other.bytes
        events += other.events
    }

    private mutating func header(_ text: String) {
        bytes += text.utf8
        bytes.append(10)
    }

    /// An event as a line that `beckon dry-run` reads as the service did: what the request's arrival told the decoder
    /// is written into it, after its own members (the last of a repeated key is the one read): `type` when it had none
    /// (it came to `/v1/track` or the like), `receivedAt` (the service's clock, which replaces the client's), and
    /// the batch's `sentAt` when it had none of its own. (An event stamped ahead of the service's clock was taken as
    /// arriving then; a dry-run takes its own time.)
    package static func replayable(_ json: ArraySlice<UInt8>, _ arrival: Arrival) -> String {
        let text = String(decoding: json, as: UTF8.self)
        guard let members = SegmentDecoder.topLevelKeys(in: json), let close = text.lastIndex(of: "}") else { return text }
        var extra: [(String, String)] = []
        if !members.contains("type"), let kind = arrival.kind { extra.append(("type", kind.description)) }
        if let r = arrival.receivedAt { extra.append(("receivedAt", Timestamp(milliseconds: r).description)) }
        if !members.contains("sentAt"), let s = arrival.sentAt {
            extra.append(("sentAt", Timestamp(milliseconds: s).description))
        }
        guard !extra.isEmpty else { return text }
        var w = JSONWriter()
        w.beginObject()
        for (key, value) in extra {
            w.key(key)
            w.string(value)
        }
        w.endObject()
        let added = w.output.dropFirst().dropLast()
        return String(text[..<close]) + (members.isEmpty ? "" : ",") + added + String(text[close...])
    }

    /// Whether an event names one of `ids` (its `userId`, `anonymousId` or `previousId`), read without the rules; an
    /// event that is not a JSON object at all names an id whose quoted text it holds.
    package static func names(_ json: ArraySlice<UInt8>, anyOf ids: Set<String>) -> Bool {
        if let named = SegmentDecoder.ids(in: json) { return named.contains(where: ids.contains) }
        return ids.contains { id in
            let quoted = Array(JSONWriter.encode(.string(id)).utf8)
            return json.firstRange(of: quoted) != nil
        }
    }

    /// A record without the events that name one of `ids` and without their inbox reads (`nil` when it holds none): what a
    /// forget leaves in the input log. Events are matched without the rules (``names(_:anyOf:)``), so that one no
    /// rule set can decode is removed too.
    package static func without(userIDs ids: Set<String>, in record: [UInt8]) throws -> InputLog? {
        var out = InputLog()
        var removed = false
        try read(record) { input in
            switch input {
            case .event(let json, let arrival):
                if names(json, anyOf: ids) {
                    removed = true
                    return
                }
                // (Each kept event gets its arrival again: the events around it may be gone.)
                out.arrival(arrival)
                out.event(json)
            case .markRead(let user, let item, let time):
                if ids.contains(user) {
                    removed = true
                    return
                }
                out.markRead(userID: user, itemID: item, time: time)
            case .tick(let time):
                out.tick(time)
            case .forget(let user):
                if ids.contains(user) {
                    removed = true
                    return
                }
                out.forget(userID: user)
            case .rules(let version):
                out.rules(version: version)
            case .handOver(let from, let to):
                if ids.contains(from) || ids.contains(to) {
                    removed = true
                    return
                }
                out.handOver(from: from, to: to)
            case .takeOver(let from, let to):
                if ids.contains(from) || ids.contains(to) {
                    removed = true
                    return
                }
                out.takeOver(from: from, to: to)
            case .merged(let id, let into):
                if ids.contains(id) || ids.contains(into) {
                    removed = true
                    return
                }
                out.merged(id: id, into: into)
            case .device(let user, let d):
                if ids.contains(user) {
                    removed = true
                    return
                }
                out.device(userID: user, d)
            case .deviceRemoved(let user, let token, let seenBy):
                if ids.contains(user) {
                    removed = true
                    return
                }
                out.deviceRemoved(userID: user, token: token, seenBy: seenBy)
            }
        }
        return removed ? out : nil
    }

    /// Calls `body` with each event of a record that decodes under `decoder`, with its JSON as it arrived, in order:
    /// the readers of stored events (privacy exports, the console). Events that do not decode and the rest of a
    /// damaged record are passed over; what `body` throws stops the record and is thrown.
    /// With `tick`, the clock's ticks of the record too, in their place (what a replay moves the clock by); with
    /// `arrivals`, each event's arrival as one, before it (a store that logs no ticks: a fleet's).
    package static func events(
        in record: [UInt8], decoder: SegmentDecoder, tick: ((Int64) -> Void)? = nil, arrivals: Bool = false,
        _ body: (BoundEvent, ArraySlice<UInt8>) throws -> Void
    ) throws {
        var thrown: (any Error)?
        try? read(record) { input in
            guard thrown == nil else { return }
            if case .tick(let t) = input { tick?(t) }
            if arrivals, case .event(_, let arrival) = input, let t = arrival.receivedAt { tick?(t) }
            guard case .event(let json, let arrival) = input, let e = try? decoder.decode(json, arrival: arrival) else { return }
            do { try body(e, json) } catch { thrown = error }
        }
        if let thrown { throw thrown }
    }

    /// Calls `body` with each input of a record, in order.
    package static func read(_ record: [UInt8], _ body: (Input) throws -> Void) throws {
        var i = 0
        var arrival: Arrival?
        while i < record.count {
            let start = i
            guard let nl = record[i...].firstIndex(of: 10) else { throw Damaged(offset: start) }
            // (Split as bytes and kept as bytes: splitting the line as `Character`s cost a grapheme break test a byte,
            // 4.6% of a fleet process's time, and a `String` a field another 2%; an array of fields a line, 2.4%. A
            // number is read from a short inline `String`, by `Int64`'s own rules.)
            let fields = HeaderFields(record[i..<nl])
            i = nl + 1
            func int(_ s: ArraySlice<UInt8>) throws -> Int64? {
                if s.elementsEqual("-".utf8) { return nil }
                guard let v = Int64(String(decoding: s, as: UTF8.self)) else { throw Damaged(offset: start) }
                return v
            }
            func text(_ s: ArraySlice<UInt8>) -> String { String(decoding: s, as: UTF8.self) }
            func take(_ n: Int) throws -> ArraySlice<UInt8> {
                guard n >= 0, i + n <= record.count else { throw Damaged(offset: start) }
                defer { i += n }
                return record[i..<i + n]
            }
            // (A record's type is one letter.)
            switch fields.first.flatMap({ $0.count == 1 ? $0.first : nil }) {
            case UInt8(ascii: "A"):
                guard fields.count == 5 else { throw Damaged(offset: start) }
                var kind: Event.Kind?
                if !fields[1].elementsEqual("-".utf8) {
                    guard let k = Event.Kind(fields[1]) else { throw Damaged(offset: start) }
                    kind = k
                }
                arrival = Arrival(
                    kind: kind, receivedAt: try int(fields[2]), sentAt: try int(fields[3]), latest: try int(fields[4]))
            case UInt8(ascii: "E"):
                guard fields.count == 2, let n = try int(fields[1]), let arrival else { throw Damaged(offset: start) }
                let json = try take(Int(n))
                _ = try take(1)
                try body(.event(json, arrival))
            case UInt8(ascii: "R"):
                guard fields.count == 4, let t = try int(fields[1]), let u = try int(fields[2]), let m = try int(fields[3])
                else { throw Damaged(offset: start) }
                let user = String(decoding: try take(Int(u)), as: UTF8.self)
                let item = String(decoding: try take(Int(m)), as: UTF8.self)
                _ = try take(1)
                try body(.markRead(userID: user, itemID: item, time: t))
            case UInt8(ascii: "F"):
                guard fields.count == 2, let n = try int(fields[1]) else { throw Damaged(offset: start) }
                let user = String(decoding: try take(Int(n)), as: UTF8.self)
                _ = try take(1)
                try body(.forget(userID: user))
            case UInt8(ascii: "T"):
                guard fields.count == 2, let t = try int(fields[1]) else { throw Damaged(offset: start) }
                try body(.tick(t))
            case UInt8(ascii: "V"):
                guard fields.count == 2, let v = try int(fields[1]) else { throw Damaged(offset: start) }
                try body(.rules(version: v))
            case UInt8(ascii: "P"):
                guard fields.count == 7, let t = try int(fields[1]), let u = try int(fields[2]), let k = try int(fields[3]),
                    let platform = Device.Platform(rawValue: text(fields[5])),
                    fields[6].elementsEqual("0".utf8) || fields[6].elementsEqual("1".utf8)
                else { throw Damaged(offset: start) }
                let appLength = try int(fields[4])
                let user = String(decoding: try take(Int(u)), as: UTF8.self)
                let token = String(decoding: try take(Int(k)), as: UTF8.self)
                let app = try appLength.map { String(decoding: try take(Int($0)), as: UTF8.self) }
                _ = try take(1)
                try body(
                    .device(
                        userID: user,
                        Device(
                            token: token, platform: platform, app: app, firstSeen: t, lastSeen: t,
                            pushEnabled: fields[6].elementsEqual("1".utf8)))
                )
            case UInt8(ascii: "U"):
                guard fields.count == 3 || fields.count == 4, let u = try int(fields[1]), let k = try int(fields[2]) else {
                    throw Damaged(offset: start)
                }
                var seenBy: Int64?
                if fields.count == 4 {
                    guard let t = try int(fields[3]) else { throw Damaged(offset: start) }
                    seenBy = t
                }
                let user = String(decoding: try take(Int(u)), as: UTF8.self)
                let token = String(decoding: try take(Int(k)), as: UTF8.self)
                _ = try take(1)
                try body(.deviceRemoved(userID: user, token: token, seenBy: seenBy))
            case UInt8(ascii: "H"), UInt8(ascii: "W"), UInt8(ascii: "M"):
                guard fields.count == 3, let m = try int(fields[1]), let n = try int(fields[2]) else {
                    throw Damaged(offset: start)
                }
                let a = String(decoding: try take(Int(m)), as: UTF8.self)
                let b = String(decoding: try take(Int(n)), as: UTF8.self)
                _ = try take(1)
                switch fields[0].first {
                case UInt8(ascii: "H"): try body(.handOver(from: a, to: b))
                case UInt8(ascii: "W"): try body(.takeOver(from: a, to: b))
                default: try body(.merged(id: a, into: b))
                }
            default:
                throw Damaged(offset: start)
            }
        }
    }
}

/// A header line's fields, as `split(separator: " ")` gives them (empty ones left out), kept in place rather than in
/// an array a line. No header has more than ``most`` fields: a line of more counts as `most + 1`, which none takes.
struct HeaderFields {
    static let most = 7
    private let line: ArraySlice<UInt8>
    private var ranges = InlineArray<8, Range<Int>>(repeating: 0..<0)
    private(set) var count = 0

    init(_ line: ArraySlice<UInt8>) {
        self.line = line
        var k = line.startIndex
        while k < line.endIndex && count <= Self.most {
            guard line[k] != UInt8(ascii: " ") else {
                k += 1
                continue
            }
            let start = k
            while k < line.endIndex && line[k] != UInt8(ascii: " ") { k += 1 }
            ranges[count] = start..<k
            count += 1
        }
    }

    subscript(_ k: Int) -> ArraySlice<UInt8> { line[ranges[k]] }
    var first: ArraySlice<UInt8>? { count > 0 ? self[0] : nil }
}
