import Crypto

/// Loaded, checked and compiled rules: immutable, `Sendable`, indexed by event name.
///
/// Built by ``RuleSetCompiler``; run by ``Engine``. Attribute, property and context names are resolved to
/// slots and event names to integers, so evaluating an event does no string look-ups beyond interning its name.
public final class CompiledRuleSet: Sendable {
    public let units: [CompiledUnit]
    public let rules: [CompiledRule]
    /// Interned event keys (`Application Opened`, `screen:Settings`), by id.
    public let eventNames: [String]
    public let eventIDs: [String: Int32]
    public let propertySlots: [String: Int]
    public let contextSlots: [String: Int]
    public let attributeSlots: [String: Int]
    public let attributeNames: [String]
    let propertyNames: [String]
    let contextNames: [String]
    /// Rule indices triggered by each event id, in evaluation order.
    let rulesByEvent: [[Int32]]
    /// `on_change` rule indices by attribute slot.
    let rulesByAttribute: [[Int32]]
    /// Rules whose pending actions an event cancels (`unless`), by event id.
    let cancelIndex: [[Int32]]
    /// Sequence rules with a step on an event, by event id.
    let sequenceIndex: [[Int32]]
    /// Goals whose event is this one, by event id.
    let goalsByEvent: [[(unit: Int32, goal: Int)]]
    let series: [SeriesSpec]
    /// Event series to record, by event id.
    let seriesByEvent: [[Int32]]
    /// Series that record every track and screen event.
    let anyEventSeries: [Int32]
    /// `inactive_for` rules (enabled), whose timers every activity moves.
    let inactivityRules: [Int32]
    /// `schedule` rules (enabled), whose timers each user's events set when missing.
    let scheduleRules: [Int32]
    /// Some enabled rule is a `schedule`: the stored users must be reached (``Engine/reach(_:)``).
    public var hasSchedules: Bool { !scheduleRules.isEmpty }
    /// The enabled `schedule` rules (the broadcasts), in load order.
    public var schedules: [CompiledRule] { scheduleRules.map { rules[Int($0)] } }
    /// Some rule is `inactive_for` or `schedule` (a flag the engine reads per event without touching the lists).
    let hasTimedRules: Bool
    let memoSlots: Int
    public let settings: EngineSettings
    /// Whether some rule reads `event.properties` as a whole map.
    public let needsAllProperties: Bool
    public let flows: [CompiledFlow]
    public let flowIndex: [String: Int]
    /// Per unit: no start, end or audience, so its rules need not look at it while evaluating.
    let plainUnits: [Bool]
    /// Some unit holds users out (a fire asks its unit only then).
    let hasHoldouts: Bool
    /// The names the tracking plans declare, when plans were loaded (for checking test streams).
    public let plan: PlanNames?
    /// Per event id, what the engine does with the event, in flat memory this rule set owns (see ``EventPlans``).
    let eventPlans: EventPlans
    /// The rules by index, for the engine's hot path (see ``RuleEntry``).
    let ruleTable: RuleTable
    /// The series' recording parameters by index, for the engine's hot path (see ``SeriesEntry``).
    let seriesTable: SeriesTable

