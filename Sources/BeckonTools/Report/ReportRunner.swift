import BeckonCore
import BeckonYAML
import Foundation

/// `beckon report PATH... --events FILE [--format text|json] [--html FILE]`: per rule, what its triggers came to;
/// per campaign and rule set, exposure and each goal's conversion, time to goal, and treatment against holdout.
public enum ReportRunner {
    public enum Format: String, Sendable, CaseIterable { case text, json }

    public struct Options: Sendable {
        public var paths: [String]
        public var events: String
        public var format: Format = .text
        public var html: String?
        public var until: String?
        /// What to do at a bad event line.
        public var badLines: BadLinePolicy = .goOn
        public init(
            paths: [String], events: String, format: Format = .text, html: String? = nil, until: String? = nil,
            badLines: BadLinePolicy = .goOn
        ) {
            self.paths = paths
            self.events = events
            self.format = format
            self.html = html
            self.until = until
            self.badLines = badLines
        }
    }

    public static func run(_ o: Options, console: any Console) -> Int32 {
        let loaded = RuleLoader.load(paths: o.paths)
        guard let ruleSet = loaded.ruleSet else {
            console.err(loaded.rendered())
            return 1
        }
        guard let stream = EventStream.opened(o.events, badLines: o.badLines, console: console) else { return 1 }
        let builder = ReportBuilder(ruleSet: ruleSet)
        stream.events(decoder: SegmentDecoder(ruleSet: ruleSet), console: console) { builder.process($0) }
        if stream.finish(console: console) { return 1 }
        let bad = stream.badLines
        var end = builder.last
        if let u = o.until {
            guard let t = DryRunRunner.untilTime(u, last: builder.last ?? Int64.min, console: console) else { return 64 }
            end = max(end ?? t, t)
        }
        if let end { builder.finish(at: end) }
        let report = builder.report(paths: o.paths, eventsFile: o.events, badLines: bad, end: end)
        switch o.format {
        case .text: console.out(text(report))
        case .json: console.out(JSONWriter.encode(json(report)) + "\n")
        }
        if let path = o.html {
            do {
                try writePage(ReportHTML.page(report), to: path)
            } catch {
                console.err(Terminal.safe("error: cannot write \(path): \(error.reason)") + "\n")
                return 1
            }
        }
        return 0
    }

    /// Why a page could not be written.
    struct WriteProblem: Error {
        var reason: String
    }

