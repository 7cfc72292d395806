/// Turns parsed files into a ``CompiledRuleSet``: resolves names to slots, type-checks and compiles every
/// expression, merges defaults, indexes rules by event. Reports every problem with its position.
///
/// ```swift
/// let (ruleSet, diagnostics) = RuleSetCompiler.compile(parsedFiles)
/// ```
public enum RuleSetCompiler {
    /// `maxSeries` is lowered only by tests of that bound.
    public static func compile(_ files: [ParsedFile], maxSeries: Int = ValueLimits.maxSeries) -> (CompiledRuleSet?, [Diagnostic])
    {
        var b = Builder(maxSeries: maxSeries)
        let set = b.build(files)
        return (b.diagnostics.hasErrors ? nil : set, b.diagnostics.items)
    }
}

private struct Builder {
    /// At most this many history series (``ValueLimits/maxSeries``).
    let maxSeries: Int
    var diagnostics = DiagnosticBag()
    let symbols = SymbolTable()
    /// Every flow of every file, by id (so that any file's rules may move users through it).
    var flowSpecs: [String: FlowSpec] = [:]
    var flows: [CompiledFlow] = []

    mutating func build(_ files: [ParsedFile]) -> CompiledRuleSet {
        var settings = EngineSettings()
        var settingsSeen: SettingsSpec?
        var ruleFiles: [RuleFileSpec] = []
        var plans: [TrackingPlanSpec] = []
        for f in files {
            switch f {
            case .rules(let r): ruleFiles.append(r)
            case .trackingPlan(let p): plans.append(p)
            case .tests: break  // run by `beckon test`, not part of the rules
            case .settings(let s):
                if let first = settingsSeen {
                    diagnostics.error(
                        .duplicateSettings, "settings are already defined in \(first.path)", at: s.name.location,
                        suggestion: "keep one settings file per set of loaded rules")
                    continue
                }
                settingsSeen = s
            }
        }
        if !plans.isEmpty { symbols.plan = planIndex(plans) }
        // Flows are known to every file before any rule is compiled.
        for file in ruleFiles {
            for f in file.flows {
                if flowSpecs[f.id.value] != nil {
                    diagnostics.error(.duplicateName, "flow '\(f.id.value)' is defined twice", at: f.id.location)
                    continue
                }
                flowSpecs[f.id.value] = f
                symbols.plan?.flowAttributes.insert(f.id.value)
            }
            // A conversion-value table keeps the user's value in an attribute of its name, as a flow keeps its state.
            for c in file.conversionValues {
                symbols.plan?.flowAttributes.insert(c.id.value)
                symbols.plan?.conversionAttributes.insert(c.id.value)
            }
        }
        if let s = settingsSeen {
            for e in s.sessionStartEvents { checkEvent(e) }
            settings.sessionStartEvents = Set(s.sessionStartEvents.map { symbols.event($0.value) })
            if let t = s.sessionTimeoutMs { settings.sessionTimeoutMs = t }
            if let d = s.dedupWindowMs { settings.dedupWindowMs = d }
            if let d = s.clockSkewMs { settings.clockSkewMs = d }
            settings.destinations = s.destinations
            if !s.globalLimits.isEmpty {
                let g = CompiledLimits(s.globalLimits)
                if g.needsZone { _ = symbols.zoneSlots }
                settings.globalLimits = g
                if !g.rolling.isEmpty {
                    settings.globalSeries = symbols.upsertSeries(
                        "global", SeriesSpec(source: .globalMessages, retentionMs: g.retentionMs, keepsLifetime: false))
                }
            }
            for (channel, spec) in s.channelLimits {
                let l = CompiledLimits(spec)
                if l.needsZone { _ = symbols.zoneSlots }
                let retention = l.perSession == nil ? l.retentionMs : max(l.retentionMs, ChannelLimit.sessionSpanMs)
                let series = symbols.upsertSeries(
                    "channel:" + channel.value.rawValue,
                    SeriesSpec(source: .channel(channel.value), retentionMs: retention, keepsLifetime: l.perUser != nil))
                settings.channelLimits.append(ChannelLimit(channel: channel.value, limits: l, series: series))
            }
        }

        var units: [CompiledUnit] = []
        var rules: [CompiledRule] = []
        var unitNames: [String: SourceLocation] = [:]
        for file in ruleFiles {
            if let prev = unitNames[file.name.value] {
                diagnostics.error(
                    .duplicateName, "\(file.kind.rawValue) '\(file.name.value)' is already defined at \(prev)",
                    at: file.name.location, suggestion: "give each campaign and rule set its own name")
                continue
            }
            unitNames[file.name.value] = file.name.location
            let before = symbols.series.count
            compileFile(file, unitIndex: Int32(units.count), units: &units, rules: &rules)
            if before <= maxSeries && symbols.series.count > maxSeries {
                diagnostics.error(
                    .limitExceeded,
                    "the rule sets keep more than \(maxSeries) history series (the limit) from this file on: "
                        + "each event name with each property filter that a history function or a `reprompt` reads, "
                        + "and each rule with a rolling limit, is one series",
                    at: file.name.location, suggestion: "count fewer distinct filters, or split the rule sets")
            }
        }

        var byAttribute = Array(repeating: [Int32](), count: symbols.attributeNames.count)
        for r in rules where r.enabled {
            if case .change(let slot, _, _) = r.trigger {
                if slot >= byAttribute.count {
                    byAttribute.append(contentsOf: repeatElement([], count: slot - byAttribute.count + 1))
                }
                byAttribute[slot].append(r.index)
            }
        }
        if byAttribute.count < symbols.attributeNames.count {
            byAttribute.append(contentsOf: repeatElement([], count: symbols.attributeNames.count - byAttribute.count))
        }
        // The warnings are computed alongside errors, for every rule that compiled (a rule with errors of its own
        // has none: what it would do is not known), so that one run reports every problem.
        var analyzer = RuleAnalyzer(
            files: ruleFiles, units: units, rules: rules, eventNames: symbols.eventNames, plan: symbols.plan,
            settings: settingsSeen)
        analyzer.run()
        diagnostics.append(contentsOf: analyzer.warnings)
        return CompiledRuleSet(
            units: units, rules: rules, eventNames: symbols.eventNames, propertyNames: symbols.propertyNames,
            contextNames: symbols.contextNames, attributeNames: symbols.attributeNames,
            rulesByAttribute: byAttribute, series: symbols.series, memoSlots: symbols.memoSlots,
            settings: settings, needsAllProperties: symbols.needsAllProperties, flows: flows,
            plan: symbols.plan.map { planNames($0) })
    }

