import ArgumentParser
import BeckonCommands
import BeckonCore
import BeckonTools
import BeckonYAML
import Foundation
import Testing

/// Event files as editors, exporters and attackers write them: every event kept, every bad line named.
struct LineReaderTests {
    func lines(_ bytes: [UInt8], chunkSize: Int = 1 << 20, maxLineBytes: Int = 1 << 20) throws -> [String] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-lines-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(bytes).write(to: file)
        let reader = try #require(LineReader(path: file.path, chunkSize: chunkSize, maxLineBytes: maxLineBytes))
        var out: [String] = []
        reader.readLines { line in
            switch line {
            case .text(let b): out.append("\(reader.lineNumber):" + String(decoding: b, as: UTF8.self))
            case .overlong(let n): out.append("\(reader.lineNumber):overlong \(n)")
            }
            return true
        }
        return out
    }

    @Test(arguments: [1, 2, 3, 5, 1 << 20])
    func everyLineEndIsOne(chunkSize: Int) throws {
        let expected = ["1:a", "2:b", "3:c", "4:", "5:d", "6:e"]
        #expect(try lines(Array("a\nb\r\nc\r\rd\re".utf8), chunkSize: chunkSize) == expected)
        #expect(try lines(Array("a\rb\rc\r\rd\re\r".utf8), chunkSize: chunkSize) == expected)
        #expect(try lines(Array("a\r\nb\r\nc\r\n\r\nd\r\ne\r\n".utf8), chunkSize: chunkSize) == expected)
    }

    @Test(arguments: [1, 2, 4, 1 << 20])
    func aByteOrderMarkIsSkipped(chunkSize: Int) throws {
        #expect(try lines([0xEF, 0xBB, 0xBF] + Array("{}\n{}".utf8), chunkSize: chunkSize) == ["1:{}", "2:{}"])
        // Only before the first line.
        #expect(try lines(Array("{}\n".utf8) + [0xEF, 0xBB, 0xBF], chunkSize: chunkSize) == ["1:{}", "2:\u{FEFF}"])
    }

    @Test(arguments: [3, 7, 64])
    func anOverlongLineIsCountedNotKept(chunkSize: Int) throws {
        let long = String(repeating: "x", count: 100)
        #expect(
            try lines(Array("a\n\(long)\nb\n\(long)".utf8), chunkSize: chunkSize, maxLineBytes: 10) == [
                "1:a", "2:overlong 100", "3:b", "4:overlong 100",
            ])
    }

    /// A file of one huge line without a newline is never held whole: the reader's buffer stays near the limit.
    @Test func aHugeLineWithoutANewlineIsNotBuffered() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-huge-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(repeating: UInt8(ascii: "x"), count: 64 << 20).write(to: file)
        let reader = try #require(LineReader(path: file.path, chunkSize: 1 << 16, maxLineBytes: 1 << 16))
        var seen: [LineReader.Line] = []
        reader.readLines {
            seen.append($0)
            return true
        }
        guard seen.count == 1, case .overlong(let n) = seen[0] else {
            Issue.record("expected one overlong line")
            return
        }
        #expect(n == 64 << 20)
        #expect(reader.bufferCapacity <= 1 << 18)
    }
}

struct EventFileTests {
    static let rules = """
        version: 1
        campaign: c
        rules:
          - id: hi
            on: Opened
            do: [ { deep_link: "app://hi" } ]
          - id: later
            on: Opened
            wait: 1h
            do: [ { deep_link: "app://later" } ]
        """

