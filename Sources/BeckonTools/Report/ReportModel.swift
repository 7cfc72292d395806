import BeckonCore

/// What `beckon report` measures: per rule, what happened to its triggers; per campaign or rule set, who was
/// exposed (treatment: the first fire; holdout: the first `held_back`) and, per goal, who converted within its window.
struct Report {
    var paths: [String]
    var eventsFile: String
    var events = 0
    /// People: ids merged into another (an anonymous visitor who signed in) are counted once, as that user.
    var users = 0
    /// Ids seen that were merged into another.
    var mergedIDs = 0
    var badLines = 0
    var duplicates = 0
    /// Events that do not fit the tracking plans (processed all the same).
    var offPlan = 0
    /// First and last event time, and the end of observation (the last event, or `--until`).
    var first: Int64?
    var last: Int64?
    var end: Int64?
    var units: [UnitReport] = []
}

struct UnitReport {
    var name: String
    var kind: String
    var holdout: Double
    /// Users for whom a rule of the file was triggered.
    var usersTriggered = 0
    var exposed = Groups(treatment: 0, holdout: 0)
    var rules: [RuleRow] = []
    var goals: [GoalReport] = []
    /// The file's A/B test and its rules' own, each variant against the control.
    var tests: [TestReport] = []
}

/// One A/B test: the file's (`rule` nil; exposure as each goal says) or a rule's (exposure: that rule's first fire).
struct TestReport {
    var rule: String?
    var variants: [VariantReport]
}

struct VariantReport {
    var id: String
    var control: Bool
    var weight: Double
    /// Per goal of the file, in order: this variant's users, and the difference from the control (rate, and value
    /// per user when the goal has one).
    var goals: [VariantGoal]
}

struct VariantGoal {
    var goal: String
    var result: GroupResult
    var difference: (estimate: Double, low: Double, high: Double)?
    var valueDifference: (estimate: Double, low: Double, high: Double)?
}

struct Groups<T> {
    var treatment: T
    var holdout: T
}

/// One rule's funnel: every trigger ends in exactly one of fired, held back, still pending at the end, or a reason it
/// did not fire, so `triggered = fired + heldBack + pending + sum(suppressed)`.
struct RuleRow {
    var id: String
    var triggered: Int
    var fired: Int
    var heldBack: Int
    /// Delayed actions that went into a wait (`wait`, `at`, a schedule's run): each also ends in one of the others.
    var scheduled: Int
    /// Still waiting for their time at the end of observation.
    var pending: Int
    /// Why triggers did not fire, most frequent first: `limit:per_day`, `lost`, `if`, `replaced`, `cancelled`…
    var suppressed: [(reason: String, count: Int)]
    /// Times an action was put off on its way (quiet hours' `held`, a send `rate`), not where it ended.
    var deferred: [(reason: String, count: Int)]
}

struct GoalReport {
    var id: String
    var description: String?
    var event: String
    var withinMs: Int64
    /// The rule whose first fire exposes a user, or `nil` for any rule of the file.
    var exposureRule: String?
    var treatment: GroupResult
    /// The comparison group: the file's holdout, or when it has none the control variant of the exposing rule's A/B
    /// test (`nil`: neither).
    var holdout: GroupResult?
    /// What ``holdout`` is: `holdout` or `control`.
    var comparison = "holdout"
    /// Treatment rate minus holdout rate, with a 95% interval.
    var difference: (estimate: Double, low: Double, high: Double)?
    /// The property summed as the goal's value, when it has one.
    var value: String? = nil
}

/// One group's conversions. Only users whose whole window lies before the end of observation count in the rate,
/// so that users exposed near the end do not pull it down.
struct GroupResult {
    var exposed = 0
    /// Exposed users whose window ended before the end of observation.
    var complete = 0
    /// Of `complete`, those who reached the goal within the window.
    var converted = 0
    /// Times from exposure to the first goal event, of the converted users, sorted (ms).
    var times: [Int64] = []
    /// Complete and converted users by the UTC day of their exposure (days since 1970).
    var byDay: [Int64: (complete: Int, converted: Int)] = [:]
    /// With a value goal: the value each complete user brought within the window (0 for those who did not convert).
    var values: [Double] = []

    var meanValue: Double? { values.isEmpty ? nil : values.reduce(0, +) / Double(values.count) }
    var valueInterval: (low: Double, high: Double)? { Statistics.meanInterval(values) }

    var rate: Double? { complete > 0 ? Double(converted) / Double(complete) : nil }
    var interval: (low: Double, high: Double)? { Statistics.wilson(converted, complete) }
    var median: Int64? { Statistics.quantile(times, 0.5) }
    var p90: Int64? { Statistics.quantile(times, 0.9) }
}

