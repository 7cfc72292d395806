import BeckonCore
import BeckonYAML

/// `beckon explain PATH... --events FILE --user ID [--rule ID]`: for each of one user's events, every candidate
/// rule's verdict with the values its conditions saw, the limit that blocked it and when it frees up, the rival it
/// lost to, and the delayed actions scheduled, fired or cancelled.
public enum ExplainRunner {
    public enum Format: String, Sendable, CaseIterable { case text, json }

    public struct Options: Sendable {
        public var paths: [String]
        public var events: String
        public var user: String
        public var rule: String?
        public var format: Format = .text
        public var until: String?
        /// What to do at a bad event line.
        public var badLines: BadLinePolicy = .goOn
        public init(
            paths: [String], events: String, user: String, rule: String? = nil, format: Format = .text, until: String? = nil,
            badLines: BadLinePolicy = .goOn
        ) {
            self.paths = paths
            self.events = events
            self.user = user
            self.rule = rule
            self.format = format
            self.until = until
            self.badLines = badLines
        }
    }

    /// What happened at one of the user's events (or when time ran on at the end).
    struct Step {
        var time: Int64
        var title: String
        var event: BoundEvent?
        var outcome: EventOutcome
        /// Events of the user that did not trigger the rule asked about (`--rule`).
        var notTriggered: String?
    }

    /// Runs one user's events through a fresh engine with explain traces on, and keeps a ``Step`` for each event
    /// (and for each time timers came due in between). Other users' events are skipped: users do not share state.
    struct Tracer {
        let ruleSet: CompiledRuleSet
        let user: String
        let rule: Int32?
        let engine: Engine
        private(set) var steps: [Step] = []
        /// The latest event time of the whole stream, any user's.
        private(set) var streamEnd = Int64.min

        init(ruleSet: CompiledRuleSet, user: String, rule: Int32?) {
            self.ruleSet = ruleSet
            self.user = user
            self.rule = rule
            self.engine = Engine(ruleSet: ruleSet, options: .init(explain: true))
        }

        mutating func feed(_ e: BoundEvent) {
            streamEnd = max(streamEnd, e.timestamp)
            guard e.userID == user else { return }
            let due = engine.advance(to: e.timestamp)
            if !due.verdicts.isEmpty || !due.actions.isEmpty {
                steps.append(Step(time: e.timestamp, title: "time passes", event: nil, outcome: due))
            }
            let outcome = engine.process(e)
            var step = Step(time: e.timestamp, title: ExplainRunner.describe(e), event: e, outcome: outcome)
            if let r = rule, !outcome.verdicts.contains(where: { $0.rule == r }) {
                let rule = ruleSet.rules[Int(r)]
                step.notTriggered = "does not trigger \(rule.qualifiedID) (it waits for \(rule.triggerDescription))"
            }
            steps.append(step)
        }

        /// Lets time run to `end` so that delayed actions due by then fire.
        /// Lets time pass to `end`: what comes due fires (a step when anything did).
        mutating func finish(at end: Int64) {
            guard end != Int64.min else { return }
            let due = engine.advance(to: end)
            if !due.verdicts.isEmpty || !due.actions.isEmpty {
                steps.append(Step(time: end, title: "time passes (to \(Timestamp(milliseconds: end)))", event: nil, outcome: due))
            }
        }

        var pending: [PendingAction] { engine.profile(of: user)?.pending ?? [] }
    }

    public static func run(_ o: Options, console: any Console) -> Int32 {
        let loaded = RuleLoader.load(paths: o.paths)
        guard let ruleSet = loaded.ruleSet else {
            console.err(loaded.rendered())
            return 1
        }
        var ruleIndex: Int32?
        if let r = o.rule {
            guard let rule = ruleSet.rule(named: r) else {
                let hint = Suggest.nearest(r, in: ruleSet.rules.map(\.id)).map { "; did you mean '\($0)'?" } ?? ""
                console.err(Terminal.safe("error: no rule '\(r)' in the loaded files\(hint)") + "\n")
                return 64
            }
            ruleIndex = rule.index
        }
        guard let stream = EventStream.opened(o.events, badLines: o.badLines, console: console) else { return 1 }
        var tracer = Tracer(ruleSet: ruleSet, user: o.user, rule: ruleIndex)
        stream.events(decoder: SegmentDecoder(ruleSet: ruleSet), console: console) { tracer.feed($0) }
        if stream.finish(console: console) { return 1 }
        var end = tracer.streamEnd
        if let u = o.until {
            guard let t = DryRunRunner.untilTime(u, last: tracer.streamEnd, console: console) else { return 64 }
            end = max(end, t)
        }
        tracer.finish(at: end)
        let steps = tracer.steps
        let pending = tracer.pending
        if steps.isEmpty {
            console.err(Terminal.safe("no events for user '\(o.user)' in \(o.events)") + "\n")
            return 1
        }
        switch o.format {
        case .text: console.out(text(steps, pending: pending, ruleSet: ruleSet, rule: ruleIndex, user: o.user))
        case .json: console.out(json(steps, pending: pending, ruleSet: ruleSet, rule: ruleIndex, user: o.user) + "\n")
        }
        return 0
    }