    func run(
        _ events: [UInt8], badLines: BadLinePolicy = .goOn, format: DryRunRunner.Format = .table, until: String? = nil
    ) throws -> (Int32, StringConsole) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-events-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.rules.write(to: dir.appendingPathComponent("rules.yaml"), atomically: true, encoding: .utf8)
        try Data(events).write(to: dir.appendingPathComponent("events.jsonl"))
        let console = StringConsole()
        let status = DryRunRunner.run(
            .init(
                paths: [dir.appendingPathComponent("rules.yaml").path], events: dir.appendingPathComponent("events.jsonl").path,
                format: format, badLines: badLines, until: until),
            console: console)
        return (status, console)
    }

    /// A file that cannot be read to its end (here `/proc/self/mem`: open succeeds, read fails) is an error, not an
    /// empty stream: dry-run, explain and report fail and say why. A folder is refused when it is opened.
    @Test func aReadErrorFailsTheCommand() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-readerr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.rules.write(to: dir.appendingPathComponent("rules.yaml"), atomically: true, encoding: .utf8)
        let rules = [dir.appendingPathComponent("rules.yaml").path]
        let dry = StringConsole()
        #expect(DryRunRunner.run(.init(paths: rules, events: "/proc/self/mem"), console: dry) == 1)
        #expect(dry.stderr.contains("reading stopped after line 0: Input/output error"), "\(dry.stderr)")
        let report = StringConsole()
        #expect(ReportRunner.run(.init(paths: rules, events: "/proc/self/mem"), console: report) == 1)
        #expect(report.stderr.contains("Input/output error"), "\(report.stderr)")
        let folder = StringConsole()
        #expect(DryRunRunner.run(.init(paths: rules, events: dir.path), console: folder) == 1)
        #expect(folder.stderr == "error: cannot open events file '\(dir.path)': Is a directory\n", "\(folder.stderr)")
    }

    func event(_ user: String, _ time: String, id: String? = nil) -> String {
        #"{"type":"track","event":"Opened","userId":"\#(user)","timestamp":"\#(time)""#
            + (id.map { #","messageId":"\#($0)""# } ?? "")
            + "}"
    }

    @Test func byteOrderMarkAndCarriageReturnsLoseNoEvent() throws {
        let lines = (0..<4).map { event("u\($0)", "2026-03-01T09:0\($0):00Z") }
        let (status, console) = try run([0xEF, 0xBB, 0xBF] + Array(lines.joined(separator: "\r").utf8), format: .jsonl)
        #expect(status == 0)
        #expect(console.stdout.split(separator: "\n").count == 4)
        #expect(console.stderr.contains("4 events, 4 users"))
    }

    /// An action that comes due while a duplicate is read is printed, at the next event.
    @Test func nothingDueIsLostAroundADuplicate() throws {
        let lines = [
            event("ann", "2026-03-01T09:00:00Z", id: "a"), event("bob", "2026-03-01T09:00:00Z", id: "b"),
            event("bob", "2026-03-01T11:00:00Z", id: "b"), event("cat", "2026-03-01T11:00:00Z", id: "c"),
        ]
        let (status, console) = try run(Array(lines.joined(separator: "\n").utf8), format: .jsonl, until: "+2h")
        #expect(status == 0)
        let links = console.stdout.split(separator: "\n").compactMap { $0.range(of: "app://later") != nil ? $0 : nil }
        #expect(links.count == 3)
        #expect(console.stderr.contains("duplicates 1"))
    }

    /// A user id that holds a newline cannot forge a line of the table.
    @Test func idsAreShownSafely() throws {
        let forged = #"x\n2026-03-01T09:00:00Z  mallory  ✓ c/hi  deep_link  app://pwned\u001b[2J\u202e"#
        let (status, console) = try run(Array(event(forged, "2026-03-01T09:00:00Z").utf8))
        #expect(status == 0)
        let lines = console.stdout.split(separator: "\n")
        #expect(!lines.contains { $0.hasPrefix("2026-03-01T09:00:00Z  mallory") })
        #expect(console.stdout.contains(#"x\u{A}2026"#))
        #expect(!console.stdout.contains("\u{1B}") && !console.stdout.contains("\u{202E}"))
    }

    @Test func aBadLineIsNamedByLineAndColumn() throws {
        let text =
            event("u1", "2026-03-01T09:00:00Z") + "\n" + #"{"type":"track","event":"Opened","timestamp":"2026-03-01T09:00:00Z"}"#
        let (status, console) = try run(Array(text.utf8), badLines: .strict)
        #expect(status == 1)
        #expect(console.stderr.contains("events.jsonl:2:1: bad event: missing 'userId'"))
    }

    /// A `--until` that cannot be used exits 64 and says why: too long, not a duration, an offset out of range.
    @Test(arguments: [
        ("+9223372036854775807ms", "error: --until: '9223372036854775807ms' is longer than the longest duration"),
        ("+300000000w", "error: --until: '300000000w' is longer than the longest duration a rule file may use, 100 years"),
        ("+7x", "error: --until: '7x' is not a duration like 7d or 1h30m"),
        ("2026-03-31T00:00:00+99:99", "error: --until: '2026-03-31T00:00:00+99:99': "),
        ("tomorrow", "error: --until: expects a time like 2026-03-31T00:00:00Z or +DURATION like +7d, found 'tomorrow'"),
        // Written out, a time holds to the bound of +DURATION (it ran 2.9M daily actions for one user).
        ("9999-12-31T00:00:00Z", "error: --until: '9999-12-31T00:00:00Z' is more than 100 years (36525d) after the last event"),
    ])
    func aHugeUntilIsAnErrorNotACrash(_ until: String, _ message: String) throws {
        let (status, console) = try run(Array(event("u1", "2026-03-01T09:00:00Z").utf8), until: until)
        #expect(status == 64)
        #expect(console.stderr.contains(message), "\(console.stderr)")
    }

    /// A `--until` that is no time at all is refused when the command line is read (exit 64), before the stream runs
    /// and prints its output; one that depends on the stream (`+7d` with no event) is left to the run.
    @Test(arguments: ["tomorrow", "+7x", "+36526d", "2026-13-01T00:00:00Z", "2026-03-31T00:00:00+24:00"])
    func anUntilThatIsNoTimeIsRefusedFirst(_ until: String) {
        for command in [["dry-run"], ["explain", "--user", "u1"], ["report"]] {
            do {
                _ = try BeckonCLI.parseAsRoot(command + ["rules", "--events", "e.jsonl", "--until", until])
                Issue.record("\(command) --until \(until) was taken")
            } catch {
                #expect(BeckonCLI.exitCode(for: error) == .validationFailure, "\(command) \(until)")
                #expect(BeckonCLI.message(for: error).hasPrefix("--until: "), "\(BeckonCLI.message(for: error))")
            }
        }
        #expect(throws: Never.self) { try BeckonCLI.parseAsRoot(["dry-run", "rules", "--events", "e.jsonl", "--until", "+7d"]) }
    }
}

/// A file decoded on other threads (``DecodingPipeline``) hands over the same events, in the same order and with the
/// same line numbers, and names the same bad lines, as one thread decoding it line by line.
struct DecodingPipelineTests {
    /// 6,000 lines over a dozen blocks: events, bad lines, blank lines, `\r\n` ends and an overlong line among them.
    static func file() -> [UInt8] {
        var out: [UInt8] = []
        for i in 1...6000 {
            let line: String
            switch i {
            case _ where i % 97 == 0: line = #"{"type":"track","event":"Opened""#  // cut short
            case _ where i % 131 == 0: line = "   "
            case 2500:
                line = #"{"type":"track","event":"Opened","userId":"u","p":""# + String(repeating: "x", count: 1 << 20) + #""}"#
            default:
                line =
                    #"{"type":"track","event":"\#(i % 3 == 0 ? "Opened" : "Other")","userId":"u\#(i % 50)","#
                    + #""timestamp":"2026-03-01T09:00:00Z","messageId":"m\#(i)"}"#
            }
            out += Array(line.utf8) + (i % 7 == 0 ? [13, 10] : [10])
        }
        return out
    }

    /// The stream's events and bad-line reports; `holdingTheHelper`: the first decoding thread's queue is suspended
    /// while the stream is read (and resumed after).
    func run(
        _ bytes: [UInt8], _ policy: BadLinePolicy, workers: Int, holdingTheHelper: Bool = false
    ) throws -> (events: [String], stderr: String, ahead: Int) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-pipe-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let rules = try #require(RuleLoader.load(texts: [("r.yaml", EventFileTests.rules)]).ruleSet)
        let stream = try #require(EventStream(path: path, badLines: policy))
        let console = StringConsole()
        var events: [String] = []
        var ahead = 0
        if holdingTheHelper { stream.helper.suspend() }
        defer { if holdingTheHelper { stream.helper.resume() } }
        stream.events(decoder: SegmentDecoder(ruleSet: rules), console: console, workers: workers) {
            events.append("\(stream.eventLine) \($0.userID) \($0.name) \($0.messageID ?? "-")")
            ahead = max(ahead, stream.linesAhead)
        }
        _ = stream.finish(console: console)
        return (events, console.stderr.replacingOccurrences(of: path, with: "FILE"), ahead)
    }

    @Test(arguments: [1, 2, 3, 4])
    func everyLineAsOneThreadReadsIt(workers: Int) throws {
        let bytes = Self.file()
        let one = try run(bytes, .goOn, workers: 0)
        #expect(one.events.count == 6000 - 61 - 45 - 1)  // bad, blank (131·k, not 97·k), overlong
        #expect(one.events.first == "1 u1 Other m1" && one.events.last == "6000 u0 Opened m6000")
        #expect(one.stderr.contains("FILE:97:") && one.stderr.contains("… and 52 more bad lines"), "\(one.stderr)")
        let many = try run(bytes, .goOn, workers: workers)
        #expect(many.events == one.events)
        #expect(many.stderr == one.stderr)
        // Read ahead, but only so far: blank lines hold nothing and are not counted by the bound (45 here).
        #expect(one.ahead == 0)
        #expect(many.ahead > 0 && many.ahead <= DecodingPipeline.maxLinesAhead(workers: workers) + 45, "\(many.ahead)")
    }

    /// The engine's thread decodes what the decoding threads have not started: with the one decoding thread held (its
    /// queue suspended), every block is decoded by the engine's thread, the same events in the same order (before, the
    /// stream waited for that thread for ever).
    @Test func theEnginesThreadDecodesWhatNoOtherThreadStarted() throws {
        let bytes = Self.file()
        let one = try run(bytes, .goOn, workers: 0)
        let held = try run(bytes, .goOn, workers: 1, holdingTheHelper: true)
        #expect(held.events == one.events)
        #expect(held.stderr == one.stderr)
    }

    @Test(arguments: [1, 2])
    func strictStopsAtTheSameLine(workers: Int) throws {
        let bytes = Self.file()
        let one = try run(bytes, .strict, workers: 0)
        #expect(one.events.last?.hasPrefix("96 ") == true, "\(one.events.suffix(1))")
        let many = try run(bytes, .strict, workers: workers)
        #expect(many.events == one.events)
        #expect(many.stderr == one.stderr && one.stderr.contains("FILE:97:"), "\(many.stderr)")
    }
}