/// Runs a stream through the engine and gathers what a ``Report`` needs.
final class ReportBuilder {
    let ruleSet: CompiledRuleSet
    let engine: Engine
    private var ruleIndex: [String: Int32] = [:]
    /// Users with a verdict, by unit.
    private var triggered: [Set<String>]
    /// First fire (or `held_back`) time per user, by rule.
    private var firstByRule: [[String: Int64]]
    /// Goal events per user (time, value), by unit and goal.
    private var hits: [[[String: [(time: Int64, value: Double?)]]]]
    private var users = Set<String>()
    private(set) var first: Int64?
    private(set) var last: Int64?

    init(ruleSet: CompiledRuleSet) {
        self.ruleSet = ruleSet
        // Verdicts say whom each rule triggered for; why a condition was false is not read.
        engine = Engine(ruleSet: ruleSet, options: .init(recordVerdicts: true, trackGoals: true, whyNot: false))
        for r in ruleSet.rules { ruleIndex[r.qualifiedID] = r.index }
        triggered = Array(repeating: [], count: ruleSet.units.count)
        firstByRule = Array(repeating: [:], count: ruleSet.rules.count)
        hits = ruleSet.units.map { u in Array(repeating: [:], count: u.goals.count) }
    }

    func process(_ e: BoundEvent) {
        users.insert(e.userID)
        first = min(first ?? e.timestamp, e.timestamp)
        last = max(last ?? e.timestamp, e.timestamp)
        collect(engine.process(e))
    }

    /// Lets time run to `end` (delayed actions come due).
    func finish(at end: Int64) { engine.advance(to: end, each: collect) }

    private func collect(_ o: EventOutcome) {
        for v in o.verdicts { triggered[Int(ruleSet.rules[Int(v.rule)].unit)].insert(v.userID) }
        for a in o.actions {
            guard let r = ruleIndex[a.unit + "/" + a.rule] else { continue }
            if firstByRule[Int(r)][a.userID] == nil { firstByRule[Int(r)][a.userID] = a.time }
        }
        for h in o.goalHits { hits[Int(h.unit)][h.goal][h.userID, default: []].append((h.time, h.value)) }
    }

    /// The person an id is: the user it was merged into, or itself.
    private func person(_ id: String) -> String { engine.mergedTarget(of: id) ?? id }

    func report(paths: [String], eventsFile: String, badLines: Int, end: Int64?) -> Report {
        var report = Report(paths: paths, eventsFile: eventsFile)
        let s = engine.stats
        report.events = s.events
        report.users = Set(users.map(person)).count
        report.mergedIDs = users.count - report.users
        report.badLines = badLines
        report.duplicates = s.duplicates
        report.offPlan = s.offPlan
        report.first = first
        report.last = last
        report.end = end
        for (u, unit) in ruleSet.units.enumerated() {
            let rules = ruleSet.rules.filter { Int($0.unit) == u }
            var ur = UnitReport(name: unit.name, kind: unit.kind.rawValue, holdout: unit.holdout)
            ur.usersTriggered = Set(triggered[u].map(person)).count
            let pending = engine.pendingByRule
            ur.rules = rules.map { r in
                let i = Int(r.index)
                let reasons = RuleCount.reasons(s.blocked[i])
                return RuleRow(
                    id: r.id, triggered: s.triggered[i], fired: s.fired[i], heldBack: s.heldBack[i], scheduled: s.scheduled[i],
                    pending: pending[i], suppressed: reasons.filter { !Verdict.deferringCodes.contains($0.reason) },
                    deferred: reasons.filter { Verdict.deferringCodes.contains($0.reason) })
            }
            let exposedAny = exposure(rules.map(\.index))
            for first in exposedAny.values {
                if unit.isHeldOut(first.id) { ur.exposed.holdout += 1 } else { ur.exposed.treatment += 1 }
            }
            let goalHits = hitsByPerson(unit: u)
            for (g, goal) in unit.goals.enumerated() {
                let exposed = goal.exposureRule.map { exposure([$0]) } ?? exposedAny
                // Without a holdout, the control variant of the exposing rule's test is the comparison group (its
                // users are exposed through their `held_back`: they are not the treatment).
                let test = unit.holdout > 0 ? nil : controlledTest(goal.exposureRule, of: rules)
                var t = GroupResult()
                var h = GroupResult()
                for (user, first) in exposed {
                    let control =
                        unit.isHeldOut(first.id) || test.map { $0.index(of: first.id) == $0.controlIndex } == true
                    let valued = goal.valueProperty != nil
                    if control {
                        count(at: first.time, hits: goalHits[g][user], within: goal.withinMs, end: end, valued: valued, into: &h)
                    } else {
                        count(at: first.time, hits: goalHits[g][user], within: goal.withinMs, end: end, valued: valued, into: &t)
                    }
                }
                t.times.sort()
                h.times.sort()
                let compared = unit.holdout > 0 || test != nil
                var gr = GoalReport(
                    id: goal.id, description: goal.description, event: goal.event, withinMs: goal.withinMs,
                    exposureRule: goal.exposureRule.map { ruleSet.rules[Int($0)].id }, treatment: t,
                    holdout: compared ? h : nil, comparison: unit.holdout > 0 ? "holdout" : "control",
                    value: goal.valueProperty)
                if compared { gr.difference = Statistics.difference(t.converted, t.complete, h.converted, h.complete) }
                ur.goals.append(gr)
            }
            ur.tests = tests(unit: u, rules: rules, exposedAny: exposedAny, goalHits: goalHits, end: end)
            report.units.append(ur)
        }
        return report
    }

