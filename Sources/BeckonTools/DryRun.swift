import BeckonCore
import BeckonYAML

/// `beckon dry-run PATH... --events FILE|-`: runs a stream through the rules and shows what fires, and for every
/// rule whose trigger matched but did not fire, why not.
public enum DryRunRunner {
    public enum Format: String, Sendable, CaseIterable { case table, jsonl }

    public struct Options: Sendable {
        public var paths: [String]
        public var events: String
        public var format: Format = .table
        /// What to do at a bad event line.
        public var badLines: BadLinePolicy = .goOn
        public var firedOnly = false
        /// After the stream, let time run to this instant (RFC 3339, or `+DURATION` after the last event) so that
        /// delayed actions due by then fire.
        public var until: String?
        public init(
            paths: [String], events: String, format: Format = .table, badLines: BadLinePolicy = .goOn,
            firedOnly: Bool = false, until: String? = nil
        ) {
            self.paths = paths
            self.events = events
            self.format = format
            self.badLines = badLines
            self.firedOnly = firedOnly
            self.until = until
        }
    }

    public static func run(_ o: Options, console: any Console) -> Int32 {
        let loaded = RuleLoader.load(paths: o.paths)
        guard let ruleSet = loaded.ruleSet else {
            console.err(loaded.rendered())
            console.err("\(loaded.errorCount) error(s) in the rules; nothing was run\n")
            return 1
        }
        if loaded.warningCount > 0 { console.err(loaded.rendered()) }
        guard let stream = EventStream.opened(o.events, badLines: o.badLines, console: console) else { return 1 }
        let engine = Engine(ruleSet: ruleSet, options: Engine.Options(recordVerdicts: o.format == .table && !o.firedOnly))
        let table = TablePrinter(console: console)
        // JSON lines are written on a thread of their own for a file (ActionLines); what else is written to the
        // console waits for the lines before it.
        let lines = ActionLines(for: stream, to: console)
        let console = lines.ordering(console)
        defer { lines.drain() }
        func show(_ outcome: EventOutcome) {
            switch o.format {
            case .jsonl: lines.add(outcome.actions)
            case .table: table.print(outcome, firedOnly: o.firedOnly)
            }
        }
        var outcome = EventOutcome()
        stream.events(decoder: SegmentDecoder(ruleSet: ruleSet), console: console) {
            engine.process($0, into: &outcome)
            show(outcome)
        }
        if stream.finish(console: console) { return 1 }
        if let until = o.until {
            guard let end = untilTime(until, last: engine.latestEventTime, console: console) else { return 64 }
            engine.advance(to: end, each: show)
        }
        let summary = Summary(engine: engine, badLines: stream.badLines)
        if o.format == .table {
            console.out("\n" + summary.render())
        } else {
            console.err(summary.headline + "\n")
        }
        return 0
    }
}

/// One line of the dry-run table: a fired action, or a rule that matched but did not fire (the console's table and
/// the terminal's come from these).
public struct DryRunRow: Sendable {
    /// What became of the rule: it fired (an action), did not, or waits (scheduled, or held by quiet hours).
    public enum Result: Sendable {
        case fired, notFired, waiting

        /// The table's mark: ✓, ✗ or ⏲.
        public var mark: String {
            switch self {
            case .fired: "✓"
            case .notFired: "✗"
            case .waiting: "⏲"
            }
        }
    }

    public var time: Int64
    public var user: String
    public var result: Result
    public var rule: String
    /// The action's kind (fired rows only).
    public var kind: String?
    /// What the action carries, or why the rule did not fire.
    public var detail: String
    public var warnings: [String] = []

    /// The rows of one outcome, in order: fired verdicts are noted right after their actions are made, so both lists
    /// share one order.
    public static func rows(_ outcome: EventOutcome, firedOnly: Bool) -> [DryRunRow] {
        var rows: [DryRunRow] = []
        var k = 0
        let actions = outcome.actions
        func fired(_ a: FiredAction) -> DryRunRow {
            DryRunRow(
                time: a.time, user: a.userID, result: .fired, rule: a.unit + "/" + a.rule, kind: a.kind,
                detail: DryRunRunner.detail(a), warnings: a.warnings)
        }
        for v in outcome.verdicts {
            if v.verdict.fired {
                while k < actions.count && actions[k].unit + "/" + actions[k].rule == v.qualifiedID {
                    rows.append(fired(actions[k]))
                    k += 1
                }
            } else if !firedOnly {
                let result: Result
                switch v.verdict {
                case .scheduled, .quietHours(heldUntil: .some), .rateHeld: result = .waiting
                default: result = .notFired
                }
                rows.append(
                    DryRunRow(
                        time: v.time, user: v.userID, result: result, rule: v.qualifiedID, kind: nil, detail: v.verdict.summary)
                )
            }
        }
        while k < actions.count {
            rows.append(fired(actions[k]))
            k += 1
        }
        return rows
    }

    /// The row as the terminal table prints it.
    public var line: String {
        var s = "\(Timestamp(milliseconds: time))  \(user)  \(result.mark) \(rule)  "
        s += kind.map { "\($0)  \(detail)" } ?? detail
        if !warnings.isEmpty { s += "  ⚠ " + warnings.joined(separator: "; ") }
        return s
    }
}