    /// The plans' names, and the types of what an event brings that the rules read (``PlanNames/conform``).
    func planNames(_ index: PlanIndex) -> PlanNames {
        var names = PlanNames(
            events: Set(index.events.keys), screens: index.screens, traits: Set(index.traits.keys).union(index.flowAttributes))
        for (event, fields) in index.events {
            let typed = fields.compactMap { name, field in
                symbols.propertySlots[name].map { (slot: $0, name: name, type: field.type) }
            }
            if !typed.isEmpty { names.propertyTypes[event] = typed.sorted { $0.slot < $1.slot } }
        }
        for (name, field) in index.traits where field.type != .any { names.traitTypes[name] = field.type }
        return names
    }

    // MARK: Tracking plans

    func planIndex(_ plans: [TrackingPlanSpec]) -> PlanIndex {
        let index = PlanIndex()
        for p in plans {
            for e in p.events {
                var props = index.events[e.name.value] ?? [:]
                for f in e.properties { props[f.name.value] = f }
                index.events[e.name.value] = props
            }
            for sc in p.screens { index.screens.insert(sc.value) }
            for t in p.traits { index.traits[t.name.value] = t }
        }
        return index
    }

    /// An event named in YAML (a trigger, an `unless`, a goal…) must be in the plan, when one is loaded.
    mutating func checkEvent(_ name: Located<String>, screen: Bool = false) {
        guard let plan = symbols.plan else { return }
        let key = screen ? "screen:" + name.value : name.value
        guard !plan.hasEvent(key) else { return }
        let candidates = screen ? Array(plan.screens) : Array(plan.events.keys)
        diagnostics.error(
            .unknownEvent,
            screen
                ? "the tracking plan has no screen '\(name.value)'" + PlanIndex.hint(name.value, candidates)
                : plan.unknownEvent(name.value), at: name.location,
            suggestion: Suggest.nearest(name.value, in: candidates).map { "replace it with '\($0)'" }
                ?? "add it to the tracking plan's `events`, or fix the name")
    }

