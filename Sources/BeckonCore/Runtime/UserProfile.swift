/// Everything Beckon keeps about one user: attributes, event history, fire records, session, inbox.
///
/// A reference type so that a ``StateStore`` can hand the engine the live profile to update in place.
/// Times are milliseconds since 1970, read only from events.
public final class UserProfile {
    public let userID: String
    /// Attributes the loaded rules read, by ``CompiledRuleSet/attributeSlots``.
    public internal(set) var attributes: ContiguousArray<Value?>
    /// Last value seen of each context field the rules read (server-side events often lack context).
    public internal(set) var context: ContiguousArray<Value?>
    /// The latest time processed for this user; never moves back.
    public internal(set) var clock: Int64 = Int64.min
    public internal(set) var session = Session()
    /// Events processed for this user (a key for action ids when an event has no messageId). Declared after
    /// `session`, whose last field it packs beside.
    public internal(set) var eventCount: UInt32 = 0
    public internal(set) var history = HistoryLog()
    /// Fire records of the rules with limits or re-prompts this user has triggered, sorted by rule index.
    public internal(set) var records: ContiguousArray<RuleRecord> = []
    /// Recent messageIds (hashed) with their times, to drop duplicates.
    var recentMessageIDs: ContiguousArray<(hash: UInt64, time: Int64)> = []
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
        attributes = ContiguousArray(repeating: nil, count: attributeCount)
        context = ContiguousArray(repeating: nil, count: contextCount)
    }

    public struct Session: Sendable, Hashable {
        public var start: Int64 = 0
        public var lastActivity: Int64 = Int64.min
        /// 0 before the first event; increments with each new session.
        public var id: UInt32 = 0
    }

    /// Where `rule`'s record is, or would go (records are sorted by rule).
    private func recordSlot(_ rule: Int32) -> Int {
        var lo = 0
        var hi = records.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if records[mid].rule < rule { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    func recordIndex(_ rule: Int32) -> Int? {
        let i = recordSlot(rule)
        return i < records.count && records[i].rule == rule ? i : nil
    }

    public func record(for rule: Int32) -> RuleRecord? { recordIndex(rule).map { records[$0] } }

    /// The record of `rule`, created when missing.
    func withRecord<R>(_ rule: Int32, _ body: (inout RuleRecord) -> R) -> R {
        let i = recordSlot(rule)
        if !(i < records.count && records[i].rule == rule) { records.insert(RuleRecord(rule: rule), at: i) }
        return body(&records[i])
    }

    /// Unread items in the inbox.
    public var unreadCount: Int { inbox.count(where: { !$0.read }) }

    /// An estimate of the heap bytes this profile holds (for `beckon bench`).
    public var approximateBytes: Int {
        let valueStride = MemoryLayout<Value?>.stride
        var n = 16 + MemoryLayout<UserProfile>.size
        n += attributes.capacity * valueStride + context.capacity * valueStride
        n += history.byteCount + records.capacity * MemoryLayout<RuleRecord>.stride
        n += recentMessageIDs.capacity * 16 + inbox.count * 96 + (extras == nil ? 0 : 96)
        return n
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