/// Actions written as JSON lines on a thread of their own come out as the engine's thread would write them, in order.
struct ActionLinesTests {
    /// Constant actions (kept by reference), computed ones (kept whole: `set` and a templated link) and a holdout's
    /// held-back fires.
    static let rules = """
        version: 1
        campaign: c
        holdout: 20%
        rules:
          - id: hi
            on: Opened
            do: [ { deep_link: "app://hi" } ]
          - id: tagged
            on: Opened
            do:
              - set: { last: "${event.properties.n}" }
              - deep_link: "app://n/${event.properties.n}"
        """

    /// 3,000 events' outcomes (3 actions each, over 40 users), as the engine hands them over in one outcome that it
    /// reuses event after event; each is also handed to `each` before the next event.
    static func outcomes(_ rules: CompiledRuleSet, each: (FiredActions) -> Void = { _ in }) -> [FiredActions] {
        let engine = Engine(ruleSet: rules)
        let decoder = SegmentDecoder(ruleSet: rules)
        var out: [FiredActions] = []
        var outcome = EventOutcome()
        for i in 0..<3000 {
            let line =
                #"{"type":"track","event":"Opened","userId":"u\#(i % 40)","properties":{"n":\#(i)},"#
                + #""timestamp":"2026-03-01T09:00:00Z","messageId":"m\#(i)"}"#
            guard let event = try? decoder.decode(line) else { return [] }
            engine.process(event, into: &outcome)
            each(outcome.actions)
            out.append(outcome.actions)
        }
        return out
    }

