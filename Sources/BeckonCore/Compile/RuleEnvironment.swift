/// Interned names, slots and history series, shared by every expression of a rule set while it compiles.
final class SymbolTable {
    var eventNames: [String] = []
    var eventIDs: [String: Int32] = [:]
    var propertyNames: [String] = []
    var propertySlots: [String: Int] = [:]
    var contextNames: [String] = []
    var contextSlots: [String: Int] = [:]
    var attributeNames: [String] = []
    var attributeSlots: [String: Int] = [:]
    var series: [SeriesSpec] = []
    var seriesKeys: [String: Int32] = [:]
    var memoSlots = 0
    var needsAllProperties = false
    var surfaceIDs: [String: Int32] = [:]

    /// The id of a message surface (interned).
    func surface(_ name: String) -> Int32 {
        if let id = surfaceIDs[name] { return id }
        let id = Int32(surfaceIDs.count)
        surfaceIDs[name] = id
        return id
    }
    /// The loaded tracking plans, merged; `nil` when none is loaded (then names are not checked).
    var plan: PlanIndex?

    func event(_ key: String) -> Int32 {
        if let id = eventIDs[key] { return id }
        let id = Int32(eventNames.count)
        eventNames.append(key)
        eventIDs[key] = id
        return id
    }

    func property(_ name: String) -> Int {
        if let s = propertySlots[name] { return s }
        propertyNames.append(name)
        propertySlots[name] = propertyNames.count - 1
        return propertyNames.count - 1
    }

    func context(_ name: String) -> Int {
        if let s = contextSlots[name] { return s }
        contextNames.append(name)
        contextSlots[name] = contextNames.count - 1
        return contextNames.count - 1
    }

    func attribute(_ name: String) -> Int {
        if let s = attributeSlots[name] { return s }
        attributeNames.append(name)
        attributeSlots[name] = attributeNames.count - 1
        return attributeNames.count - 1
    }

    func memoSlot() -> Int {
        memoSlots += 1
        return memoSlots - 1
    }

    /// The series of an event (with an optional property filter), kept for at least `retention` ms.
    func eventSeries(
        _ eventID: Int32, filter: [(slot: Int, value: Value)], retention: Int64, lifetime: Bool, valueSlot: Int? = nil
    ) -> Int32 {
        let key =
            "e\(eventID)|" + filter.map { "\($0.slot)=\(JSONWriter.encode($0.value))" }.joined(separator: ",")
            + (valueSlot.map { "|v\($0)" } ?? "")
        return upsertSeries(
            key,
            SeriesSpec(
                source: .event(eventID, filter: filter), retentionMs: retention, keepsLifetime: lifetime, valueSlot: valueSlot))
    }

    /// The series of every track and screen event (`"*"`).
    func anyEventSeries(retention: Int64, lifetime: Bool) -> Int32 {
        upsertSeries("any", SeriesSpec(source: .anyEvent, retentionMs: retention, keepsLifetime: lifetime))
    }

    func upsertSeries(_ key: String, _ spec: SeriesSpec) -> Int32 {
        if let i = seriesKeys[key] {
            series[Int(i)].retentionMs = max(series[Int(i)].retentionMs, spec.retentionMs)
            series[Int(i)].keepsLifetime = series[Int(i)].keepsLifetime || spec.keepsLifetime
            return i
        }
        let i = Int32(series.count)
        series.append(spec)
        seriesKeys[key] = i
        return i
    }

    /// Slots for the user's time zone: the `timezone` attribute, else the last `context.timezone`.
    lazy var zoneSlots: (attribute: Int, context: Int) = (attribute("timezone"), context("timezone"))
}

/// The tracking plans loaded with the rules, indexed for name and type checks.
final class PlanIndex {
    var events: [String: [String: PlanField]] = [:]
    var screens: Set<String> = []
    var traits: [String: PlanField] = [:]
    /// Attributes that flows keep their state in (declared by the flows, not the plan).
    var flowAttributes: Set<String> = []
    /// Attributes that conversion-value tables keep the user's value in (an int), also in ``flowAttributes``.
    var conversionAttributes: Set<String> = []

    var allPropertyNames: [String] { Array(Set(events.values.flatMap(\.keys))) }

    /// Whether an event key (`Name` or `screen:Name`) is in the plan.
    func hasEvent(_ key: String) -> Bool {
        if key == "*" { return true }
        if key.hasPrefix("screen:") { return screens.isEmpty || screens.contains(String(key.dropFirst(7))) }
        return events[key] != nil
    }

    func hasTrait(_ name: String) -> Bool { name == "id" || traits[name] != nil || flowAttributes.contains(name) }

    /// A "did you mean" for an unknown name among `candidates`.
    static func hint(_ name: String, _ candidates: [String]) -> String {
        Suggest.nearest(name, in: candidates).map { "; did you mean '\($0)'?" } ?? ""
    }