    /// An attribute named in YAML (`on_change`, `set`, `unset`) must be a trait of the plan, when one is loaded.
    mutating func checkTrait(_ name: Located<String>) {
        guard let plan = symbols.plan, !plan.hasTrait(name.value) else { return }
        diagnostics.error(
            .unknownTrait, plan.unknownTrait(name.value), at: name.location,
            suggestion: Suggest.nearest(name.value, in: Array(plan.traits.keys)).map { "replace it with '\($0)'" }
                ?? "add it to the tracking plan's `traits`")
    }

    // MARK: Expressions

    /// Compiles an expression, turning its problems into diagnostics at their places in the file.
    mutating func expression(_ src: ExpressionSource, _ env: RuleEnvironment) -> CompiledExpr? {
        let (result, problems) = Builder.compile(src, env.segments, ExprCompiler(environment: env, tracing: env.tracing))
        for p in problems where !env.tracing {
            diagnostics.append(
                .error(
                    p.id, p.message, at: src.location(of: p.span),
                    suggestion: Builder.help(p, in: src.text)))
        }
        return result
    }

    /// Parses, checks and compiles an expression of a rule file: a condition too deep with its segments written out
    /// is refused before it is compiled (compiling it would recurse through them), and `timestamp("…")` of a literal
    /// that is not a timestamp, which fails on every evaluation, is an error at the literal (CEL reports it only when
    /// it is evaluated).
    static func compile(
        _ src: ExpressionSource, _ segments: SegmentTable, _ c: ExprCompiler, inSegment: Bool = false
    ) -> (CompiledExpr?, [ExprProblem]) {
        let e: Expr
        do { e = try Parser.parse(src.text) } catch { return (nil, [error]) }
        let deep = segments.depthProblems(in: e, inSegment: inSegment)
        if deep.tooDeep { return (nil, deep.problems) }
        let result = c.compile(e, source: src.text)
        return (result, c.problems + timestampLiterals(e))
    }

    static func timestampLiterals(_ e: Expr) -> [ExprProblem] {
        var bad: [(String, SourceSpan)] = []
        e.walk { node in
            if case .call("timestamp", nil, let args) = node.node, args.count == 1, case .literal(.string(let t)) = args[0].node,
                Timestamp.parse(t) == nil
            {
                bad.append((t, args[0].span))
            }
        }
        return bad.map { t, span in
            ExprProblem(
                "timestamp(\"\(t)\") always fails: " + (Timestamp.offsetProblem(t) ?? "'\(t)' is not an RFC 3339 timestamp"),
                span, id: .invalidTimestamp, suggestion: "write it like 2026-01-01T09:00:00+01:00 or 2026-01-01T08:00:00Z")
        }
    }

    /// A replacement token becomes the whole corrected expression: "did you mean `user.plan == "pro"`?".
    static func help(_ p: ExprProblem, in text: String) -> String? {
        guard let s = p.suggestion else { return nil }
        let scalars = Array(text.unicodeScalars)
        guard p.span.start >= 0, p.span.end <= scalars.count, p.span.start < p.span.end, !s.contains(" ") || s.first == "\""
        else { return s }
        var (start, end) = (p.span.start, p.span.end)
        func isName(_ c: Unicode.Scalar) -> Bool { c == "_" || c.properties.isAlphabetic || ("0"..."9").contains(c) }
        func isOperator(_ c: Unicode.Scalar) -> Bool { "=!<>&|".unicodeScalars.contains(c) }
        if s.unicodeScalars.allSatisfy(isName) {
            // A name replaces the name in the span it corrects (the nearest), not the span: in `event.nam` only `nam`,
            // in `url.startswth("x")` only `startswth`. (Names inside quotes are text, not names.)
            var names: [Range<Int>] = []
            var k = start
            var quote: Unicode.Scalar?
            while k < end {
                let c = scalars[k]
                if let q = quote {
                    if c == "\\" { k += 1 } else if c == q { quote = nil }
                    k += 1
                } else if c == "\"" || c == "'" {
                    quote = c
                    k += 1
                } else if isName(c) {
                    let from = k
                    while k < end && isName(scalars[k]) { k += 1 }
                    names.append(from..<k)
                } else {
                    k += 1
                }
            }
            if let nearest = names.map({ ($0, Suggest.distance(String(String.UnicodeScalarView(scalars[$0])), s)) })
                .min(by: { $0.1 < $1.1 })?.0
            {
                (start, end) = (nearest.lowerBound, nearest.upperBound)
            }
        } else if s.unicodeScalars.allSatisfy(isOperator) {
            // An operator replaces the whole run of operator characters it stands in (`===` becomes `==`).
            while start > 0 && isOperator(scalars[start - 1]) { start -= 1 }
            while end < scalars.count && isOperator(scalars[end]) { end += 1 }
        }
        var fixed = String.UnicodeScalarView(scalars[..<start])
        fixed.append(contentsOf: s.unicodeScalars)
        fixed.append(contentsOf: scalars[end...])
        return "did you mean `\(String(fixed))`?"
    }

