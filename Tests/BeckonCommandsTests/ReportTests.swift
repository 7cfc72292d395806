import Foundation
import Testing

@testable import BeckonCommands
@testable import BeckonTools

/// `beckon report`: golden text and JSON, hand-checked numbers on a small fixture, the statistics, the HTML page.
struct ReportTests {
    static let small = Snapshot.fixtures.appendingPathComponent("report/small")
    static let root = SeedRuleSetTests.root

    func run(
        _ paths: [String], events: String, format: ReportRunner.Format = .text, html: String? = nil, until: String? = nil
    )
        -> (Int32, String)
    {
        let console = StringConsole()
        let status = ReportRunner.run(
            .init(paths: paths, events: events, format: format, html: html, until: until), console: console)
        let out = (console.stdout + console.stderr).replacingOccurrences(of: Self.root.path + "/", with: "")
        return (status, Snapshot.relative(out))
    }

    func smallJSON(until: String? = nil) throws -> [String: Any] {
        let (status, out) = run(
            [Self.small.path], events: Self.small.appendingPathComponent("events.jsonl").path, format: .json, until: until)
        #expect(status == 0)
        return try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])
    }

    func goal(_ report: [String: Any]) throws -> [String: Any] {
        let unit = try #require((report["units"] as? [[String: Any]])?.first)
        return try #require((unit["goals"] as? [[String: Any]])?.first)
    }

    /// Treatment ann, ivy, kit, pam; holdout bob, cat (by the hash). ann buys 5 h after her first nudge (and her
    /// second open is not a second exposure); ivy buys after 25 h, outside the day; kit bought only before; pam's
    /// day is not over when the stream ends. bob buys after 2 h, cat never.
    @Test func countsFollowTheDefinitions() throws {
        let g = try goal(try smallJSON())
        let t = try #require(g["treatment"] as? [String: Any])
        #expect(t["exposed"] as? Int == 4)
        #expect(t["full_window"] as? Int == 3)
        #expect(t["converted"] as? Int == 1)
        #expect(t["median_ms"] as? Int == 5 * 3_600_000)
        let h = try #require(g["holdout"] as? [String: Any])
        #expect(h["exposed"] as? Int == 2)
        #expect(h["full_window"] as? Int == 2)
        #expect(h["converted"] as? Int == 1)
        #expect(h["median_ms"] as? Int == 2 * 3_600_000)
        let d = try #require(g["difference"] as? [String: Any])
        #expect(abs((d["estimate"] as? Double ?? 0) - (1.0 / 3 - 0.5)) < 1e-6)
    }

    /// A rule's A/B test, by hand: control ann, hal, ivy; treat bob, cat, dan, eve (by the hash). ann buys 10 after
    /// 5 h; bob 30 and 20, cat 40; dan's 99 comes after 28 h, outside the day. Control 1 of 3 and 10/3 per user;
    /// treat 2 of 4 and 90/4 per user.
    @Test func variantsAreComparedWithTheControl() throws {
        let dir = Snapshot.fixtures.appendingPathComponent("report/variants")
        let (status, out) = run([dir.path], events: dir.appendingPathComponent("events.jsonl").path, format: .json)
        #expect(status == 0)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])
        let unit = try #require((report["units"] as? [[String: Any]])?.first)
        let test = try #require((unit["tests"] as? [[String: Any]])?.first)
        #expect(test["rule"] as? String == "nudge")
        let variants = try #require(test["variants"] as? [[String: Any]])
        #expect(variants.map { $0["variant"] as? String } == ["control", "treat"])
        #expect(variants.map { $0["control"] as? Bool } == [true, false])
        func result(_ v: Int) throws -> (goal: [String: Any], result: [String: Any]) {
            let g = try #require((variants[v]["goals"] as? [[String: Any]])?.first)
            return (g, try #require(g["result"] as? [String: Any]))
        }
        let (_, control) = try result(0)
        let (treatGoal, treat) = try result(1)
        #expect(control["full_window"] as? Int == 3)
        #expect(control["converted"] as? Int == 1)
        #expect(abs((control["value_per_user"] as? Double ?? 0) - 10.0 / 3) < 1e-5)
        #expect(treat["full_window"] as? Int == 4)
        #expect(treat["converted"] as? Int == 2)
        #expect(treat["value_per_user"] as? Double == 22.5)
        let d = try #require(treatGoal["difference"] as? [String: Any])
        #expect(abs((d["estimate"] as? Double ?? 0) - (0.5 - 1.0 / 3)) < 1e-5)
        let vd = try #require(treatGoal["value_difference"] as? [String: Any])
        #expect(abs((vd["estimate"] as? Double ?? 0) - (22.5 - 10.0 / 3)) < 1e-5)
    }

    /// The abandoned-cart example, where 799 anonymous ids sign in, a later add to cart replaces the waiting push,
    /// quiet hours hold some, and the push is an A/B test with a control.
    func cartJSON() throws -> [String: Any] {
        let dir = Self.root.appendingPathComponent("examples/abandoned_cart")
        let (status, out) = run([dir.path], events: dir.appendingPathComponent("week.jsonl").path, format: .json)
        #expect(status == 0)
        return try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])
    }

    /// People are counted once: an anonymous id merged into a known one is that user (as dry-run counts them).
    @Test func peopleAreCountedOnceWhateverTheirIDs() throws {
        let report = try cartJSON()
        #expect(report["users"] as? Int == 2000)
        #expect(report["merged_ids"] as? Int == 799)
        let unit = try #require((report["units"] as? [[String: Any]])?.first)
        #expect(unit["users_triggered"] as? Int == 2000)
    }

    /// Every trigger ends in one column: fired, held back, still pending, or a reason (a push replaced by a later add
    /// to cart is `replaced`); quiet hours' holds are told apart, not counted as an end.
    @Test func aRulesFunnelAddsUp() throws {
        for report in [try cartJSON(), try smallJSON()] {
            for unit in try #require(report["units"] as? [[String: Any]]) {
                for row in try #require(unit["rules"] as? [[String: Any]]) {
                    let ended = try #require(row["not_fired"] as? [String: Int]).values.reduce(0, +)
                    let sum = (row["fired"] as? Int ?? -1) + (row["held_back"] as? Int ?? -1) + (row["pending"] as? Int ?? -1)
                    #expect(row["triggered"] as? Int == sum + ended, "\(row)")
                }
            }
        }
        let unit = try #require((try cartJSON()["units"] as? [[String: Any]])?.first)
        let push = try #require((unit["rules"] as? [[String: Any]])?.first)
        #expect(push["not_fired"] as? [String: Int] == ["replaced": 2024, "cancelled": 480])
        #expect(push["deferred"] as? [String: Int] == ["held": 772])
    }

    /// With no holdout, a goal exposed by a rule with a control variant compares with the control: the control's
    /// users are not the treatment.
    @Test func aTestsControlIsNotTheTreatment() throws {
        let unit = try #require((try cartJSON()["units"] as? [[String: Any]])?.first)
        let g = try #require((unit["goals"] as? [[String: Any]])?.first)
        #expect(g["comparison"] as? String == "control")
        #expect((g["treatment"] as? [String: Any])?["exposed"] as? Int == 1372)
        #expect((g["holdout"] as? [String: Any])?["exposed"] as? Int == 148)
        #expect(g["difference"] is [String: Any])
        // A file with a holdout still compares with it.
        #expect(try goal(try smallJSON())["comparison"] as? String == "holdout")
    }

    @Test func untilClosesMoreWindows() throws {
        let t = try #require(try goal(try smallJSON(until: "+1d"))["treatment"] as? [String: Any])
        #expect(t["full_window"] as? Int == 4)
        #expect(t["converted"] as? Int == 2)
    }

    @Test func smallGoldenText() {
        let (status, out) = run([Self.small.path], events: Self.small.appendingPathComponent("events.jsonl").path)
        #expect(status == 0)
        Snapshot.assert(out, named: "report/small.txt")
    }

    static let stampbook = ["rules/stampbook", "examples/stampbook_reminder"]
    static let launchMonth = "examples/stampbook_reminder/launch_month.jsonl"

    /// Seed 002's goals, and the reminder experiment's treatment against holdout.
    @Test(arguments: [ReportRunner.Format.text, .json])
    func stampbookGolden(_ format: ReportRunner.Format) throws {
        let (status, out) = run(
            Self.stampbook.map { Self.root.appendingPathComponent($0).path },
            events: Self.root.appendingPathComponent(Self.launchMonth).path,
            format: format)
        #expect(status == 0)
        #expect(out.contains("claimed_welcome_within_24h"))
        if format == .json { #expect((try? JSONSerialization.jsonObject(with: Data(out.utf8))) != nil) }
        Snapshot.assert(out, named: "report/stampbook.\(format == .json ? "json" : "txt")")
    }

    @Test func htmlIsOneSelfContainedPage() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-report-\(UUID().uuidString).html")
        defer { try? FileManager.default.removeItem(at: file) }
        let (status, _) = run(
            Self.stampbook.map { Self.root.appendingPathComponent($0).path },
            events: Self.root.appendingPathComponent(Self.launchMonth).path,
            html: file.path)
        #expect(status == 0)
        let html = try String(contentsOf: file, encoding: .utf8)
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        for fetch in ["<script", "<link", " src=", "url(", "@import"] {
            #expect(!html.contains(fetch), "page would fetch: \(fetch)")
        }
        // Every http URL is the SVG namespace, which is a name, not a fetch.
        let urls = html.components(separatedBy: "http").dropFirst().filter { !$0.hasPrefix("://www.w3.org/2000/svg") }
        #expect(urls.isEmpty)
        // A funnel per file, and two charts per goal (5 goals); beside them the colour keys' squares.
        let svgs = html.components(separatedBy: "<svg").count - 1
        let keys = html.components(separatedBy: "<svg class=\"key\"").count - 1
        #expect(svgs - keys == 2 + 2 * 5)
        #expect(html.contains("Treatment − holdout"))
    }

    @Test func badLinesAreCountedNotFatal() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-report-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: file) }
        let good = try String(contentsOf: Self.small.appendingPathComponent("events.jsonl"), encoding: .utf8)
        try ("{not json\n" + good).write(to: file, atomically: true, encoding: .utf8)
        let (status, out) = run([Self.small.path], events: file.path)
        #expect(status == 0)
        #expect(out.contains(":1:2: bad event: expected a key in quotes"))
        #expect(out.contains("bad lines 1"))
    }

    /// `--html PATH` replaces a regular file whole (through a symbolic link, the file, not the link), writes into a pipe
    /// as it is (not a file put in its place), and refuses a folder with a reason.
    @Test func theHTMLPageGoesWhereThePathLeads() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-html-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let events = Self.small.appendingPathComponent("events.jsonl").path
        let file = dir.appendingPathComponent("page.html").path
        let link = dir.appendingPathComponent("link.html").path
        try "old".write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "page.html")
        #expect(run([Self.small.path], events: events, html: link).0 == 0)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "page.html")
        #expect(try String(contentsOfFile: file, encoding: .utf8).contains("<html"))

        let fifo = dir.appendingPathComponent("pipe").path
        #expect(mkfifo(fifo, 0o600) == 0)
        // (A reader that does not wait for a writer, so that the page's write can open the pipe.)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        defer { close(reader) }
        #expect(run([Self.small.path], events: events, html: fifo).0 == 0)
        let read = FileHandle(fileDescriptor: reader, closeOnDealloc: false).availableData
        #expect(String(decoding: read, as: UTF8.self).contains("<html"))
        let type = try FileManager.default.attributesOfItem(atPath: fifo)[.type] as? FileAttributeType
        #expect(type != .typeRegular, "the pipe became a file")

        let (status, out) = run([Self.small.path], events: events, html: dir.path)
        #expect(status == 1)
        #expect(out.contains("it is a folder"), "\(out)")
    }
}

