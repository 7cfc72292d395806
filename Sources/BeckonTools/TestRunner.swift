import BeckonCore
import BeckonYAML
import Foundation

/// `beckon test PATH...`: runs the campaign test files (`tests:`) found under the paths. Each case sends its stream
/// through a fresh engine and checks the actions that came against `expect` (in order, each a subset of an action's
/// fields), `expect_none` and `exact`. A failure shows what was expected, what came, and the explain trace of each
/// expected rule that did not fire.
public enum TestRunner {
    /// Most events one shorthand line may expand to with `repeat`.
    public static let maxRepeat = 100_000
    /// Most bytes (as JSON) of the events one case's `events:` lines expand to, all together: `repeat:` lines of large
    /// events would otherwise hold gigabytes of a 100 KB file.
    public static let maxCaseEventBytes = 64 << 20
    /// How many of a rule's triggers a failure's explain trace shows (the last ones).
    static let maxTraceSteps = 5

    /// `badLines`: what to do at a bad line of a case's `events_file` (its own events are part of the test file, and a
    /// bad one is an error there).
    public static func run(
        paths: [String], filter: String? = nil, badLines: BadLinePolicy = .goOn, console: any Console
    ) -> Int32 {
        let found = RuleLoader.loadTests(paths: paths)
        if !found.diagnostics.isEmpty { console.err(found.rendered()) }
        if found.errorCount > 0 {
            console.err("\(found.errorCount) error(s) in the test files; nothing was run\n")
            return 1
        }
        if found.testSuites.isEmpty {
            console.err("no test files (`tests:`) found in \(paths.joined(separator: ", "))\n")
            return 1
        }
        var tally = Tally()
        var ruleSets: [String: LoadResult] = [:]
        for suite in found.testSuites {
            let dir = (suite.path as NSString).deletingLastPathComponent
            let rulePaths = suite.rules.isEmpty ? [dir.isEmpty ? "." : dir] : suite.rules.map { resolve($0.value, from: dir) }
            let key = rulePaths.joined(separator: "\u{0}")
            let loaded = ruleSets[key] ?? RuleLoader.load(paths: rulePaths)
            ruleSets[key] = loaded
            let cases = suite.cases.filter { c in filter.map { c.name.value.localizedCaseInsensitiveContains($0) } ?? true }
            if cases.isEmpty { continue }
            console.out(Terminal.safe("\(suite.path)  \(suite.name.value)") + "\n")
            guard let ruleSet = loaded.ruleSet else {
                console.out("  ✗ the rules do not load (\(rulePaths.joined(separator: ", "))):\n")
                console.out(indent(loaded.rendered(), by: 6))
                tally.failed += cases.count
                continue
            }
            for c in cases {
                let result = runCase(
                    c, suite: suite, ruleSet: ruleSet, sources: found.sources, badLines: badLines, console: console)
                tally.badLines += result.badLines
                if result.passed {
                    tally.passed += 1
                    console.out("  ✓ \(Terminal.safe(c.name.value))\n")
                } else {
                    tally.failed += 1
                    console.out("  ✗ \(Terminal.safe(c.name.value))\n")
                    // (The report quotes the events' ids and values, which may hold any character.)
                    console.out(indent(Terminal.safe(result.report, keepingLineBreaks: true), by: 6))
                }
            }
        }
        let total = tally.passed + tally.failed
        let suites = found.testSuites.count
        console.out(
            "\n\(suites) test file\(suites == 1 ? "" : "s"), \(total) case\(total == 1 ? "" : "s"): "
                + "\(tally.passed) passed, \(tally.failed) failed"
                + (tally.badLines > 0 ? " (bad lines \(tally.badLines), skipped)" : "") + "\n")
        if total == 0, let filter {
            console.err(Terminal.safe("no test case matches '\(filter)'") + "\n")
            return 1
        }
        return tally.failed == 0 ? 0 : 1
    }

    struct Tally {
        var passed = 0
        var failed = 0
        var badLines = 0
    }

    struct CaseResult {
        var passed: Bool
        var report: String
        /// Bad lines of the case's `events_file`, skipped.
        var badLines = 0
    }

    static func resolve(_ path: String, from dir: String) -> String {
        path.hasPrefix("/") || dir.isEmpty ? path : (dir as NSString).appendingPathComponent(path)
    }

