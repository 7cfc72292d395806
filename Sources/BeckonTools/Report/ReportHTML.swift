import BeckonCore
import Foundation

/// `beckon report --html FILE`: one self-contained page (inline CSS and SVG, no script, nothing fetched) with a
/// funnel per campaign, and per goal the conversion by day of exposure and the distribution of time to goal.
enum ReportHTML {
    static let treatmentColor = "#2563eb"
    static let holdoutColor = "#f59e0b"
    static let neutralColor = "#64748b"

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// A colour key: an SVG square (no `style` attribute, so a page whose policy forbids inline styles shows it).
    static func swatch(_ color: String) -> String {
        "<svg class=\"key\" width=\"10\" height=\"10\" aria-hidden=\"true\"><rect width=\"10\" height=\"10\" fill=\"\(color)\"/></svg>"
    }

    /// The report's own rules (the page's `<style>`, and the console's stylesheet).
    public static let css = """
        .report h1 { font-size: 22px; margin: 0 0 4px; } .report h2 { font-size: 18px; margin: 28px 0 6px; border-top: 1px solid #e2e8f0; padding-top: 16px; }
        .report h3 { font-size: 15px; margin: 18px 0 4px; } .report .meta, .report .note { color: #475569; margin: 0 0 8px; }
        .report table { border-collapse: collapse; margin: 6px 0 10px; } .report th, .report td { padding: 3px 10px; text-align: right; border-bottom: 1px solid #e2e8f0; }
        .report th:first-child, .report td:first-child { text-align: left; } .report th { font-weight: 600; color: #334155; }
        .report .charts { display: flex; flex-wrap: wrap; gap: 18px; } .report figure { margin: 0; } .report figcaption { color: #334155; font-weight: 600; margin-bottom: 2px; }
        .report .key { display: inline-block; margin: 0 4px 0 10px; } .report .good { color: #15803d; } .report .bad { color: #b91c1c; }
        """

    /// The report without a page around it, in a `<div class="report">`: with its own `h1` or (in a page that has
    /// one) without; units are `h2`, tests and goals `h3`.
    static func body(_ r: Report, heading: Bool = true) -> String {
        var body = "<div class=\"report\">\n"
        if heading { body += "<h1>Beckon report</h1>\n" }
        body += "<p class=\"meta\">\(escape(r.paths.joined(separator: " "))) on \(escape(r.eventsFile))<br>"
        body += "\(r.events) events, \(r.users) users"
        if let f = r.first, let l = r.last { body += ", \(Timestamp(milliseconds: f)) to \(Timestamp(milliseconds: l))" }
        if let e = r.end, e != r.last { body += ", observed until \(Timestamp(milliseconds: e))" }
        body += " · bad lines \(r.badLines), duplicates \(r.duplicates)\(r.offPlan > 0 ? ", off plan \(r.offPlan)" : "")</p>\n"
        for u in r.units { body += unit(u) }
        body += "</div>\n"
        return body
    }

