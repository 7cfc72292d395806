import ArgumentParser
import Foundation
import Testing

@testable import BeckonCommands
@testable import BeckonTools

/// One bad-line policy for every command that reads events: by default each bad line is counted and skipped, the
/// first ten reported as FILE:LINE:COLUMN, the rest summed up in one line; `--strict` stops at the first.
struct BadLinePolicyTests {
    /// The commands that read an events file, as they are called on the command line.
    enum Command: String, CaseIterable, CustomStringConvertible {
        case dryRun = "dry-run"
        case explain, report, test

        var description: String { rawValue }
    }

    /// 20 good events of one user (one a minute, each firing `c/hi`) with 15 bad lines between them: lines 2, 4, …, 30.
    static let goodEvents = 20
    static let badLineNumbers = Array(stride(from: 2, through: 30, by: 2))

    static func eventTime(_ i: Int) -> String { "2026-03-01T09:\(i < 10 ? "0" : "")\(i):00Z" }

    static func eventsFile() -> String {
        var lines: [String] = []
        var good = 0
        for n in 1...(goodEvents + badLineNumbers.count) {
            if badLineNumbers.contains(n) {
                lines.append(
                    n % 4 == 0
                        ? "not json \(n)" : #"{"type":"track","event":"Opened","timestamp":"2026-03-01T09:00:00Z"}"#)
            } else {
                lines.append(
                    #"{"type":"track","event":"Opened","userId":"ann","messageId":"m\#(good)","timestamp":"\#(eventTime(good))"}"#
                )
                good += 1
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A test file whose one case reads the events file and expects every good event's action, and nothing else.
    static func testFile() -> String {
        var s = "version: 1\ntests: bad_lines\nrules: rules.yaml\ncases:\n  - name: every good line is run\n"
        s += "    events_file: events.jsonl\n    exact: true\n    expect:\n"
        for i in 0..<goodEvents { s += "      - { user: ann, rule: hi, at: \(eventTime(i)) }\n" }
        return s
    }

    /// A folder with the rules, the events and the test file; removed by the caller.
    static func folder() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-badlines-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try EventFileTests.rules.write(to: dir.appendingPathComponent("rules.yaml"), atomically: true, encoding: .utf8)
        try eventsFile().write(to: dir.appendingPathComponent("events.jsonl"), atomically: true, encoding: .utf8)
        try testFile().write(to: dir.appendingPathComponent("events.test.yaml"), atomically: true, encoding: .utf8)
        return dir
    }

    func arguments(_ command: Command, in dir: URL) -> [String] {
        let rules = dir.appendingPathComponent("rules.yaml").path
        let events = dir.appendingPathComponent("events.jsonl").path
        switch command {
        case .dryRun: return ["dry-run", rules, "--events", events, "--format", "jsonl"]
        case .explain: return ["explain", rules, "--events", events, "--user", "ann"]
        case .report: return ["report", rules, "--events", events, "--format", "json"]
        case .test: return ["test", dir.appendingPathComponent("events.test.yaml").path]
        }
    }

    func run(_ arguments: [String]) -> (Int32, StringConsole) {
        let console = StringConsole()
        return (BeckonCLI.run(arguments, console: console), console)
    }

    /// The line numbers of the bad lines reported one by one on standard error.
    func reported(_ stderr: String) -> [Int] {
        stderr.split(separator: "\n").compactMap { line -> Int? in
            guard let r = line.range(of: "events.jsonl:"), line.contains(": bad event: ") else { return nil }
            return Int(line[r.upperBound...].prefix { $0.isNumber })
        }
    }

    @Test(arguments: Command.allCases)
    func badLinesAreCountedReportedAndSkipped(_ command: Command) throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (status, console) = run(arguments(command, in: dir))
        #expect(status == 0, "\(console.stdout)\n\(console.stderr)")
        // The first ten, in order, and one line for the five others.
        #expect(reported(console.stderr) == Array(Self.badLineNumbers.prefix(BadLinePolicy.reportedLines)))
        #expect(console.stderr.contains("events.jsonl:4:1: bad event: expected a JSON object"), "\(console.stderr)")
        #expect(console.stderr.contains("events.jsonl:2:1: bad event: missing 'userId'"), "\(console.stderr)")
        #expect(console.stderr.components(separatedBy: "… and 5 more bad lines\n").count == 2, "\(console.stderr)")
        // Every good event was processed, and the bad lines are counted where the command shows counts.
        switch command {
        case .dryRun:
            #expect(console.stdout.split(separator: "\n").count { $0.contains("app://hi") } == Self.goodEvents)
            #expect(console.stderr.contains("20 events, 1 user, 20 actions fired (bad lines 15,"), "\(console.stderr)")
        case .explain:
            #expect(console.stdout.components(separatedBy: "✓ c/hi").count - 1 == Self.goodEvents, "\(console.stdout)")
        case .report:
            let json = try #require(try JSONSerialization.jsonObject(with: Data(console.stdout.utf8)) as? [String: Any])
            #expect(json["bad_lines"] as? Int == 15)
            #expect(json["events"] as? Int == Self.goodEvents)
        case .test:
            #expect(console.stdout.contains("1 case: 1 passed, 0 failed (bad lines 15, skipped)"), "\(console.stdout)")
        }
    }

    @Test(arguments: Command.allCases)
    func strictStopsAtTheFirstBadLine(_ command: Command) throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (status, console) = run(arguments(command, in: dir) + ["--strict"])
        #expect(status == 1, "\(console.stdout)\n\(console.stderr)")
        #expect(reported(console.stderr) == [2], "\(console.stderr)")
        #expect(console.stderr.contains("events.jsonl:2:1: bad event: missing 'userId'"))
        #expect(console.stderr.contains("stopped at the first bad line (--strict)"))
        #expect(!console.stderr.contains("more bad line"))
        switch command {
        case .dryRun:
            // The event before the bad line was run; none after it.
            #expect(console.stdout.split(separator: "\n").count == 1)
        case .test:
            // The case fails at the bad line, named by its place.
            #expect(console.stdout.contains("events.jsonl:2:1"), "\(console.stdout)")
            #expect(console.stdout.contains("1 case: 0 passed, 1 failed\n"), "\(console.stdout)")
        case .explain, .report:
            #expect(console.stdout.isEmpty)
        }
    }

    /// A folder where the events should be is refused when it is opened, once, in the command's words: a folder
    /// opened and failed at its first read, and `test` printed an error placed nowhere besides its case's.
    @Test(arguments: Command.allCases)
    func aFolderForTheEventsIsRefusedOnce(_ command: Command) throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let events = dir.appendingPathComponent("events.jsonl")
        try FileManager.default.removeItem(at: events)
        try FileManager.default.createDirectory(at: events, withIntermediateDirectories: false)
        let (status, console) = run(arguments(command, in: dir))
        #expect(status != 0, "\(console.stdout)\n\(console.stderr)")
        let said = console.stdout + console.stderr
        #expect(said.components(separatedBy: "events.jsonl': Is a directory").count == 2, "\(said)")
        #expect(!said.contains("reading stopped"), "\(said)")
        if command == .test { #expect(said.contains("events.test.yaml:6:18"), "\(said)") }
    }

    /// Ten bad lines are all reported, with no line for more.
    @Test func tenBadLinesAreAllReported() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let events = dir.appendingPathComponent("events.jsonl")
        let lines = try String(contentsOf: events, encoding: .utf8).split(separator: "\n")
        try (lines.prefix(20).joined(separator: "\n") + "\n").write(to: events, atomically: true, encoding: .utf8)
        let (status, console) = run(arguments(.dryRun, in: dir))
        #expect(status == 0)
        #expect(reported(console.stderr) == Array(Self.badLineNumbers.prefix(10)))
        #expect(!console.stderr.contains("more bad line"))
        #expect(console.stderr.contains("(bad lines 10,"))
    }