/// The readable dry-run table: one line per fired action, and one per rule that matched but did not fire.
final class TablePrinter {
    let console: any Console
    init(console: any Console) { self.console = console }

    func print(_ outcome: EventOutcome, firedOnly: Bool) {
        for row in DryRunRow.rows(outcome, firedOnly: firedOnly) { console.out(Terminal.safe(row.line) + "\n") }
    }
}

extension DryRunRunner {
    /// Why a `--until` (or a test's `until`) cannot be used, in words for the command line.
    struct UntilProblem: Error {
        var message: String
        /// The value is a time, but one counted from a last event the stream does not have.
        var needsAnEvent = false
    }

    /// `--until`: an RFC 3339 time, or `+DURATION` after the last event's time (`last`, `Int64.min` when none).
    static func untilTime(_ text: String, last: Int64) -> Result<Int64, UntilProblem> {
        if text.hasPrefix("+") {
            let d = String(text.dropFirst())
            switch DSLDuration.read(d) {
            case .invalid: return .failure(UntilProblem(message: "'\(d)' is not a duration like 7d or 1h30m"))
            case .tooLong: return .failure(UntilProblem(message: DSLDuration.tooLongMessage(d)))
            case .milliseconds(let ms):
                guard last != Int64.min else {
                    return .failure(
                        UntilProblem(message: "'\(text)' counts from the last event, and there is none", needsAnEvent: true))
                }
                let (end, overflow) = last.addingReportingOverflow(ms)
                return overflow ? .failure(UntilProblem(message: "'\(text)' is past the year 9999")) : .success(end)
            }
        }
        if let t = Timestamp.parse(text) {
            // (The bound of `+DURATION` holds for a time written out too: time run on for more is a loop to no end.)
            if last != Int64.min, t.milliseconds > last, t.milliseconds - last > DSLDuration.maxMilliseconds {
                return .failure(
                    UntilProblem(
                        message: "'\(text)' is more than 100 years (36525d) after the last event, "
                            + "\(Timestamp(milliseconds: last)): time runs on at most that long"))
            }
            return .success(t.milliseconds)
        }
        if let why = Timestamp.offsetProblem(text) { return .failure(UntilProblem(message: "'\(text)': \(why)")) }
        return .failure(
            UntilProblem(message: "expects a time like 2026-03-31T00:00:00Z or +DURATION like +7d, found '\(text)'"))
    }

    /// Why `text` is not an `--until` at all, whatever the stream (so a command can say so before it reads one).
    public static func untilFormProblem(_ text: String) -> String? {
        if case .failure(let p) = untilTime(text, last: Int64.min), !p.needsAnEvent {
            return p.message
        }
        return nil
    }

    /// ``untilTime(_:last:)`` for a command's `--until`: `nil` once it has said on standard error why the value cannot
    /// be used (the command then exits 64).
    static func untilTime(_ text: String, last: Int64, console: any Console) -> Int64? {
        switch untilTime(text, last: last) {
        case .success(let t): return t
        case .failure(let p):
            console.err("error: --until: \(p.message)\n")
            return nil
        }
    }

    /// A one-line description of an action's own fields.
    static func detail(_ a: FiredAction) -> String {
        func str(_ v: Value?) -> String {
            guard let v else { return "" }
            if case .string(let s) = v { return s }
            return JSONWriter.encode(v)
        }
        guard let kind = ActionKind(rawValue: a.kind) else { return "" }
        switch kind {
        case .message:
            guard case .map(let m)? = a["message"] else { return "" }
            var s = str(m[string: "surface"])
            if let t = m[string: "title"] { s += " \"\(str(t))\"" }
            if case .list(let buttons)? = m[string: "buttons"] {
                for b in buttons {
                    guard case .map(let bm) = b else { continue }
                    var label = "[" + str(bm[string: "label"])
                    if let l = bm[string: "deep_link"] { label += " → " + str(l) }
                    if let act = bm[string: "action"] { label += " → " + str(act) }
                    s += " " + label + "]"
                }
            }
            return s
        case .screen, .flow:
            var s = str(a["screen"])
            if case .map(let p)? = a["params"], !p.isEmpty { s += " " + JSONWriter.encode(.map(p)) }
            return s
        case .deepLink: return str(a["url"])
        case .notify:
            guard case .map(let n)? = a["notification"] else { return "" }
            var s = "\(str(n[string: "id"])): \"\(str(n[string: "message"]))\""
            if let from = n[string: "sender"] { s += " from \(str(from))" }
            if let link = n[string: "link"] { s += " → \(str(link))" }
            return s + " (unread \(str(a["unread"])))"
        case .push:
            guard case .map(let p)? = a["push"] else { return "" }
            var s = p[string: "title"].map { "\"\(str($0))\" " } ?? ""
            s += "\"\(str(p[string: "body"]))\""
            if let link = p[string: "deep_link"] { s += " → \(str(link))" }
            if let to = p[string: "to"] { s += " to \(str(to))" }
            return s
        case .email:
            guard case .map(let e)? = a["email"] else { return "" }
            return str(e[string: "template"]) + " to " + str(e[string: "to"])
        case .skipped: return str(a["channel"]) + ": " + str(a["reason"])
        case .markRead:
            guard case .map(let n)? = a["notification"] else { return "" }
            return "\(str(n[string: "id"])) (unread \(str(a["unread"])))"
        case .prompt: return str(a["permission"])
        case .emit: return str(a["event"]) + " " + str(a["payload"])
        case .set, .unset: return str(a["attributes"])
        case .heldBack: return ""
        }
    }
}