    /// A condition: must be bool (or dyn).
    mutating func condition(_ src: ExpressionSource?, _ key: String, _ env: RuleEnvironment) -> CompiledExpr? {
        guard let src, let e = expression(src, env) else { return nil }
        switch e.type {
        case .bool, .dyn, .error: break
        default:
            if !env.tracing {
                diagnostics.error(
                    .expressionType, "'\(key)' must be a condition (true or false), but this is a \(e.type)",
                    at: src.location, suggestion: "compare it with something, like `\(src.text) > 0`")
            }
            return nil
        }
        if let c = e.constant, !env.tracing {
            if case .error(let err) = c {
                diagnostics.error(.expressionType, "'\(key)' always fails: \(err.message)", at: src.location)
            }
        }
        return e
    }

    func environment(
        _ segments: SegmentTable, _ place: ExpressionPlace, change: Bool = false, tracing: Bool = false, events: [String]? = nil
    ) -> RuleEnvironment {
        RuleEnvironment(
            symbols: symbols, segments: segments, place: place, hasChange: change, tracing: tracing, triggerEvents: events)
    }

    // MARK: Files

    mutating func compileFile(_ file: RuleFileSpec, unitIndex: Int32, units: inout [CompiledUnit], rules: inout [CompiledRule]) {
        let segments = SegmentTable()
        segments.symbols = symbols
        for (name, src) in file.segments {
            if ["event", "user", "context", "now", "change", "inbox"].contains(name.value) {
                diagnostics.error(.duplicateName, "'\(name.value)' is a built-in name and cannot be a segment", at: name.location)
                continue
            }
            segments.add(name.value, src)
        }
        // Segment problems are reported once, from the untraced compile.
        var segmentDiagnostics: [Diagnostic] = []
        let symbols = self.symbols
        segments.compile = { [segments] src, tracing in
            let env = RuleEnvironment(symbols: symbols, segments: segments, place: .segment, hasChange: false, tracing: tracing)
            let (r, problems) = Builder.compile(
                src, segments, ExprCompiler(environment: env, tracing: tracing), inSegment: true)
            if !tracing {
                for p in problems {
                    segmentDiagnostics.append(
                        .error(
                            p.id, p.message, at: src.location(of: p.span),
                            suggestion: Builder.help(p, in: src.text)))
                }
            }
            return r
        }
        // Compile every segment, used or not, so that its problems are reported.
        for (name, src) in file.segments where segments.has(name.value) {
            do { _ = try segments.reference(name.value, span: SourceSpan(0, 0), tracing: false) } catch {
                diagnostics.error(error.id, error.message, at: src.location(of: error.span))
            }
        }

        if let s = file.start, let e = file.end, e.value <= s.value {
            diagnostics.error(
                .invalidSchedule, "'end' (\(e.value)) is not after 'start' (\(s.value)): no rule of this file can ever fire",
                at: e.location)
        }
        let audience = condition(file.audience, "audience", environment(segments, .audience))
        let audienceTraced = condition(file.audience, "audience", environment(segments, .audience, tracing: true))
        for f in file.flows where flowSpecs[f.id.value]?.location == f.location {
            flows.append(compileFlow(f, segments: segments))
        }
        if file.timezone?.value == .user { _ = symbols.zoneSlots }
        let firstRule = rules.count
        for spec in file.rules {
            if let r = compileRule(spec, file: file, unitIndex: unitIndex, index: Int32(rules.count), segments: segments) {
                rules.append(r)
            }
        }
        let goals = file.goals.map { compileGoal($0, file: file, rules: rules[firstRule...], segments: segments) }
        units.append(
            CompiledUnit(
                name: file.name.value, kind: file.kind, path: file.path, enabled: file.enabled,
                start: file.start?.value.milliseconds, end: file.end?.value.milliseconds,
                audience: audience, audienceTraced: audienceTraced, audienceMemo: symbols.memoSlot(),
                userLocalWindow: file.timezone?.value == .user, goals: goals, holdout: file.holdout?.value ?? 0))
        diagnostics.append(contentsOf: segmentDiagnostics)
    }