    static func indent(_ text: String, by n: Int) -> String {
        let pad = String(repeating: " ", count: n)
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.isEmpty ? "" : pad + $0 }
            .joined(separator: "\n").trimmingTrailingNewlines() + "\n"
    }

    // MARK: One case

    static func runCase(
        _ c: TestCaseSpec, suite: TestSuiteSpec, ruleSet: CompiledRuleSet, sources: [String: String],
        badLines: BadLinePolicy, console: any Console
    ) -> CaseResult {
        var stream = StreamBuilder(suite: suite, testCase: c, ruleSet: ruleSet)
        stream.build(badLines: badLines, console: console)
        var problems = DiagnosticBag()
        problems.append(contentsOf: stream.diagnostics)
        let expect = c.expect.compactMap { Expectation.parse($0, ruleSet: ruleSet, into: &problems) }
        let expectNone = c.expectNone.compactMap { Expectation.parse($0, ruleSet: ruleSet, into: &problems) }
        var end = stream.events.map(\.timestamp).max() ?? Int64.min
        if let u = c.until {
            switch DryRunRunner.untilTime(u.value, last: end) {
            case .success(let t): end = max(end, t)
            case .failure(let p):
                problems.error(
                    .wrongType, "'until' \(p.message)", at: u.location, suggestion: "write it like 2026-03-08T00:00:00Z or +7d")
            }
        }
        if problems.hasErrors {
            return CaseResult(
                passed: false, report: DiagnosticRenderer(sources: sources).render(problems.sorted), badLines: stream.badLines)
        }

        let engine = Engine(ruleSet: ruleSet)
        var came: [FiredAction] = []
        for e in stream.events { came += engine.process(e).actions }
        if end != Int64.min { came += engine.advance(to: end).actions }

        // Expected, in order: each matched to the earliest action after the previous match (greedy is optimal for
        // an ordered subsequence).
        var matches: [Int?] = []
        var next = 0
        for x in expect {
            let hit = came[next...].firstIndex { x.matches($0) }
            matches.append(hit)
            if let hit { next = hit + 1 }
        }
        let unwanted = expectNone.map { x in came.firstIndex { x.matches($0) } }
        let matched = Set(matches.compactMap { $0 })
        let extra = c.exact ? came.indices.filter { !matched.contains($0) } : []
        let passed = !matches.contains(nil) && !unwanted.contains { $0 != nil } && extra.isEmpty
        guard !passed else { return CaseResult(passed: true, report: "", badLines: stream.badLines) }

        var out = "at \(c.location)\n"
        if !expect.isEmpty {
            out += "expected, in this order\(c.exact ? " and nothing else" : ""):\n"
            for (n, (x, m)) in zip(expect, matches).enumerated() {
                out += "  \(n + 1) \(m == nil ? "✗" : "✓") \(x.text)  " + (m.map { "came: #\($0 + 1)" } ?? "did not come") + "\n"
            }
        }
        if !expectNone.isEmpty {
            out += "expected none of:\n"
            for (x, m) in zip(expectNone, unwanted) {
                out += "  \(m == nil ? "✓" : "✗") \(x.text)  " + (m.map { "came: #\($0 + 1)" } ?? "did not come") + "\n"
            }
        }
        if !extra.isEmpty { out += "not expected (exact): " + extra.map { "#\($0 + 1)" }.joined(separator: ", ") + "\n" }
        out += "what came (\(came.count) action\(came.count == 1 ? "" : "s")):\n"
        if came.isEmpty { out += "  nothing\n" }
        for (i, a) in came.enumerated() {
            out +=
                "  #\(i + 1)  \(Timestamp(milliseconds: a.time))  \(a.userID)  \(a.unit)/\(a.rule)  \(a.kind)  \(DryRunRunner.detail(a))\n"
        }
        for (n, (x, m)) in zip(expect, matches).enumerated() where m == nil {
            // The nearest action that came (fewest fields off) says more than a trace when the rule did fire.
            let near = came.indices.map { ($0, x.differences(came[$0])) }.filter { !$0.1.isEmpty && x.sameSource(came[$0.0]) }
                .min { $0.1.count < $1.1.count }
            if let (i, diffs) = near {
                out += "\nthe nearest to expectation \(n + 1) is #\(i + 1), but\n" + diffs.map { "  \($0)\n" }.joined()
            } else {
                out += why(x, stream: stream, ruleSet: ruleSet, end: end)
            }
        }
        return CaseResult(passed: false, report: out, badLines: stream.badLines)
    }

    /// The explain trace of an expected rule that did not fire, for each user it was expected for.
    static func why(_ x: Expectation, stream: StreamBuilder, ruleSet: CompiledRuleSet, end: Int64) -> String {
        guard let rule = x.rule else { return "(name a `rule:` in the expectation to see why it did not fire)\n" }
        let users = x.user.map { [$0] } ?? stream.users
        var out = ""
        for user in users.prefix(3) {
            var tracer = ExplainRunner.Tracer(ruleSet: ruleSet, user: user, rule: rule.index)
            for e in stream.events { tracer.feed(e) }
            tracer.finish(at: end)
            var steps = tracer.steps.filter { s in s.outcome.verdicts.contains { $0.rule == rule.index } }
            let omitted = max(0, steps.count - maxTraceSteps)
            steps.removeFirst(omitted)
            out += "\nwhy \(rule.qualifiedID) did not fire for \(user)"
            out += omitted > 0 ? " (its last \(maxTraceSteps) triggers; \(omitted) before them not shown):\n" : ":\n"
            if steps.isEmpty {
                let n = stream.events.count { $0.userID == user }
                out +=
                    "  none of \(user)'s \(n) event\(n == 1 ? "" : "s") triggers it (it waits for \(rule.triggerDescription))\n"
                continue
            }
            let text = ExplainRunner.text(steps, pending: tracer.pending, ruleSet: ruleSet, rule: rule.index, user: user)
            out += indent(String(text.drop { $0 != "\n" }.dropFirst()).trimmingLeadingNewlines(), by: 2)
        }
        return out
    }

    // MARK: Expectations

    /// One `expect` item: a subset of an action's fields. `user`, `campaign`, `rule`, `action`, `trigger`, `at`
    /// and `id` name the action's envelope; any other key is one of the action's own fields (`message`, `screen`…),
    /// compared as a subset (maps: these keys; lists: these items, in order).
    struct Expectation {
        var text: String
        var user: String?
        var rule: CompiledRule?
        var at: Int64?
        var fields: [(key: String, value: Value)]

        static func parse(_ item: TestItem, ruleSet: CompiledRuleSet, into problems: inout DiagnosticBag) -> Expectation? {
            guard case .map(let m) = item.value else {
                problems.error(
                    .wrongType, "an expectation is a map of action fields, found \(item.value.typeName)", at: item.location,
                    suggestion: "write it like { user: alice, rule: welcome, action: message }")
                return nil
            }
            var x = Expectation(text: flow(item.value), fields: [])
            for (k, v) in m.entries {
                guard case .string(let key) = k else { continue }
                switch key {
                case "user", "userId":
                    x.user = scalarText(v)
                case "rule":
                    let name = scalarText(v)
                    guard let r = ruleSet.rule(named: name) else {
                        let hint = Suggest.nearest(name, in: ruleSet.rules.map(\.id))
                        problems.error(
                            .unknownIdentifier,
                            "no rule '\(name)' in the rules under test" + (hint.map { "; did you mean '\($0)'?" } ?? ""),
                            at: item.valueLocation("rule"), suggestion: hint.map { "replace it with '\($0)'" })
                        return nil
                    }
                    x.rule = r
                case "at":
                    guard let t = Timestamp.parse(scalarText(v)) else {
                        problems.error(
                            .wrongType, "'at' in an expectation is a timestamp, found '\(scalarText(v))'",
                            at: item.valueLocation("at"),
                            suggestion: "write it like 2026-03-01T09:00:00Z")
                        return nil
                    }
                    x.at = t.milliseconds
                default:
                    x.fields.append((key, v))
                }
            }
            return x.checked(item, into: &problems) ? x : nil
        }

        /// Whether the expectation names an action kind and fields that can come (an expectation that can never match
        /// would let `expect_none` pass by accident): `action` is a kind the named rule fires, and every other key is
        /// a field of that kind (of any kind the rule fires, without `action`), a map's keys among the field's.
        func checked(_ item: TestItem, into problems: inout DiagnosticBag) -> Bool {
            var kinds = rule.map { Array($0.firedKinds) } ?? ActionKind.allCases
            if let (_, v) = fields.first(where: { $0.key == "action" }) {
                let name = scalarText(v)
                guard let kind = ActionKind(rawValue: name) else {
                    let hint = Suggest.nearest(name, in: ActionKind.allCases.map(\.rawValue))
                    problems.error(
                        .unknownKey,
                        "no action kind '\(name)'; the kinds are "
                            + ActionKind.allCases.map(\.rawValue).joined(separator: ", "),
                        at: item.valueLocation("action"), suggestion: hint.map { "did you mean '\($0)'?" })
                    return false
                }
                if let rule, !rule.firedKinds.contains(kind) {
                    problems.error(
                        .unknownKey,
                        "rule '\(rule.id)' fires no '\(name)' action; it fires "
                            + rule.firedKinds.map(\.rawValue).sorted().joined(separator: ", "),
                        at: item.valueLocation("action"))
                    return false
                }
                kinds = [kind]
            }
            // (A field's keys are the union of the kinds'; a field whose keys are free in one kind is free.)
            var known: [String: [String]?] = [:]
            for k in kinds {
                for (field, keys) in k.fields {
                    switch (known[field], keys) {
                    case (nil, _): known[field] = keys
                    case (.some(.some(let had)), .some(let more)): known[field] = had + more
                    default: known[field] = .some(nil)
                    }
                }
            }
            let what =
                kinds.count == 1
                ? "a '\(kinds[0].rawValue)' action" : rule.map { "an action of rule '\($0.id)'" } ?? "any action"
            for (key, value) in fields where !ActionKind.envelope.contains(key) {
                guard let keys = known[key] else {
                    let hint = Suggest.nearest(key, in: Array(known.keys) + ActionKind.envelope)
                    problems.error(
                        .unknownKey,
                        "'\(key)' is not a field of \(what); its fields are "
                            + (known.keys.sorted() + ["user", "at"]).joined(separator: ", "),
                        at: item.keyLocation(key), suggestion: hint.map { "did you mean '\($0)'?" })
                    return false
                }
                guard let keys, case .map(let m) = value else { continue }
                for case .string(let sub) in m.entries.map(\.key) where !keys.contains(sub) {
                    let hint = Suggest.nearest(sub, in: keys)
                    problems.error(
                        .unknownKey,
                        "'\(key)' has no key '\(sub)'; its keys are \(Set(keys).sorted().joined(separator: ", "))",
                        at: item.valueLocation(key), suggestion: hint.map { "did you mean '\($0)'?" })
                    return false
                }
            }
            return true
        }

        func matches(_ a: FiredAction) -> Bool { sameSource(a) && differences(a).isEmpty }

        /// Same user (when given) and same rule (when given).
        func sameSource(_ a: FiredAction) -> Bool {
            if let user, a.userID != user { return false }
            if let rule, a.unit + "/" + a.rule != rule.qualifiedID { return false }
            return true
        }

        /// The expected fields this action does not have, as `at is …, expected …`.
        func differences(_ a: FiredAction) -> [String] {
            var out: [String] = []
            if let at, a.time != at {
                out.append("at is \(Timestamp(milliseconds: a.time)), expected \(Timestamp(milliseconds: at))")
            }
            for (k, want) in fields {
                let got: Value? =
                    switch k {
                    case "campaign", "ruleset": .string(a.unit)
                    case "action": .string(a.kind)
                    case "trigger": .string(a.trigger)
                    case "variant": a.variant.map { .string($0) }
                    case "id": .string(a.id)
                    default: a[k]
                    }
                guard let got else {
                    out.append("it has no \(k) (its fields: \(a.fields.map(\.key).joined(separator: ", ")))")
                    continue
                }
                if !subset(want, of: got) { out.append("\(k) is \(flow(got)), expected \(flow(want))") }
            }
            return out
        }
    }

    /// Whether `want` is contained in `got`: maps by key, lists as an ordered subsequence, numbers by value.
    static func subset(_ want: Value, of got: Value) -> Bool {
        switch (want, got) {
        case (.map(let w), .map(let g)):
            return w.entries.allSatisfy { k, v in g[k].map { subset(v, of: $0) } ?? false }
        case (.list(let w), .list(let g)):
            var i = 0
            for item in w {
                guard let hit = g[i...].firstIndex(where: { subset(item, of: $0) }) else { return false }
                i = hit + 1
            }
            return true
        default:
            if case .bool(true) = want.celEquals(got) { return true }
            return false
        }
    }

    static func scalarText(_ v: Value) -> String {
        if case .string(let s) = v { return s }
        return JSONWriter.encode(v)
    }

    /// A value the way it was written, in YAML flow style: `{ user: alice, rule: welcome }`.
    static func flow(_ v: Value) -> String {
        switch v {
        case .map(let m):
            return "{ " + m.entries.map { "\(flow($0.key)): \(flow($0.value))" }.joined(separator: ", ") + " }"
        case .list(let xs): return "[" + xs.map(flow).joined(separator: ", ") + "]"
        case .string(let s):
            let plain =
                !s.isEmpty && s.allSatisfy { $0.isLetter || $0.isNumber || "_-./:@ ".contains($0) } && s.first != " "
                && s.last != " " && !s.contains(": ") && Double(s) == nil
                && !["true", "false", "null", "yes", "no", "on", "off", "~"].contains(s.lowercased())
            return plain ? s : JSONWriter.encode(v)
        default: return JSONWriter.encode(v)
        }
    }
}

