/// Static analysis of rules that load: parts that can never do what they say. Each finding is a warning with an id
/// from ``DiagnosticID/analysis``; a rule (or its whole file) silences one with `silence: [id]`.
///
/// - `never_true`: the conditions a rule must pass (its file's `audience`, `where`, `if`, with segments expanded)
///   contradict each other or the tracking plan, or compare constants that are false.
/// - `shadowed_rule`: a rule with a higher priority (or the same, loaded first) shows a message on the same surface
///   on every event that triggers this one, and nothing can stop it, so this one always loses arbitration.
/// - `limit_never_binds`: a limit made moot by another (`on_occurrence` fires once per user; a cooldown allows
///   fewer fires than a window's cap).
/// - `limit_always_binds`: a cooldown as long as the file's life, which blocks every fire after the first, so that a
///   count above 1 is never reached.
/// - `deep_link_scheme`: a deep link whose scheme is not in the settings' `deep_link_schemes`.
/// - `delay_outlives_campaign`: a rule's `wait` is as long as its file's whole life, so every delayed action comes
///   due after the end and is dropped.
/// - `channel_limit_never_binds`: a cap in the settings' `channel_limits` that no rule can reach: no enabled rule
///   sends on the channel, or `global_limit` (which counts every channel) blocks first in a window that always
///   contains the channel's.
/// - `schedule_outside_campaign`: a scheduled rule whose runs all fall outside its file's `start`–`end` (a one-off
///   before the start or after the end; a weekly run on a day the file's span does not reach).
/// - `variant_weights`: a file's or a rule's variants whose weights do not add up to 100 (they are used as shares of
///   their sum, which is rarely what was meant).
struct RuleAnalyzer {
    let files: [RuleFileSpec]
    let ruleSet: (units: [CompiledUnit], rules: [CompiledRule])
    let plan: PlanIndex?
    let settings: SettingsSpec?
    var deepLinkSchemes: [Located<String>]? { settings?.deepLinkSchemes }
    /// Interned event names, by id.
    let eventNames: [String]
    private(set) var warnings: [Diagnostic] = []

    init(
        files: [RuleFileSpec], units: [CompiledUnit], rules: [CompiledRule], eventNames: [String], plan: PlanIndex?,
        settings: SettingsSpec?
    ) {
        self.files = files
        self.ruleSet = (units, rules)
        self.eventNames = eventNames
        self.plan = plan
        self.settings = settings
    }

    mutating func run() {
        let byName = Dictionary(ruleSet.rules.map { ($0.qualifiedID, $0) }, uniquingKeysWith: { a, _ in a })
        for file in files where file.enabled {
            if !file.silence.contains(where: { $0.value == DiagnosticID.variantWeights.rawValue }) {
                variantWeights(file.variants, into: &warnings)
            }
            for spec in file.rules where spec.enabled {
                guard let rule = byName[file.name.value + "/" + spec.id.value] else { continue }
                let silenced = Set((file.silence + spec.silence).map(\.value))
                var found: [Diagnostic] = []
                conditions(spec, in: file, rule: rule, into: &found)
                shadowing(rule, spec: spec, into: &found)
                limits(spec, in: file, into: &found)
                cooldownOutlivesFile(spec, in: file, into: &found)
                deepLinks(spec, into: &found)
                variantWeights(spec.variants, into: &found)
                scheduleOutside(spec, in: file, into: &found)
                delay(spec, in: file, into: &found)
                quietHoursInApp(spec, in: file, into: &found)
                warnings += found.filter { !silenced.contains($0.id.rawValue) }
            }
        }
        channelLimits(into: &warnings)
    }

    // MARK: never_true

    /// One comparison of a conjunction: `operand op literal`.
    struct Atom {
        enum Op: String { case eq = "==", ne = "!=", lt = "<", le = "<=", gt = ">", ge = ">=", within = "in" }
        var operand: String
        var op: Op
        var value: Value
        var location: SourceLocation
        /// Why it holds, for facts that come from the plan or a function's range rather than from the rule.
        var given: String?
        var text: String { "\(operand) \(op.rawValue) \(ExprPrinter.literal(value))" }
    }