    func unknownEvent(_ key: String) -> String {
        "the tracking plan has no event '\(key)'" + PlanIndex.hint(key, Array(events.keys))
    }

    func unknownTrait(_ name: String) -> String {
        "the tracking plan has no trait '\(name)'" + PlanIndex.hint(name, Array(traits.keys) + Array(flowAttributes))
    }
}

/// Where an expression sits, which decides the variables it may use.
enum ExpressionPlace {
    case audience, segment, whereClause, ifClause, action

    var name: String {
        switch self {
        case .audience: "audience"
        case .segment: "segment"
        case .whereClause: "where"
        case .ifClause: "if"
        case .action: "action"
        }
    }
}

/// The names an expression of a rule file can use: `event`, `user`, `context`, `now`, `change`, `inbox`,
/// the file's segments, and Beckon's history functions.
final class RuleEnvironment: ExpressionEnvironment {
    let symbols: SymbolTable
    let segments: SegmentTable
    let place: ExpressionPlace
    let hasChange: Bool
    let tracing: Bool
    /// The events that can be `event` here (for property checks against the plan); `nil` when unknown.
    let triggerEvents: [String]?

    init(
        symbols: SymbolTable, segments: SegmentTable, place: ExpressionPlace, hasChange: Bool, tracing: Bool,
        triggerEvents: [String]? = nil
    ) {
        self.symbols = symbols
        self.segments = segments
        self.place = place
        self.hasChange = hasChange
        self.tracing = tracing
        self.triggerEvents = triggerEvents
    }

    var variableNames: [String] {
        ["event", "user", "context", "now", "inbox"] + (hasChange ? ["change"] : []) + segments.names
    }

    var functionNames: [String] {
        ["count", "last_seen", "first_seen", "seen", "days_since", "sum", "active_days", "average"]
            + Array(FunctionDecl.beckon.keys)
    }

    // MARK: Variables

    func variable(_ name: String) -> VariableBinding? {
        switch name {
        case "event": return eventVariable()
        case "user": return userVariable()
        case "context": return contextVariable()
        case "now":
            return VariableBinding(type: .timestamp) { _, _, _ in
                ({ s in .timestamp(Timestamp(milliseconds: s.now)) }, .timestamp, 0)
            }
        case "change" where hasChange: return changeVariable()
        case "inbox": return inboxVariable()
        default:
            guard segments.has(name) else { return nil }
            return VariableBinding(type: .bool) { [segments, tracing] _, _, span throws(ExprProblem) in
                let (ev, t) = try segments.reference(name, span: span, tracing: tracing)
                return (ev, t, 0)
            }
        }
    }

    private static func noField(_ variable: String, _ field: String, _ fields: [String], _ span: SourceSpan) -> ExprProblem {
        let hint = Suggest.nearest(field, in: fields)
        return ExprProblem(
            "'\(variable)' has no field '\(field)'"
                + (hint.map { "; did you mean '\($0)'?" } ?? "; its fields: " + fields.joined(separator: ", ")),
            span, id: .unknownIdentifier, suggestion: hint)
    }

    /// How to write `user.NAME` for a name (brackets when it is not an identifier).
    static func userPath(_ name: String) -> String {
        let plain =
            name.unicodeScalars.allSatisfy { Lexer.isIdentStart($0) || Lexer.isDigit($0) }
            && name.unicodeScalars.first.map(Lexer.isIdentStart) == true
        return plain ? "user." + name : "user[\"\(name)\"]"
    }

    /// A property must be in the plan for every event that can trigger here (or, when unknown, for some event);
    /// its declared type when all agree.
    static func checkProperty(
        _ key: String, _ plan: PlanIndex?, _ events: [String]?, _ span: SourceSpan
    ) throws(ExprProblem) -> CELType {
        guard let plan else { return .dyn }
        let planned = (events ?? []).filter { plan.events[$0] != nil }
        if planned.isEmpty {
            guard plan.allPropertyNames.contains(key) else {
                throw ExprProblem(
                    "no event of the tracking plan has a property '\(key)'" + PlanIndex.hint(key, plan.allPropertyNames), span,
                    id: .unknownProperty,
                    suggestion: Suggest.nearest(key, in: plan.allPropertyNames).map { "event.properties." + $0 })
            }
            return .dyn
        }
        // With several trigger events, the property must belong to at least one of them (a guard like
        // `event.name == "A" || event.properties.x` is common); its type counts only where declared.
        let types = planned.compactMap { plan.events[$0]?[key]?.type.celType }
        guard !types.isEmpty else {
            let props = Array(Set(planned.flatMap { plan.events[$0].map { Array($0.keys) } ?? [] }))
            let which =
                planned.count == 1
                ? "event '\(planned[0])' has" : "none of " + planned.map { "'\($0)'" }.joined(separator: ", ") + " has"
            throw ExprProblem(
                "\(which) no property '\(key)' in the tracking plan" + PlanIndex.hint(key, props), span,
                id: .unknownProperty, suggestion: Suggest.nearest(key, in: props).map { "event.properties." + $0 })
        }
        return types.count == planned.count ? CELType.join(types) : .dyn
    }

