/// Every kind of limit a rule (or the global cap) can have. This is the one definition: the DSL keys, the verdict
/// codes (`limit:per_day`), the engine's counter columns, the order limits are checked in, the words `explain` prints,
/// the windows rolling limits count in, and which kinds the engine's fast path decides all derive from it.
///
/// A new kind is added here, with its case in ``LimitStanding`` (the one checker): the compiler then makes every path
/// handle it, and the fast path leaves rules that have it to the general one until it is named in ``decidedByGate``.
public enum LimitKind: Int, CaseIterable, Sendable, CustomStringConvertible {
    // The order is the order of the verdict codes' counters (`Verdict.limitKeys`): append, never reorder.
    case onOccurrence, everyOccurrence, perUser, perSession, perMinute, perHour, perDay, perWeek, perMonth, cooldown

    /// The key in rule files and verdict codes.
    public var key: String {
        switch self {
        case .onOccurrence: "on_occurrence"
        case .everyOccurrence: "every_occurrence"
        case .perUser: "per_user"
        case .perSession: "per_session"
        case .perMinute: "per_minute"
        case .perHour: "per_hour"
        case .perDay: "per_day"
        case .perWeek: "per_week"
        case .perMonth: "per_month"
        case .cooldown: "cooldown"
        }
    }

    public var description: String { key }

    /// The window a rolling limit counts fires in (`nil` for the kinds that are not rolling windows).
    public var window: HistoryWindow? {
        switch self {
        case .perMinute: .rolling(ms: 60_000)
        case .perHour: .rolling(ms: 3_600_000)
        case .perDay: .rolling(ms: 86_400_000)
        case .perWeek: .rolling(ms: 604_800_000)
        case .perMonth: .monthBack
        default: nil
        }
    }

    /// The rolling kinds, shortest window first (the order they are read from a rule file).
    public static let rolling = allCases.filter { $0.window != nil }

    /// The kinds the engine's fast path (``SimpleGate``) decides, from a user's fire record alone. A positive list: a
    /// rule with any other kind is decided by the general path, which handles every kind.
    static let decidedByGate: Set<LimitKind> = [.perUser, .perSession, .cooldown]
}

/// A rule's limits: the kinds it has with their values, in the order they are checked.
public struct CompiledLimits: Sendable {
    public var perUser: Int?
    public var perSession: Int?
    /// Rolling windows in the order written (own before defaults), each with its most fires.
    public var rolling: [(kind: LimitKind, max: Int)] = []
    public var cooldownMs: Int64?
    public var onOccurrence: Int?
    public var everyOccurrence: Int?
    /// Every kind present, in check order: occurrences, per user, per session, the rolling windows, cooldown.
    public let kinds: [LimitKind]

    init(_ spec: LimitSpec) {
        perUser = spec.perUser?.value
        perSession = spec.perSession?.value
        rolling = spec.rolling.map { ($0.kind, $0.max.value) }
        cooldownMs = spec.cooldown?.value
        onOccurrence = spec.onOccurrence?.value
        everyOccurrence = spec.everyOccurrence?.value
        var kinds: [LimitKind] = []
        if onOccurrence != nil { kinds.append(.onOccurrence) }
        if everyOccurrence != nil { kinds.append(.everyOccurrence) }
        if perUser != nil { kinds.append(.perUser) }
        if perSession != nil { kinds.append(.perSession) }
        kinds += rolling.map(\.kind)
        if cooldownMs != nil { kinds.append(.cooldown) }
        self.kinds = kinds
    }

    var isEmpty: Bool { kinds.isEmpty }

    public var tracksOccurrences: Bool { onOccurrence != nil || everyOccurrence != nil }

    /// How long fire times must be kept for the rolling limits.
    var retentionMs: Int64 { rolling.compactMap { $0.kind.window?.retentionMs }.max() ?? 0 }

    /// Whether a rolling window needs the user's time zone (a calendar month does).
    var needsZone: Bool { rolling.contains { $0.kind.window?.needsZone ?? false } }
}

/// One limit of a rule, for one user, now: how much of it is used, and whether it blocks a fire. The one checker:
/// the engine's check, the words of `explain` and the fast path's gate all read limits through it.
struct LimitStanding {
    let kind: LimitKind
    let used: Int
    let max: Int
    let blocks: Bool
    /// When it stops blocking, if that can be known now.
    var freesAt: Int64? = nil
    var lastFire: Int64 = Int64.min

    /// A per-user cap: `fires` of `max` used.
    @inline(__always) static func perUserBlocks(fires: UInt32, max: UInt32) -> Bool { fires >= max }
    /// A per-session cap: the fires in the user's current session.
    @inline(__always) static func perSessionBlocks(_ rec: RuleRecord, session: UInt32, max: Int) -> Bool {
        rec.firesInSession(session) >= max
    }
    /// A cooldown: the last fire less than `ms` ago.
    @inline(__always) static func cooldownBlocks(lastFire: Int64, ms: Int64, now: Int64) -> Bool {
        ms > 0 && lastFire != Int64.min && now - lastFire < ms
    }

    /// The limit as `explain` words it: "per_user 1 of 3 used", "per_week 0 of 1"…
    var explanation: String {
        switch kind {
        case .onOccurrence: "occurrence \(used) (fires on \(Engine.ordinal(max)))"
        case .everyOccurrence: "occurrence \(used) (fires on every \(Engine.ordinal(max)))"
        case .perUser: "per_user \(used) of \(max) used"
        case .cooldown:
            lastFire == Int64.min
                ? "cooldown \(DSLDuration.format(Int64(max))) (never fired)"
                : "cooldown \(DSLDuration.format(Int64(max))) (last fired \(Timestamp(milliseconds: lastFire)))"
        default: "\(kind.key) \(used) of \(max)"
        }
    }

    /// The hit a blocking limit makes of a verdict.
    var hit: LimitHit {
        kind == .cooldown
            ? LimitHit(
                key: kind.key, count: 1, max: 1, freesAt: freesAt, lastFire: lastFire, cooldownMs: Int64(max),
                keyIndex: kind.rawValue)
            : LimitHit(key: kind.key, count: used, max: max, freesAt: freesAt, keyIndex: kind.rawValue)
    }
}