// MARK: The stream

/// Turns a test case's events (an `events_file`, then the inline events in shorthand or Segment form) into bound
/// events. Users with starting traits get an `identify` at the time of the first event, before it.
struct StreamBuilder {
    let suite: TestSuiteSpec
    let testCase: TestCaseSpec
    let ruleSet: CompiledRuleSet
    let decoder: SegmentDecoder
    private(set) var events: [BoundEvent] = []
    private(set) var diagnostics: [Diagnostic] = []
    /// Users in order of first appearance.
    private(set) var users: [String] = []
    /// Bad lines of the `events_file`, skipped.
    private(set) var badLines = 0
    /// Bytes (as JSON) of the events the case's lines expanded to so far (``TestRunner/maxCaseEventBytes``), and
    /// whether they passed the bound (the lines after it are not expanded).
    private var eventBytes = 0
    private var overBytes = false

    static let shorthandKeys = [
        "user", "event", "screen", "identify", "at", "after", "properties", "context", "id", "repeat", "every",
    ]

    init(suite: TestSuiteSpec, testCase: TestCaseSpec, ruleSet: CompiledRuleSet) {
        self.suite = suite
        self.testCase = testCase
        self.ruleSet = ruleSet
        self.decoder = SegmentDecoder(ruleSet: ruleSet)
    }