    private func eventVariable() -> VariableBinding {
        var b = VariableBinding(type: .dyn) { [symbols, triggerEvents] path, testOnly, span throws(ExprProblem) in
            guard let first = path.first else {
                symbols.needsAllProperties = true
                return ({ s in RuleEnvironment.eventMap(s) }, .map(.string, .dyn), 0)
            }
            switch first {
            case "name": return ({ s in .string(s.event?.name ?? "") }, .string, 1)
            case "type": return ({ s in .string(s.event?.kind.description ?? "") }, .string, 1)
            case "timestamp":
                return ({ s in s.event.map { .timestamp(Timestamp(milliseconds: $0.timestamp)) } ?? .null }, .timestamp, 1)
            case "messageId": return ({ s in s.event?.messageID.map(Value.string) ?? .null }, .dyn, 1)
            case "userId": return ({ s in .string(s.profile?.userID ?? "") }, .string, 1)
            case "properties":
                guard path.count >= 2 else {
                    symbols.needsAllProperties = true
                    return ({ s in .map(s.event?.allProperties ?? ValueMap()) }, .map(.string, .dyn), 1)
                }
                let key = path[1]
                let type = try RuleEnvironment.checkProperty(key, symbols.plan, triggerEvents, span)
                let slot = symbols.property(key)
                if testOnly && path.count == 2 {
                    return ({ s in .bool(s.event?.property(slot) != nil) }, .bool, 2)
                }
                return (
                    { s in
                        if let v = s.event?.property(slot) { return v }
                        return .error(.noSuchKey(key))
                    }, type, 2
                )
            case "context":
                let (ev, t, n) = try RuleEnvironment.contextSelect(symbols, Array(path.dropFirst()), testOnly, span)
                return (ev, t, n + 1)
            case "traits":
                guard path.count >= 2 else {
                    return ({ s in .map(ValueMap((s.event?.traits ?? []).map { ($0.name, $0.value) })) }, .map(.string, .dyn), 1)
                }
                let key = path[1]
                if testOnly && path.count == 2 {
                    return ({ s in .bool(s.event?.traits.contains { $0.name == key } ?? false) }, .bool, 2)
                }
                return ({ s in s.event?.traits.first { $0.name == key }?.value ?? .error(.noSuchKey(key)) }, .dyn, 2)
            default:
                throw RuleEnvironment.noField(
                    "event", first, ["name", "type", "timestamp", "messageId", "properties", "context", "traits"], span)
            }
        }
        b.operand = { [symbols] path in
            path.count == 2 && path[0] == "properties" ? .property(symbols.property(path[1])) : nil
        }
        return b
    }

    static func eventMap(_ s: EvalScope) -> Value {
        guard let e = s.event else { return .null }
        var m = ValueMap()
        m[string: "name"] = .string(e.name)
        m[string: "type"] = .string(e.kind.description)
        m[string: "timestamp"] = .timestamp(Timestamp(milliseconds: e.timestamp))
        if let id = e.messageID { m[string: "messageId"] = .string(id) }
        m[string: "properties"] = .map(e.allProperties ?? ValueMap())
        return .map(m)
    }

    private func userVariable() -> VariableBinding {
        var b = VariableBinding(type: .map(.string, .dyn)) { [symbols] path, testOnly, span throws(ExprProblem) in
            guard let key = path.first else {
                let names = symbols.attributeNames
                return ({ s in RuleEnvironment.userMap(s, names) }, .map(.string, .dyn), 0)
            }
            if key == "id" {
                if testOnly && path.count == 1 { return ({ _ in .bool(true) }, .bool, 1) }
                return ({ s in .string(s.profile?.userID ?? "") }, .string, 1)
            }
            var type = CELType.dyn
            if let plan = symbols.plan {
                guard plan.hasTrait(key) else {
                    throw ExprProblem(
                        plan.unknownTrait(key), span, id: .unknownTrait,
                        suggestion: Suggest.nearest(key, in: Array(plan.traits.keys)).map(RuleEnvironment.userPath))
                }
                type = plan.traits[key]?.type.celType ?? (plan.conversionAttributes.contains(key) ? .int : .map(.string, .dyn))
            }
            let slot = symbols.attribute(key)
            if testOnly && path.count == 1 {
                return ({ s in .bool(s.profile?.attributes[slot] != nil) }, .bool, 1)
            }
            let missing = Value.error(EvalError("user attribute '\(key)' is not set"))
            return (
                { s in
                    if let v = s.profile?.attributes[slot] { return v }
                    return missing
                }, type, 1
            )
        }
        b.operand = { [symbols] path in path.count == 1 && path[0] != "id" ? .attribute(symbols.attribute(path[0])) : nil }
        return b
    }