    private func conditions(_ spec: RuleSpec, in file: RuleFileSpec, rule: CompiledRule, into out: inout [Diagnostic]) {
        var atoms: [Atom] = []
        var constantFalse: (String, SourceLocation)?
        let segments = Dictionary(file.segments.map { ($0.name.value, $0.expression) }, uniquingKeysWith: { a, _ in a })
        for src in [file.audience, spec.whereClause, spec.ifClause].compactMap({ $0 }) {
            guard let e = try? Parser.parse(src.text) else { continue }
            var collector = AtomCollector(segments: segments)
            collector.collect(e, source: src, origin: nil, negated: false)
            atoms += collector.atoms
            if constantFalse == nil { constantFalse = collector.constantFalse }
        }
        if let (text, at) = constantFalse {
            out.append(
                Diagnostic(
                    .warning, .neverTrue, "`\(text)` is always false, so rule '\(spec.id.value)' never fires", at: at,
                    suggestion: "fix the condition, or set `enabled: false` to keep the rule off"))
            return
        }
        var facts: [String: Facts] = [:]
        for a in atoms {
            if facts[a.operand] == nil { facts[a.operand] = Facts(givens: givens(for: a.operand, rule: rule)) }
            if let clash = facts[a.operand]!.add(a) {
                let message =
                    clash.given.map { "`\(a.text)` can never be true: \($0)" }
                    ?? "`\(a.text)` contradicts `\(clash.text)` (line \(clash.location.position.line))"
                out.append(
                    Diagnostic(
                        .warning, .neverTrue, message + ", so rule '\(spec.id.value)' never fires", at: a.location,
                        suggestion: "fix the condition, or set `enabled: false` to keep the rule off"))
                return
            }
        }
    }

    /// What is known of an operand before the rule says anything: counts are never negative, and plan traits and
    /// properties with `values` take only those.
    private func givens(for operand: String, rule: CompiledRule) -> [Atom] {
        let nowhere = rule.location
        for f in ["count", "active_days", "size"] where operand.hasPrefix(f + "(") {
            return [Atom(operand: operand, op: .ge, value: .int(0), location: nowhere, given: "\(f)(…) is never negative")]
        }
        guard let plan else { return [] }
        if let name = ExprPrinter.traitName(operand), let values = plan.traits[name]?.values {
            return [
                Atom(
                    operand: operand, op: .within, value: .list(values), location: nowhere,
                    given:
                        "the tracking plan gives '\(name)' only the values \(values.map(ExprPrinter.literal).joined(separator: ", "))"
                )
            ]
        }
        if let prop = ExprPrinter.propertyName(operand), case .events(let ids) = rule.trigger, !ids.isEmpty {
            var all: [Value] = []
            for id in ids {
                guard eventNames.indices.contains(Int(id)), let values = plan.events[eventNames[Int(id)]]?[prop]?.values else {
                    return []
                }
                all += values
            }
            return [
                Atom(
                    operand: operand, op: .within, value: .list(all), location: nowhere,
                    given:
                        "the tracking plan gives property '\(prop)' only the values \(all.map(ExprPrinter.literal).joined(separator: ", "))"
                )
            ]
        }
        return []
    }

    /// The facts about one operand so far; `add` returns the atom a new one contradicts.
    struct Facts {
        var eq: Atom?
        var ne: [Atom] = []
        var lower: (value: Double, inclusive: Bool, atom: Atom)?
        var upper: (value: Double, inclusive: Bool, atom: Atom)?
        var within: (values: [Value], atom: Atom)?

        init(givens: [Atom]) {
            for g in givens { _ = add(g) }
        }

