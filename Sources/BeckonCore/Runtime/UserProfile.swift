import CBeckon

/// Everything Beckon keeps about one user: attributes, event history, fire records, session, inbox.
///
/// A reference type so that a ``StateStore`` can hand the engine the live profile to update in place.
/// Times are milliseconds since 1970, read only from events.
public final class UserProfile {
    public let userID: String
    /// Attributes the loaded rules read, by ``CompiledRuleSet/attributeSlots``.
    public let attributes: ValueSlots
    /// Last value seen of each context field the rules read (server-side events often lack context).
    public let context: ValueSlots
    /// The latest time processed for this user; never moves back.
    @exclusivity(unchecked) public internal(set) var clock: Int64 = Int64.min
    @exclusivity(unchecked) public internal(set) var session = Session()
    /// Events processed for this user (a key for action ids when an event has no messageId). Declared after
    /// `session`, whose last field it packs beside.
    @exclusivity(unchecked) public internal(set) var eventCount: UInt32 = 0
    /// Read and changed in place (it cannot be copied). Only the engine's thread touches it: no exclusivity checks.
    @exclusivity(unchecked) public internal(set) var history = HistoryLog()
    /// Fire records of the rules with limits or re-prompts this user has triggered, sorted by rule index, in memory
    /// the profile owns (records are plain data: reading one counts no references and checks no exclusive access).
    @exclusivity(unchecked) private var recordBase: UnsafeMutablePointer<RuleRecord>? = nil
    @exclusivity(unchecked) private var recordCount: Int32 = 0
    @exclusivity(unchecked) private var recordCapacity: Int32 = 0
    /// The messageIds within the de-duplication window, from the user's first one on.
    @exclusivity(unchecked) var messageIDs: MessageIDWindow?
    /// What most users never need (an inbox, timers, partial sequences, the global cap's record, attributes no rule
    /// reads), allocated on first use: a profile stays small for the users who need none of it.
    private var extras: Extras?

    final class Extras {
        var otherAttributes: ValueMap?
        var messages = RuleRecord(rule: -1)
        var inbox: [InboxItem] = []
        var pending: [PendingAction] = []
        var sequences: [SequenceState] = []
    }

    private func ensureExtras() -> Extras {
        if let e = extras { return e }
        let e = Extras()
        extras = e
        return e
    }

    /// Attributes no loaded rule reads (kept so the profile stays complete).
    public internal(set) var otherAttributes: ValueMap? {
        get { extras?.otherAttributes }
        _modify { yield &ensureExtras().otherAttributes }
    }
    /// Global in-app cap record (per-session and lifetime counters for `message` actions).
    public internal(set) var messages: RuleRecord {
        get { extras?.messages ?? RuleRecord(rule: -1) }
        _modify { yield &ensureExtras().messages }
    }
    public internal(set) var inbox: [InboxItem] {
        get { extras?.inbox ?? [] }
        _modify { yield &ensureExtras().inbox }
    }
    /// Delayed actions waiting for their due time.
    public internal(set) var pending: [PendingAction] {
        get { extras?.pending ?? [] }
        _modify { yield &ensureExtras().pending }
    }
    /// Partial matches of sequence triggers.
    var sequences: [SequenceState] {
        get { extras?.sequences ?? [] }
        _modify { yield &ensureExtras().sequences }
    }

    public init(userID: String, attributeCount: Int, contextCount: Int) {
        self.userID = userID
        attributes = ValueSlots(count: attributeCount)
        context = ValueSlots(count: contextCount)
    }

    deinit {
        attributes.free()
        context.free()
        recordBase?.deallocate()
    }

    public struct Session: Sendable, Hashable {
        public var start: Int64 = 0
        public var lastActivity: Int64 = Int64.min
        /// 0 before the first event; increments with each new session.
        public var id: UInt32 = 0
    }

    /// Bytes from a profile object's start that hold all of it (header and stored properties; a test checks that
    /// they do), for the prefetch hints.
    static let objectBytes = 152

    /// Asks the CPU for the memory the engine reads for most events (see ``InMemoryStateStore``'s prefetching).
    @inline(__always) func prefetchState() {
        beckon_prefetch_range(attributes.base, attributes.count * MemoryLayout<Value?>.stride, 4)
        if let r = recordBase { beckon_prefetch_range(r, Int(recordCount) * MemoryLayout<RuleRecord>.stride, 2) }
        history.prefetch()
    }

    /// Fire records of the rules with limits or re-prompts this user has triggered, sorted by rule index.
    public var records: [RuleRecord] { Array(UnsafeBufferPointer(start: recordBase, count: Int(recordCount))) }