    static func userMap(_ s: EvalScope, _ names: [String]) -> Value {
        guard let p = s.profile else { return .null }
        var m = p.otherAttributes ?? ValueMap()
        for (i, n) in names.enumerated() { if let v = p.attributes[i] { m[string: n] = v } }
        m[string: "id"] = .string(p.userID)
        return .map(m)
    }

    private func contextVariable() -> VariableBinding {
        VariableBinding(type: .map(.string, .dyn)) { [symbols] path, testOnly, span throws(ExprProblem) in
            try RuleEnvironment.contextSelect(symbols, path, testOnly, span)
        }
    }

    /// `context.FIELD`: from the event, else the last value seen for the user.
    static func contextSelect(
        _ symbols: SymbolTable, _ path: [String], _ testOnly: Bool, _ span: SourceSpan
    )
        throws(ExprProblem) -> (Eval, CELType, Int)
    {
        guard let key = path.first else {
            throw ExprProblem("use a field of the context, like context.locale or context.os.name", span, id: .expressionType)
        }
        let slot = symbols.context(key)
        if testOnly && path.count == 1 {
            return ({ s in .bool(s.event?.contextSlots[slot] != nil || s.profile?.context[slot] != nil) }, .bool, 1)
        }
        return (
            { s in
                if let v = s.event?.contextSlots[slot] ?? s.profile?.context[slot] { return v }
                return .error(EvalError("context field '\(key)' is unknown for this user"))
            }, .dyn, 1
        )
    }

    private func changeVariable() -> VariableBinding {
        VariableBinding(type: .dyn) { path, _, span throws(ExprProblem) in
            guard let f = path.first else {
                return (
                    { s in
                        guard let c = s.change else { return .null }
                        return .map(ValueMap([("attribute", .string(c.attribute)), ("from", c.from), ("to", c.to)]))
                    }, .map(.string, .dyn), 0
                )
            }
            switch f {
            case "attribute": return ({ s in .string(s.change?.attribute ?? "") }, .string, 1)
            case "from": return ({ s in s.change?.from ?? .null }, .dyn, 1)
            case "to": return ({ s in s.change?.to ?? .null }, .dyn, 1)
            default: throw RuleEnvironment.noField("change", f, ["attribute", "from", "to"], span)
            }
        }
    }

    private func inboxVariable() -> VariableBinding {
        VariableBinding(type: .dyn) { path, _, span throws(ExprProblem) in
            guard let f = path.first else {
                throw ExprProblem(
                    "use a field of the inbox: inbox.unread, inbox.total, inbox.ids, inbox.unread_ids", span,
                    id: .expressionType)
            }
            switch f {
            case "unread": return ({ s in .int(Int64(s.profile?.unreadCount ?? 0)) }, .int, 1)
            case "total": return ({ s in .int(Int64(s.profile?.inbox.count ?? 0)) }, .int, 1)
            case "ids": return ({ s in .list((s.profile?.inbox ?? []).map { .string($0.id) }) }, .list(.string), 1)
            case "unread_ids":
                return ({ s in .list((s.profile?.inbox ?? []).filter { !$0.read }.map { .string($0.id) }) }, .list(.string), 1)
            default: throw RuleEnvironment.noField("inbox", f, ["unread", "total", "ids", "unread_ids"], span)
            }
        }
    }

    // MARK: History functions

    func function(_ name: String) -> CustomFunction? {
        switch name {
        case "count": return CustomFunction(usage: "count(\"Event Name\", \"7d\")", compile: compileCount)
        case "last_seen", "first_seen":
            return CustomFunction(usage: "\(name)(\"Event Name\")") { [self] args, span, c throws(ExprProblem) in
                try compileSeen(name, args, span, c)
            }
        case "seen":
            return CustomFunction(usage: "seen(\"Event Name\")") { [self] args, span, c throws(ExprProblem) in
                try compileSeen(name, args, span, c)
            }
        case "days_since":
            return CustomFunction(usage: "days_since(\"Event Name\") or days_since(timestamp)", compile: compileDaysSince)
        case "sum": return CustomFunction(usage: "sum(\"Event Name\", \"property\", \"7d\")", compile: compileSum)
        case "active_days": return CustomFunction(usage: "active_days(\"Event Name\", \"30d\")", compile: compileActiveDays)
        case "average": return CustomFunction(usage: "average(\"Event Name\", \"7d\")", compile: compileAverage)
        default: return nil
        }
    }

    private func constantString(_ e: Expr, _ c: ExprCompiler, what: String, usage: String) throws(ExprProblem) -> String {
        let n = c.compileNode(e)
        guard let v = n.constant, case .string(let s) = v else {
            throw ExprProblem("\(what) must be written as a quoted string, like \(usage)", e.span, id: .expressionType)
        }
        return s
    }

    func eventKey(_ name: String) -> String {
        name.hasPrefix("screen:") ? name : BoundEvent.internKey(kind: .track, name: name)
    }