        mutating func add(_ a: Atom) -> Atom? {
            switch a.op {
            case .eq:
                if let e = eq, !Value.equal(e.value, a.value) { return e }
                if let n = ne.first(where: { Value.equal($0.value, a.value) }) { return n }
                if let w = within, !w.values.contains(where: { Value.equal($0, a.value) }) { return w.atom }
                if let x = a.value.number {
                    if let l = lower, x < l.value || (x == l.value && !l.inclusive) { return l.atom }
                    if let u = upper, x > u.value || (x == u.value && !u.inclusive) { return u.atom }
                }
                eq = a
            case .ne:
                if let e = eq, Value.equal(e.value, a.value) { return e }
                if let w = within, w.values.count == 1, Value.equal(w.values[0], a.value) { return w.atom }
                ne.append(a)
            case .lt, .le, .gt, .ge:
                guard let x = a.value.number else { return nil }
                let inclusive = a.op == .le || a.op == .ge
                if a.op == .gt || a.op == .ge {
                    if lower == nil || x > lower!.value || (x == lower!.value && !inclusive) { lower = (x, inclusive, a) }
                } else {
                    if upper == nil || x < upper!.value || (x == upper!.value && !inclusive) { upper = (x, inclusive, a) }
                }
                if let l = lower, let u = upper, l.value > u.value || (l.value == u.value && !(l.inclusive && u.inclusive)) {
                    return l.atom.location == a.location ? u.atom : l.atom
                }
                if let e = eq, let v = e.value.number {
                    if let l = lower, v < l.value || (v == l.value && !l.inclusive) { return e }
                    if let u = upper, v > u.value || (v == u.value && !u.inclusive) { return e }
                }
            case .within:
                guard case .list(let values) = a.value else { return nil }
                if let e = eq, !values.contains(where: { Value.equal($0, e.value) }) { return e }
                if let w = within {
                    let both = w.values.filter { v in values.contains { Value.equal($0, v) } }
                    if both.isEmpty { return w.atom }
                    within = (both, w.atom)
                } else {
                    within = (values, a)
                }
            }
            return nil
        }
    }

    // MARK: shadowed_rule

    private func shadowing(_ rule: CompiledRule, spec: RuleSpec, into out: inout [Diagnostic]) {
        guard let surface = rule.surface, !rule.timing.isDelayed else { return }
        for a in ruleSet.rules where a.index != rule.index && a.surface == surface {
            guard a.priority > rule.priority || (a.priority == rule.priority && a.index < rule.index) else { continue }
            guard alwaysQualifies(a), covers(a.trigger, rule.trigger) else { continue }
            let tie =
                a.priority == rule.priority
                ? "the same priority (\(a.priority)) and is loaded first" : "priority \(a.priority) over \(rule.priority)"
            out.append(
                Diagnostic(
                    .warning, .shadowedRule,
                    "rule '\(spec.id.value)' never shows: '\(a.qualifiedID)' (\(a.location.file):\(a.location.position.line)) shows on surface "
                        + "'\(surface)' on every event that triggers it, with no condition or limit, and has \(tie)",
                    at: spec.id.location,
                    suggestion: "give this rule a higher priority, or add a condition or a limit to '\(a.id)'"))
            return
        }
    }

    /// Nothing can stop the rule once triggered: no condition, limit, delay, re-prompt, schedule or audience.
    private func alwaysQualifies(_ r: CompiledRule) -> Bool {
        let unit = ruleSet.units[Int(r.unit)]
        return r.enabled && unit.enabled && r.whereExpr == nil && r.ifExpr == nil && r.limits.isEmpty && !r.timing.isDelayed
            && r.reprompt == nil && unit.audience == nil && unit.start == nil && unit.end == nil
    }

    /// Whether every event that triggers `b` also triggers `a`.
    private func covers(_ a: CompiledTrigger, _ b: CompiledTrigger) -> Bool {
        switch (a, b) {
        case (.events(let x), .events(let y)): return !y.isEmpty && Set(y).isSubset(of: Set(x))
        case (.change(let sa, let fa, let ta), .change(let sb, _, _)): return sa == sb && fa == nil && ta == nil
        default: return false
        }
    }

    // MARK: limits

