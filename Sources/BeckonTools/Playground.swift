import BeckonCore
import BeckonYAML

/// The console's playground: `beckon validate` and `beckon dry-run` over texts, in memory — an edited rule file with
/// the other files of a rule set, and a pasted event stream — within ``Limits``. It reads no file and touches no
/// live state: the rules come from ``RuleLoader/load(texts:)`` and run in an engine of their own.
public enum Playground {
    /// The playground's bounds (docs/reference/limits.md). A run over any of them is refused, or stopped where it got
    /// to with the reason.
    public struct Limits: Sendable {
        /// The edited rule file, in bytes.
        public var ruleBytes = 256 * 1024
        /// The pasted stream, in bytes and in lines.
        public var eventBytes = 1024 * 1024
        public var eventLines = 10_000
        /// Time spent running events and letting time run (checked between events, and between days of `until`).
        public var runMilliseconds: Int64 = 2_000
        /// How far past the last event `until` may let time run.
        public var untilMs: Int64 = 90 * Milliseconds.day
        /// Rows of the table shown (the counts cover every event).
        public var rows = 2_000
        public init() {}
    }

    /// A diagnostic as the console shows it: where, what, and `beckon validate`'s text (source line and caret).
    public struct Problem: Sendable {
        public var severity: String
        public var file: String
        public var line: Int
        public var column: Int
        public var message: String
        public var rendered: String
    }

    public struct Result: Sendable {
        /// The rules' diagnostics (errors and warnings), sorted.
        public var problems: [Problem] = []
        public var errors = 0
        /// Whether the events ran (the rules compiled and the input is within the limits).
        public var ran = false
        public var rows: [DryRunRow] = []
        /// Rows past ``Limits/rows``, not kept.
        public var rowsLeftOut = 0
        public var headline = ""
        public var perRule: [RuleCount] = []
        /// Bad event lines, as the commands report them (`events:LINE:COLUMN: bad event: …`).
        public var badLines: [String] = []
        /// Why the input was refused or the run stopped early, in words.
        public var stopped: String?
        /// The rules as edited, when they compiled (what a service sizes an edited schedule's audience with).
        public var ruleSet: CompiledRuleSet?
    }