    /// The unit's A/B tests: the file's (every rule shares its variants, hashed with the file's name), then each rule's
    /// own. Users are grouped by their variant; each variant's goal results are compared with the control's. (`goalHits`:
    /// ``hitsByPerson(unit:)``.)
    private func tests(
        unit u: Int, rules: [CompiledRule], exposedAny: [String: (time: Int64, id: String)],
        goalHits: [[String: [(time: Int64, value: Double?)]]], end: Int64?
    ) -> [TestReport] {
        let unit = ruleSet.units[u]
        var out: [TestReport] = []
        var seen = Set<String>()
        for rule in rules {
            guard let v = rule.variants, seen.insert(v.salt).inserted else { continue }
            let fileTest = v.salt == unit.name
            var groups = Array(repeating: Array(repeating: GroupResult(), count: unit.goals.count), count: v.ids.count)
            for (g, goal) in unit.goals.enumerated() {
                let exposed =
                    fileTest ? (goal.exposureRule.map { exposure([$0]) } ?? exposedAny) : exposure([rule.index])
                // (A file's holdout never reaches a rule's test: its users are in neither arm. A person's variant is
                // their first exposed id's.)
                for (user, first) in exposed where !unit.isHeldOut(first.id) {
                    count(
                        at: first.time, hits: goalHits[g][user], within: goal.withinMs, end: end,
                        valued: goal.valueProperty != nil, into: &groups[v.index(of: first.id)][g])
                }
            }
            let control = v.controlIndex
            let weights = v.weights
            out.append(
                TestReport(
                    rule: fileTest ? nil : rule.id,
                    variants: v.ids.indices.map { k in
                        VariantReport(
                            id: v.ids[k], control: k == control, weight: weights[k],
                            goals: unit.goals.indices.map { g in
                                var x = groups[k][g]
                                x.times.sort()
                                var vg = VariantGoal(goal: unit.goals[g].id, result: x)
                                if let c = control, c != k {
                                    let y = groups[c][g]
                                    vg.difference = Statistics.difference(x.converted, x.complete, y.converted, y.complete)
                                    if unit.goals[g].valueProperty != nil {
                                        vg.valueDifference = Statistics.meanDifference(x.values, y.values)
                                    }
                                }
                                return vg
                            })
                    }))
        }
        return out
    }

    /// Per person, the first exposure among these rules: its time and the id it was under (which decides the holdout
    /// and the variant). Ids merged into one user are one person.
    private func exposure(_ rules: [Int32]) -> [String: (time: Int64, id: String)] {
        var out: [String: (time: Int64, id: String)] = [:]
        for r in rules {
            for (id, t) in firstByRule[Int(r)] {
                let p = person(id)
                if let seen = out[p], (seen.time, seen.id) <= (t, id) { continue }
                out[p] = (t, id)
            }
        }
        return out
    }

    /// The unit's goal events per person (each goal's), whichever of their ids sent them.
    private func hitsByPerson(unit u: Int) -> [[String: [(time: Int64, value: Double?)]]] {
        hits[u].map { byID in
            var out: [String: [(time: Int64, value: Double?)]] = [:]
            for (id, h) in byID { out[person(id), default: []] += h }
            return out
        }
    }

    /// The A/B test with a control that exposes users to a goal: the exposing rule's, or with none named the file's
    /// (its rules share it).
    private func controlledTest(_ exposure: Int32?, of rules: [CompiledRule]) -> CompiledVariants? {
        if let exposure { return ruleSet.rules[Int(exposure)].variants.flatMap { $0.controlIndex == nil ? nil : $0 } }
        guard let unit = rules.first.map({ ruleSet.units[Int($0.unit)].name }) else { return nil }
        return rules.lazy.compactMap(\.variants).first { $0.controlIndex != nil && $0.salt == unit }
    }

    /// Counts one exposed user at `at` with their goal events `hits`: converted when one comes within the window, and
    /// with `valued` the sum of the values of those within it.
    private func count(
        at: Int64, hits: [(time: Int64, value: Double?)]?, within: Int64, end: Int64?, valued: Bool, into g: inout GroupResult
    ) {
        g.exposed += 1
        guard let end, at + within <= end else { return }
        g.complete += 1
        let inWindow = (hits ?? []).filter { $0.time >= at && $0.time - at <= within }
        let day = Int64((Double(at) / Double(Milliseconds.day)).rounded(.down))
        var d = g.byDay[day] ?? (0, 0)
        d.complete += 1
        if let first = inWindow.map(\.time).min() {
            g.converted += 1
            g.times.append(first - at)
            d.converted += 1
        }
        if valued { g.values.append(inWindow.reduce(0) { $0 + ($1.value ?? 0) }) }
        g.byDay[day] = d
    }
}