    private func limits(_ spec: RuleSpec, in file: RuleFileSpec, into out: inout [Diagnostic]) {
        let own = spec.limits
        let l = own.merged(over: file.defaultLimits)
        func warn(_ id: DiagnosticID, _ message: String, at: SourceLocation, _ suggestion: String) {
            out.append(Diagnostic(.warning, id, "rule '\(spec.id.value)': " + message, at: at, suggestion: suggestion))
        }
        if let on = l.onOccurrence {
            var moot: [(String, Located<Int>)] = []
            if let n = own.perUser { moot.append(("per_user", n)) }
            if let n = own.perSession { moot.append(("per_session", n)) }
            for r in own.rolling { moot.append((r.kind.key, r.max)) }
            for (key, n) in moot {
                warn(
                    .limitNeverBinds,
                    "`\(key): \(n.value)` never binds on its own: `on_occurrence: \(on.value)` already fires at most once per user",
                    at: n.location, "remove it")
            }
        }
        if let cooldown = l.cooldown, cooldown.value > 0 {
            for r in own.rolling {
                let window = r.kind.window?.maxSpanMs ?? 0
                let most = Int((window + cooldown.value - 1) / cooldown.value)
                if r.max.value >= most {
                    warn(
                        .limitNeverBinds,
                        "`\(r.kind.key): \(r.max.value)` never binds on its own: `cooldown: \(DSLDuration.format(cooldown.value))` "
                            + "already allows at most \(most) fire\(most == 1 ? "" : "s") in its window",
                        at: r.max.location, "remove it, or shorten the cooldown")
                }
            }
        }
    }

    /// A cooldown as long as the file's whole life lets the rule fire once per user; a count above 1 then never
    /// comes into play.
    private func cooldownOutlivesFile(_ spec: RuleSpec, in file: RuleFileSpec, into out: inout [Diagnostic]) {
        let l = spec.limits.merged(over: file.defaultLimits)
        guard let cooldown = l.cooldown, let start = file.start, let end = file.end else { return }
        let life = end.value.milliseconds - start.value.milliseconds
        guard life > 0, cooldown.value >= life else { return }
        let counts = ([("per_user", l.perUser)] + l.rolling.map { ($0.kind.key, Optional($0.max)) })
            .compactMap { key, n in n.flatMap { $0.value > 1 ? "`\(key): \($0.value)`" : nil } }
        guard !counts.isEmpty else { return }
        out.append(
            Diagnostic(
                .warning, .limitAlwaysBinds,
                "rule '\(spec.id.value)': `cooldown: \(DSLDuration.format(cooldown.value))` is as long as the \(file.kind.rawValue) "
                    + "runs (\(DSLDuration.format(life))), so after a user's first fire it blocks every other and "
                    + counts.joined(separator: ", ") + " can never be reached",
                at: cooldown.location, suggestion: "shorten the cooldown, or lower the count to 1"))
    }

    // MARK: deep_link_scheme

    private func deepLinks(_ spec: RuleSpec, into out: inout [Diagnostic]) {
        guard let schemes = deepLinkSchemes, !schemes.isEmpty else { return }
        let allowed = Set(schemes.map { $0.value.lowercased() })
        var links: [TemplateSource] = []
        for a in spec.actions {
            switch a.value {
            case .deepLink(let t): links.append(t)
            case .message(let m): links += m.buttons.compactMap(\.deepLink)
            case .notify(let n): if let l = n.link { links.append(l) }
            case .push(let p): if let l = p.deepLink { links.append(l) }
            default: break
            }
        }
        for link in links {
            // Only a literal start can be checked: `${…}` may produce any scheme.
            guard case .text(let head)? = link.parts.first, let colon = head.firstIndex(of: ":") else { continue }
            let scheme = String(head[..<colon])
            guard !allowed.contains(scheme.lowercased()) else { continue }
            let hint = Suggest.nearest(scheme, in: schemes.map(\.value))
            out.append(
                Diagnostic(
                    .warning, .deepLinkScheme,
                    "deep link '\(head)' uses scheme '\(scheme)', which is not in the settings' deep_link_schemes ("
                        + schemes.map(\.value).joined(separator: ", ") + ")" + (hint.map { "; did you mean '\($0)'?" } ?? ""),
                    at: link.location, suggestion: "fix the link, or add '\(scheme)' to `deep_link_schemes` if the app opens it"))
        }
    }