    init(
        units: [CompiledUnit], rules: [CompiledRule], eventNames: [String], propertyNames: [String],
        contextNames: [String], attributeNames: [String], rulesByAttribute: [[Int32]], series: [SeriesSpec],
        memoSlots: Int, settings: EngineSettings, needsAllProperties: Bool, flows: [CompiledFlow] = [], plan: PlanNames? = nil
    ) {
        self.plan = plan
        self.plainUnits = units.map { $0.start == nil && $0.end == nil && $0.audience == nil }
        self.hasHoldouts = units.contains { $0.holdout > 0 }
        self.flows = flows
        self.flowIndex = Dictionary(uniqueKeysWithValues: flows.enumerated().map { ($1.id, $0) })
        self.units = units
        self.rules = rules
        self.eventNames = eventNames
        self.eventIDs = Dictionary(uniqueKeysWithValues: eventNames.enumerated().map { ($1, Int32($0)) })
        self.propertyNames = propertyNames
        self.contextNames = contextNames
        self.attributeNames = attributeNames
        self.propertySlots = Dictionary(uniqueKeysWithValues: propertyNames.enumerated().map { ($1, $0) })
        self.contextSlots = Dictionary(uniqueKeysWithValues: contextNames.enumerated().map { ($1, $0) })
        self.attributeSlots = Dictionary(uniqueKeysWithValues: attributeNames.enumerated().map { ($1, $0) })
        var byEvent = Array(repeating: [Int32](), count: eventNames.count)
        for r in rules where r.enabled {
            if case .events(let ids) = r.trigger { for id in ids { byEvent[Int(id)].append(r.index) } }
        }
        self.rulesByEvent = byEvent
        var cancel = Array(repeating: [Int32](), count: eventNames.count)
        var sequences = Array(repeating: [Int32](), count: eventNames.count)
        for r in rules where r.enabled {
            for u in r.timing.unless where !cancel[Int(u.eventID)].contains(r.index) { cancel[Int(u.eventID)].append(r.index) }
            if case .sequence(let seq) = r.trigger {
                for step in seq.steps where !sequences[Int(step.eventID)].contains(r.index) {
                    sequences[Int(step.eventID)].append(r.index)
                }
            }
        }
        self.cancelIndex = cancel
        self.sequenceIndex = sequences
        var goals = Array(repeating: [(unit: Int32, goal: Int)](), count: eventNames.count)
        for (u, unit) in units.enumerated() {
            for (g, goal) in unit.goals.enumerated() { goals[Int(goal.eventID)].append((Int32(u), g)) }
        }
        self.goalsByEvent = goals
        self.rulesByAttribute = rulesByAttribute
        self.series = series
        var sByEvent = Array(repeating: [Int32](), count: eventNames.count)
        for (i, s) in series.enumerated() {
            if case .event(let id, _) = s.source { sByEvent[Int(id)].append(Int32(i)) }
        }
        self.seriesByEvent = sByEvent
        self.anyEventSeries = series.indices.filter { if case .anyEvent = series[$0].source { true } else { false } }.map {
            Int32($0)
        }
        self.inactivityRules = rules.filter { r in
            if case .inactive = r.trigger { r.enabled } else { false }
        }.map(\.index)
        self.scheduleRules = rules.filter { r in
            if case .schedule = r.trigger { r.enabled } else { false }
        }.map(\.index)
        self.hasTimedRules = !inactivityRules.isEmpty || !scheduleRules.isEmpty
        self.memoSlots = memoSlots
        self.settings = settings
        self.needsAllProperties = needsAllProperties
        self.ruleTable = RuleTable(rules: rules, plainUnits: plainUnits)
        self.seriesTable = SeriesTable(series.map(SeriesEntry.init))
        self.eventPlans = EventPlans(
            rules: byEvent, series: sByEvent, cancel: cancel, sequences: sequences,
            goals: goals.map { !$0.isEmpty }, sessionStarts: settings.sessionStartEvents)
    }

    deinit { for r in rules { Borrowed.reclaim(r) } }

    /// The rule with this id (`rule` or `campaign/rule`).
    public func rule(named name: String) -> CompiledRule? {
        rules.first { $0.qualifiedID == name } ?? rules.first { $0.id == name }
    }

    /// Binds a general ``Event`` to this rule set's slots.
    public func bind(_ e: Event) -> BoundEvent {
        let props = SlotRow(count: propertyNames.count)
        for (k, v) in e.properties.entries {
            if case .string(let key) = k, let slot = propertySlots[key] { props[slot] = v }
        }
        let ctx = SlotRow(count: contextNames.count)
        for (k, v) in e.context.entries {
            if case .string(let key) = k, let slot = contextSlots[key] { ctx[slot] = v }
        }
        let traits: [(name: String, value: Value)] = e.traits.entries.compactMap { k, v in
            if case .string(let key) = k { return (key, v) }
            return nil
        }
        let key = BoundEvent.internKey(kind: e.kind, name: e.name)
        return BoundEvent(
            kind: e.kind, nameID: eventIDs[key] ?? -1, name: e.name, userID: e.userID,
            timestamp: e.timestamp, messageID: e.messageID, propertySlots: props, contextSlots: ctx,
            traits: traits, allProperties: needsAllProperties ? e.properties : nil, previousID: e.previousID)
    }
}

/// Each rule, lent by the rule set (which keeps every rule), with the ``SimpleGate`` that decides it when it has one
/// and its unit is plain (read from the table: no copy out of the rule object).
struct RuleEntry {
    let rule: Borrowed<CompiledRule>
    let gate: SimpleGate?
    let hasLimits: Bool
}