    mutating func build(badLines policy: BadLinePolicy, console: any Console) {
        if let f = testCase.eventsFile { readFile(f, badLines: policy, console: console) }
        var now = events.last?.timestamp
        for item in testCase.events { expand(item, now: &now) }
        // Starting traits: an identify per user, first, at the stream's first instant.
        guard let start = events.map(\.timestamp).min() else { return }
        var first: [BoundEvent] = []
        for (user, traits) in testCase.users {
            if let plan = ruleSet.plan, case .map(let m) = traits {
                for case (.string(let t), _) in m.entries where !plan.traits.contains(t) {
                    let hint = Suggest.nearest(t, in: Array(plan.traits))
                    diagnostics.append(
                        .error(
                            .unknownTrait,
                            "\(user)'s starting traits: the tracking plan has no trait '\(t)'"
                                + (hint.map { "; did you mean '\($0)'?" } ?? ""), at: testCase.location))
                }
            }
            let m = ValueMap([
                ("type", .string("identify")), ("userId", .string(user)), ("traits", traits),
                ("timestamp", .string(Timestamp(milliseconds: start).description)),
            ])
            if let e = decode(.map(m), at: testCase.location) { first.append(e) }
        }
        events = first + events
        for e in events where !users.contains(e.userID) { users.append(e.userID) }
    }