    /// The test's console, written from the writing queue while nothing else writes to it (``ActionLines/ordering(_:)``).
    final class Target: @unchecked Sendable {
        let console: StringConsole
        init(_ console: StringConsole) { self.console = console }
    }

    func written(_ outcomes: [FiredActions], threaded: Bool, marks: Bool = false) -> String {
        let console = StringConsole()
        let target = Target(console)
        let lines = ActionLines(threaded: threaded) { target.console.out(bytes: $0) }
        let ordered = lines.ordering(console)
        for (i, actions) in outcomes.enumerated() {
            // A fresh outcome would be reused: the lines must not depend on it after `add`.
            var reused = actions
            lines.add(reused)
            reused = FiredActions()
            if marks && i % 700 == 0 { ordered.out("mark \(i)\n") }
        }
        lines.drain()
        return console.stdout
    }

    /// On the thread that also decodes the file's lines (the stream's helper, as `dry-run --format jsonl` of a file
    /// writes them): the same lines as on the engine's thread, a bad line skipped between blocks of both kinds of work.
    @Test func onTheThreadThatDecodesAsOnTheEnginesThread() throws {
        let rules = try #require(RuleLoader.load(texts: [("r.yaml", Self.rules)]).ruleSet)
        var text = ""
        for i in 0..<3000 {
            if i == 1500 { text += "{not json\n" }
            text += #"{"type":"track","event":"Opened","userId":"u\#(i % 40)","properties":{"n":\#(i)},"#
            text += #""timestamp":"2026-03-01T09:00:00Z","messageId":"m\#(i)"}"# + "\n"
        }
        let path = NSTemporaryDirectory() + "helper-\(UUID().uuidString).jsonl"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let expected = Self.outcomes(rules).map { $0.map { $0.json + "\n" }.joined() }.joined()
        for workers in [0, 1, 2] {
            let stream = try #require(EventStream(path: path, badLines: .goOn))
            let console = StringConsole()
            let target = Target(console)
            let lines = ActionLines(on: workers > 0 ? stream.helper : nil) { target.console.out(bytes: $0) }
            let engine = Engine(ruleSet: rules)
            var outcome = EventOutcome()
            stream.events(decoder: SegmentDecoder(ruleSet: rules), console: lines.ordering(console), workers: workers) {
                engine.process($0, into: &outcome)
                lines.add(outcome.actions)
            }
            lines.drain()
            #expect(!stream.finish(console: console))
            #expect(stream.badLines == 1, "\(workers) decoding threads")
            #expect(console.stdout == expected, "\(workers) decoding threads")
        }
    }