/// The rules by index, for the engine's hot path: read with no reference counted per rule.
typealias RuleTable = FlatTable<RuleEntry>

extension FlatTable where Entry == RuleEntry {
    init(rules: [CompiledRule], plainUnits: [Bool]) {
        self.init(
            rules.map {
                RuleEntry(rule: Borrowed(lending: $0), gate: plainUnits[Int($0.unit)] ? $0.gate : nil, hasLimits: $0.hasLimits)
            })
    }

    /// Runs `body` with rule `i`, counting no reference.
    /// (Rule indices come from the same compiled rule set: in range, checked in debug builds.)
    @inline(__always) func withRule<R>(_ i: Int32, _ body: (CompiledRule) -> R) -> R { self[inRange: Int(i)].rule.with(body) }

    /// Rule `i` (counted if the caller keeps it).
    @inline(__always) func rule(_ i: Int32) -> CompiledRule { self[inRange: Int(i)].rule.object }
}

/// What recording an entry of a series needs (a filter, rarer, is read from the series itself).
struct SeriesEntry {
    let retentionMs: Int64
    /// For `sum`: the property whose numeric values are kept (-1: none).
    let valueSlot: Int32
    let hasFilter: Bool
    let keepsLifetime: Bool

    init(_ s: SeriesSpec) {
        retentionMs = s.retentionMs
        valueSlot = s.valueSlot.map(Int32.init) ?? -1
        hasFilter = s.hasFilter
        keepsLifetime = s.keepsLifetime
    }
}
typealias SeriesTable = FlatTable<SeriesEntry>

/// Per event id, the rules it triggers and the series it records, with flags for the rarer work it asks for — in two
/// flat tables the rule set owns, so that the engine reads an event's plan without counting references.
struct EventPlans: ~Copyable {
    struct Plan {
        /// Where the event's rules and its series are in ``items``.
        var rulesStart: Int32
        var rulesCount: Int32
        var seriesStart: Int32
        var seriesCount: Int32
        /// It cancels some rule's pending actions (`unless`).
        var cancels: Bool
        /// It is a step of some sequence trigger.
        var stepsSequences: Bool
        /// It is some unit's goal.
        var isGoal: Bool
        /// It starts a new session (`session.start_on`).
        var startsSession: Bool

        /// Where the event's rules are in the plans' items, in evaluation order.
        var rules: Range<Int> { Int(rulesStart)..<Int(rulesStart + rulesCount) }
        /// Where the event series it records are.
        var series: Range<Int> { Int(seriesStart)..<Int(seriesStart + seriesCount) }
    }

    private let plans: FlatTable<Plan>
    /// Rule and series indices, each event's in two runs (``Plan/rules``, ``Plan/series``).
    private let items: FlatTable<Int32>
    var count: Int { plans.count }

    init(rules: [[Int32]], series: [[Int32]], cancel: [[Int32]], sequences: [[Int32]], goals: [Bool], sessionStarts: Set<Int32>) {
        var items: [Int32] = []
        var plans: [Plan] = []
        func put(_ list: [Int32]) -> (Int32, Int32) {
            let start = items.count
            items += list
            return (Int32(start), Int32(list.count))
        }
        for id in 0..<rules.count {
            let (rs, rc) = put(rules[id])
            let (ss, sc) = put(series[id])
            plans.append(
                Plan(
                    rulesStart: rs, rulesCount: rc, seriesStart: ss, seriesCount: sc, cancels: !cancel[id].isEmpty,
                    stepsSequences: !sequences[id].isEmpty, isGoal: goals[id], startsSession: sessionStarts.contains(Int32(id))))
        }
        self.plans = FlatTable(plans)
        self.items = FlatTable(items)
    }

    @inline(__always) subscript(_ id: Int32) -> Plan { plans[id] }

    /// A rule or series index of a plan's ``Plan/rules`` or ``Plan/series`` (`i` from the plan: in range).
    @inline(__always) func item(_ i: Int) -> Int32 { items[inRange: i] }
}

/// A campaign or rule set after compilation.
public final class CompiledUnit: Sendable {
    public let name: String
    public let kind: UnitKind
    public let path: String
    public let enabled: Bool
    /// Inclusive start and exclusive end, in ms.
    public let start: Int64?
    public let end: Int64?
    let audience: CompiledExpr?
    let audienceTraced: CompiledExpr?
    let audienceMemo: Int
    /// `start`/`end` are wall-clock times compared in each user's own zone (`timezone: user`).
    public let userLocalWindow: Bool
    public let goals: [CompiledGoal]
    /// Share of users held back (0: none).
    public let holdout: Double