    /// The `events_file`, through the one event reader and its bad-line policy: a bad line is reported and skipped,
    /// or (`--strict`) the case fails at it.
    private mutating func readFile(_ f: Located<String>, badLines policy: BadLinePolicy, console: any Console) {
        let dir = (suite.path as NSString).deletingLastPathComponent
        let path = TestRunner.resolve(f.value, from: dir)
        guard let stream = EventStream(path: path, badLines: policy) else {
            diagnostics.append(.error(.unreadableFile, EventStream.cannotOpen(path), at: f.location))
            return
        }
        stream.events(decoder: decoder, console: console) { events.append($0) }
        let failed = stream.finish(console: console)
        if let bad = stream.bad.stoppedAt {
            let at = SourceLocation(file: path, position: SourcePosition(line: bad.line, column: bad.column))
            diagnostics.append(.error(.invalidValue, "bad event: \(bad.message) (--strict)", at: at))
        } else if failed, let error = stream.readError {
            diagnostics.append(
                .error(
                    .unreadableFile, "events file '\(path)': reading stopped after line \(stream.lineNumber): \(error)",
                    at: f.location))
        }
        if !failed { badLines = stream.badLines }
    }

    /// One inline item: shorthand (`{ user, event, at }`) or a Segment object (it has `type`).
    private mutating func expand(_ item: TestItem, now: inout Int64?) {
        guard case .map(let m) = item.value else {
            error("an event is a map like { user: alice, event: E_Opened_App, at: 2026-03-01T09:00:00Z }", at: item.location)
            return
        }
        if m[string: "type"] != nil {
            var seg = m
            if seg[string: "timestamp"] == nil, let t = now {
                seg[string: "timestamp"] = .string(Timestamp(milliseconds: t).description)
            }
            if let e = decode(.map(seg), at: item.location) {
                events.append(e)
                now = e.timestamp
            }
            return
        }
        for (k, _) in m.entries {
            guard case .string(let key) = k, !StreamBuilder.shorthandKeys.contains(key) else { continue }
            let hint = Suggest.nearest(key, in: StreamBuilder.shorthandKeys)
            diagnostics.append(
                .error(
                    .unknownKey, "unknown key '\(key)' in a test event" + (hint.map { "; did you mean '\($0)'?" } ?? ""),
                    at: item.keyLocation(key),
                    suggestion: "known keys: " + StreamBuilder.shorthandKeys.joined(separator: ", ")
                        + "; or write a Segment event with `type:`"))
            return
        }
        var seg = ValueMap()
        let kinds = ["event", "screen", "identify"].filter { m[string: $0] != nil }
        guard kinds.count == 1 else {
            error(
                kinds.isEmpty
                    ? "a test event needs one of `event`, `screen` or `identify`"
                    : "a test event has one of `event`, `screen`, `identify`, not "
                        + kinds.joined(separator: " and "), at: item.location)
            return
        }
        if !checkPlan(m, kinds[0], item) { return }
        switch kinds[0] {
        case "event":
            seg[string: "type"] = .string("track")
            seg[string: "event"] = m[string: "event"]
        case "screen":
            seg[string: "type"] = .string("screen")
            seg[string: "name"] = m[string: "screen"]
        default:
            seg[string: "type"] = .string("identify")
            seg[string: "traits"] = m[string: "identify"]
        }
        let onlyUser = testCase.users.count == 1 ? testCase.users[0].user : nil
        guard let user = m[string: "user"].map(TestRunner.scalarText) ?? onlyUser else {
            error("a test event needs `user:` (the case does not have exactly one user in `users`)", at: item.location)
            return
        }
        seg[string: "userId"] = .string(user)
        if let p = m[string: "properties"] { seg[string: "properties"] = p }
        let context = merged([suite.context, testCase.context, m[string: "context"]])
        if let context { seg[string: "context"] = context }

        var time: Int64
        if let at = m[string: "at"] {
            guard let t = Timestamp.parse(TestRunner.scalarText(at)) else {
                error(
                    "'at' is a timestamp like 2026-03-01T09:00:00Z, found '\(TestRunner.scalarText(at))'",
                    at: item.valueLocation("at"))
                return
            }
            time = t.milliseconds
        } else if let after = m[string: "after"] {
            guard let d = DSLDuration.parse(TestRunner.scalarText(after)) else {
                error(
                    "'after' is a duration like 90s, 10m, 2h or 7d, found '\(TestRunner.scalarText(after))'",
                    at: item.valueLocation("after"))
                return
            }
            guard let t = now else {
                error("the first event needs `at:` (`after:` counts from the event before)", at: item.keyLocation("after"))
                return
            }
            time = t + d
        } else {
            guard let t = now else {
                error("the first event needs `at:`; later ones default to the time of the event before", at: item.location)
                return
            }
            time = t
        }
        var count = 1
        var every: Int64 = 0
        if let r = m[string: "repeat"] {
            guard case .int(let n) = r, n >= 1, n <= TestRunner.maxRepeat else {
                error("'repeat' is a whole number from 1 to \(TestRunner.maxRepeat)", at: item.valueLocation("repeat"))
                return
            }
            count = Int(n)
            guard let everyValue = m[string: "every"] else {
                error("'repeat' needs `every:`, a duration like 1d", at: item.keyLocation("repeat"))
                return
            }
            // (A value that is there but no duration is the value's mistake, shown at it.)
            guard let e = DSLDuration.parse(TestRunner.scalarText(everyValue)), e > 0 || n == 1 else {
                error(
                    "'every' is '\(TestRunner.scalarText(everyValue))': it needs a duration longer than 0 like 1d or 30m",
                    at: item.valueLocation("every"))
                return
            }
            every = e
        } else if m[string: "every"] != nil {
            error("'every' goes with `repeat:`", at: item.keyLocation("every"))
            return
        }
        for i in 0..<count {
            var one = seg
            one[string: "timestamp"] = .string(Timestamp(milliseconds: time).description)
            if let id = m[string: "id"] {
                one[string: "messageId"] = .string(TestRunner.scalarText(id) + (count > 1 ? "-\(i + 1)" : ""))
            }
            guard let e = decode(.map(one), at: item.location) else { return }
            events.append(e)
            now = time
            time += every
        }
    }