    /// An event name used in an expression must be in the plan, when one is loaded.
    private func checkEvent(_ name: String, _ arg: Expr) throws(ExprProblem) {
        guard let plan = symbols.plan, !plan.hasEvent(eventKey(name)) else { return }
        throw ExprProblem(
            plan.unknownEvent(name), arg.span, id: .unknownEvent,
            suggestion: Suggest.nearest(name, in: Array(plan.events.keys)).map { "\"\($0)\"" })
    }

    /// The event name and window arguments shared by the history functions, checked at load time.
    private func nameAndWindow(
        _ nameArg: Expr, _ windowArg: Expr, _ c: ExprCompiler, usage: String, allowLifetime: Bool = true
    ) throws(ExprProblem) -> (name: String, window: HistoryWindow) {
        let name = try constantString(nameArg, c, what: "the event name", usage: usage)
        try checkEvent(name, nameArg)
        let windowText = try constantString(windowArg, c, what: "the window", usage: usage)
        guard let window = HistoryWindow.parse(windowText) else {
            if DSLDuration.read(windowText.lowercased()) == .tooLong {
                throw ExprProblem(DSLDuration.tooLongMessage(windowText), windowArg.span, id: .invalidWindow)
            }
            throw ExprProblem("'\(windowText)' is not a window; use \(DSL.windowDoc)", windowArg.span, id: .invalidWindow)
        }
        if !allowLifetime && window == .lifetime {
            throw ExprProblem(
                "this function needs a rolling or calendar window, not lifetime", windowArg.span, id: .invalidWindow)
        }
        if case .calendar = window { _ = symbols.zoneSlots }
        return (name, window)
    }

    /// The series for an event name (`"*"`: every track and screen event).
    private func series(
        _ name: String, window: HistoryWindow, filter: [(slot: Int, value: Value)] = [], valueSlot: Int? = nil
    ) -> Int32 {
        if name == "*" { return symbols.anyEventSeries(retention: window.retentionMs, lifetime: window == .lifetime) }
        let id = symbols.event(eventKey(name))
        return symbols.eventSeries(
            id, filter: filter, retention: window.retentionMs, lifetime: window == .lifetime, valueSlot: valueSlot)
    }

    /// The first millisecond of the window at evaluation time.
    private static func windowStart(
        _ window: HistoryWindow, _ s: EvalScope, _ p: UserProfile, _ zone: (attribute: Int, context: Int)?
    ) -> Int64 {
        if case .calendar = window, let zone {
            return window.start(now: s.now, zone: UserProfile.userZone(p, s.event, (zone.attribute, zone.context)))
        }
        return window.start(now: s.now, zone: .utc)
    }

    private func zoneIfCalendar(_ w: HistoryWindow) -> (attribute: Int, context: Int)? {
        if case .calendar = w { return symbols.zoneSlots }
        return nil
    }

    private func compileCount(_ args: [Expr], _ span: SourceSpan, _ c: ExprCompiler) throws(ExprProblem) -> CompiledNode {
        let usage = "count(\"E_Opened_App\", \"7d\")"
        guard args.count == 2 || args.count == 3 else {
            throw ExprProblem(
                "count() takes an event name, a window and optionally a property filter, like \(usage)", span,
                id: .expressionType)
        }
        let (name, window) = try nameAndWindow(args[0], args[1], c, usage: usage)
        var filter: [(slot: Int, value: Value)] = []
        if args.count == 3 {
            let f = c.compileNode(args[2])
            guard let fv = f.constant, case .map(let m) = fv else {
                throw ExprProblem(
                    "the filter must be a map of property names to values, like {\"rule\": \"welcome\"}", args[2].span,
                    id: .expressionType)
            }
            for (k, v) in m.entries {
                guard case .string(let key) = k else {
                    throw ExprProblem("filter keys are property names (strings)", args[2].span, id: .expressionType)
                }
                filter.append((symbols.property(key), v))
            }
            if name == "*" { throw ExprProblem("a filter needs an event name, not \"*\"", args[2].span, id: .expressionType) }
        }
        let series = series(name, window: window, filter: filter)
        if window == .lifetime {
            var node = CompiledNode(
                type: .int, eval: { s in .int(Int64(s.profile?.history.lifetimeStat(series: series)?.count ?? 0)) })
            node.operand = .lifetimeCount(series: series)
            return node
        }
        let zone = zoneIfCalendar(window)
        var node = CompiledNode(
            type: .int,
            eval: { s in
                guard let p = s.profile else { return .int(0) }
                return .int(
                    Int64(p.history.count(series: series, from: RuleEnvironment.windowStart(window, s, p, zone), to: s.now)))
            })
        if case .rolling(let ms) = window { node.operand = .count(series: series, windowMs: ms) }
        return node
    }