    mutating func compileGoal(
        _ g: GoalSpec, file: RuleFileSpec, rules: ArraySlice<CompiledRule>, segments: SegmentTable
    ) -> CompiledGoal {
        checkEvent(g.event)
        var exposure: Int32?
        if let e = g.exposure {
            if let r = rules.first(where: { $0.id == e.value }) {
                exposure = r.index
            } else if !file.rules.contains(where: { $0.id.value == e.value }) {
                // (A rule the file has that did not compile has its own error: one mistake, one error.)
                diagnostics.error(
                    .unknownIdentifier,
                    "goal '\(g.id.value)' is exposed by rule '\(e.value)', which this file does not have"
                        + PlanIndex.hint(e.value, rules.map(\.id)), at: e.location)
            }
        }
        let id = symbols.event(BoundEvent.internKey(kind: .track, name: g.event.value))
        var goal = CompiledGoal(
            id: g.id.value, description: g.description, event: g.event.value, eventID: id,
            whereExpr: condition(g.whereClause, "where", environment(segments, .whereClause, events: [g.event.value])),
            withinMs: g.withinMs.value, exposureRule: exposure)
        if let v = g.value {
            if let plan = symbols.plan, let props = plan.events[g.event.value], props[v.value] == nil {
                diagnostics.error(
                    .unknownProperty,
                    "the tracking plan's '\(g.event.value)' has no property '\(v.value)'"
                        + PlanIndex.hint(v.value, Array(props.keys)), at: v.location)
            }
            goal.valueProperty = v.value
            goal.valueSlot = symbols.property(v.value)
        }
        return goal
    }

    mutating func compileFlow(_ f: FlowSpec, segments: SegmentTable) -> CompiledFlow {
        let env = environment(segments, .action)
        var steps: [CompiledFlowStep] = []
        let ids = f.steps.map(\.id.value)
        var barrier = false
        for st in f.steps {
            if !st.back { barrier = true }
            steps.append(
                CompiledFlowStep(
                    id: st.id.value, skipIf: condition(st.skipIf, "skip_if", environment(segments, .ifClause)),
                    noBackFromHere: barrier, params: values(st.params, env)))
        }
        var migrations: [Int: (table: [String: String], otherwise: String?)] = [:]
        for m in f.migrations {
            for (_, new) in m.steps where !ids.contains(new.value) {
                diagnostics.error(
                    .unknownFlow, "flow '\(f.id.value)' has no step '\(new.value)'" + PlanIndex.hint(new.value, ids),
                    at: new.location)
            }
            if let o = m.otherwise, !ids.contains(o.value) {
                diagnostics.error(
                    .unknownFlow, "flow '\(f.id.value)' has no step '\(o.value)'" + PlanIndex.hint(o.value, ids), at: o.location)
            }
            migrations[m.from.value] = (
                Dictionary(m.steps.map { ($0.old, $0.new.value) }, uniquingKeysWith: { a, _ in a }), m.otherwise?.value
            )
        }
        return CompiledFlow(
            id: f.id.value, version: f.version.value, stateSlot: symbols.attribute(f.id.value), params: values(f.params, env),
            steps: steps, finish: f.finish?.value, migrations: migrations)
    }