    /// With a tracking plan, a test's event, screen and trait names must be in it: a misspelt name would make
    /// an `expect_none` pass for the wrong reason.
    private mutating func checkPlan(_ m: ValueMap, _ kind: String, _ item: TestItem) -> Bool {
        guard let plan = ruleSet.plan, let v = m[string: kind] else { return true }
        var names: [(String, Bool, [String])] = []
        switch kind {
        case "event": names = [(TestRunner.scalarText(v), plan.events.contains(TestRunner.scalarText(v)), Array(plan.events))]
        case "screen":
            let name = TestRunner.scalarText(v)
            names = [(name, plan.has(event: "screen:" + name), Array(plan.screens))]
        default:
            if case .map(let traits) = v {
                for case (.string(let t), _) in traits.entries { names.append((t, plan.traits.contains(t), Array(plan.traits))) }
            }
        }
        var ok = true
        for (name, known, candidates) in names where !known {
            let what = kind == "identify" ? "trait" : kind
            let hint = Suggest.nearest(name, in: candidates)
            diagnostics.append(
                .error(
                    kind == "identify" ? .unknownTrait : .unknownEvent,
                    "the tracking plan has no \(what) '\(name)'" + (hint.map { "; did you mean '\($0)'?" } ?? ""),
                    at: item.valueLocation(kind), suggestion: hint.map { "replace it with '\($0)'" }))
            ok = false
        }
        return ok
    }