    private func compileSum(_ args: [Expr], _ span: SourceSpan, _ c: ExprCompiler) throws(ExprProblem) -> CompiledNode {
        let usage = "sum(\"Order Completed\", \"total\", \"30d\")"
        guard args.count == 3 else {
            throw ExprProblem(
                "sum() takes an event name, a numeric property and a window, like \(usage)", span, id: .expressionType)
        }
        let (name, window) = try nameAndWindow(args[0], args[2], c, usage: usage, allowLifetime: false)
        let property = try constantString(args[1], c, what: "the property", usage: usage)
        if name == "*" { throw ExprProblem("sum() needs an event name, not \"*\"", args[0].span, id: .expressionType) }
        let series = series(name, window: window, valueSlot: symbols.property(property))
        let zone = zoneIfCalendar(window)
        return CompiledNode(
            type: .double,
            eval: { s in
                guard let p = s.profile else { return .double(0) }
                return .double(p.history.sum(series: series, from: RuleEnvironment.windowStart(window, s, p, zone), to: s.now))
            })
    }

    private func compileActiveDays(_ args: [Expr], _ span: SourceSpan, _ c: ExprCompiler) throws(ExprProblem) -> CompiledNode {
        let usage = "active_days(\"E_Opened_App\", \"30d\")"
        guard args.count == 2 else {
            throw ExprProblem(
                "active_days() takes an event name (or \"*\") and a window, like \(usage)", span, id: .expressionType)
        }
        let (name, window) = try nameAndWindow(args[0], args[1], c, usage: usage, allowLifetime: false)
        let series = series(name, window: window)
        let zone = symbols.zoneSlots
        return CompiledNode(
            type: .int,
            eval: { s in
                guard let p = s.profile else { return .int(0) }
                let z = UserProfile.userZone(p, s.event, (zone.attribute, zone.context))
                let from = RuleEnvironment.windowStart(window, s, p, zone)
                var days = Set<Int64>()
                for t in p.history.times(series: series, from: from, to: s.now) {
                    days.insert(Civil.floorDivMod(z.local(fromUTC: Civil.floorDivMod(t, 1000).0), 86_400).0)
                }
                return .int(Int64(days.count))
            })
    }

    private func compileAverage(_ args: [Expr], _ span: SourceSpan, _ c: ExprCompiler) throws(ExprProblem) -> CompiledNode {
        let usage = "average(\"E_Opened_App\", \"28d\", \"7d\")"
        guard args.count == 2 || args.count == 3 else {
            throw ExprProblem(
                "average() takes an event name, a window and optionally an interval (default a day), like \(usage)", span,
                id: .expressionType)
        }
        let (name, window) = try nameAndWindow(args[0], args[1], c, usage: usage, allowLifetime: false)
        var intervals: Double
        switch window {
        case .calendar(_, let n):
            if args.count == 3 {
                throw ExprProblem(
                    "a calendar window is averaged per calendar period; leave out the interval", args[2].span,
                    id: .invalidWindow)
            }
            intervals = Double(n)
        case .rolling(let ms):
            var per: Int64 = Milliseconds.day
            if args.count == 3 {
                let text = try constantString(args[2], c, what: "the interval", usage: usage)
                guard let p = DSLDuration.parse(text), p > 0, p <= ms else {
                    throw ExprProblem(
                        "the interval must be a duration no longer than the window, like 1d", args[2].span,
                        id: .invalidWindow)
                }
                per = p
            }
            intervals = Double(ms) / Double(per)
        case .lifetime, .monthBack: intervals = 1
        }
        let series = series(name, window: window)
        let zone = zoneIfCalendar(window)
        let n = intervals
        return CompiledNode(
            type: .double,
            eval: { s in
                guard let p = s.profile else { return .double(0) }
                return .double(
                    Double(p.history.count(series: series, from: RuleEnvironment.windowStart(window, s, p, zone), to: s.now)) / n)
            })
    }

    private func compileSeen(
        _ fn: String, _ args: [Expr], _ span: SourceSpan, _ c: ExprCompiler
    ) throws(ExprProblem) -> CompiledNode {
        let usage = "\(fn)(\"E_Opened_App\")"
        guard args.count == 1 else {
            throw ExprProblem("\(fn)() takes one event name, like \(usage)", span, id: .expressionType)
        }
        let name = try constantString(args[0], c, what: "the event name", usage: usage)
        try checkEvent(name, args[0])
        let id = symbols.event(eventKey(name))
        let series = symbols.eventSeries(id, filter: [], retention: 0, lifetime: true)
        switch fn {
        case "seen":
            return CompiledNode(type: .bool, eval: { s in .bool(s.profile?.history.lifetimeStat(series: series) != nil) })
        case "first_seen":
            return CompiledNode(
                type: .dyn,
                eval: { s in
                    s.profile?.history.lifetimeStat(series: series).map { .timestamp(Timestamp(milliseconds: $0.first)) } ?? .null
                })
        default:
            return CompiledNode(
                type: .dyn,
                eval: { s in
                    s.profile?.history.lifetimeStat(series: series).map { .timestamp(Timestamp(milliseconds: $0.last)) } ?? .null
                })
        }
    }