    // MARK: schedule_outside_campaign

    private func scheduleOutside(_ spec: RuleSpec, in file: RuleFileSpec, into out: inout [Diagnostic]) {
        guard case .schedule(let sched) = spec.trigger, file.start != nil || file.end != nil else { return }
        let start = file.start?.value.milliseconds ?? Int64.min
        let end = file.end?.value.milliseconds ?? Int64.max
        let day: Int64 = Milliseconds.day
        switch sched.value {
        case .once(let t):
            guard t < start || t >= end else { return }
            out.append(
                Diagnostic(
                    .warning, .scheduleOutsideCampaign,
                    "rule '\(spec.id.value)' runs once at \(Timestamp(milliseconds: t)), "
                        + (t < start ? "before its \(file.kind.rawValue) starts" : "after its \(file.kind.rawValue) ends")
                        + ": it never runs", at: sched.location, suggestion: "move the time, or the file's start and end"))
        case .every(let at):
            // Zones are UTC-12 to UTC+14: an instant is on a local day from the UTC day before to the day after.
            guard !at.days.isEmpty, start != Int64.min, end != Int64.max, end - start < 6 * day else { return }
            var d = Civil.floorDivMod(start - 14 * 3_600_000, day).0
            let last = Civil.floorDivMod(end + 14 * 3_600_000, day).0
            while d <= last {
                if at.days.contains(Civil.weekday(fromDays: d)) { return }
                d += 1
            }
            out.append(
                Diagnostic(
                    .warning, .scheduleOutsideCampaign,
                    "rule '\(spec.id.value)' runs \(sched.value.description), but its \(file.kind.rawValue) runs from "
                        + "\(Timestamp(milliseconds: start)) to \(Timestamp(milliseconds: end)), which has no such day: it never runs",
                    at: sched.location, suggestion: "pick a day within the file's dates, or widen them"))
        }
    }

    // MARK: quiet_hours_in_app

    /// Quiet hours keep pushes and emails from waking people; a rule that inherits the file's default quiet hours but
    /// sends neither holds (or drops) what the user sees only in the app — an inbox item, an onboarding screen, an
    /// in-app message — at hours they may well be in it.
    private func quietHoursInApp(_ spec: RuleSpec, in file: RuleFileSpec, into out: inout [Diagnostic]) {
        guard let q = file.defaultQuietHours, spec.quietHours == nil, !spec.quietHoursOff,
            !spec.actions.contains(where: { $0.value.kind == .push || $0.value.kind == .email })
        else { return }
        let kinds = Set(spec.actions.map(\.value.kind.rawValue)).sorted().joined(separator: ", ")
        out.append(
            Diagnostic(
                .warning, .quietHoursInApp,
                "rule '\(spec.id.value)' takes the file's default quiet hours (line \(q.location.position.line)) but sends no "
                    + "push or email: what it shows in the app (\(kinds)) \(q.hold ? "waits until they end" : "is dropped") "
                    + "though the user may be in the app then",
                at: spec.id.location,
                suggestion: "add `quiet_hours: none` to the rule, or give it quiet hours of its own"))
    }

    // MARK: variant_weights

    private func variantWeights(_ variants: [VariantSpec], into out: inout [Diagnostic]) {
        guard let first = variants.first else { return }
        let sum = variants.reduce(0) { $0 + $1.weight.value }
        guard abs(sum - 100) > 1e-9 else { return }
        let text = String(describing: sum).replacingSuffix(".0", with: "")
        out.append(
            Diagnostic(
                .warning, .variantWeights,
                "the variants' weights add up to \(text)%, not 100%: they are used as shares of \(text)",
                at: first.weight.location, suggestion: "make them add up to 100"))
    }