    mutating func compileRule(
        _ spec: RuleSpec, file: RuleFileSpec, unitIndex: Int32, index: Int32, segments: SegmentTable
    ) -> CompiledRule? {
        let before = diagnostics.errorCount
        var trigger: CompiledTrigger
        var triggerDescription: String
        var isChange = false
        var triggerEvents: [String]?
        switch spec.trigger {
        case .events(let names):
            for n in names { checkEvent(n) }
            triggerEvents = names.map(\.value)
            trigger = .events(names.map { symbols.event(BoundEvent.internKey(kind: .track, name: $0.value)) })
            triggerDescription = names.map(\.value).joined(separator: " | ")
        case .screens(let names):
            for n in names { checkEvent(n, screen: true) }
            trigger = .events(names.map { symbols.event(BoundEvent.internKey(kind: .screen, name: $0.value)) })
            triggerDescription = names.map { "screen:" + $0.value }.joined(separator: " | ")
        case .change(let attr, let from, let to):
            isChange = true
            if let bad = FileParser.reservedAttribute(attr.value) {
                diagnostics.error(.invalidTrigger, bad, at: attr.location)
            }
            checkTrait(attr)
            trigger = .change(attributeSlot: symbols.attribute(attr.value), from: from?.map(\.value), to: to?.map(\.value))
            triggerDescription = "change:" + attr.value
        case .sequence(let steps, let within, let correlate):
            for st in steps { checkEvent(st.event) }
            triggerEvents = steps.last.map { [$0.event.value] }
            let compiled = steps.map { step in
                CompiledStep(
                    eventID: symbols.event(BoundEvent.internKey(kind: .track, name: step.event.value)),
                    whereExpr: condition(
                        step.whereClause, "where", environment(segments, .whereClause, events: [step.event.value])))
            }
            trigger = .sequence(
                CompiledSequence(steps: compiled, withinMs: within, correlateSlot: correlate.map { symbols.property($0.value) }))
            triggerDescription = "sequence:" + steps.map(\.event.value).joined(separator: " → ")
        case .inactive(let d):
            trigger = .inactive(ms: d.value)
            triggerDescription = "inactive:" + DSLDuration.format(d.value)
        case .schedule(let sched):
            trigger = .schedule(sched.value)
            triggerDescription = "schedule:" + sched.value.description
            _ = symbols.zoneSlots
        }
        let ev = triggerEvents
        let whereExpr = condition(spec.whereClause, "where", environment(segments, .whereClause, change: isChange, events: ev))
        let whereTraced = condition(
            spec.whereClause, "where", environment(segments, .whereClause, change: isChange, tracing: true, events: ev))
        let ifExpr = condition(spec.ifClause, "if", environment(segments, .ifClause, change: isChange, events: ev))
        let ifTraced = condition(
            spec.ifClause, "if", environment(segments, .ifClause, change: isChange, tracing: true, events: ev))
        var limitSpec = spec.limits.merged(over: file.defaultLimits)
        if let r = spec.reprompt, let times = r.times { limitSpec.perUser = Located(times, r.location) }
        if let r = spec.reprompt { checkEvent(r.after) }
        let limits = CompiledLimits(limitSpec)
        if limits.needsZone { _ = symbols.zoneSlots }
        if let perUser = limitSpec.perUser, let n = limitSpec.onOccurrence, perUser.value < 1 {
            diagnostics.error(.invalidLimit, "on_occurrence \(n.value) with per_user 0 never fires", at: perUser.location)
        }

        var actions: [ActionTemplate] = []
        var surface: String?
        let actionEnv = environment(segments, .action, change: isChange, events: ev)
        for a in spec.actions {
            if case .message(let m) = a.value {
                if surface != nil {
                    diagnostics.error(
                        .invalidAction, "a rule shows at most one message; split this one into two rules", at: a.location)
                }
                surface = m.surface
            }
            actions.append(action(a.value, actionEnv))
        }
        let variants = compileVariants(spec, file: file, actions: actions, surface: surface, env: actionEnv)
        var fireSeries: Int32 = -1
        if !limits.rolling.isEmpty {
            fireSeries = symbols.upsertSeries(
                "fires\(index)", SeriesSpec(source: .ruleFires(index), retentionMs: limits.retentionMs, keepsLifetime: false))
        }
        let timing = compileTiming(spec, file: file, segments: segments, isChange: isChange)
        guard diagnostics.errorCount == before else { return nil }
        return CompiledRule(
            index: index, unit: unitIndex, unitName: file.name.value, unitKind: file.kind, id: spec.id.value,
            enabled: spec.enabled && file.enabled, trigger: trigger, triggerDescription: triggerDescription,
            whereExpr: whereExpr, whereTraced: whereTraced, ifExpr: ifExpr, ifTraced: ifTraced, limits: limits,
            priority: spec.priority?.value ?? file.defaultPriority ?? 0, surface: surface,
            surfaceID: surface.map { symbols.surface($0) } ?? -1, actions: actions,
            fireSeries: fireSeries, location: spec.location, timing: timing, reprompt: reprompt(spec.reprompt),
            variants: variants, transactional: spec.transactional)
    }