    /// Loads `files` with `edited`'s text in place of the file at `path` (or added, when the set has no such file),
    /// then runs `events` (Segment JSON lines) through the rules, letting time run to `until` (as `dry-run --until`)
    /// at the end.
    public static func run(
        files: [(path: String, text: String)], path: String, edited: String, events: String, until: String?,
        limits: Limits = Limits()
    ) -> Result {
        var result = Result()
        if edited.utf8.count > limits.ruleBytes {
            result.stopped = "the rule file is over the playground's \(limits.ruleBytes / 1024) KiB"
            return result
        }
        if events.utf8.count > limits.eventBytes {
            result.stopped = "the events are over the playground's \(limits.eventBytes / 1024) KiB"
            return result
        }
        var texts = files.filter { $0.path != path }
        texts.append((path, edited))
        // (A file the rules name is a name here: the playground reads nothing from disk.)
        let loaded = RuleLoader.load(texts: texts, readsNamedFiles: false)
        var bag = DiagnosticBag()
        bag.append(contentsOf: loaded.diagnostics)
        let renderer = DiagnosticRenderer(sources: loaded.sources)
        result.problems = bag.sorted.map {
            Problem(
                severity: $0.severity.rawValue, file: $0.location.file, line: $0.location.position.line,
                column: $0.location.position.column,
                message: $0.message, rendered: renderer.render($0))
        }
        result.errors = loaded.errorCount
        guard let ruleSet = loaded.ruleSet else { return result }
        result.ruleSet = ruleSet

        let lines = Self.lines(events)
        if lines.count(where: { !$0.isEmpty }) > limits.eventLines {
            result.stopped = "the events are over the playground's \(limits.eventLines) lines"
            return result
        }
        let decoder = SegmentDecoder(ruleSet: ruleSet)
        let console = StringConsole()
        var bad = BadLines(policy: .goOn, file: "events")
        let engine = Engine(ruleSet: ruleSet, options: Engine.Options(recordVerdicts: true))
        let start = ContinuousClock.now
        let budget = Duration.milliseconds(limits.runMilliseconds)
        // (An event's expressions stop at the limit too: one event cannot hold the run past it.)
        engine.evaluationDeadline = start + budget
        func keep(_ outcome: EventOutcome) {
            for row in DryRunRow.rows(outcome, firedOnly: false) {
                if result.rows.count < limits.rows { result.rows.append(row) } else { result.rowsLeftOut += 1 }
            }
        }
        result.ran = true
        for (n, text) in lines.enumerated() {
            if text.isEmpty { continue }
            let line = String(decoding: text, as: UTF8.self)
            if ContinuousClock.now - start > budget {
                result.stopped = "stopped before line \(n + 1): over the playground's \(limits.runMilliseconds) ms"
                break
            }
            do throws(DecodeError) {
                keep(engine.process(try decoder.decode(line)))
            } catch {
                _ = bad.note(line: n + 1, column: error.column, error.message, console: console)
            }
        }
        _ = bad.finish(console: console)
        result.badLines = console.stderr.split(separator: "\n").map(String.init)
        if let until, !until.isEmpty, result.stopped == nil {
            let last = engine.latestEventTime
            switch DryRunRunner.untilTime(until, last: last) {
            case .failure(let p): result.stopped = "until: " + p.message
            case .success(let end) where last != Int64.min && end - last > limits.untilMs:
                result.stopped = "until is more than \(DSLDuration.format(limits.untilMs)) after the last event"
            case .success(let end):
                // A day at a time, with the time limit checked between days (delayed actions can chain).
                var t = last == Int64.min ? end : last
                repeat {
                    t = min(end, t + Milliseconds.day)
                    keep(engine.advance(to: t))
                    if t < end && ContinuousClock.now - start > budget {
                        result.stopped =
                            "stopped letting time run at \(Timestamp(milliseconds: t)): over the playground's \(limits.runMilliseconds) ms"
                        break
                    }
                } while t < end
            }
        }
        let summary = Summary(engine: engine, badLines: bad.count)
        result.headline = summary.headline
        result.perRule = summary.perRule
        return result
    }
}

extension Playground {
    /// The lines of pasted events as `dry-run` reads a file (``LineReader``): a line ends at `\n`, `\r\n` or a lone
    /// `\r`; a line of only spaces and tabs is blank (empty here).
    static func lines(_ text: String) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        let bytes = Array(text.utf8)
        var start = 0
        var i = 0
        func end(_ j: Int) {
            let line = bytes[start..<j]
            out.append(line.allSatisfy { $0 == 32 || $0 == 9 } ? [] : line)
        }
        while i < bytes.count {
            if bytes[i] == 10 || bytes[i] == 13 {
                end(i)
                if bytes[i] == 13 && i + 1 < bytes.count && bytes[i + 1] == 10 { i += 1 }
                start = i + 1
            }
            i += 1
        }
        if start < bytes.count { end(bytes.count) }
        return out
    }
}

extension ReportRunner {
    /// `beckon report`'s HTML for `ruleSet` over the events `events` hands to its argument (in time order), without a
    /// page around it (for the console): `source` names the rules and `eventsName` the events in its first line;
    /// `end`, when later than the last event, lets time run on to it.
    public static func body(
        ruleSet: CompiledRuleSet, source: String, eventsName: String, end: Int64?,
        events: ((BoundEvent) -> Void) throws -> Void
    ) rethrows -> String {
        let builder = ReportBuilder(ruleSet: ruleSet)
        try events { builder.process($0) }
        var until = builder.last
        if let end, let last = builder.last { until = max(end, last) }
        if let until { builder.finish(at: until) }
        return ReportHTML.body(builder.report(paths: [source], eventsFile: eventsName, badLines: 0, end: until), heading: false)
    }

    /// The report's stylesheet rules (scoped to `.report`).
    public static var css: String { ReportHTML.css }
}