    // MARK: channel_limit_never_binds

    private func channelLimits(into out: inout [Diagnostic]) {
        guard let s = settings else { return }
        let used = Set(ruleSet.rules.filter(\.enabled).flatMap(\.channels))
        for (channel, spec) in s.channelLimits {
            let name = channel.value.rawValue
            guard used.contains(channel.value) else {
                out.append(
                    Diagnostic(
                        .warning, .channelLimitNeverBinds,
                        "no enabled rule sends on the \(name) channel, so this cap never binds",
                        at: channel.location, suggestion: "remove it, or check the rules that should send one"))
                continue
            }
            // Each cap beside the global caps that count at least as much: the global limit counts every channel's
            // fires, so one over a span that always contains this one's (a window, the session, the lifetime) has
            // counted at least as many; with a cap no higher it blocks first.
            let lifetime = s.globalLimits.perUser.map { [(LimitKind.perUser.key, $0.value)] } ?? []
            var caps: [(kind: LimitKind, max: Located<Int>, global: [(key: String, max: Int)])] = spec.rolling.compactMap {
                kind, max in
                guard let window = kind.window else { return nil }
                let windows = s.globalLimits.rolling.compactMap { g in
                    g.kind.window.map { window.alwaysWithin($0) } == true ? (g.kind.key, g.max.value) : nil
                }
                return (kind, max, windows + lifetime)
            }
            if let own = spec.perSession {
                let session = s.globalLimits.perSession.map { [(LimitKind.perSession.key, $0.value)] } ?? []
                caps.append((.perSession, own, session + lifetime))
            }
            if let own = spec.perUser { caps.append((.perUser, own, lifetime)) }
            for (kind, max, global) in caps {
                guard let g = global.first(where: { $0.max <= max.value }) else { continue }
                out.append(
                    Diagnostic(
                        .warning, .channelLimitNeverBinds,
                        "\(name) \(kind.key): \(max.value) never binds: global_limit \(g.key): \(g.max) counts every channel "
                            + "and blocks first",
                        at: max.location, suggestion: "lower it below \(g.max), or remove it"))
            }
        }
    }

    // MARK: delay_outlives_campaign

    private func delay(_ spec: RuleSpec, in file: RuleFileSpec, into out: inout [Diagnostic]) {
        guard let wait = spec.waitMs, let start = file.start, let end = file.end else { return }
        let life = end.value.milliseconds - start.value.milliseconds
        guard life > 0, wait.value >= life else { return }
        out.append(
            Diagnostic(
                .warning, .delayOutlivesCampaign,
                "rule '\(spec.id.value)' waits \(DSLDuration.format(wait.value)), but its \(file.kind.rawValue) runs only "
                    + "\(DSLDuration.format(life)) (start to end): every delayed action would come due after the end and be dropped",
                at: wait.location, suggestion: "shorten `wait`, or move `end`"))
    }
}

/// Flattens conditions into comparisons (`&&` only; segments expanded; `!` pushed into comparisons).
private struct AtomCollector {
    let segments: [String: ExpressionSource]
    var atoms: [RuleAnalyzer.Atom] = []
    var constantFalse: (String, SourceLocation)?
    private var expanding: Set<String> = []
    /// Segments already expanded, with the polarity: a segment used again adds no fact, and expanding it again would
    /// cost exponential time (a segment that uses one twice, which uses one twice…).
    private var expanded: Set<String> = []

    init(segments: [String: ExpressionSource]) { self.segments = segments }