    /// The rule's A/B test: its own `variants:` (each with its own `do` or the rule's), or its file's (the rule's
    /// actions in every variant, the user's variant shared by the file's rules).
    mutating func compileVariants(
        _ spec: RuleSpec, file: RuleFileSpec, actions: [ActionTemplate], surface: String?, env: RuleEnvironment
    ) -> CompiledVariants? {
        if !spec.variants.isEmpty && !file.variants.isEmpty {
            diagnostics.error(
                .invalidValue, "this \(file.kind.rawValue) has variants already: a rule of it cannot have its own",
                at: spec.variants[0].location, suggestion: "test the rule in a file of its own, or remove one of the tests")
            return nil
        }
        let specs = spec.variants.isEmpty ? file.variants : spec.variants
        guard !specs.isEmpty else { return nil }
        var lists: [[ActionTemplate]] = []
        for v in specs {
            guard let own = v.actions else {
                lists.append(actions)
                continue
            }
            for a in own {
                if case .message(let m) = a.value, m.surface != surface {
                    diagnostics.error(
                        .invalidAction,
                        "variant '\(v.id.value)' shows its message on '\(m.surface)', the rule on "
                            + (surface.map { "'\($0)'" } ?? "no surface") + ": a test changes what shows, not where",
                        at: a.location)
                }
            }
            lists.append(own.map { action($0.value, env) })
        }
        let origins = zip(specs, lists).map {
            ActionOrigin(unit: file.name.value, unitKind: file.kind, rule: spec.id.value, actions: $1, variant: $0.id.value)
        }
        return CompiledVariants(
            ids: specs.map(\.id.value), weights: specs.map(\.weight.value), controlIndex: specs.firstIndex(where: \.control),
            salt: spec.variants.isEmpty ? file.name.value : file.name.value + "/" + spec.id.value, actions: lists,
            origins: origins)
    }

    mutating func compileTiming(_ spec: RuleSpec, file: RuleFileSpec, segments: SegmentTable, isChange: Bool) -> CompiledTiming {
        var t = CompiledTiming()
        t.waitMs = spec.waitMs?.value
        t.at = spec.at?.value
        t.retrigger = spec.retrigger
        // Timed rules are decided when their time comes: conditions then, on the user's state then.
        switch spec.trigger {
        case .inactive:
            t.recheck = true
            t.retrigger = .restart
        case .schedule:
            // (`add`: a run held by quiet hours and the next run may both be pending.)
            t.recheck = true
            t.retrigger = .add
        default:
            t.recheck = spec.recheck
        }
        t.quietHours = spec.quietHoursOff ? nil : spec.quietHours ?? file.defaultQuietHours
        t.rate = spec.rate?.value
        if t.at != nil || t.quietHours != nil { _ = symbols.zoneSlots }
        for u in spec.unless {
            checkEvent(u.event)
            let id = symbols.event(BoundEvent.internKey(kind: .track, name: u.event.value))
            t.unless.append(
                CompiledStep(
                    eventID: id,
                    whereExpr: condition(u.whereClause, "where", environment(segments, .whereClause, events: [u.event.value]))))
        }
        return t
    }

    /// `reprompt` becomes two history series: every `after` event, and those whose properties match `when`.
    mutating func reprompt(_ r: RepromptSpec?) -> CompiledReprompt? {
        guard let r else { return nil }
        let id = symbols.event(BoundEvent.internKey(kind: .track, name: r.after.value))
        let all = symbols.eventSeries(id, filter: [], retention: 0, lifetime: true)
        let matching = symbols.eventSeries(
            id, filter: r.when.map { (symbols.property($0.key), $0.value) }, retention: 0, lifetime: true)
        return CompiledReprompt(
            after: r.after.value, when: r.when.map { "\($0.key) = \(JSONWriter.encode($0.value))" }.joined(separator: ", "),
            allSeries: all, matchingSeries: matching, waitMs: r.waitMs)
    }

