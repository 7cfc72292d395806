/// The hot part of a ``UserProfile``: what the engine reads and changes for most events, in the profile's own memory.
struct ProfileRow: ~Copyable {
    /// Attributes the loaded rules read, by ``CompiledRuleSet/attributeSlots``.
    var attributes: SparseRow
    /// Last value seen of each context field the rules read (server-side events often lack context).
    var context: SparseRow
    /// The latest time processed for this user; never moves back.
    var clock: Int64 = Int64.min
    var session = UserProfile.Session()
    /// Events processed for this user (a key for action ids when an event has no messageId). After `session`, whose
    /// last field it packs beside.
    var eventCount: UInt32 = 0
    /// Whether an event named this id as its `userId` (``BoundEvent/identified``): a known user is never merged into
    /// another.
    var known = false
    var history = HistoryLog()
    /// Fire records of the rules with limits or re-prompts this user has triggered, sorted by rule index.
    var records = RawVector<RuleRecord>()
    /// The messageIds within the de-duplication window, from the user's first one on.
    var messageIDs = MessageIDWindow()

    init(attributeCount: Int, contextCount: Int) {
        attributes = SparseRow(count: attributeCount)
        context = SparseRow(count: contextCount)
    }
}

/// The rarer part of a profile, made on first use.
final class ProfileExtras {
    var otherAttributes: ValueMap?
    var messages = RuleRecord(rule: -1)
    var inbox: [InboxItem] = []
    var pending: [PendingAction] = []
    var sequences: [SequenceState] = []
    var mergedInto: String?
    var devices: [Device] = []
}

extension UserProfile {
    /// Attributes the loaded rules read, by ``CompiledRuleSet/attributeSlots``, read and changed in place.
    public internal(set) var attributes: SparseRow {
        _read { yield row.attributes }
        _modify { yield &row.attributes }
    }
    /// Last value seen of each context field the rules read (server-side events often lack context).
    public internal(set) var context: SparseRow {
        _read { yield row.context }
        _modify { yield &row.context }
    }
    /// The latest time processed for this user; never moves back.
    public internal(set) var clock: Int64 {
        get { row.clock }
        set { row.clock = newValue }
    }
    public internal(set) var session: Session {
        get { row.session }
        set { row.session = newValue }
    }
    /// Events processed for this user (a key for action ids when an event has no messageId).
    /// Whether an event named this id as its `userId`: a known user, never merged into another (docs/events.md).
    public internal(set) var known: Bool {
        get { row.known }
        set { row.known = newValue }
    }
    public internal(set) var eventCount: UInt32 {
        get { row.eventCount }
        set { row.eventCount = newValue }
    }
    /// The user's event history, read and changed in place (it cannot be copied).
    var history: HistoryLog {
        _read { yield row.history }
        _modify { yield &row.history }
    }
    /// The messageIds within the de-duplication window.
    var messageIDs: MessageIDWindow {
        _read { yield row.messageIDs }
        _modify { yield &row.messageIDs }
    }

    private func ensureExtras() -> ProfileExtras {
        if let e = extras { return e }
        let e = ProfileExtras()
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
    /// The user this id was merged into (see ``UserState/mergedInto``); such a profile holds nothing else.
    public internal(set) var mergedInto: String? {
        get { extras?.mergedInto }
        _modify { yield &ensureExtras().mergedInto }
    }

    /// The devices the user gets push on (``Device``).
    public internal(set) var devices: [Device] {
        get { extras?.devices ?? [] }
        _modify { yield &ensureExtras().devices }
    }

    public struct Session: Sendable, Hashable {
        public var start: Int64 = 0
        public var lastActivity: Int64 = Int64.min
        /// 0 before the first event; increments with each new session.
        public var id: UInt32 = 0
    }

    /// Fire records of the rules with limits or re-prompts this user has triggered, sorted by rule index.
    public var records: [RuleRecord] { row.records.elements }

    /// Where `rule`'s record is, or would go (records are sorted by rule).
    @inline(__always) private func recordSlot(_ rule: Int32) -> Int { row.records.lowerBound { $0.rule < rule } }

    public func record(for rule: Int32) -> RuleRecord? {
        let i = recordSlot(rule)
        guard i < row.records.count, row.records[i].rule == rule else { return nil }
        return row.records[i]
    }

    /// The record of `rule`, created when missing.
    func withRecord<R>(_ rule: Int32, _ body: (inout RuleRecord) -> R) -> R {
        let i = recordSlot(rule)
        if i == row.records.count || row.records[i].rule != rule { row.records.insert(RuleRecord(rule: rule), at: i) }
        return body(&row.records[i])
    }

    /// Unread items in the inbox.
    public var unreadCount: Int { inbox.count(where: { !$0.read }) }

    /// An estimate of the heap bytes this profile holds (for `beckon bench`).
    public var approximateBytes: Int {
        var n = 16 + MemoryLayout<UserProfile>.size
        n += attributes.byteCount + context.byteCount
        n += history.byteCount + row.records.capacity * MemoryLayout<RuleRecord>.stride
        n += messageIDs.bytes + inbox.count * 96 + (extras == nil ? 0 : 96)
        for q in sequences { n += 48 + q.key.utf8.count + q.best.count * 8 }
        return n
    }
}

extension UserProfile {
    /// The user's zone: the `timezone` attribute, else the event's or last `context.timezone`, else UTC.
    static func userZone(_ p: UserProfile, _ e: BoundEvent?, _ slots: (attribute: Int?, context: Int?)) -> Zone {
        var candidates: [Value?] = []
        if let a = slots.attribute, a < p.attributes.count { candidates.append(p.attributes[a]) }
        if let c = slots.context {
            if let e, c < e.contextSlots.count { candidates.append(e.contextSlots[c]) }
            if c < p.context.count { candidates.append(p.context[c]) }
        }
        for v in candidates {
            if case .string(let name)? = v, let z = ZoneCache.zone(name) { return z }
        }
        return .utc
    }
}

/// How often one rule has fired and been triggered for one user.
public struct RuleRecord: Sendable, Hashable, BitwiseCopyable {
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

/// A delayed action kept in a user's state until its due time: a `wait`/`at` rule, or an action held by quiet hours.
public struct PendingAction: Sendable {
    public var id: UInt64
    public var rule: Int32
    /// When it fires (ms).
    public var due: Int64
    public var scheduledAt: Int64
    /// Held by quiet hours (rather than delayed by `wait`/`at`).
    public var held: Bool
    var triggerKey: TriggerKey
    var trigger: String
    /// The triggering event, which the actions' `${…}` fields see when they fire.
    var event: BoundEvent?
    var change: AttributeChange?
}

/// Partial matches of a sequence trigger for one user and correlation key: `best[k]` is the latest start time of a
/// match that has reached step `k` (`Int64.min` for none).
struct SequenceState: Sendable {
    var rule: Int32
    var key: String
    var best: [Int64]
}