    init(
        name: String, kind: UnitKind, path: String, enabled: Bool, start: Int64?, end: Int64?, audience: CompiledExpr?,
        audienceTraced: CompiledExpr?, audienceMemo: Int, userLocalWindow: Bool, goals: [CompiledGoal], holdout: Double
    ) {
        self.name = name
        self.kind = kind
        self.path = path
        self.enabled = enabled
        self.start = start
        self.end = end
        self.audience = audience
        self.audienceTraced = audienceTraced
        self.audienceMemo = audienceMemo
        self.userLocalWindow = userLocalWindow
        self.goals = goals
        self.holdout = holdout
    }

    /// Whether a user is in this file's holdout: a stable hash of the file's name and the user id.
    public func isHeldOut(_ userID: String) -> Bool {
        guard holdout > 0 else { return false }
        return Holdout.fraction(unit: name, user: userID) < holdout
    }
}

enum Holdout {
    /// A stable number in [0, 1) for a user and file (SHA-256, so it is the same on every machine and run).
    static func fraction(unit: String, user: String) -> Double {
        var h = SHA256()
        h.update(data: Array("holdout:\(unit):\(user)".utf8))
        let bytes = Array(h.finalize().prefix(8))
        let n = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Double(n >> 11) / Double(1 << 53)
    }
}

/// A goal of a campaign or rule set, for reports.
public struct CompiledGoal: Sendable {
    public let id: String
    public let description: String?
    public let event: String
    let eventID: Int32
    let whereExpr: CompiledExpr?
    public let withinMs: Int64
    /// The rule whose first fire exposes a user; `nil`: the first fire of any rule of the file.
    public let exposureRule: Int32?
    /// The property summed as the goal's value (revenue), by name and slot; `nil`: conversions only.
    public var valueProperty: String? = nil
    var valueSlot: Int? = nil
}

/// A versioned flow, compiled.
public struct CompiledFlow: Sendable {
    public let id: String
    public let version: Int
    /// The attribute that holds each user's place in the flow.
    let stateSlot: Int
    let params: [(key: String, value: CompiledValue)]
    let steps: [CompiledFlowStep]
    public let finish: String?
    /// From version → (old step → new step, the step for unmapped old steps).
    let migrations: [Int: (table: [String: String], otherwise: String?)]

    public var stepIDs: [String] { steps.map(\.id) }
}

struct CompiledFlowStep: Sendable {
    let id: String
    let skipIf: CompiledExpr?
    /// Back navigation is disallowed from here on.
    let noBackFromHere: Bool
    let params: [(key: String, value: CompiledValue)]
}

public enum CompiledTrigger: Sendable {
    case events([Int32])
    case change(attributeSlot: Int, from: [Value]?, to: [Value]?)
    case sequence(CompiledSequence)
    /// `inactive_for`: a timer each activity moves to its time plus `ms`.
    case inactive(ms: Int64)
    /// `schedule`: a timer per user at the next run, set when the engine first sees them, again after each run.
    case schedule(ScheduleSpec)
}

/// An event, with an optional condition on it (a sequence step, an `unless` event).
public struct CompiledStep: Sendable {
    let eventID: Int32
    let whereExpr: CompiledExpr?
}

public struct CompiledSequence: Sendable {
    let steps: [CompiledStep]
    public let withinMs: Int64
    /// The property slot every step must share, if correlated.
    let correlateSlot: Int?
}

/// Delays, cancellation and quiet hours of a rule.
public struct CompiledTiming: Sendable {
    public var waitMs: Int64?
    public var at: AtSpec?
    public var retrigger: RetriggerPolicy = .keep
    public var recheck = false
    public var quietHours: QuietHoursSpec?
    /// A schedule's send rate (`rate:`).
    public var rate: SendRate?
    var unless: [CompiledStep] = []

    public var isDelayed: Bool { waitMs != nil || at != nil }
}

/// The re-prompt condition: the latest `after` event matched `when`, at least `wait` ago.
final class CompiledReprompt: Sendable {
    let after: String
    let when: String
    let allSeries: Int32
    let matchingSeries: Int32
    let waitMs: Int64