    static func page(_ r: Report) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>Beckon report</title>
        <style>
        body { font: 14px/1.45 "DejaVu Sans", system-ui, sans-serif; color: #0f172a; margin: 24px; max-width: 1180px; }
        \(css)
        </style></head>
        <body>
        \(body(r))</body></html>

        """
    }

    static func unit(_ u: UnitReport) -> String {
        var s = "<h2>\(escape(u.kind)) \(escape(u.name))</h2>\n<p class=\"meta\">"
        s += u.holdout > 0 ? "holdout \(ReportRunner.percent(u.holdout))" : "no holdout"
        s += " · \(u.usersTriggered) users triggered a rule · \(u.exposed.treatment) exposed"
        if u.holdout > 0 { s += " · \(u.exposed.holdout) held back" }
        s +=
            "</p>\n<table><tr><th>rule</th><th>triggered</th><th>fired</th><th>held back</th><th>pending</th><th>not fired</th></tr>\n"
        for row in u.rules {
            let not = row.suppressed.map { "\($0.reason) \($0.count)" }.joined(separator: ", ")
            s +=
                "<tr><td>\(escape(row.id))</td><td>\(row.triggered)</td><td>\(row.fired)</td><td>\(row.heldBack)</td>"
                + "<td>\(row.pending)</td><td>\(escape(not.isEmpty ? "-" : not))</td></tr>\n"
        }
        s += "</table>\n"
        var stages: [(String, Int, Int)] = [
            ("triggered a rule", u.usersTriggered, 0), ("exposed", u.exposed.treatment, u.exposed.holdout),
        ]
        for g in u.goals { stages.append(("reached \(g.id)", g.treatment.converted, g.holdout?.converted ?? 0)) }
        s +=
            "<div class=\"charts\"><figure><figcaption>Funnel (users)</figcaption>\(funnel(stages, split: u.holdout > 0))</figure></div>\n"
        for g in u.goals { s += goal(g) }
        for t in u.tests { s += test(t, goals: u.goals) }
        return s
    }

    /// An A/B test: per goal, a row per variant with its difference from the control.
    static func test(_ t: TestReport, goals: [GoalReport]) -> String {
        var s = "<h3>test " + (t.rule.map { "of rule \(escape($0))" } ?? "of the whole file") + "</h3>\n"
        for (g, goal) in goals.enumerated() {
            s += "<p class=\"note\">goal \(escape(goal.id))</p>\n<table><tr><th>variant</th><th>weight</th><th>exposed</th>"
            s += "<th>full window</th><th>converted</th><th>rate</th><th>vs control (points, 95% CI)</th>"
            if goal.value != nil { s += "<th>\(escape(goal.value!)) per user</th><th>vs control</th>" }
            s += "</tr>\n"
            for v in t.variants {
                let x = v.goals[g].result
                let d = v.goals[g].difference
                let cls = d.map { $0.low > 0 ? "good" : $0.high < 0 ? "bad" : "" } ?? ""
                let diff =
                    v.control
                    ? "control"
                    : d.map {
                        "\(ReportRunner.points($0.estimate)) [\(ReportRunner.points($0.low)), \(ReportRunner.points($0.high))]"
                    } ?? "-"
                s += "<tr><td>\(escape(v.id))</td><td>\(String(format: "%g", v.weight))%</td><td>\(x.exposed)</td>"
                s += "<td>\(x.complete)</td><td>\(x.converted)</td><td>\(ReportRunner.percent(x.rate))</td>"
                s += "<td class=\"\(cls)\">\(diff)</td>"
                if goal.value != nil {
                    let vd = v.goals[g].valueDifference.map {
                        String(format: "%+.2f [%+.2f, %+.2f]", $0.estimate, $0.low, $0.high)
                    }
                    s +=
                        "<td>\(ReportRunner.money(x.meanValue, x.valueInterval))</td><td>\(v.control ? "control" : vd ?? "-")</td>"
                }
                s += "</tr>\n"
            }
            s += "</table>\n"
        }
        return s
    }

    static func goal(_ g: GoalReport) -> String {
        var s = "<h3>goal \(escape(g.id))</h3>\n"
        if let d = g.description { s += "<p class=\"meta\">\(escape(d))</p>\n" }
        s += "<p class=\"note\">\(escape(g.event)) within \(DSLDuration.format(g.withinMs)) of exposure ("
        s += g.exposureRule.map { "first fire of \(escape($0))" } ?? "first fire of any rule"
        s += "); rates count only users whose whole window was observed.</p>\n"
        s +=
            "<table><tr><th>group</th><th>exposed</th><th>full window</th><th>converted</th><th>rate</th><th>95% CI</th><th>median</th><th>p90</th></tr>\n"
        func row(_ name: String, _ x: GroupResult, _ color: String) -> String {
            let ci = x.interval.map { "\(ReportRunner.percent($0.low)) – \(ReportRunner.percent($0.high))" } ?? "-"
            return
                "<tr><td>\(swatch(color))\(name)</td><td>\(x.exposed)</td><td>\(x.complete)</td>"
                + "<td>\(x.converted)</td><td>\(ReportRunner.percent(x.rate))</td><td>\(ci)</td><td>\(ReportRunner.time(x.median))</td>"
                + "<td>\(ReportRunner.time(x.p90))</td></tr>\n"
        }
        s += row("treatment", g.treatment, treatmentColor)
        if let h = g.holdout { s += row(g.comparison, h, holdoutColor) }
        s += "</table>\n"
        if let d = g.difference {
            let cls = d.low > 0 ? "good" : d.high < 0 ? "bad" : ""
            s +=
                "<p class=\"\(cls)\">Treatment − \(g.comparison): <b>\(ReportRunner.points(d.estimate)) points</b>, 95% CI "
                + "[\(ReportRunner.points(d.low)), \(ReportRunner.points(d.high))]</p>\n"
        }
        var series = [("treatment", treatmentColor, g.treatment)]
        if let h = g.holdout { series.append((g.comparison, holdoutColor, h)) }
        s += "<div class=\"charts\">"
        s += "<figure><figcaption>Conversion by day of exposure</figcaption>\(overTime(series))</figure>"
        s +=
            "<figure><figcaption>Time to goal (share of converted users)</figcaption>\(histogram(series, within: g.withinMs))</figure>"
        s += "</div>\n"
        return s
    }

    // MARK: Charts

    static let width = 540.0
    static let height = 230.0
    static let left = 46.0
    static let right = 12.0
    static let top = 12.0
    static let bottom = 40.0

    static func f(_ x: Double) -> String { String(format: "%.1f", x) }

    static func svg(_ inner: String, height h: Double = height) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(h))\" viewBox=\"0 0 \(Int(width)) \(Int(h))\" "
            + "font-family=\"DejaVu Sans, sans-serif\" font-size=\"11\">\(inner)</svg>"
    }

    /// A y axis from 0 to `top100` in four steps, with grid lines.
    static func percentAxis(max top100: Double) -> String {
        var s = ""
        let plotH = height - top - bottom
        for i in 0...4 {
            let v = (top100 * Double(i) / 4 * 1000).rounded() / 10
            let y = top + plotH * (1 - Double(i) / 4)
            let label = v == v.rounded() ? "\(Int(v))%" : String(format: "%.1f%%", v)
            s += "<line x1=\"\(f(left))\" y1=\"\(f(y))\" x2=\"\(f(width - right))\" y2=\"\(f(y))\" stroke=\"#e2e8f0\"/>"
            s += "<text x=\"\(f(left - 6))\" y=\"\(f(y + 4))\" text-anchor=\"end\" fill=\"#475569\">\(label)</text>"
        }
        return s
    }

    /// The top of a percent axis: four round steps (2.5%, 5%, 10%, 20% or 25%) that reach the largest value.
    static func ceiling(_ v: Double) -> Double {
        let step = [0.025, 0.05, 0.1, 0.2, 0.25].first { $0 * 4 >= v } ?? 0.25
        return step * 4
    }

    static func legend(_ series: [(String, String, GroupResult)], y: Double) -> String {
        var s = ""
        var x = left
        for (name, color, _) in series {
            s += "<rect x=\"\(f(x))\" y=\"\(f(y - 9))\" width=\"10\" height=\"10\" fill=\"\(color)\"/>"
            s += "<text x=\"\(f(x + 14))\" y=\"\(f(y))\" fill=\"#334155\">\(name)</text>"
            x += 90
        }
        return s
    }

    /// Horizontal bars, one per stage; with a holdout each bar is split into treatment and holdout.
    static func funnel(_ stages: [(String, Int, Int)], split: Bool) -> String {
        let rowH = 26.0
        // About 6.5 px a character at 11 px.
        let labelW = 16 + 6.5 * Double(stages.map(\.0.count).max() ?? 10)
        let h = top + rowH * Double(stages.count) + 30
        let most = Double(max(1, stages.map { $0.1 + $0.2 }.max() ?? 1))
        let barW = width - labelW - right - 60
        var s = ""
        for (i, (name, a, b)) in stages.enumerated() {
            let y = top + rowH * Double(i)
            let wa = barW * Double(a) / most
            let wb = barW * Double(b) / most
            s += "<text x=\"\(f(labelW - 8))\" y=\"\(f(y + 15))\" text-anchor=\"end\" fill=\"#334155\">\(escape(name))</text>"
            let color = i == 0 ? neutralColor : treatmentColor
            s += "<rect x=\"\(f(labelW))\" y=\"\(f(y + 3))\" width=\"\(f(wa))\" height=\"18\" fill=\"\(color)\"/>"
            if b > 0 {
                s += "<rect x=\"\(f(labelW + wa))\" y=\"\(f(y + 3))\" width=\"\(f(wb))\" height=\"18\" fill=\"\(holdoutColor)\"/>"
            }
            let label = split && i > 0 ? "\(a) + \(b)" : "\(a + b)"
            s += "<text x=\"\(f(labelW + wa + wb + 6))\" y=\"\(f(y + 16))\" fill=\"#0f172a\">\(label)</text>"
        }
        if split {
            s += legend([("treatment", treatmentColor, GroupResult()), ("holdout", holdoutColor, GroupResult())], y: h - 8)
        }
        return svg(s, height: h)
    }

    /// Conversion rate of each day's exposed users, one line per group.
    static func overTime(_ series: [(String, String, GroupResult)]) -> String {
        let days = Set(series.flatMap { $0.2.byDay.keys }).sorted()
        guard let first = days.first, let last = days.last else { return svg(note("no user with a full window yet")) }
        let rates = series.flatMap { $0.2.byDay.values.map { Double($0.converted) / Double(max(1, $0.complete)) } }
        let yMax = ceiling(rates.max() ?? 0.1)
        let plotW = width - left - right
        let plotH = height - top - bottom
        func x(_ d: Int64) -> Double { left + (last == first ? plotW / 2 : plotW * Double(d - first) / Double(last - first)) }
        func y(_ r: Double) -> Double { top + plotH * (1 - r / yMax) }
        var s = percentAxis(max: yMax)
        let step = max(1, days.count / 6)
        for (i, d) in days.enumerated() where i % step == 0 {
            let label = String(Timestamp(milliseconds: d * Milliseconds.day).description.dropFirst(5).prefix(5))
            s += "<text x=\"\(f(x(d)))\" y=\"\(f(height - bottom + 14))\" text-anchor=\"middle\" fill=\"#475569\">\(label)</text>"
        }
        for (_, color, g) in series {
            let points = g.byDay.keys.sorted().map { d -> (Double, Double) in
                let v = g.byDay[d]!
                return (x(d), y(Double(v.converted) / Double(max(1, v.complete))))
            }
            s +=
                "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(points.map { "\(f($0.0)),\(f($0.1))" }.joined(separator: " "))\"/>"
            for p in points { s += "<circle cx=\"\(f(p.0))\" cy=\"\(f(p.1))\" r=\"2.5\" fill=\"\(color)\"/>" }
        }
        s += legend(series, y: height - 6)
        return svg(s)
    }

    /// A bin width that splits `within` into at most 24 bins.
    static func binWidth(_ within: Int64) -> Int64 {
        let minute: Int64 = 60_000
        let widths = [1, 5, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080].map { Int64($0) * minute }
        return widths.first { within / $0 <= 24 } ?? max(1, within / 24)
    }

    /// Time to goal in bins, each group as a share of its converted users.
    static func histogram(_ series: [(String, String, GroupResult)], within: Int64) -> String {
        guard series.contains(where: { !$0.2.times.isEmpty }) else { return svg(note("no conversions yet")) }
        let w = binWidth(within)
        let bins = Int((within + w - 1) / w)
        let shares: [[Double]] = series.map { (_, _, g) in
            var counts = Array(repeating: 0, count: bins)
            for t in g.times { counts[min(bins - 1, Int(t / w))] += 1 }
            return counts.map { g.times.isEmpty ? 0 : Double($0) / Double(g.times.count) }
        }
        let yMax = ceiling(shares.flatMap { $0 }.max() ?? 0.1)
        let plotW = width - left - right
        let plotH = height - top - bottom
        let slot = plotW / Double(bins)
        let barW = max(1, (slot - 2) / Double(series.count))
        var s = percentAxis(max: yMax)
        for (k, (_, color, _)) in series.enumerated() {
            for (i, v) in shares[k].enumerated() where v > 0 {
                let h = plotH * v / yMax
                s +=
                    "<rect x=\"\(f(left + slot * Double(i) + 1 + barW * Double(k)))\" y=\"\(f(top + plotH - h))\" "
                    + "width=\"\(f(barW))\" height=\"\(f(h))\" fill=\"\(color)\"/>"
            }
        }
        let step = max(1, bins / 6)
        for i in stride(from: 0, through: bins, by: step) {
            s +=
                "<text x=\"\(f(left + slot * Double(i)))\" y=\"\(f(height - bottom + 14))\" text-anchor=\"middle\" fill=\"#475569\">"
                + "\(i == 0 ? "0" : HumanDuration.format(Int64(i) * w))</text>"
        }
        s += legend(series, y: height - 6)
        return svg(s)
    }

    static func note(_ text: String) -> String {
        "<text x=\"\(f(width / 2))\" y=\"\(f(height / 2))\" text-anchor=\"middle\" fill=\"#64748b\">\(text)</text>"
    }
}