    private func compileDaysSince(_ args: [Expr], _ span: SourceSpan, _ c: ExprCompiler) throws(ExprProblem) -> CompiledNode {
        guard args.count == 1 else {
            throw ExprProblem(
                "days_since() takes one event name or timestamp, like days_since(\"Signed In\")", span, id: .expressionType)
        }
        let arg = c.compileNode(args[0])
        if let v = arg.constant, case .string(let name) = v, Timestamp.parse(name) == nil {
            if let why = Timestamp.offsetProblem(name) {
                throw ExprProblem("'\(name)' is not a timestamp: \(why)", args[0].span, id: .invalidTimestamp)
            }
            try checkEvent(name, args[0])
            let id = symbols.event(eventKey(name))
            let series = symbols.eventSeries(id, filter: [], retention: 0, lifetime: true)
            return CompiledNode(
                type: .int,
                eval: { s in
                    guard let last = s.profile?.history.lifetimeStat(series: series)?.last else {
                        return .error(EvalError("'\(name)' has not happened for this user"))
                    }
                    return .int(RuleEnvironment.wholeDays(s.now - last))
                })
        }
        switch arg.type {
        case .timestamp, .string, .dyn, .null, .error: break
        default:
            throw ExprProblem(
                "days_since() needs an event name or a timestamp, not \(arg.type)", args[0].span, id: .expressionType)
        }
        let ev = arg.eval
        return CompiledNode(
            type: .int,
            eval: { s in
                switch ev(s) {
                case .timestamp(let t): return .int(RuleEnvironment.wholeDays(s.now - t.milliseconds))
                case .string(let text):
                    guard let t = Timestamp.parse(text) else { return .error(EvalError("'\(text)' is not a timestamp")) }
                    return .int(RuleEnvironment.wholeDays(s.now - t.milliseconds))
                case .null: return .error(EvalError("days_since() of null"))
                case .error(let e): return .error(e)
                default: return .error(.noSuchOverload)
                }
            })
    }

    static func wholeDays(_ ms: Int64) -> Int64 { Civil.floorDivMod(ms, Milliseconds.day).0 }
}

/// The segments of one file, compiled on first use (so order does not matter) with cycle detection.
///
/// Segments count toward ``Parser/maxDepth`` like any other nesting: a condition with the segments it uses written
/// out (each use of a segment one more level) nests at most that deep, checked by ``depthProblems(in:inSegment:)`` before an
/// expression is compiled. Compiling and evaluating recurse through the segments a condition uses, so this bounds
/// them as it bounds one expression, whatever the order or number of segments. Each segment is compiled once and,
/// within one evaluation (traced or not), evaluated once, however often it is used: a segment that uses another
/// twice, which uses another twice… costs no more than the segments' own size.
final class SegmentTable {
    struct Entry {
        var source: ExpressionSource
        var compiled: [Bool: (Eval, CELType)] = [:]
        var memo: [Bool: Int] = [:]
    }
    private var entries: [String: Entry] = [:]
    /// The segments being compiled, outermost first.
    private var compiling: [String] = []
    var names: [String] { Array(entries.keys) }
    /// Set by the rule-set compiler: compiles a segment's source.
    var compile: ((ExpressionSource, Bool) -> CompiledExpr?)?
    /// Segments referenced at least once (for the unused-segment warning).
    private(set) var used: Set<String> = []
    var symbols: SymbolTable?
    /// Each segment's levels with the segments it uses written out, computed for all at the first question.
    private var heights: [String: Int]?

    init() {}

    func add(_ name: String, _ source: ExpressionSource) { entries[name] = Entry(source: source) }
    func has(_ name: String) -> Bool { entries[name] != nil }

    /// The uses of segments in `e`, with the level each is at (the whole expression is level 1).
    func uses(in e: Expr) -> [(name: String, level: Int, span: SourceSpan)] {
        var out: [(name: String, level: Int, span: SourceSpan)] = []
        var stack: [(Expr, Int)] = [(e, 1)]
        while let (node, level) = stack.popLast() {
            switch node.node {
            case .literal: break
            case .ident(let name): if entries[name] != nil { out.append((name, level, node.span)) }
            case .select(let o, _, _): stack.append((o, level + 1))
            case .call(_, let t, let args):
                if let t { stack.append((t, level + 1)) }
                for a in args { stack.append((a, level + 1)) }
            case .list(let xs): for x in xs { stack.append((x, level + 1)) }
            case .map(let pairs):
                for p in pairs {
                    stack.append((p.key, level + 1))
                    stack.append((p.value, level + 1))
                }
            case .comprehension(let c):
                stack.append((c.range, level + 1))
                if let p = c.predicate { stack.append((p, level + 1)) }
                if let t = c.transform { stack.append((t, level + 1)) }
            }
        }
        return out
    }

    /// The levels of segment `name` written out: its own expression's, or, through a use of a segment at level `l`,
    /// `l` + that segment's. Computed for every segment at once without recursion (a depth-first walk with its own
    /// stack); a segment that does not parse, or a use that closes a cycle, counts 1 (both are reported elsewhere).
    func writtenOutHeight(_ name: String) -> Int {
        if heights == nil { heights = computeHeights() }
        return heights?[name] ?? 1
    }