    init(after: String, when: String, allSeries: Int32, matchingSeries: Int32, waitMs: Int64) {
        self.after = after
        self.when = when
        self.allSeries = allSeries
        self.matchingSeries = matchingSeries
        self.waitMs = waitMs
    }
}

public final class CompiledRule: Sendable {
    public let index: Int32
    public let unit: Int32
    public let id: String
    /// `unit/id`.
    public let qualifiedID: String
    public let enabled: Bool
    public let trigger: CompiledTrigger
    public let triggerDescription: String
    let whereExpr: CompiledExpr?
    let whereTraced: CompiledExpr?
    let ifExpr: CompiledExpr?
    let ifTraced: CompiledExpr?
    public let limits: CompiledLimits
    public let priority: Int
    /// The surface of its `message` action, if it has one: rules on the same surface are arbitrated.
    public let surface: String?
    /// `surface` interned within the rule set (-1: none), for arbitration without string compares.
    let surfaceID: Int32
    /// Its A/B test (its own `variants:`, or its file's), `nil` when it has none.
    public let variants: CompiledVariants?

    /// The kinds its fires can come out as: its actions' (a variant's too), a `flow` as a `screen`, a `push` or
    /// `email` as `skipped`, and any fire as `held_back`.
    public var firedKinds: Set<ActionKind> {
        var out: Set<ActionKind> = [.heldBack]
        for a in actions + (variants?.actions.flatMap { $0 } ?? []) {
            out.insert(a.kind)
            if a.kind == .flow { out.insert(.screen) }
            if a.kind == .push || a.kind == .email { out.insert(.skipped) }
        }
        return out
    }
    /// The channels (``ActionKind/channels``) its actions message the user on, in channel order: a rule with any counts
    /// toward `global_limit`, and toward each of their `channel_limits` (none for a `transactional` rule).
    let channels: [ActionKind]
    /// Whether fires are recorded per user (limits and re-prompts read the record).
    let keepsRecord: Bool
    /// `limits` is not empty; it counts trigger occurrences (kept so evaluating need not copy `limits` to ask).
    let hasLimits: Bool
    let tracksOccurrences: Bool
    let actions: [ActionTemplate]
    /// Its names and compiled actions as its fires carry them.
    let origin: ActionOrigin
    /// `origin`, lent by the rule (which holds it), read without counting a reference.
    let originReference: Borrowed<ActionOrigin>
    /// Set when the rule is simple enough to decide from flat data (see ``SimpleGate``).
    let gate: SimpleGate?
    /// `timing` has a delay; it has quiet hours (flags read without copying `timing`).
    let isDelayed: Bool
    let hasQuietHours: Bool
    /// Series of its fire times, when it has rolling limits (else -1).
    let fireSeries: Int32
    public let location: SourceLocation
    public let timing: CompiledTiming
    let reprompt: CompiledReprompt?

    init(
        index: Int32, unit: Int32, unitName: String, unitKind: UnitKind, id: String, enabled: Bool, trigger: CompiledTrigger,
        triggerDescription: String, whereExpr: CompiledExpr?, whereTraced: CompiledExpr?, ifExpr: CompiledExpr?,
        ifTraced: CompiledExpr?, limits: CompiledLimits, priority: Int, surface: String?, surfaceID: Int32,
        actions: [ActionTemplate], fireSeries: Int32, location: SourceLocation, timing: CompiledTiming,
        reprompt: CompiledReprompt?, variants: CompiledVariants? = nil, transactional: Bool = false
    ) {
        self.variants = variants
        self.index = index
        self.unit = unit
        self.id = id
        self.qualifiedID = unitName + "/" + id
        self.enabled = enabled
        self.trigger = trigger
        self.triggerDescription = triggerDescription
        self.whereExpr = whereExpr
        self.whereTraced = whereTraced
        self.ifExpr = ifExpr
        self.ifTraced = ifTraced
        self.limits = limits
        self.priority = priority
        self.surface = surface
        self.surfaceID = surfaceID
        self.actions = actions
        self.fireSeries = fireSeries
        self.location = location
        self.timing = timing
        self.reprompt = reprompt
        origin = ActionOrigin(unit: unitName, unitKind: unitKind, rule: id, actions: actions)
        originReference = Borrowed(lending: origin)
        gate = SimpleGate(whereExpr: whereExpr, ifExpr: ifExpr, limits: limits, reprompt: reprompt)
        isDelayed = timing.isDelayed
        hasQuietHours = timing.quietHours != nil
        hasLimits = !limits.isEmpty
        tracksOccurrences = limits.tracksOccurrences
        keepsRecord = !limits.isEmpty || reprompt != nil
        // (A transactional rule messages the user on no capped channel: neither held by the caps nor counted.)
        channels = transactional ? [] : ActionTemplate.channels(of: actions + (variants?.actions.flatMap { $0 } ?? []))
    }

