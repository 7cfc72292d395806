/// Why a rule whose trigger matched did or did not fire.
public enum Verdict: Sendable {
    case fired
    /// The campaign has not started, has ended, or is disabled.
    case notLive(String)
    /// `where`, `audience` or `if` was false or failed (the value says which: `false` or an error), or a re-prompt is
    /// not due. `why` lists the values that decided, when verdicts are recorded.
    case conditionFalse(clause: Clause, value: Value, why: String?)
    /// One of the rule's limits blocked it.
    case limited(LimitHit)
    /// Another rule on the same surface won arbitration.
    case lostTo(rule: String, priority: Int, ownPriority: Int)
    /// The global message cap, or a channel's cap (``LimitHit/channel``), blocked it.
    case globalLimited(LimitHit)
    /// A chain of `set` → `on_change` went deeper than the settings allow.
    case cascadeLimit(Int)
    /// The rule qualified; its actions wait until `due` (`wait`/`at`).
    case scheduled(due: Int64)
    /// The rule already has an action pending for the user (`retrigger: keep`).
    case alreadyPending(due: Int64)
    /// An `unless` event cancelled the pending action.
    case cancelled(by: String, due: Int64)
    /// Quiet hours: held until `heldUntil`, or dropped (`nil`).
    case quietHours(heldUntil: Int64?)
    /// A schedule's send rate (`rate:`) is reached in this window: the run waits for the next, `until`.
    case rateHeld(until: Int64)
    /// The user is in the file's holdout: the fire is recorded (`held_back`), the actions are not sent.
    case heldBack

    public var fired: Bool { if case .fired = self { true } else { false } }

    /// One line for people: "if was false", "limit per_day reached (1 of 1; frees at …)".
    public var summary: String {
        switch self {
        case .fired: return "fired"
        case .notLive(let why): return why
        case .conditionFalse(.reprompt, _, let why): return "reprompt: " + (why ?? "not due")
        case .conditionFalse(let clause, let v, let why):
            let detail = why.map { $0.isEmpty ? "" : ": " + $0 } ?? ""
            if case .error(let e) = v { return "\(clause) failed (\(e.message))" + detail }
            return "\(clause) was false" + detail
        case .limited(let hit): return "limit \(hit.summary)"
        case .lostTo(let rule, let p, let own):
            return p == own
                ? "lost to \(rule) (same priority \(p); it is loaded first)" : "lost to \(rule) (priority \(p) over \(own))"
        case .globalLimited(let hit): return (hit.channel.map { "\($0) channel limit " } ?? "global limit ") + hit.summary
        case .cascadeLimit(let n): return "not evaluated: on_change chain deeper than \(n)"
        case .scheduled(let due): return "scheduled for \(Timestamp(milliseconds: due))"
        case .alreadyPending(let due): return "already pending (due at \(Timestamp(milliseconds: due)))"
        case .cancelled(let by, let due): return "cancelled by \(by) (was due at \(Timestamp(milliseconds: due)))"
        case .quietHours(let until):
            return until.map { "quiet hours: held until \(Timestamp(milliseconds: $0))" } ?? "quiet hours: dropped"
        case .rateHeld(let until): return "send rate reached: held until \(Timestamp(milliseconds: until))"
        case .heldBack: return "held back (holdout group)"
        }
    }

    /// The codes of verdicts that put an action off rather than end its trigger (quiet hours' hold, a send rate): what
    /// becomes of it is counted again when it comes due, so a rule's outcomes add up without them.
    public static let deferringCodes: Set<String> = ["held", "rate"]

    /// A short machine-readable reason: `fired`, `where`, `if`, `audience`, `limit:per_day`, `lost`, `not_live`…
    public var code: String {
        switch self {
        case .fired: "fired"
        case .notLive: "not_live"
        case .conditionFalse(let clause, _, _): clause.rawValue
        case .limited(let hit): "limit:" + hit.key
        case .lostTo: "lost"
        case .globalLimited(let hit): (hit.channel == nil ? "global_limit:" : "channel_limit:") + hit.key
        case .cascadeLimit: "cascade_limit"
        case .scheduled: "scheduled"
        case .alreadyPending: "pending"
        case .cancelled: "cancelled"
        case .quietHours(let until): until == nil ? "quiet_hours" : "held"
        case .rateHeld: "rate"
        case .heldBack: "held_back"
        }
    }
}