    /// `--keep-going` is what dry-run does anyway now: still accepted, no longer shown.
    @Test func keepGoingIsAHiddenNoOp() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (status, console) = run(arguments(.dryRun, in: dir) + ["--keep-going"])
        #expect(status == 0)
        #expect(console.stderr.contains("(bad lines 15,"))
        let help = BeckonCLI.helpMessage(for: DryRun.self, columns: 500)
        #expect(!help.contains("keep-going"))
        #expect(help.contains("--strict"))
    }

    /// The shared options are one group: the commands that read a stream all offer `--strict`, and say so alike.
    @Test func everyStreamCommandOffersStrict() {
        let helps = [
            BeckonCLI.helpMessage(for: DryRun.self, columns: 500), BeckonCLI.helpMessage(for: Explain.self, columns: 500),
            BeckonCLI.helpMessage(for: ReportCommand.self, columns: 500), BeckonCLI.helpMessage(for: Test.self, columns: 500),
        ]
        let strict = helps.map { $0.split(separator: "\n").first { $0.drop { $0 == " " }.hasPrefix("--strict") } }
        #expect(strict.allSatisfy { $0 != nil && $0 == strict[0] }, "\(strict)")
    }

    /// `--format` is an enum the parser knows: a value it does not know is a usage error with the parser's message,
    /// and the help lists the values.
    @Test(arguments: [
        ["dry-run", "r.yaml", "--events", "e.jsonl"], ["explain", "r.yaml", "--events", "e.jsonl", "--user", "ann"],
        ["report", "r.yaml", "--events", "e.jsonl"], ["bench", "--workload", "w"],
    ])
    func anUnknownFormatIsRefusedByTheParser(_ command: [String]) {
        let (status, console) = run(command + ["--format", "nonsense"])
        #expect(status == 64)
        #expect(console.stderr.contains("The value 'nonsense' is invalid for '--format <format>'"), "\(console.stderr)")
    }

    @Test func theHelpListsTheFormats() {
        #expect(BeckonCLI.helpMessage(for: DryRun.self, columns: 500).contains("values: table, jsonl"))
        for help in [
            BeckonCLI.helpMessage(for: Explain.self, columns: 500), BeckonCLI.helpMessage(for: ReportCommand.self, columns: 500),
            BeckonCLI.helpMessage(for: Bench.self, columns: 500),
        ] {
            #expect(help.contains("values: text, json"), "\(help)")
        }
    }

    @Test func anUnknownReferencePageIsRefusedByTheParser() {
        let (status, console) = run(["reference", "nonsense"])
        #expect(status == 64)
        #expect(console.stderr.contains("The value 'nonsense' is invalid for '<page>'"), "\(console.stderr)")
        let (ok, page) = run(["reference", "limits"])
        #expect(ok == 0 && !page.stdout.isEmpty)
    }
}
