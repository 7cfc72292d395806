import BeckonCommands
import BeckonCore
import BeckonTools
import BeckonYAML
import Foundation
import Testing

/// Rule paths that cannot be read stop every command that loads rules, and `validate` checks several apps at once.
struct RulePathTests {
    enum BadPath: String, CaseIterable, Sendable {
        case missing, notUTF8, danglingLink, emptyFolder, deviceLink
    }

    enum Command: String, CaseIterable, Sendable { case validate, dryRun, explain, report }

    struct Setup {
        var dir: URL
        var good: String
        var bad: String
        var events: String
    }

    /// A fresh folder with a good rule folder, a bad path of the given kind next to it, and an event stream.
    static func setUp(_ kind: BadPath) throws -> Setup {
        let fm = FileManager.default
        let dir = fm.temporaryDirectory.appendingPathComponent("beckon-paths-\(UUID().uuidString)")
        try fm.createDirectory(at: dir.appendingPathComponent("good"), withIntermediateDirectories: true)
        try """
        version: 1
        campaign: c
        rules:
          - id: r
            on: Opened
            do: [ { deep_link: "app://x" } ]
        """.write(to: dir.appendingPathComponent("good/rules.yaml"), atomically: true, encoding: .utf8)
        let events = dir.appendingPathComponent("events.jsonl")
        try #"{"type":"track","event":"Opened","userId":"u","timestamp":"2026-01-01T00:00:00Z"}"#
            .write(to: events, atomically: true, encoding: .utf8)
        let bad = dir.appendingPathComponent("bad.yaml")
        switch kind {
        case .missing: break
        case .notUTF8: try Data("version: 1\ncampaign: d\n# caf".utf8 + [0xE9] + "\n".utf8).write(to: bad)
        case .danglingLink:
            try fm.createSymbolicLink(atPath: bad.path, withDestinationPath: dir.appendingPathComponent("gone").path)
        case .emptyFolder: try fm.createDirectory(at: bad, withIntermediateDirectories: true)
        case .deviceLink: try fm.createSymbolicLink(atPath: bad.path, withDestinationPath: "/dev/zero")
        }
        return Setup(dir: dir, good: dir.appendingPathComponent("good").path, bad: bad.path, events: events.path)
    }

    static func run(_ command: Command, paths: [String], events: String) -> (Int32, StringConsole) {
        let console = StringConsole()
        let status: Int32
        switch command {
        case .validate: status = ValidateRunner.run(paths: paths, console: console)
        case .dryRun: status = DryRunRunner.run(.init(paths: paths, events: events), console: console)
        case .explain: status = ExplainRunner.run(.init(paths: paths, events: events, user: "u"), console: console)
        case .report: status = ReportRunner.run(.init(paths: paths, events: events), console: console)
        }
        return (status, console)
    }

    /// Any rule path that cannot be read, given next to good ones, is an error that stops the command.
    @Test(arguments: Command.allCases, BadPath.allCases)
    func anUnreadablePathStopsTheCommand(_ command: Command, _ kind: BadPath) throws {
        let s = try Self.setUp(kind)
        defer { try? FileManager.default.removeItem(at: s.dir) }
        let (status, console) = Self.run(command, paths: [s.good, s.bad], events: s.events)
        #expect(status == 1, "\(command) ran without \(kind): \(console.stdout)\(console.stderr)")
        #expect(console.stderr.contains("bad.yaml"), "\(console.stderr)")
        let (clean, _) = Self.run(command, paths: [s.good], events: s.events)
        #expect(clean == 0)
    }

    @Test func theFirstInvalidUTF8ByteIsPointedAt() throws {
        let s = try Self.setUp(.notUTF8)
        defer { try? FileManager.default.removeItem(at: s.dir) }
        let (_, console) = Self.run(.validate, paths: [s.bad], events: s.events)
        #expect(console.stderr.contains("bad.yaml:3:6: error: "), "\(console.stderr)")
        #expect(console.stderr.contains("invalid UTF-8 byte 0xE9"), "\(console.stderr)")
    }

    /// A file over the size limit is refused without reading it; a device is read no further than the limit.
    @Test func filesOverTheSizeLimitAreNotRead() throws {
        let s = try Self.setUp(.deviceLink)
        defer { try? FileManager.default.removeItem(at: s.dir) }
        let big = s.dir.appendingPathComponent("big.yaml")
        try Data(count: YAMLLoader.maxFileBytes + 1).write(to: big)
        for path in [big.path, s.bad] {
            let r = RuleLoader.load(paths: [path])
            let d = try #require(r.diagnostics.first)
            #expect(d.id == .limitExceeded, "\(d)")
            #expect(d.message.contains("the limit is \(YAMLLoader.maxFileBytes) bytes"), "\(d)")
        }
    }

    // MARK: Several apps

    /// Each folder with its own settings is its own rule set: the shipped apps validate together, in one run.
    @Test(arguments: [["rules/bossup", "rules/stampbook", "rules/ops", "campaigns/firefox"], ["rules", "campaigns"]])
    func severalAppsValidateTogether(_ paths: [String]) {
        let console = StringConsole()
        let status = ValidateRunner.run(
            paths: paths.map { SeedRuleSetTests.root.appendingPathComponent($0).path }, console: console)
        #expect(status == 0, "\(console.stderr)")
        #expect(console.stdout == "18 files, 35 rules: 0 errors, 0 warnings\n")
    }

    /// Problems of every app are reported in the same run, with one summary.
    @Test func problemsOfEveryAppAreReported() throws {
        let fm = FileManager.default
        let dir = fm.temporaryDirectory.appendingPathComponent("beckon-apps-\(UUID().uuidString)")
        defer { try? fm.removeItem(at: dir) }
        for app in ["one", "two"] {
            try fm.createDirectory(at: dir.appendingPathComponent(app), withIntermediateDirectories: true)
            try "version: 1\nsettings: \(app)\n".write(
                to: dir.appendingPathComponent("\(app)/settings.yaml"), atomically: true, encoding: .utf8)
            try
                "version: 1\ncampaign: c\nrules:\n  - id: r\n    on: Opened\n    prioirty: 1\n    do: [ { deep_link: \"a://x\" } ]\n"
                .write(to: dir.appendingPathComponent("\(app)/rules.yaml"), atomically: true, encoding: .utf8)
        }
        let console = StringConsole()
        let status = ValidateRunner.run(paths: [dir.appendingPathComponent("one").path, dir.path], console: console)
        #expect(status == 1)
        #expect(console.stderr.components(separatedBy: "[unknown_key]").count - 1 == 2, "\(console.stderr)")
        #expect(!console.stderr.contains("duplicate"), "\(console.stderr)")
        #expect(console.stderr.hasSuffix("4 files, 2 rules: 2 errors, 0 warnings\n"), "\(console.stderr)")
    }
}