    static func describe(_ e: BoundEvent) -> String {
        var s = e.kind == .identify ? "identify" : (e.kind == .track ? e.name : "\(e.kind) \(e.name)")
        if e.kind == .identify { s += " " + e.traits.map { "\($0.name)=\(JSONWriter.encode($0.value))" }.joined(separator: ", ") }
        if let id = e.messageID { s += "  (messageId \(id))" }
        return s
    }

    static func glyph(_ v: Verdict) -> String {
        switch v {
        case .fired: "✓"
        case .scheduled, .quietHours(heldUntil: .some), .rateHeld: "⏲"
        case .heldBack: "◌"
        default: "✗"
        }
    }

    static func text(_ steps: [Step], pending: [PendingAction], ruleSet: CompiledRuleSet, rule: Int32?, user: String) -> String {
        var out = ""
        // Every line through one place: text from events is made safe to show (``Terminal``).
        func line(_ s: String) { out += Terminal.safe(s) + "\n" }
        line("user \(user)\(rule.map { ", rule \(ruleSet.rules[Int($0)].qualifiedID)" } ?? "")")
        for step in steps {
            guard let lines = lines(of: step, rule: rule) else { continue }
            line("")
            line("\(Timestamp(milliseconds: step.time))  \(step.title)")
            for l in lines { line(l) }
        }
        let mine = pendingLines(pending, ruleSet: ruleSet, rule: rule)
        if !mine.isEmpty {
            line("")
            line("pending")
            for l in mine { line(l) }
        }
        return out
    }

    /// The lines under a step's heading (`nil`: the step is not shown when asking about `rule`).
    static func lines(of step: Step, rule: Int32?) -> [String]? {
        let verdicts = step.outcome.verdicts.filter { rule == nil || $0.rule == rule }
        if rule != nil && verdicts.isEmpty && step.notTriggered == nil { return nil }
        var out: [String] = []
        if step.outcome.status == .duplicate { out.append("  duplicate messageId: dropped") }
        if step.outcome.late { out.append("  late: evaluated at the user's clock") }
        for m in step.event?.offPlan ?? [] { out.append("  off plan: \(m)") }
        if let n = step.notTriggered { out.append("  \(n)") }
        if rule == nil && verdicts.isEmpty && step.outcome.status != .duplicate {
            out.append("  no rule is triggered by this event")
        }
        for v in verdicts {
            // When time passes, each delayed action has its own time.
            let when = step.event == nil ? "\(Timestamp(milliseconds: v.time))  " : ""
            out.append("  \(when)\(glyph(v.verdict)) \(v.qualifiedID)  \(v.verdict.summary)")
            for c in v.clauses {
                out.append("      \(c.clause.padding(8)) \(c.passed ? "true " : "false")  \(c.detail)")
            }
            if v.verdict.fired {
                for a in step.outcome.actions where a.unit + "/" + a.rule == v.qualifiedID {
                    out.append("      → \(a.kind)  \(DryRunRunner.detail(a))")
                }
            }
        }
        return out
    }

    static func pendingLines(_ pending: [PendingAction], ruleSet: CompiledRuleSet, rule: Int32?) -> [String] {
        pending.filter { rule == nil || $0.rule == rule }.map { p in
            "  ⏲ \(ruleSet.rules[Int(p.rule)].qualifiedID)  due at \(Timestamp(milliseconds: p.due))\(p.held ? " (held by quiet hours)" : "")"
        }
    }