/// One rule's line of a run's summary (dry-run's table, the playground's).
public struct RuleCount: Sendable {
    public var rule: String
    public var triggered: Int
    public var fired: Int
    /// What else became of its matches: ``notFired(blocked:scheduled:)``.
    public var notFired: String

    /// `scheduled N` (when any), then the blocks by reason (``Verdict/code``), most first: `limit:per_day 3, where 1`;
    /// `-` for none. The one spelling of a rule's blocks, in the summary and the console's live counts.
    public static func notFired(blocked: [String: Int], scheduled: Int) -> String {
        var parts = reasons(blocked).map { "\($0.reason) \($0.count)" }
        if scheduled > 0 { parts.insert("scheduled \(scheduled)", at: 0) }
        return parts.isEmpty ? "-" : parts.joined(separator: ", ")
    }
}

extension RuleCount {
    /// Blocks by reason, most first (ties by reason): the one order of the summary, the report and the console.
    public static func reasons(_ blocked: [String: Int]) -> [(reason: String, count: Int)] {
        blocked.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}

/// Counts at the end of a run.
struct Summary {
    let engine: Engine
    let badLines: Int

    var headline: String {
        let s = engine.stats
        func n(_ k: Int, _ word: String) -> String { "\(k) \(word)\(k == 1 ? "" : "s")" }
        let pending = engine.pendingCount
        let users = n(engine.store.userCount - s.merges, "user") + (s.merges > 0 ? " (\(n(s.merges, "id")) merged in)" : "")
        let skipped = s.skippedActions > 0 ? " and \(s.skippedActions) skipped (no address)" : ""
        return "\(n(s.events, "event")), \(users), \(n(s.actions - s.skippedActions, "action")) fired\(skipped)"
            + " (bad lines \(badLines), duplicates \(s.duplicates), late \(s.late)"
            + (s.attributesNotKept > 0 ? ", attributes not kept \(s.attributesNotKept)" : "")
            + (s.offPlan > 0 ? ", off plan \(s.offPlan)" : "") + ")"
            + (pending > 0 ? "; \(n(pending, "delayed action")) still pending (use --until to let time pass)" : "")
    }

    /// Per rule: trigger matches, fires, and what else became of its matches.
    var perRule: [RuleCount] {
        let s = engine.stats
        return engine.ruleSet.rules.map { r in
            let i = Int(r.index)
            return RuleCount(
                rule: r.qualifiedID, triggered: s.triggered[i], fired: s.fired[i],
                notFired: RuleCount.notFired(blocked: s.blocked[i], scheduled: s.scheduled[i]))
        }
    }

    func render() -> String {
        var out = headline + "\n"
        let rows = perRule
        guard !rows.isEmpty else { return out }
        let width = max(4, rows.map(\.rule.count).max() ?? 4)
        out += "rule".padding(width) + "  triggered  fired  not fired\n"
        for r in rows {
            out +=
                r.rule.padding(width) + "  " + String(r.triggered).leftPadding(9) + "  " + String(r.fired).leftPadding(5) + "  "
                + r.notFired + "\n"
        }
        return out
    }
}

/// A progress line on standard error, only when it is a terminal: events done, events per second, and with a known
/// file size the share read and the time left. Rewritten in place at most four times a second; cleared at the end.
public final class Progress {
    let console: any Console
    let total: Int?
    let enabled: Bool
    var last: UInt64 = 0
    let started: UInt64
    let clock: () -> UInt64

    public init(console: any Console, total: Int?, clock: @escaping () -> UInt64 = Stopwatch.nanoseconds) {
        self.console = console
        self.total = total
        self.clock = clock
        enabled = console.errIsTerminal
        started = clock()
    }

    /// Call once per event (or line); looks at the clock only every 4096th.
    public func tick(events: Int, bytes: Int) {
        guard enabled, events & 0xFFF == 0 else { return }
        let now = clock()
        guard now - last > 250_000_000 else { return }
        last = now
        let secs = Double(now - started) / 1e9
        let rate = Double(events) / max(secs, 1e-9)
        var s = "\r\(events) events, \(Int(rate)) events/s"
        if let total, total > 0, bytes > 0 {
            let frac = Double(bytes) / Double(total)
            let eta = secs / max(frac, 1e-9) - secs
            s += ", \(Int(frac * 100))%, ETA \(Int(eta))s"
        }
        console.err(s + "   ")
    }

    public func finish() { if enabled && last != 0 { console.err("\r" + String(repeating: " ", count: 70) + "\r") } }
}

extension String {
    func padding(_ n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
    func leftPadding(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}