/// The condition a rule failed: its clause.
public enum Clause: String, Sendable, CaseIterable, CustomStringConvertible {
    case whereClause = "where"
    case ifClause = "if"
    case audience, reprompt

    public var description: String { rawValue }
}

extension Verdict {
    /// The codes of verdicts that are neither fires nor limits, in the order of their counters.
    enum BlockCode: Int, CaseIterable {
        case notLive, whereClause, ifClause, audience, reprompt, lost, cascadeLimit, pending, cancelled, quietHours, held
        case rate

        var rawName: String {
            switch self {
            case .notLive: "not_live"
            case .whereClause: Clause.whereClause.rawValue
            case .ifClause: Clause.ifClause.rawValue
            case .audience: Clause.audience.rawValue
            case .reprompt: Clause.reprompt.rawValue
            case .lost: "lost"
            case .cascadeLimit: "cascade_limit"
            case .pending: "pending"
            case .cancelled: "cancelled"
            case .quietHours: "quiet_hours"
            case .held: "held"
            case .rate: "rate"
            }
        }
    }

    static let limitKeys = LimitKind.allCases.map(\.key)
    static let plainCodes = BlockCode.allCases.map(\.rawName)
    /// The codes of verdicts that are not fires, in a fixed order: ``blockIndex`` counts them without strings.
    static let blockCodes =
        plainCodes + limitKeys.map { "limit:" + $0 } + limitKeys.map { "global_limit:" + $0 }
        + limitKeys.map { "channel_limit:" + $0 }
    /// How many ``blockCodes`` there are (a literal, checked by `literalIndexesNameTheirCodes`: the engine's counters
    /// read it per verdict).
    static let blockCodeCount = 51

    /// Places in ``limitKeys`` of the kinds the fast path blocks on: their ``LimitKind`` raw values, as literals (the
    /// engine reads them per rule; `literalIndexesNameTheirCodes` checks each against ``LimitKind``).
    enum LimitIndex {
        static let onOccurrence = 0
        static let everyOccurrence = 1
        static let perUser = 2
        static let perSession = 3
        static let cooldown = 9
    }

    /// Places in ``blockCodes`` of the blocks a ``SimpleGate`` decides (literals, checked by `literalIndexesNameTheirCodes`).
    enum BlockIndex {
        static let whereClause = 1
        static let ifClause = 2
        static let perUser = 12 + LimitIndex.perUser
        static let perSession = 12 + LimitIndex.perSession
        static let cooldown = 12 + LimitIndex.cooldown
    }

    /// The index of ``code`` in ``blockCodes`` (`nil` for fires, and for a code not in the table).
    var blockIndex: Int? {
        func limit(_ key: String) -> Int? { Verdict.limitKeys.firstIndex(of: key) }
        let n = Verdict.plainCodes.count
        switch self {
        case .fired, .scheduled, .heldBack: return nil
        case .notLive: return BlockCode.notLive.rawValue
        case .conditionFalse(let clause, _, _):
            switch clause {
            case .whereClause: return BlockCode.whereClause.rawValue
            case .ifClause: return BlockCode.ifClause.rawValue
            case .audience: return BlockCode.audience.rawValue
            case .reprompt: return BlockCode.reprompt.rawValue
            }
        case .lostTo: return BlockCode.lost.rawValue
        case .cascadeLimit: return BlockCode.cascadeLimit.rawValue
        case .alreadyPending: return BlockCode.pending.rawValue
        case .cancelled: return BlockCode.cancelled.rawValue
        case .quietHours(let until): return (until == nil ? BlockCode.quietHours : BlockCode.held).rawValue
        case .rateHeld: return BlockCode.rate.rawValue
        case .limited(let hit): return (hit.keyIndex >= 0 ? hit.keyIndex : limit(hit.key)).map { n + $0 }
        case .globalLimited(let hit):
            let group = hit.channel == nil ? 1 : 2
            return (hit.keyIndex >= 0 ? hit.keyIndex : limit(hit.key)).map { n + group * Verdict.limitKeys.count + $0 }
        }
    }
}