    /// Writes `page` to `path`: a regular file, or none yet, is replaced whole and at once (through a symbolic link
    /// to it: the link stays); anything else that takes bytes — standard output, a pipe, a terminal, `/dev/null` — is
    /// written to as it is, never replaced by a file; a folder is an error, and so is a write that fails (a full disk).
    static func writePage(_ page: String, to path: String) throws(WriteProblem) {
        var st = stat()
        if stat(path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFREG {
            if (st.st_mode & S_IFMT) == S_IFDIR { throw WriteProblem(reason: "it is a folder; give a file's path") }
            guard let handle = FileHandle(forWritingAtPath: path) else {
                throw WriteProblem(reason: String(cString: strerror(errno)))
            }
            do {
                try handle.write(contentsOf: Data(page.utf8))
                try handle.close()
            } catch {
                throw WriteProblem(reason: reason(error))
            }
            return
        }
        // (Through a symbolic link, its file is replaced, not the link.)
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath()
        do {
            try page.write(to: target, atomically: true, encoding: .utf8)
        } catch {
            throw WriteProblem(reason: reason(error))
        }
    }

    /// The system's words for why a write failed (Foundation's own on Linux are a domain and a number).
    private static func reason(_ error: any Error) -> String {
        let e = error as NSError
        let posix = e.domain == NSPOSIXErrorDomain ? e : e.userInfo[NSUnderlyingErrorKey] as? NSError
        if let posix, posix.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(posix.code))) }
        return e.localizedDescription
    }

    // MARK: Text

    static func percent(_ x: Double?) -> String {
        guard let x else { return "-" }
        return String(format: "%.1f%%", x * 100)
    }

    static func points(_ x: Double) -> String { String(format: "%+.1f", x * 100) }

    static func time(_ ms: Int64?) -> String { ms.map(HumanDuration.format) ?? "-" }

    static func text(_ r: Report) -> String {
        var out = "report: \(r.paths.joined(separator: " ")) on \(r.eventsFile)\n"
        out += "\(r.events) events, \(r.users) users" + (r.mergedIDs > 0 ? " (\(r.mergedIDs) ids merged in)" : "")
        if let f = r.first, let l = r.last { out += ", \(Timestamp(milliseconds: f)) to \(Timestamp(milliseconds: l))" }
        if let e = r.end, e != r.last { out += ", observed until \(Timestamp(milliseconds: e))" }
        out += " (bad lines \(r.badLines), duplicates \(r.duplicates)\(r.offPlan > 0 ? ", off plan \(r.offPlan)" : ""))\n"
        for u in r.units {
            let holdout = u.holdout > 0 ? "holdout \(percent(u.holdout))" : "no holdout"
            out += "\n\(u.kind) \(u.name) (\(holdout)): \(u.usersTriggered) users triggered a rule, "
            out +=
                u.holdout > 0
                ? "\(u.exposed.treatment) exposed, \(u.exposed.holdout) held back\n" : "\(u.exposed.treatment) exposed\n"
            let width = max(4, u.rules.map(\.id.count).max() ?? 4)
            out += "  " + "rule".padding(width) + "  triggered  fired  held back  pending  not fired\n"
            for row in u.rules {
                let not = row.suppressed.map { "\($0.reason) \($0.count)" }.joined(separator: ", ")
                out +=
                    "  " + row.id.padding(width) + "  " + String(row.triggered).leftPadding(9) + "  "
                    + String(row.fired).leftPadding(5)
                    + "  " + String(row.heldBack).leftPadding(9) + "  " + String(row.pending).leftPadding(7) + "  "
                    + (not.isEmpty ? "-" : not) + "\n"
            }
            // What waited on the way is told apart: each of those ended in one of the columns above.
            for row in u.rules where row.scheduled > 0 || !row.deferred.isEmpty {
                let ways =
                    (row.scheduled > 0 ? ["\(row.scheduled) waited for their time"] : [])
                    + row.deferred.map { "\($0.count) \($0.reason == "held" ? "held by quiet hours" : "held by the send rate")" }
                out += "  (\(row.id): \(ways.joined(separator: ", ")); each counted once above, where it ended)\n"
            }
            for g in u.goals {
                out += "\n  goal \(g.id)" + (g.description.map { ": \($0)" } ?? "") + "\n"
                out +=
                    "    \(g.event) within \(DSLDuration.format(g.withinMs)) of exposure (\(g.exposureRule.map { "first fire of \($0)" } ?? "first fire of any rule"))\n"
                out += "    group      exposed  full window  converted  rate    95% CI           median    p90\n"
                func line(_ name: String, _ x: GroupResult) -> String {
                    let ci = x.interval.map { "[\(percent($0.low)), \(percent($0.high))]" } ?? "-"
                    return "    " + name.padding(9) + "  " + String(x.exposed).leftPadding(7) + "  "
                        + String(x.complete).leftPadding(11) + "  "
                        + String(x.converted).leftPadding(9) + "  " + percent(x.rate).padding(6) + "  " + ci.padding(15) + "  "
                        + time(x.median).padding(8) + "  " + time(x.p90) + "\n"
                }
                out += line("treatment", g.treatment)
                if let h = g.holdout { out += line(g.comparison, h) }
                if let v = g.value {
                    out += "    \(v) per exposed user: treatment \(money(g.treatment.meanValue, g.treatment.valueInterval))"
                    if let h = g.holdout { out += ", \(g.comparison) \(money(h.meanValue, h.valueInterval))" }
                    out += "\n"
                }
                if let d = g.difference {
                    out += "    difference: \(points(d.estimate)) points, 95% CI [\(points(d.low)), \(points(d.high))]"
                    out +=
                        d.low > 0
                        ? " (the campaign helps)\n"
                        : d.high < 0 ? " (the campaign hurts)\n" : " (not distinguishable from no effect)\n"
                } else if g.holdout != nil {
                    out += "    difference: - (a group has no user with a full window yet)\n"
                }
            }
            for t in u.tests { out += test(t, goals: u.goals) }
        }
        return out
    }

    /// A mean value with its interval: `12.40 [8.10, 16.70]`.
    static func money(_ mean: Double?, _ ci: (low: Double, high: Double)?) -> String {
        guard let mean else { return "-" }
        return String(format: "%.2f", mean) + (ci.map { String(format: " [%.2f, %.2f]", $0.low, $0.high) } ?? "")
    }

    static func verdict(_ d: (estimate: Double, low: Double, high: Double)) -> String {
        d.low > 0 ? "better" : d.high < 0 ? "worse" : "no clear difference"
    }

    /// An A/B test: per goal, each variant's conversion (and value) and its difference from the control.
    static func test(_ t: TestReport, goals: [GoalReport]) -> String {
        var out = "\n  test " + (t.rule.map { "of rule \($0)" } ?? "of the whole file") + ": "
        out += t.variants.map { "\($0.id) \(String(format: "%g", $0.weight))%" + ($0.control ? " (control)" : "") }.joined(
            separator: ", ")
        out += "\n"
        for (g, goal) in goals.enumerated() {
            out += "    goal \(goal.id)\n"
            out += "    variant       exposed  full window  converted  rate    95% CI           vs control (points, 95% CI)\n"
            for v in t.variants {
                let x = v.goals[g].result
                let ci = x.interval.map { "[\(percent($0.low)), \(percent($0.high))]" } ?? "-"
                let diff =
                    v.control
                    ? "control"
                    : v.goals[g].difference.map {
                        "\(points($0.estimate)) [\(points($0.low)), \(points($0.high))] \(verdict($0))"
                    } ?? "-"
                out +=
                    "    " + v.id.padding(12) + "  " + String(x.exposed).leftPadding(7) + "  "
                    + String(x.complete).leftPadding(11)
                    + "  " + String(x.converted).leftPadding(9) + "  " + percent(x.rate).padding(6) + "  " + ci.padding(15) + "  "
                    + diff + "\n"
            }
            if let value = goal.value {
                for v in t.variants {
                    let x = v.goals[g].result
                    out += "    \(v.id): \(value) per user \(money(x.meanValue, x.valueInterval))"
                    if let d = v.goals[g].valueDifference {
                        out += String(format: ", vs control %+.2f [%+.2f, %+.2f] ", d.estimate, d.low, d.high) + verdict(d)
                    }
                    out += "\n"
                }
            }
        }
        return out
    }

    // MARK: JSON

    static func json(_ r: Report) -> Value {
        func time(_ t: Int64?) -> Value { t.map { .string(Timestamp(milliseconds: $0).description) } ?? .null }
        func num(_ x: Double?) -> Value { x.map { .double(($0 * 1e6).rounded() / 1e6) } ?? .null }
        func interval(_ d: (estimate: Double, low: Double, high: Double)?) -> Value {
            d.map { .map(ValueMap([("estimate", num($0.estimate)), ("ci95", .list([num($0.low), num($0.high)]))])) } ?? .null
        }
        func group(_ g: GroupResult) -> Value {
            .map(
                ValueMap([
                    ("exposed", .int(Int64(g.exposed))), ("full_window", .int(Int64(g.complete))),
                    ("value_per_user", num(g.meanValue)),
                    ("value_ci95", g.valueInterval.map { .list([num($0.low), num($0.high)]) } ?? .null),
                    ("converted", .int(Int64(g.converted))), ("rate", num(g.rate)),
                    ("ci95", g.interval.map { .list([num($0.low), num($0.high)]) } ?? .null),
                    ("median_ms", g.median.map { .int($0) } ?? .null), ("p90_ms", g.p90.map { .int($0) } ?? .null),
                    (
                        "by_day",
                        .list(
                            g.byDay.keys.sorted().map { d in
                                let v = g.byDay[d]!
                                return .map(
                                    ValueMap([
                                        (
                                            "day",
                                            .string(String(Timestamp(milliseconds: d * Milliseconds.day).description.prefix(10)))
                                        ),
                                        ("full_window", .int(Int64(v.complete))), ("converted", .int(Int64(v.converted))),
                                    ]))
                            })
                    ),
                ]))
        }
        let units: [Value] = r.units.map { u in
            .map(
                ValueMap([
                    ("name", .string(u.name)), ("kind", .string(u.kind)), ("holdout", num(u.holdout)),
                    ("users_triggered", .int(Int64(u.usersTriggered))), ("exposed", .int(Int64(u.exposed.treatment))),
                    ("held_back", .int(Int64(u.exposed.holdout))),
                    (
                        "rules",
                        .list(
                            u.rules.map { row in
                                .map(
                                    ValueMap([
                                        ("rule", .string(row.id)), ("triggered", .int(Int64(row.triggered))),
                                        ("fired", .int(Int64(row.fired))), ("held_back", .int(Int64(row.heldBack))),
                                        ("scheduled", .int(Int64(row.scheduled))), ("pending", .int(Int64(row.pending))),
                                        ("not_fired", .map(ValueMap(row.suppressed.map { ($0.reason, .int(Int64($0.count))) }))),
                                        ("deferred", .map(ValueMap(row.deferred.map { ($0.reason, .int(Int64($0.count))) }))),
                                    ]))
                            })
                    ),
                    (
                        "goals",
                        .list(
                            u.goals.map { g in
                                var m = ValueMap([
                                    ("goal", .string(g.id)), ("event", .string(g.event)), ("within_ms", .int(g.withinMs)),
                                    ("exposure", g.exposureRule.map { .string($0) } ?? .null), ("treatment", group(g.treatment)),
                                    ("holdout", g.holdout.map(group) ?? .null),
                                    ("comparison", g.holdout == nil ? .null : .string(g.comparison)),
                                ])
                                if let d = g.difference {
                                    m[string: "difference"] = .map(
                                        ValueMap([("estimate", num(d.estimate)), ("ci95", .list([num(d.low), num(d.high)]))]))
                                } else {
                                    m[string: "difference"] = .null
                                }
                                m[string: "value"] = g.value.map { .string($0) } ?? .null
                                return .map(m)
                            })
                    ),
                    (
                        "tests",
                        .list(
                            u.tests.map { t in
                                .map(
                                    ValueMap([
                                        ("rule", t.rule.map { .string($0) } ?? .null),
                                        (
                                            "variants",
                                            .list(
                                                t.variants.map { v in
                                                    .map(
                                                        ValueMap([
                                                            ("variant", .string(v.id)), ("control", .bool(v.control)),
                                                            ("weight", num(v.weight / 100)),
                                                            (
                                                                "goals",
                                                                .list(
                                                                    v.goals.map { vg in
                                                                        .map(
                                                                            ValueMap([
                                                                                ("goal", .string(vg.goal)),
                                                                                ("result", group(vg.result)),
                                                                                ("difference", interval(vg.difference)),
                                                                                (
                                                                                    "value_difference",
                                                                                    interval(vg.valueDifference)
                                                                                ),
                                                                            ]))
                                                                    })
                                                            ),
                                                        ]))
                                                })
                                        ),
                                    ]))
                            })
                    ),
                ]))
        }
        return .map(
            ValueMap([
                ("rules", .list(r.paths.map { .string($0) })), ("events_file", .string(r.eventsFile)),
                ("events", .int(Int64(r.events))), ("users", .int(Int64(r.users))),
                ("merged_ids", .int(Int64(r.mergedIDs))), ("bad_lines", .int(Int64(r.badLines))),
                ("duplicates", .int(Int64(r.duplicates))), ("off_plan", .int(Int64(r.offPlan))), ("first", time(r.first)),
                ("last", time(r.last)),
                ("observed_until", time(r.end)), ("units", .list(units)),
            ]))
    }
}