    // MARK: Actions

    mutating func value(_ v: ValueSource, _ env: RuleEnvironment) -> CompiledValue {
        switch v {
        case .literal(let x): return .constant(x)
        case .template(let t): return template(t, env)
        case .list(let xs): return .list(xs.map { value($0, env) })
        case .map(let pairs): return .map(pairs.map { ($0.key, value($0.value, env)) })
        }
    }

    /// A whole-scalar `${expr}` keeps its type; text with expressions in it becomes a string.
    mutating func template(_ t: TemplateSource, _ env: RuleEnvironment) -> CompiledValue {
        if t.parts.count == 1, case .expression(let src) = t.parts[0] {
            guard let e = expression(src, env) else { return .constant(.null) }
            if let c = e.constant { return .constant(c) }
            return .expr(e)
        }
        var pieces: [CompiledValue.Piece] = []
        for p in t.parts {
            switch p {
            case .text(let s): pieces.append(.text(s))
            case .expression(let src):
                if let e = expression(src, env) { pieces.append(.expr(e)) }
            }
        }
        if pieces.allSatisfy({ if case .text = $0 { true } else { false } }) {
            return .constant(.string(pieces.map { if case .text(let s) = $0 { s } else { "" } }.joined()))
        }
        return .text(pieces)
    }

    mutating func values(
        _ pairs: [(key: String, value: ValueSource)], _ env: RuleEnvironment
    ) -> [(key: String, value: CompiledValue)] {
        pairs.map { ($0.key, value($0.value, env)) }
    }

    mutating func action(_ a: ActionSpec, _ env: RuleEnvironment) -> ActionTemplate {
        switch a {
        case .message(let m):
            return .message(
                surface: m.surface, template: m.template,
                title: m.title.map { template($0, env) }, body: m.body.map { template($0, env) },
                image: m.image.map { template($0, env) },
                buttons: m.buttons.map {
                    ActionTemplate.Button(
                        label: template($0.label, env), deepLink: $0.deepLink.map { template($0, env) },
                        action: $0.action.map { template($0, env) })
                },
                data: values(m.data, env))
        case .screen(let id, let params): return .screen(id: template(id, env), params: values(params, env))
        case .deepLink(let url): return .deepLink(template(url, env))
        case .notify(let n):
            return .notify(
                id: n.id.map { template($0, env) }, sender: n.sender.map { template($0, env) },
                message: template(n.message, env), link: n.link.map { template($0, env) }, data: values(n.data, env))
        case .push(let p):
            return .push(
                title: p.title.map { template($0, env) }, body: template(p.body, env),
                deepLink: p.deepLink.map { template($0, env) }, image: p.image.map { template($0, env) },
                data: values(p.data, env), to: p.to.map { template($0, env) })
        case .email(let e):
            return .email(
                template: template(e.template, env), to: template(e.to, env), subject: e.subject.map { template($0, env) },
                data: values(e.data, env))
        case .markRead(let id): return .markRead(template(id, env))
        case .prompt(let p): return .prompt(p)
        case .emit(let event, let payload): return .emit(event: event, payload: values(payload, env))
        case .set(let attrs):
            for a in attrs { checkTrait(a.attribute) }
            return .set(attrs.map { (symbols.attribute($0.attribute.value), $0.attribute.value, value($0.value, env)) })
        case .unset(let names):
            for n in names { checkTrait(n) }
            return .unset(names.map { (symbols.attribute($0.value), $0.value) })
        case .flow(let f):
            if let id = f.flow.literal {
                if let spec = flowSpecs[id] {
                    if let step = f.step?.literal, !spec.steps.contains(where: { $0.id.value == step }) {
                        let ids = spec.steps.map(\.id.value)
                        diagnostics.error(
                            .unknownFlow, "flow '\(id)' has no step '\(step)'" + PlanIndex.hint(step, ids), at: f.step!.location)
                    }
                } else {
                    diagnostics.error(
                        .unknownFlow, "no flow named '\(id)' is loaded" + PlanIndex.hint(id, Array(flowSpecs.keys)),
                        at: f.flow.location,
                        suggestion: "define it under `flows:` in a rule file, or fix the name")
                }
            }
            return .flow(verb: f.verb, flow: template(f.flow, env), step: f.step.map { template($0, env) })
        }
    }
}