    /// One step of ``timeline(ruleSet:events:user:until:)``: its time, heading and the lines `beckon explain` prints
    /// under it.
    public struct TimelineStep: Sendable {
        public var time: Int64
        public var title: String
        /// Whether it is one of the user's events (not time passing).
        public var isEvent: Bool
        public var lines: [String]
    }

    /// `beckon explain`'s steps for `user` over `events` (a fresh engine: the events in order, other users' skipped),
    /// then time run on to `until` if given; with the pending delayed actions' lines at the end.
    ///
    /// `clocks` (by event, when given): the clock a service had moved to when it processed the event, time let pass to
    /// first, so a replay judges a late event as the service did (docs/events.md#events-out-of-time-order).
    public static func timeline(
        ruleSet: CompiledRuleSet, events: [BoundEvent], clocks: [Int64?] = [], user: String, until: Int64? = nil
    ) -> (steps: [TimelineStep], pending: [String]) {
        var tracer = Tracer(ruleSet: ruleSet, user: user, rule: nil)
        for (i, e) in events.enumerated() {
            if i < clocks.count, let clock = clocks[i] { tracer.finish(at: clock) }
            tracer.feed(e)
        }
        if let until { tracer.finish(at: max(until, tracer.streamEnd)) }
        let steps = tracer.steps.map { s in
            TimelineStep(time: s.time, title: s.title, isEvent: s.event != nil, lines: lines(of: s, rule: nil) ?? [])
        }
        return (steps, pendingLines(tracer.pending, ruleSet: ruleSet, rule: nil))
    }

    static func json(_ steps: [Step], pending: [PendingAction], ruleSet: CompiledRuleSet, rule: Int32?, user: String) -> String {
        var items: [Value] = []
        for step in steps {
            let verdicts = step.outcome.verdicts.filter { rule == nil || $0.rule == rule }
            if rule != nil && verdicts.isEmpty && step.notTriggered == nil { continue }
            var m = ValueMap()
            m[string: "time"] = .string(Timestamp(milliseconds: step.time).description)
            if let e = step.event {
                m[string: "type"] = .string(e.kind.description)
                if e.kind != .identify { m[string: "event"] = .string(e.name) }
                if let id = e.messageID { m[string: "messageId"] = .string(id) }
            } else {
                m[string: "type"] = .string("time")
            }
            if step.outcome.status == .duplicate { m[string: "duplicate"] = .bool(true) }
            if step.outcome.late { m[string: "late"] = .bool(true) }
            if let off = step.event?.offPlan, !off.isEmpty { m[string: "off_plan"] = .list(off.map { .string($0) }) }
            if let n = step.notTriggered { m[string: "not_triggered"] = .string(n) }
            m[string: "verdicts"] = .list(
                verdicts.map { v in
                    var vm = ValueMap()
                    vm[string: "time"] = .string(Timestamp(milliseconds: v.time).description)
                    vm[string: "rule"] = .string(v.qualifiedID)
                    vm[string: "verdict"] = .string(v.verdict.code)
                    vm[string: "summary"] = .string(v.verdict.summary)
                    vm[string: "conditions"] = .list(
                        v.clauses.map {
                            .map(
                                ValueMap([
                                    ("clause", .string($0.clause)), ("passed", .bool($0.passed)), ("values", .string($0.detail)),
                                ]))
                        })
                    if v.verdict.fired {
                        vm[string: "actions"] = .list(
                            step.outcome.actions.filter { $0.unit + "/" + $0.rule == v.qualifiedID }.map { a in
                                var am = ValueMap()
                                am[string: "id"] = .string(a.id)
                                am[string: "action"] = .string(a.kind)
                                for (k, val) in a.fields { am[string: k] = val }
                                return .map(am)
                            })
                    }
                    return .map(vm)
                })
            items.append(.map(m))
        }
        let mine = pending.filter { rule == nil || $0.rule == rule }
        let root = ValueMap([
            ("user", .string(user)), ("steps", .list(items)),
            (
                "pending",
                .list(
                    mine.map {
                        .map(
                            ValueMap([
                                ("rule", .string(ruleSet.rules[Int($0.rule)].qualifiedID)),
                                ("due", .string(Timestamp(milliseconds: $0.due).description)), ("held", .bool($0.held)),
                            ]))
                    })
            ),
        ])
        return JSONWriter.encode(.map(root))
    }
}