    /// `origin` is where an expanded segment is named in the rule: facts inside it are reported there. `level` counts
    /// the levels of the condition with its segments written out: past ``Parser/maxDepth`` (a compile error) the
    /// collector stops, so that it never recurses deeper than that.
    mutating func collect(_ e: Expr, source: ExpressionSource, origin: SourceLocation?, negated: Bool, level: Int = 1) {
        guard level <= Parser.maxDepth else { return }
        let at = origin ?? source.location(of: e.span)
        if let t = Self.truth(e) {
            if t == negated, constantFalse == nil {
                let text = source.text.unicodeScalars.dropFirst(e.span.start).prefix(e.span.end - e.span.start)
                constantFalse = ((negated ? "!" : "") + String(String.UnicodeScalarView(text)), at)
            }
            return
        }
        switch e.node {
        case .ident(let name) where segments[name] != nil && !expanding.contains(name):
            // Each segment once per polarity: a second expansion adds no fact.
            guard expanded.insert("\(negated) \(name)").inserted else { return }
            guard let src = segments[name], let inner = try? Parser.parse(src.text) else { return }
            expanding.insert(name)
            collect(inner, source: src, origin: at, negated: negated, level: level + 1)
            expanding.remove(name)
        case .call("_&&_", nil, let args) where !negated:
            for a in args { collect(a, source: source, origin: origin, negated: false, level: level + 1) }
        case .call("_||_", nil, let args) where negated:
            for a in args { collect(a, source: source, origin: origin, negated: true, level: level + 1) }
        case .call("!_", nil, let args) where args.count == 1:
            collect(args[0], source: source, origin: origin, negated: !negated, level: level + 1)
        case .call(let fn, nil, let args) where args.count == 2 && Self.ops[fn] != nil:
            comparison(fn, args[0], args[1], at: at, negated: negated)
        default:
            // A bare boolean operand: `user.is_default_browser` means `== true`.
            if let text = ExprPrinter.print(e) {
                atoms.append(.init(operand: text, op: .eq, value: .bool(!negated), location: at))
            }
        }
    }

    static let ops: [String: RuleAnalyzer.Atom.Op] = [
        "_==_": .eq, "_!=_": .ne, "_<_": .lt, "_<=_": .le, "_>_": .gt, "_>=_": .ge, "@in": .within,
    ]
    static let negation: [RuleAnalyzer.Atom.Op: RuleAnalyzer.Atom.Op] = [
        .eq: .ne, .ne: .eq, .lt: .ge, .ge: .lt, .le: .gt, .gt: .le,
    ]
    static let mirrored: [RuleAnalyzer.Atom.Op: RuleAnalyzer.Atom.Op] = [
        .eq: .eq, .ne: .ne, .lt: .gt, .gt: .lt, .le: .ge, .ge: .le,
    ]

    private mutating func comparison(_ fn: String, _ lhs: Expr, _ rhs: Expr, at: SourceLocation, negated: Bool) {
        guard var op = Self.ops[fn] else { return }
        let l = ExprPrinter.constant(lhs)
        let r = ExprPrinter.constant(rhs)
        if l != nil && r != nil { return }  // decided by `truth`
        var operandExpr = lhs
        var value: Value
        if let r {
            value = r
        } else if let l, op != .within, let m = Self.mirrored[op] {
            operandExpr = rhs
            value = l
            op = m
        } else {
            return
        }
        if negated {
            guard let n = Self.negation[op] else { return }  // `!(x in [...])` says little
            op = n
        }
        guard let operand = ExprPrinter.print(operandExpr) else { return }
        atoms.append(.init(operand: operand, op: op, value: value, location: at))
    }

    /// The value of a condition made of constants only (`false`, `1 > 2 || false`), else `nil`.
    static func truth(_ e: Expr) -> Bool? {
        switch e.node {
        case .literal(.bool(let b)): return b
        case .call("!_", nil, let args) where args.count == 1: return truth(args[0]).map { !$0 }
        case .call("_&&_", nil, let args):
            let ts = args.map(truth)
            if ts.contains(false) { return false }
            return ts.allSatisfy { $0 == true } ? true : nil
        case .call("_||_", nil, let args):
            let ts = args.map(truth)
            if ts.contains(true) { return true }
            return ts.allSatisfy { $0 == false } ? false : nil
        case .call(let fn, nil, let args) where args.count == 2:
            guard let op = ops[fn], let a = ExprPrinter.constant(args[0]), let b = ExprPrinter.constant(args[1]) else {
                return nil
            }
            return decide(op, a, b)
        default: return nil
        }
    }