/// A limit that blocked a fire, with the counts behind it. The words (`detail`) are made only when asked for, so
/// that blocking costs no allocation.
public struct LimitHit: Sendable {
    /// `per_user`, `per_session`, `per_day`, `cooldown`, `on_occurrence`…
    public var key: String
    /// The count that reached the limit (the occurrence, for occurrence limits).
    public var count: Int
    public var max: Int
    /// When the limit next lets a fire through (ms), if it ever does by time alone.
    public var freesAt: Int64?
    /// For `cooldown`: the last fire and the cooldown (ms).
    var lastFire: Int64 = 0
    var cooldownMs: Int64 = 0
    /// The index of `key` in ``Verdict/limitKeys`` when the engine knew it (-1: look it up).
    var keyIndex = -1
    /// For a channel's cap (`channel_limits`): the channel (`push`, `email`, `message`).
    public var channel: String? = nil

    public var detail: String {
        switch key {
        case "on_occurrence": "this is occurrence \(count); fires only on occurrence \(max)"
        case "every_occurrence": "this is occurrence \(count); fires on every \(Engine.ordinal(max))"
        case "per_user": "\(count) of \(max) fires used"
        case "per_session": "\(count) of \(max) in this session; frees in the next session"
        case "cooldown": "last fired at \(Timestamp(milliseconds: lastFire)), cooldown \(DSLDuration.format(cooldownMs))"
        case "per_calendar_day": "\(count) of \(max) today (the user's calendar day)"
        case "per_calendar_week": "\(count) of \(max) this calendar week (from Monday, the user's zone)"
        case "per_calendar_month": "\(count) of \(max) this calendar month (the user's zone)"
        default: "\(count) of \(max) in the window"
        }
    }

    public var summary: String {
        var s = "\(key) reached (\(detail))"
        if let f = freesAt { s += "; frees at \(Timestamp(milliseconds: f))" }
        return s
    }
}

/// The verdict of one rule on one event.
public struct RuleVerdict: Sendable {
    public var rule: Int32
    public var qualifiedID: String
    public var time: Int64
    public var userID: String
    public var trigger: String
    public var verdict: Verdict
    /// With ``Engine/Options/explain``: each condition evaluated, with the values it saw.
    public var clauses: [ClauseTrace] = []
}

/// One condition of a rule as `explain` shows it: `if  false  heavy_user = false (count(…) = 9, needs >= 10)`.
public struct ClauseTrace: Sendable {
    /// `where`, `audience`, `if`, `reprompt`.
    public var clause: String
    public var passed: Bool
    public var detail: String
}

/// A user reaching a goal event (for reports), with ``Engine/Options/trackGoals``.
public struct GoalHit: Sendable {
    public var unit: Int32
    public var goal: Int
    public var userID: String
    public var time: Int64
    /// The goal event's value property (revenue), when the goal has one and the event carries a number.
    public var value: Double? = nil
}

/// What processing one event did.
public struct EventOutcome: Sendable {
    /// `duplicate`: a `messageId` the user sent within the dedup window; `refused`: the event passes a bound of
    /// docs/reference/limits.md (``BoundEvent/boundProblem`` says which). Neither changes anything.
    public enum Status: Sendable { case processed, duplicate, refused }
    public var status: Status
    /// The event's time was before something already processed for its user (see docs/events.md).
    public var late: Bool
    public var actions: FiredActions
    /// Verdicts of the rules whose trigger matched, when ``Engine/Options/recordVerdicts`` is on.
    public var verdicts: [RuleVerdict]
    /// Goal events reached, when ``Engine/Options/trackGoals`` is on.
    public var goalHits: [GoalHit] = []
    /// The due times of the delayed actions that came due here, fired or not (a live clock's lag is now − due).
    public var dueTimes: [Int64] = []

    /// An empty outcome, to pass to ``Engine/process(_:into:)`` event after event.
    public init(status: Status = .processed, late: Bool = false, actions: [FiredAction] = [], verdicts: [RuleVerdict] = []) {
        self.status = status
        self.late = late
        self.actions = FiredActions(actions)
        self.verdicts = verdicts
    }
}