    @Test func onAThreadOfTheirOwnAsOnTheEnginesThread() throws {
        let rules = try #require(RuleLoader.load(texts: [("r.yaml", Self.rules)]).ruleSet)
        let outcomes = Self.outcomes(rules)
        #expect(outcomes.count == 3000)
        // Each action as `FiredAction.json` writes it: the reference.
        let expected = outcomes.map { $0.map { $0.json + "\n" }.joined() }.joined()
        #expect(expected.contains(#""action":"held_back""#) && expected.contains("app://n/2999"))
        // 3 actions an event, 2 (held back, one a rule) for the holdout's users.
        #expect(outcomes.allSatisfy { $0.count == 3 || $0.count == 2 } && outcomes.contains { $0.count == 2 })
        // Far more than the runs that may be out at once: the writer holds the engine back, and loses nothing.
        #expect(expected.utf8.count > ActionLines.chunkBytes * 4)
        #expect(written(outcomes, threaded: false) == expected)
        #expect(written(outcomes, threaded: true) == expected)
        // Straight from the engine's outcome, which the next event overwrites in place.
        let console = StringConsole()
        let target = Target(console)
        let lines = ActionLines(threaded: true) { target.console.out(bytes: $0) }
        _ = Self.outcomes(rules) { lines.add($0) }
        lines.drain()
        #expect(console.stdout == expected)
    }

    /// A slow output holds the engine's thread back: at most ``ActionLines/maxRunsOut`` runs wait to be written.
    @Test func aSlowOutputHoldsTheEngineBack() throws {
        let rules = try #require(RuleLoader.load(texts: [("r.yaml", Self.rules)]).ruleSet)
        let outcomes = Self.outcomes(rules)
        let console = StringConsole()
        let target = Target(console)
        let lines = ActionLines(threaded: true) {
            usleep(2000)
            target.console.out(bytes: $0)
        }
        for actions in outcomes { lines.add(actions) }
        lines.drain()
        #expect(lines.mostRunsOut == ActionLines.maxRunsOut)
        #expect(console.stdout == outcomes.map { $0.map { $0.json + "\n" }.joined() }.joined())
    }

    /// What else is written through `ordering` comes after the lines added before it.
    @Test(arguments: [false, true])
    func otherOutputKeepsItsPlace(threaded: Bool) throws {
        let rules = try #require(RuleLoader.load(texts: [("r.yaml", Self.rules)]).ruleSet)
        let outcomes = Self.outcomes(rules)
        var expected = ""
        for (i, actions) in outcomes.enumerated() {
            expected += actions.map { $0.json + "\n" }.joined()
            if i % 700 == 0 { expected += "mark \(i)\n" }
        }
        #expect(written(outcomes, threaded: threaded, marks: true) == expected)
    }

    /// Actions of two rule sets (a reload between them) are taken together: those of the other set are kept whole.
    @Test func actionsOfAnotherRuleSetAreKeptWhole() throws {
        let a = try #require(RuleLoader.load(texts: [("r.yaml", Self.rules)]).ruleSet)
        let b = try #require(RuleLoader.load(texts: [("r.yaml", Self.rules)]).ruleSet)
        let first = Self.outcomes(a).prefix(5)
        let second = Self.outcomes(b).prefix(5)
        var all = FiredActions()
        for x in first + second { all.append(contentsOf: x) }
        let expected = (first + second).flatMap { $0.map(\.json) }
        #expect(all.map(\.json) == expected)
    }
}