struct StatisticsTests {
    @Test func wilsonMatchesPublishedValues() throws {
        // Newcombe (1998a), table I: 81/263 → 0.2553 to 0.3662; 0/10 → 0 to 0.2775.
        let a = try #require(Statistics.wilson(81, 263))
        #expect(abs(a.low - 0.2553) < 5e-5 && abs(a.high - 0.3662) < 5e-5)
        let b = try #require(Statistics.wilson(0, 10))
        #expect(b.low == 0 && abs(b.high - 0.2775) < 5e-5)
        #expect(Statistics.wilson(0, 0) == nil)
    }

    @Test func newcombeMatchesPublishedValues() throws {
        // Newcombe (1998b), example (a): 56/70 − 48/80 → 0.0524 to 0.3339 by the hybrid score method.
        let d = try #require(Statistics.difference(56, 70, 48, 80))
        #expect(abs(d.estimate - 0.2) < 1e-9)
        #expect(abs(d.low - 0.0524) < 5e-5 && abs(d.high - 0.3339) < 5e-5)
        #expect(Statistics.difference(1, 2, 0, 0) == nil)
    }

    /// The mean's interval: mean ± 1.96·s/√n; Welch's difference: each group's own variance.
    @Test func meanIntervals() throws {
        let (low, high) = try #require(Statistics.meanInterval([1, 2, 3, 4]))
        let half = 1.959963984540054 * (5.0 / 3 / 4).squareRoot()
        #expect(abs(low - (2.5 - half)) < 1e-12 && abs(high - (2.5 + half)) < 1e-12)
        let d = try #require(Statistics.meanDifference([1, 2, 3, 4], [0, 0]))
        #expect(d.estimate == 2.5)
        #expect(abs(d.high - d.estimate - half) < 1e-12)
        #expect(Statistics.meanInterval([7]) == nil)
    }

    @Test func quantilesInterpolate() {
        #expect(Statistics.quantile([1, 2, 3, 4], 0.5) == 3)  // 2.5, rounded half away from zero
        #expect(Statistics.quantile([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 0.9) == 91)
        #expect(Statistics.quantile([7], 0.9) == 7)
        #expect(Statistics.quantile([], 0.5) == nil)
    }

    @Test func durationsReadWell() {
        #expect(HumanDuration.format(45_000) == "45s")
        #expect(HumanDuration.format(12 * 60_000) == "12m")
        #expect(HumanDuration.format((5 * 60 + 12) * 60_000) == "5h 12m")
        #expect(HumanDuration.format(51 * 3_600_000) == "2d 3h")
    }
}