    deinit {
        // Takes back what the rule lent: its origin and its gate's predicates.
        Borrowed.reclaim(origin)
        if let p = whereExpr?.predicate, gate?.whereTerms != nil { Borrowed.reclaim(p) }
        if let p = ifExpr?.predicate, gate?.ifTerms != nil { Borrowed.reclaim(p) }
    }
}

/// What decides a simple rule — conditions that are flat predicates and only the limits of
/// ``LimitKind/decidedByGate`` — so that the engine can decide it, when it records no verdicts, without building a
/// ``Verdict``. It makes the same checks in the same order as the engine's general evaluation (`where`, `if`, then the
/// limits through ``LimitStanding``'s tests), which the engine uses for every other rule, for plain units only, and
/// whenever verdicts are recorded.
struct SimpleGate: Sendable {
    // Lent by the rule's `whereExpr` and `ifExpr`, which live as long as the rule: copying the gate or reading them
    // counts no references.
    let whereTerms: Borrowed<Predicate>?
    let ifTerms: Borrowed<Predicate>?
    let perUser: UInt32
    let perSession: Int
    let cooldownMs: Int64

    init?(whereExpr: CompiledExpr?, ifExpr: CompiledExpr?, limits: CompiledLimits, reprompt: CompiledReprompt?) {
        guard reprompt == nil, limits.kinds.allSatisfy(LimitKind.decidedByGate.contains) else { return nil }
        if let w = whereExpr {
            guard let p = w.predicate else { return nil }
            whereTerms = Borrowed(lending: p)
        } else {
            whereTerms = nil
        }
        if let c = ifExpr {
            guard let p = c.predicate else { return nil }
            ifTerms = Borrowed(lending: p)
        } else {
            ifTerms = nil
        }
        perUser = limits.perUser.map { UInt32(clamping: $0) } ?? .max
        perSession = limits.perSession ?? .max
        cooldownMs = limits.cooldownMs ?? 0
    }

    /// `nil` when the rule qualifies; else the index in ``Verdict/blockCodes`` of why not. The user and the event are
    /// read through the loans the engine's scope holds for the event.
    @inline(__always) func blocks(_ scope: EvalScope, now: Int64, rule: Int32, hasLimits: Bool) -> Int? {
        let profile = scope.profileLoan
        let event = scope.eventLoan
        if let w = whereTerms, !w.with({ $0.holds(profile: profile, event: event, now: now) }) {
            return Verdict.BlockIndex.whereClause
        }
        if let c = ifTerms, !c.with({ $0.holds(profile: profile, event: event, now: now) }) {
            return Verdict.BlockIndex.ifClause
        }
        guard hasLimits, let rec = profile?.with({ $0.record(for: rule) }) else { return nil }
        if LimitStanding.perUserBlocks(fires: rec.fires, max: perUser) { return Verdict.BlockIndex.perUser }
        if LimitStanding.perSessionBlocks(rec, session: profile!.with { $0.session.id }, max: perSession) {
            return Verdict.BlockIndex.perSession
        }
        if LimitStanding.cooldownBlocks(lastFire: rec.lastFire, ms: cooldownMs, now: now) { return Verdict.BlockIndex.cooldown }
        return nil
    }
}

/// A history series: occurrences of something, kept as long as the longest window that asks for it.
struct SeriesSpec: Sendable {
    enum Source: Sendable {
        /// Occurrences of an event, optionally only those whose properties equal the filter's values.
        case event(Int32, filter: [(slot: Int, value: Value)])
        /// Occurrences of any track or screen event (`"*"`).
        case anyEvent
        case ruleFires(Int32)
        case globalMessages
        /// Fires that sent an action on the channel (`channel_limits`).
        case channel(ActionKind)
    }
    var source: Source
    var retentionMs: Int64
    var keepsLifetime: Bool
    /// For `sum`: the property whose numeric values are kept.
    var valueSlot: Int? = nil

    /// Only occurrences whose properties match a filter count.
    var hasFilter: Bool {
        if case .event(_, let filter) = source { !filter.isEmpty } else { false }
    }
}

