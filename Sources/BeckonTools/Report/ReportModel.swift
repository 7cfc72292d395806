import BeckonCore

/// What `beckon report` measures: per rule, what happened to its triggers; per campaign or rule set, who was
/// exposed (treatment: the first fire; holdout: the first `held_back`) and, per goal, who converted within its window.
struct Report {
    var paths: [String]
    var eventsFile: String
    var events = 0
    var users = 0
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

struct RuleRow {
    var id: String
    var triggered: Int
    var fired: Int
    var heldBack: Int
    var scheduled: Int
    /// Why triggers did not fire, most frequent first: `limit:per_day`, `lost`, `if`, `global_limit:per_session`…
    var suppressed: [(reason: String, count: Int)]
}

struct GoalReport {
    var id: String
    var description: String?
    var event: String
    var withinMs: Int64
    /// The rule whose first fire exposes a user, or `nil` for any rule of the file.
    var exposureRule: String?
    var treatment: GroupResult
    /// `nil` when the file has no holdout.
    var holdout: GroupResult?
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
        engine = Engine(ruleSet: ruleSet, options: .init(recordVerdicts: true, trackGoals: true))
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
    func finish(at end: Int64) { collect(engine.advance(to: end)) }

    private func collect(_ o: EventOutcome) {
        for v in o.verdicts { triggered[Int(ruleSet.rules[Int(v.rule)].unit)].insert(v.userID) }
        for a in o.actions {
            guard let r = ruleIndex[a.unit + "/" + a.rule] else { continue }
            if firstByRule[Int(r)][a.userID] == nil { firstByRule[Int(r)][a.userID] = a.time }
        }
        for h in o.goalHits { hits[Int(h.unit)][h.goal][h.userID, default: []].append((h.time, h.value)) }
    }

    func report(paths: [String], eventsFile: String, badLines: Int, end: Int64?) -> Report {
        var report = Report(paths: paths, eventsFile: eventsFile)
        let s = engine.stats
        report.events = s.events
        report.users = users.count
        report.badLines = badLines
        report.duplicates = s.duplicates
        report.offPlan = s.offPlan
        report.first = first
        report.last = last
        report.end = end
        for (u, unit) in ruleSet.units.enumerated() {
            let rules = ruleSet.rules.filter { Int($0.unit) == u }
            var ur = UnitReport(name: unit.name, kind: unit.kind.rawValue, holdout: unit.holdout)
            ur.usersTriggered = triggered[u].count
            ur.rules = rules.map { r in
                let i = Int(r.index)
                return RuleRow(
                    id: r.id, triggered: s.triggered[i], fired: s.fired[i], heldBack: s.heldBack[i], scheduled: s.scheduled[i],
                    suppressed: RuleCount.reasons(s.blocked[i]))
            }
            let exposedAny = exposure(rules.map(\.index))
            for user in exposedAny.keys {
                if unit.isHeldOut(user) { ur.exposed.holdout += 1 } else { ur.exposed.treatment += 1 }
            }
            for (g, goal) in unit.goals.enumerated() {
                let exposed = goal.exposureRule.map { exposure([$0]) } ?? exposedAny
                var t = GroupResult()
                var h = GroupResult()
                for (user, at) in exposed {
                    let valued = goal.valueProperty != nil
                    if unit.isHeldOut(user) {
                        count(at: at, hits: hits[u][g][user], within: goal.withinMs, end: end, valued: valued, into: &h)
                    } else {
                        count(at: at, hits: hits[u][g][user], within: goal.withinMs, end: end, valued: valued, into: &t)
                    }
                }
                t.times.sort()
                h.times.sort()
                var gr = GoalReport(
                    id: goal.id, description: goal.description, event: goal.event, withinMs: goal.withinMs,
                    exposureRule: goal.exposureRule.map { ruleSet.rules[Int($0)].id }, treatment: t,
                    holdout: unit.holdout > 0 ? h : nil, value: goal.valueProperty)
                if unit.holdout > 0 { gr.difference = Statistics.difference(t.converted, t.complete, h.converted, h.complete) }
                ur.goals.append(gr)
            }
            ur.tests = tests(unit: u, rules: rules, exposedAny: exposedAny, end: end)
            report.units.append(ur)
        }
        return report
    }

    /// The unit's A/B tests: the file's (every rule shares its variants, hashed with the file's name), then each rule's
    /// own. Users are grouped by their variant; each variant's goal results are compared with the control's.
    private func tests(unit u: Int, rules: [CompiledRule], exposedAny: [String: Int64], end: Int64?) -> [TestReport] {
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
                // (A file's holdout never reaches a rule's test: its users are in neither arm.)
                for (user, at) in exposed where !unit.isHeldOut(user) {
                    count(
                        at: at, hits: hits[u][g][user], within: goal.withinMs, end: end, valued: goal.valueProperty != nil,
                        into: &groups[v.index(of: user)][g])
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

    /// The first exposure time per user among these rules.
    private func exposure(_ rules: [Int32]) -> [String: Int64] {
        var out: [String: Int64] = [:]
        for r in rules {
            for (user, t) in firstByRule[Int(r)] { out[user] = min(out[user] ?? t, t) }
        }
        return out
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
