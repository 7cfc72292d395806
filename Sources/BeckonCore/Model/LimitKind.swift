/// Every kind of limit a rule (or the global cap) can have. This is the one definition: the DSL keys, the verdict
/// codes (`limit:per_day`), the engine's counter columns, the order limits are checked in, the words `explain` prints,
/// the windows rolling limits count in, and which kinds the engine's fast path decides all derive from it.
///
/// A new kind is added here, with its case in ``LimitStanding`` (the one checker): the compiler then makes every path
/// handle it, and the fast path leaves rules that have it to the general one until it is named in ``decidedByGate``.
public enum LimitKind: Int, CaseIterable, Sendable, CustomStringConvertible {
    // The order is the order of the verdict codes' counters (`Verdict.limitKeys`): append, never reorder.
    case onOccurrence, everyOccurrence, perUser, perSession, perMinute, perHour, perDay, perWeek, perMonth, cooldown
    case perCalendarDay, perCalendarWeek, perCalendarMonth

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
        case .perCalendarDay: "per_calendar_day"
        case .perCalendarWeek: "per_calendar_week"
        case .perCalendarMonth: "per_calendar_month"
        }
    }

    public var description: String { key }

    /// The window a rolling limit counts fires in (`nil` for the kinds that are not rolling windows).
    public var window: HistoryWindow? {
        switch self {
        case .perMinute: .rolling(ms: 60_000)
        case .perHour: .rolling(ms: 3_600_000)
        case .perDay: .rolling(ms: Milliseconds.day)
        case .perWeek: .rolling(ms: 604_800_000)
        case .perMonth: .monthBack
        case .perCalendarDay: .calendar(.day, count: 1)
        case .perCalendarWeek: .calendar(.week, count: 1)
        case .perCalendarMonth: .calendar(.month, count: 1)
        default: nil
        }
    }

    /// The kinds that count fires in a window (rolling ones, shortest first, then the calendar ones: the order they are
    /// read from a rule file).
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