/// Settings for an engine, from the settings file (or defaults).
public struct EngineSettings: Sendable {
    public var sessionStartEvents: Set<Int32> = []
    public var sessionTimeoutMs: Int64 = 30 * 60_000
    public var globalLimits: CompiledLimits?
    public var dedupWindowMs: Int64 = 7 * Milliseconds.day
    /// How far one user's event may run ahead of the other users' latest before it moves the stream's clock alone
    /// (see ``Engine/clock``).
    public var clockSkewMs: Int64 = 7 * Milliseconds.day
    /// How deep `set` → `on_change` → `set` chains may go within one event.
    public var maxCascadeDepth: Int = 8
    /// Where a service sends fired actions (the engine only carries them).
    public var destinations: [Destination] = []
    /// Series of all message fires, for the global cap's rolling windows (-1 if none).
    var globalSeries: Int32 = -1
    /// The caps per channel (`channel_limits`), each with the series of the fires that reached it.
    public var channelLimits: [ChannelLimit] = []

    /// The defaults, before any settings file.
    public init() {}
}

/// A rule's A/B test, compiled: each user's variant by a stable hash, and each variant's actions.
public final class CompiledVariants: Sendable {
    public let ids: [String]
    /// The weights as written (percent).
    public let weights: [Double]
    /// The control variant's place in ``ids``, if the test has one: its users' fires are `held_back`.
    public let controlIndex: Int?
    /// What a user id is hashed with: the file's name (a file's test: one variant per user across its rules), or
    /// `unit/rule` (a rule's own).
    public let salt: String
    /// The upper end of each variant's share of [0, 1), in the order written.
    let bounds: [Double]
    /// Per variant, its actions and the origin its fires carry (with `"variant"` in their JSON).
    let actions: [[ActionTemplate]]
    let origins: [ActionOrigin]
    /// Per variant, the channels its actions message on (the control's: the rule's, as if it had sent).
    let channels: [[ActionKind]]

    init(ids: [String], weights: [Double], controlIndex: Int?, salt: String, actions: [[ActionTemplate]], origins: [ActionOrigin])
    {
        self.ids = ids
        self.weights = weights
        self.controlIndex = controlIndex
        self.salt = salt
        let total = weights.reduce(0, +)
        var sum = 0.0
        bounds = weights.map {
            sum += $0
            return sum / total
        }
        self.actions = actions
        self.origins = origins
        channels = actions.indices.map { k in ActionTemplate.channels(of: k == controlIndex ? actions.flatMap { $0 } : actions[k])
        }
    }

    /// The user's variant: the same for a user on every machine and run, and unchanged by edits that keep the
    /// variants' order and weights.
    public func index(of userID: String) -> Int {
        let x = Holdout.fraction(unit: "variant:" + salt, user: userID)
        return bounds.firstIndex { x < $0 } ?? bounds.count - 1
    }
}

/// A cap on one channel's fires across all rules (`channel_limits`), in windows only.
public struct ChannelLimit: Sendable {
    public var channel: ActionKind
    public var limits: CompiledLimits
    /// The series of the fires whose action on this channel went out (a `skipped` one does not count): its windows
    /// count the rolling caps, its lifetime count `per_user`, and its times since the session began `per_session`.
    var series: Int32

    /// How far back the series keeps times for `per_session`: a session that has gone on longer counts this much of
    /// it (docs/guide.md, channel_limits).
    public static let sessionSpanMs: Int64 = 7 * 86_400_000
}

/// The event, screen and trait names of the loaded tracking plans.
public struct PlanNames: Sendable {
    public var events: Set<String>
    /// Empty when the plans declare no screens (then any screen is allowed).
    public var screens: Set<String>
    /// Traits, with the attributes flows keep their state in.
    public var traits: Set<String>
    /// Per event, the plan's type of each of its properties the rules read (by ``CompiledRuleSet/propertySlots``):
    /// what ``conform(kind:name:listed:properties:traits:)`` checks and converts.
    var propertyTypes: [String: [(slot: Int, name: String, type: PlanType)]] = [:]
    /// The plan's type of each trait.
    var traitTypes: [String: PlanType] = [:]

    /// Whether an event key (`Name` or `screen:Name`) is declared.
    public func has(event key: String) -> Bool {
        if key.hasPrefix("screen:") { return screens.isEmpty || screens.contains(String(key.dropFirst(7))) }
        return events.contains(key)
    }
}