    private func merged(_ maps: [Value?]) -> Value? {
        var out = ValueMap()
        var any = false
        for case .map(let m)? in maps {
            any = true
            for (k, v) in m.entries { out[k] = v }
        }
        return any ? .map(out) : nil
    }

    private mutating func decode(_ v: Value, at location: SourceLocation) -> BoundEvent? {
        guard !overBytes else { return nil }
        let json = JSONWriter.encode(v)
        eventBytes += json.utf8.count
        guard eventBytes <= TestRunner.maxCaseEventBytes else {
            overBytes = true
            error(
                "the case's events come to more than \(TestRunner.maxCaseEventBytes >> 20) MiB (as JSON) by this line; "
                    + "repeat fewer events, or put a long stream in an `events_file`", at: location)
            return nil
        }
        do throws(DecodeError) {
            return try decoder.decode(json)
        } catch {
            diagnostics.append(.error(.invalidValue, "bad test event: \(error.message)", at: location))
            return nil
        }
    }

    private mutating func error(_ message: String, at location: SourceLocation) {
        diagnostics.append(.error(.invalidValue, message, at: location))
    }
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var s = self
        while s.hasSuffix("\n") { s.removeLast() }
        return s
    }

    func trimmingLeadingNewlines() -> String { String(drop { $0 == "\n" }) }
}