    /// Where `rule`'s record is, or would go (records are sorted by rule).
    @inline(__always) private func recordSlot(_ rule: Int32) -> Int {
        guard let base = recordBase else { return 0 }
        var lo = 0
        var hi = Int(recordCount)
        while lo < hi {
            let mid = (lo + hi) >> 1
            if base[mid].rule < rule { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The record of `rule`, if it has one: a pointer into the profile's records, valid until a record is added.
    @inline(__always) func recordPointer(_ rule: Int32) -> UnsafeMutablePointer<RuleRecord>? {
        let i = recordSlot(rule)
        guard i < Int(recordCount), let base = recordBase, base[i].rule == rule else { return nil }
        return base + i
    }

    public func record(for rule: Int32) -> RuleRecord? { recordPointer(rule)?.pointee }

    /// The record of `rule`, created when missing.
    func withRecord<R>(_ rule: Int32, _ body: (inout RuleRecord) -> R) -> R {
        if let p = recordPointer(rule) { return body(&p.pointee) }
        let i = recordSlot(rule)
        let n = Int(recordCount)
        if recordCount == recordCapacity {
            let capacity = max(2, Int(recordCapacity) * 2)
            let grown = UnsafeMutablePointer<RuleRecord>.allocate(capacity: capacity)
            if let base = recordBase {
                grown.moveInitialize(from: base, count: n)
                base.deallocate()
            }
            recordBase = grown
            recordCapacity = Int32(capacity)
        }
        let base = recordBase!
        (base + i + 1).moveInitialize(from: base + i, count: n - i)
        (base + i).initialize(to: RuleRecord(rule: rule))
        recordCount += 1
        return body(&base[i])
    }

    /// Unread items in the inbox.
    public var unreadCount: Int { inbox.count(where: { !$0.read }) }

    /// An estimate of the heap bytes this profile holds (for `beckon bench`).
    public var approximateBytes: Int {
        let valueStride = MemoryLayout<Value?>.stride
        var n = 16 + MemoryLayout<UserProfile>.size
        n += attributes.count * valueStride + context.count * valueStride
        n += history.byteCount + Int(recordCapacity) * MemoryLayout<RuleRecord>.stride
        n += (messageIDs?.bytes ?? 0) + inbox.count * 96 + (extras == nil ? 0 : 96)
        for q in sequences { n += 48 + q.key.utf8.count + q.best.count * 8 }
        return n
    }
}

/// A profile's fixed row of optional values (attributes or context fields, by slot), in memory the profile owns:
/// read and written in place, without reference counting or exclusivity checks of an array buffer.
public struct ValueSlots {
    let base: UnsafeMutablePointer<Value?>
    public let count: Int

    init(count: Int) {
        self.count = count
        // No slots (a rule set that reads no context): no allocation, a pointer never read.
        base = count == 0 ? ValueSlots.none : .allocate(capacity: count)
        base.initialize(repeating: nil, count: count)
    }

    /// Slots holding `values`.
    init(copying values: ContiguousArray<Value?>) {
        self.init(count: values.count)
        for (i, v) in values.enumerated() where v != nil { base[i] = v }
    }

    private nonisolated(unsafe) static let none = UnsafeMutablePointer<Value?>.allocate(capacity: 1)

    public subscript(_ i: Int) -> Value? {
        @inline(__always) get {
            precondition(i >= 0 && i < count, "slot out of range")
            return base[i]
        }
        @inline(__always) nonmutating set {
            precondition(i >= 0 && i < count, "slot out of range")
            base[i] = newValue
        }
    }

    /// Where slot `i` is (for reading in place).
    @inline(__always) func pointer(_ i: Int) -> UnsafePointer<Value?> {
        precondition(i >= 0 && i < count, "slot out of range")
        return UnsafePointer(base + i)
    }

    /// Every value, by slot.
    public var values: [Value?] { Array(UnsafeBufferPointer(start: base, count: count)) }

    func free() {
        guard count > 0 else { return }
        base.deinitialize(count: count)
        base.deallocate()
    }
}

/// How often one rule has fired and been triggered for one user.
public struct RuleRecord: Sendable, Hashable {
    public var rule: Int32
    /// Trigger occurrences (events that matched `on` and `where`), counted only for rules with occurrence limits.
    public var occurrences: UInt32 = 0
    public var fires: UInt32 = 0
    public var sessionFires: UInt16 = 0
    public var sessionID: UInt32 = 0
    public var lastFire: Int64 = Int64.min

    public init(rule: Int32) { self.rule = rule }

    func firesInSession(_ id: UInt32) -> Int { sessionID == id ? Int(sessionFires) : 0 }

    /// Counts a fire at `now` in session `session`.
    mutating func noteFire(at now: Int64, session: UInt32) {
        fires &+= 1
        lastFire = now
        if sessionID != session {
            sessionID = session
            sessionFires = 0
        }
        sessionFires &+= 1
    }
}

/// An item in a user's inbox.
public struct InboxItem: Sendable, Hashable {
    public var id: String
    public var sender: String?
    public var message: String
    public var link: String?
    public var createdAt: Int64
    public var read: Bool
    public var readAt: Int64?
    /// The rule that put it there.
    public var rule: String
}