    static func decide(_ op: RuleAnalyzer.Atom.Op, _ a: Value, _ b: Value) -> Bool? {
        switch op {
        case .eq: return Value.equal(a, b)
        case .ne: return !Value.equal(a, b)
        case .within:
            guard case .list(let xs) = b else { return nil }
            return xs.contains { Value.equal($0, a) }
        default:
            guard let x = a.number, let y = b.number else { return nil }
            switch op {
            case .lt: return x < y
            case .le: return x <= y
            case .gt: return x > y
            default: return x >= y
            }
        }
    }
}

/// Canonical text of the expressions the analysis reasons about (paths, calls with constant arguments).
enum ExprPrinter {
    static func print(_ e: Expr) -> String? {
        switch e.node {
        case .literal(let v): return literal(v)
        case .ident(let n): return n
        case .select(let o, let f, let test):
            guard let s = print(o) else { return nil }
            return test ? "has(\(s).\(f))" : "\(s).\(f)"
        case .call("_[_]", nil, let args) where args.count == 2:
            guard let o = print(args[0]), let k = print(args[1]) else { return nil }
            // `user["plan"]` and `user.plan` are the same operand.
            if case .literal(.string(let key)) = args[1].node, key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }),
                key.first?.isNumber == false
            {
                return "\(o).\(key)"
            }
            return "\(o)[\(k)]"
        case .call(let fn, let target, let args):
            guard !fn.hasPrefix("_"), !fn.hasPrefix("@"), !fn.hasPrefix("!") else { return nil }
            let a = args.compactMap(print)
            guard a.count == args.count else { return nil }
            if let target {
                guard let t = print(target) else { return nil }
                return "\(t).\(fn)(\(a.joined(separator: ", ")))"
            }
            return "\(fn)(\(a.joined(separator: ", ")))"
        case .list(let xs):
            let a = xs.compactMap(print)
            return a.count == xs.count ? "[" + a.joined(separator: ", ") + "]" : nil
        case .map(let pairs):
            var parts: [String] = []
            for p in pairs {
                guard let k = print(p.key), let v = print(p.value) else { return nil }
                parts.append("\(k): \(v)")
            }
            return "{" + parts.joined(separator: ", ") + "}"
        case .comprehension: return nil
        }
    }

    /// The value of a literal, or of a list of literals.
    static func constant(_ e: Expr) -> Value? {
        switch e.node {
        case .literal(let v): return v
        case .call("-_", nil, let args) where args.count == 1:
            switch constant(args[0]) {
            case .int(let n)?: return n == .min ? nil : .int(-n)  // (-Int.min overflows: no constant.)
            case .double(let d)?: return .double(-d)
            default: return nil
            }
        case .list(let xs):
            let vs = xs.compactMap(constant)
            return vs.count == xs.count ? .list(vs) : nil
        default: return nil
        }
    }

    static func literal(_ v: Value) -> String {
        switch v {
        case .string(let s): "\"\(s)\""
        case .list(let xs): "[" + xs.map(literal).joined(separator: ", ") + "]"
        default: JSONWriter.encode(v)
        }
    }

    /// `user.NAME` or `user["NAME"]` (not `default(user.NAME, x)`: the default may be outside the plan's values).
    static func traitName(_ operand: String) -> String? {
        if operand.hasPrefix("user[\""), operand.hasSuffix("\"]") {
            let name = operand.dropFirst(6).dropLast(2)
            return name.contains("\"") ? nil : String(name)
        }
        guard operand.hasPrefix("user."), !operand.dropFirst(5).contains(where: { ".[(".contains($0) }) else { return nil }
        return String(operand.dropFirst(5))
    }

    /// `event.properties.NAME`.
    static func propertyName(_ operand: String) -> String? {
        let prefix = "event.properties."
        guard operand.hasPrefix(prefix), !operand.dropFirst(prefix.count).contains(where: { ".[(".contains($0) }) else {
            return nil
        }
        return String(operand.dropFirst(prefix.count))
    }
}