    private func computeHeights() -> [String: Int] {
        var parsed: [String: (height: Int, uses: [(name: String, level: Int)])] = [:]
        for (name, entry) in entries {
            // A segment that does not parse is reported when it is compiled.
            if let e = try? Parser.parse(entry.source.text) {
                parsed[name] = (e.height, uses(in: e).map { ($0.name, $0.level) })
            } else {
                parsed[name] = (1, [])
            }
        }
        var heights: [String: Int] = [:]
        var open: Set<String> = []
        for start in entries.keys.sorted() where heights[start] == nil {
            var stack: [(name: String, next: Int)] = [(start, 0)]
            open.insert(start)
            while let top = stack.last {
                let info = parsed[top.name]!
                if top.next < info.uses.count {
                    stack[stack.count - 1].next += 1
                    let u = info.uses[top.next]
                    if heights[u.name] == nil && !open.contains(u.name) {
                        open.insert(u.name)
                        stack.append((u.name, 0))
                    }
                    continue
                }
                var h = info.height
                for u in info.uses { h = max(h, u.level + (heights[u.name] ?? 1)) }
                heights[top.name] = h
                open.remove(top.name)
                stack.removeLast()
            }
        }
        return heights
    }

    /// Whether `e` nests deeper than ``Parser/maxDepth`` with the segments it uses written out, and the problems to
    /// report: one for each use past which it does. A use of a segment too deep on its own is reported where that
    /// segment is defined; in another segment, it is not reported again (a chain of segments past the limit is one
    /// error), elsewhere it is named.
    func depthProblems(in e: Expr, inSegment: Bool) -> (tooDeep: Bool, problems: [ExprProblem]) {
        var tooDeep = false
        var problems: [ExprProblem] = []
        for u in uses(in: e) {
            let h = writtenOutHeight(u.name)
            guard u.level + h > Parser.maxDepth else { continue }
            tooDeep = true
            if h <= Parser.maxDepth {
                problems.append(
                    ExprProblem(
                        "with segment '\(u.name)' written out, this condition nests \(u.level + h) levels deep; "
                            + "the limit is \(Parser.maxDepth) (each use of a segment is a level)", u.span,
                        id: .limitExceeded,
                        suggestion: "write part of the condition out, or use fewer segments that use segments"))
            } else if !inSegment {
                problems.append(
                    ExprProblem(
                        "segment '\(u.name)' nests more than \(Parser.maxDepth) levels deep with the segments it uses "
                            + "written out (reported where they pass the limit)", u.span, id: .limitExceeded))
            }
        }
        return (tooDeep, problems)
    }

    func reference(_ name: String, span: SourceSpan, tracing: Bool) throws(ExprProblem) -> (Eval, CELType) {
        used.insert(name)
        if let c = entries[name]?.compiled[tracing] { return c }
        guard !compiling.contains(name) else {
            throw ExprProblem(
                "segment '\(name)' refers to itself (through \(compiling.sorted().joined(separator: ", ")))", span,
                id: .segmentCycle)
        }
        // Segments too deep are refused before they are compiled (``depthProblems(in:inSegment:)``), so compiling never nests
        // deeper than this; the check keeps that true whatever happens above.
        guard compiling.count < Parser.maxDepth else {
            throw ExprProblem(
                "segments nest more than \(Parser.maxDepth) deep: " + (compiling + [name]).joined(separator: " → "), span,
                id: .limitExceeded)
        }
        guard let entry = entries[name], let compile, let symbols else {
            throw ExprProblem("unknown segment '\(name)'", span, id: .unknownIdentifier)
        }
        compiling.append(name)
        let compiled = compile(entry.source, tracing)
        compiling.removeLast()
        guard let compiled else {
            let failed: (Eval, CELType) = ({ _ in .error(EvalError("segment '\(name)' failed to compile")) }, .error)
            entries[name]?.compiled[tracing] = failed
            return failed
        }
        let result: (Eval, CELType)
        if let c = compiled.constant {
            result = ({ _ in c }, compiled.type)
        } else if tracing {
            // A traced evaluation records what is inside the segment the first time it is used, and reuses its value
            // after that (a segment used twice by a segment used twice… would otherwise be evaluated exponentially
            // often).
            let key = ObjectIdentifier(compiled)
            result = (
                { s in
                    guard let trace = s.trace else { return compiled.evaluate(s) }
                    if let v = trace.segments[key] { return v }
                    let v = compiled.evaluate(s)
                    trace.segments[key] = v
                    return v
                }, compiled.type
            )
        } else {
            let slot = symbols.memoSlot()
            result = ({ s in s.memoized(slot) { compiled.evaluate($0) } }, compiled.type)
        }
        entries[name]?.compiled[tracing] = result
        return result
    }
}
