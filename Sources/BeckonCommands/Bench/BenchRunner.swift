import BeckonCore
import BeckonMemory
import BeckonTools
import BeckonYAML
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `beckon bench --workload DIR [--format json]`: runs the shared benchmark workload through the engine and measures
/// it — events per second in process (events decoded beforehand) and end to end (a JSON-lines file decoded,
/// evaluated and the actions written as JSON), peak RSS, heap bytes of state per user, allocations per event, the
/// fires per rule (to compare with the reference), the cost of 5,000 rules against 50, and how long 10,000 rules
/// take to load and compile. Everything runs on one thread, but for a second end-to-end run whose lines are decoded on
/// the other cores (``EventStream/decodingWorkers``), when there are any.
public enum BenchRunner {
    public enum Format: String, Sendable, CaseIterable { case text, json }

    public struct Options: Sendable {
        public var workload: String
        public var format: Format = .text
        /// Rule counts for the scaling run and the compile-time run.
        public var scaleRules = 5000
        public var compileRules = 10_000
        /// In-process runs to take the best of.
        public var repeats = 3
        /// Off only to profile the in-process loop alone (`--no-end-to-end`, hidden).
        public var endToEnd = true
        /// The reference's result (`bench.py ref` writes `results/ref.json`), to compare fires with.
        public var reference: String?
        /// Only write the translated rules (`bench.yaml`) and the Segment stream (`events.jsonl`, the users' identifies
        /// first) into this directory, and measure nothing (`--export`, hidden: scripts/bench-instructions.sh runs
        /// `dry-run` on them under callgrind).
        public var export: String?
        public init(workload: String, format: Format = .text, reference: String? = nil) {
            self.workload = workload
            self.format = format
            self.reference = reference
        }
    }

    struct Result {
        var users = 0
        var events = 0
        var rules = 0
        var compileMs = 0.0
        var inProcess = 0.0
        var endToEnd = 0.0
        /// End to end with the lines decoded on `decodingWorkers` other threads (0: one core, not run).
        var endToEndCores = 0.0
        var decodingWorkers = 0
        var decode = 0.0
        /// Lines of the Segment file that did not decode, skipped.
        var badLines = 0
        var peakRSSKB = 0
        var stateBytesPerUser = 0.0
        var stateCost = StateCost()
        var allocationsPerEvent = 0.0
        var fires: [(String, Int)] = []
        var scaleRules = 0
        var scaleInProcess = 0.0
        var compileRules = 0
        var compileManyMs = 0.0
        var reference: (path: String, matches: Bool, diff: [(String, Int, Int)])?
    }

    public static func run(_ o: Options, console: any Console) -> Int32 {
        do {
            if let dir = o.export {
                let workload = try BenchWorkload(dir: o.workload)
                let yaml = (dir as NSString).appendingPathComponent("bench.yaml")
                guard FileManager.default.createFile(atPath: yaml, contents: Data(try workload.rulesYAML().utf8)) else {
                    throw BenchWorkload.Problem(description: "cannot write \(yaml)")
                }
                let (users, events) = try workload.writeSegment(
                    to: (dir as NSString).appendingPathComponent("events.jsonl"), console: console)
                console.err("bench: wrote \(dir)/bench.yaml and \(dir)/events.jsonl (\(users) users, \(events) events)\n")
                return 0
            }
            let r = try measure(o, console: console)
            switch o.format {
            case .text: console.out(text(r))
            case .json: console.out(JSONWriter.encode(json(r)) + "\n")
            }
            if let ref = r.reference, !ref.matches { return 1 }
            return 0
        } catch {
            console.err("error: \(error)\n")
            return 1
        }
    }

    static func now() -> Double { Double(Stopwatch.nanoseconds()) / 1e9 }

    static func load(_ yaml: String) throws -> (CompiledRuleSet, Double) {
        let t0 = now()
        let loaded = RuleLoader.load(texts: [("bench.yaml", yaml)])
        let t = now() - t0
        guard let set = loaded.ruleSet else {
            throw BenchWorkload.Problem(description: "the translated rules do not load:\n" + loaded.rendered())
        }
        return (set, t * 1000)
    }

    static func measure(_ o: Options, console: any Console) throws -> Result {
        var r = Result()
        let workload = try BenchWorkload(dir: o.workload)
        let (rules, compileMs) = try load(try workload.rulesYAML())
        r.rules = rules.rules.count
        r.compileMs = compileMs
        let segment = NSTemporaryDirectory() + "beckon-bench-\(UUID().uuidString).jsonl"
        defer { try? FileManager.default.removeItem(atPath: segment) }
        (r.users, r.events) = try workload.writeSegment(to: segment, console: console)
        console.err("bench: \(r.users) users, \(r.events) events, \(r.rules) rules\n")

        // End to end: file → decode → evaluate → actions as JSON (to /dev/null), through the commands' one reading
        // loop; on one thread, then with the lines decoded on the other cores (when there are any).
        if o.endToEnd {
            let one = try endToEnd(segment, rules: rules, users: r.users, events: r.events, workers: 0, console: console)
            r.badLines = one.badLines
            r.endToEnd = one.perSecond
            r.fires = one.fires
            let workers = EventStream.decodingWorkers
            if workers > 0 {
                let all = try endToEnd(
                    segment, rules: rules, users: r.users, events: r.events, workers: workers, console: StringConsole())
                precondition(all.fires.map(\.1) == one.fires.map(\.1), "decoding on every core changes no fire")
                r.endToEndCores = all.perSecond
                r.decodingWorkers = workers
            }
            r.peakRSSKB = peakRSS()
        }

        // In process: events decoded beforehand.
        // Bad lines are reported once, by the first pass over the file.
        let quiet = StringConsole()
        var (users, events, decodeRate, bad) = try decode(
            segment, users: r.users, rules: rules, console: o.endToEnd ? quiet : console)
        if !o.endToEnd { r.badLines = bad }
        r.decode = decodeRate
        let first = inProcess(rules, users: users, events: events, repeats: o.repeats)
        r.inProcess = first.best
        r.allocationsPerEvent = Double(first.allocations) / Double(max(1, r.events))
        r.stateBytesPerUser = Double(first.heapBytes) / Double(max(1, r.users))
        r.stateCost = first.state
        if !o.endToEnd { r.fires = first.fires }
        users = []
        events = []

        // Many rules spread over event names the stream does not send.
        if o.scaleRules > r.rules {
            let (many, _) = try load(try workload.rulesYAML(extra: o.scaleRules - r.rules))
            let (u, e, _, _) = try decode(segment, users: r.users, rules: many, console: quiet)
            r.scaleRules = many.rules.count
            r.scaleInProcess = inProcess(many, users: u, events: e, repeats: o.repeats).best
        }
        if o.compileRules > 0 {
            let (many, ms) = try load(try workload.rulesYAML(extra: max(0, o.compileRules - r.rules)))
            r.compileRules = many.rules.count
            r.compileManyMs = ms
        }
        if let path = o.reference ?? defaultReference(), FileManager.default.fileExists(atPath: path) {
            r.reference = try compare(r.fires, events: r.events, with: path, explicit: o.reference != nil)
        }
        return r
    }

    /// One end-to-end run over the Segment file: events/s from the first event line (after the users' identifies),
    /// with `workers` threads decoding ahead of the engine (0: the engine's thread decodes).
    static func endToEnd(
        _ segment: String, rules: CompiledRuleSet, users: Int, events: Int, workers: Int, console: any Console
    ) throws -> (perSecond: Double, badLines: Int, fires: [(String, Int)]) {
        let engine = Engine(ruleSet: rules)
        guard let stream = EventStream(path: segment, badLines: .goOn) else {
            throw BenchWorkload.Problem(description: "cannot read \(segment)")
        }
        // The actions' JSON goes to /dev/null: written on the engine's thread, or with the lines decoded on the other
        // cores, on the stream's helper thread, which decodes too (as `dry-run` writes them).
        let fd = open("/dev/null", O_WRONLY)
        defer { close(fd) }
        let sink = ActionLines(on: workers > 0 ? stream.helper : nil) { bytes in
            bytes.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
        }
        var t0 = 0.0
        // Events go to the engine in batches it processes with look-ahead (as a service consuming a stream in batches
        // would); one outcome serves the run, its memory reused from event to event. A bad line is counted and skipped
        // (the one bad-line policy, ``BadLinePolicy/goOn``).
        var outcome = EventOutcome()
        var batch: [BoundEvent] = []
        batch.reserveCapacity(Self.batchSize)
        func flush() {
            engine.process(batch.span, into: &outcome) { sink.add($0.actions) }
            batch.removeAll(keepingCapacity: true)
        }
        stream.events(decoder: SegmentDecoder(ruleSet: rules), console: console, workers: workers) { event in
            if t0 == 0 && stream.eventLine > users {
                flush()
                t0 = now()
            }
            batch.append(event)
            if batch.count == Self.batchSize { flush() }
        }
        flush()
        sink.drain()
        if stream.finish(console: console) { throw BenchWorkload.Problem(description: "cannot read \(segment)") }
        return (Double(events) / (now() - t0), stream.badLines, fires(engine))
    }

    /// Runs the decoded users then events through fresh engines `repeats` times: the best events/s, and from the
    /// first run the allocations during the events and the heap the engine's state holds at the end.
    /// Events decoded before the engine processes them, end to end.
    static let batchSize = 64

    static func inProcess(
        _ rules: CompiledRuleSet, users: [BoundEvent], events: [BoundEvent], repeats: Int
    ) -> (best: Double, allocations: UInt64, heapBytes: Int, fires: [(String, Int)], state: StateCost) {
        var out = (best: 0.0, allocations: UInt64(0), heapBytes: 0, fires: [(String, Int)](), state: StateCost())
        for run in 0..<max(1, repeats) {
            let heapBefore = heapInUse()
            let engine = Engine(ruleSet: rules)
            let allocsBeforeUsers = beckon_alloc_count()
            for u in users { _ = engine.process(u) }
            // Each new user's profile is an allocation: fewer counted means the counting allocator (a count per thread)
            // does not count this thread's calls, and "0 allocations an event" would be no measure.
            precondition(
                beckon_alloc_counting() == 0 || beckon_alloc_count() - allocsBeforeUsers >= UInt64(users.count),
                "the counting allocator counted fewer allocations than new users")
            let actionsBefore = engine.stats.actions
            let allocs0 = beckon_alloc_count()
            let t0 = now()
            // Borrowed from the array: the harness copies no event (a service hands each one over once), and keeps one
            // outcome whose memory is reused. The actions are counted, not read (reading one makes it).
            var outcome = EventOutcome()
            var actions = 0
            engine.process(events.span, into: &outcome) { actions += $0.actions.count }
            let dt = now() - t0
            precondition(actions == engine.stats.actions - actionsBefore, "every action handed over")
            out.best = max(out.best, Double(events.count) / dt)
            if run == 0 {
                out.allocations = beckon_alloc_count() - allocs0
                out.heapBytes = heapInUse() - heapBefore
                out.fires = fires(engine)
                out.state = StateCost.measure(engine)
            }
        }
        return out
    }

    /// Fires per rule id, in rule order.
    static func fires(_ engine: Engine) -> [(String, Int)] {
        let fired = engine.stats.fired
        return engine.ruleSet.rules.map { ($0.id, fired[Int($0.index)]) }
    }

    /// `$BENCH_RESULTS/results/ref.json` (where `../shared/bench/run.sh` leaves the reference), if present.
    static func defaultReference() -> String? {
        let base = ProcessInfo.processInfo.environment["BENCH_RESULTS"] ?? "/tmp/beckon-bench"
        return (base as NSString).appendingPathComponent("results/ref.json")
    }

    /// Compares fires with a reference result; `nil` when the default reference is of another workload (its event
    /// count differs), an error when an explicit one is.
    static func compare(
        _ fires: [(String, Int)], events: Int, with path: String, explicit: Bool
    ) throws -> (path: String, matches: Bool, diff: [(String, Int, Int)])? {
        guard let data = FileManager.default.contents(atPath: path),
            case .map(let m) = try JSONValue.parse(String(decoding: data, as: UTF8.self)),
            case .map(let ref)? = m[string: "fires"]
        else { throw BenchWorkload.Problem(description: "\(path) has no `fires` object") }
        if case .int(let n)? = m[string: "events"], Int(n) != events {
            if explicit { throw BenchWorkload.Problem(description: "\(path) is the result of \(n) events, not \(events)") }
            return nil
        }
        var expected: [String: Int] = [:]
        for (k, v) in ref.entries { if case .string(let id) = k, case .int(let n) = v { expected[id] = Int(n) } }
        var diff: [(String, Int, Int)] = []
        let got = Dictionary(fires, uniquingKeysWith: +)
        for id in Set(expected.keys).union(got.keys.filter { got[$0]! > 0 }).sorted()
        where expected[id, default: 0] != got[id, default: 0] {
            diff.append((id, expected[id, default: 0], got[id, default: 0]))
        }
        return (path, diff.isEmpty, diff)
    }

    /// Decodes the users' and the events' lines; with the events decoded per second (the event lines alone: JSON to
    /// `BoundEvent`, the share of end to end that is decoding).
    static func decode(
        _ path: String, users: Int, rules: CompiledRuleSet, console: any Console
    ) throws -> (users: [BoundEvent], events: [BoundEvent], perSecond: Double, badLines: Int) {
        let decoder = SegmentDecoder(ruleSet: rules)
        guard let stream = EventStream(path: path, badLines: .goOn) else {
            throw BenchWorkload.Problem(description: "cannot read \(path)")
        }
        var u: [BoundEvent] = []
        var e: [BoundEvent] = []
        u.reserveCapacity(users)
        var t0 = now()
        var timing = false
        stream.lines(console: console) { line in
            if !timing && stream.lineNumber > users {
                timing = true
                t0 = now()
            }
            do throws(DecodeError) {
                let x = try decoder.decode(line)
                if stream.lineNumber <= users { u.append(x) } else { e.append(x) }
            } catch {
                return stream.badLine(error, console: console)
            }
            return true
        }
        let dt = now() - t0
        if stream.finish(console: console) { throw BenchWorkload.Problem(description: "cannot read \(path)") }
        return (u, e, Double(e.count) / dt, stream.badLines)
    }

    static func peakRSS() -> Int { beckon_peak_rss_kb() }

    /// Heap bytes in use (glibc's `mallinfo2().uordblks`).
    static func heapInUse() -> Int { Int(beckon_heap_in_use()) }

    // MARK: Output

    static func rate(_ x: Double) -> String {
        x >= 1e6 ? String(format: "%.2fM", x / 1e6) : String(format: "%.0fk", x / 1e3)
    }

    static func text(_ r: Result) -> String {
        var out =
            "workload: \(r.users) users, \(r.events) events, \(r.rules) rules (\(ProcessInfo.processInfo.activeProcessorCount) cores; one thread but for the every-core run)"
            + (r.badLines > 0 ? "; \(r.badLines) bad lines skipped" : "") + "\n"
        out += "in process:   \(rate(r.inProcess)) events/s (events decoded beforehand; best of runs)\n"
        out += "end to end:   \(rate(r.endToEnd)) events/s (JSON lines → decode → evaluate → actions as JSON)\n"
        if r.decodingWorkers > 0 {
            out +=
                "every core:   \(rate(r.endToEndCores)) events/s (end to end, the lines decoded on \(r.decodingWorkers) more thread\(r.decodingWorkers == 1 ? "" : "s"))\n"
        }
        out += "decoding:     \(rate(r.decode)) events/s (the event lines alone, JSON → events; part of end to end)\n"
        out += "peak RSS:     \(r.peakRSSKB / 1024) MB after the end-to-end run\n"
        out += String(
            format: "state:        %.0f bytes per user (heap in use after − before, %d users)\n", r.stateBytesPerUser, r.users)
        out += String(
            format: "state bytes:  %d median, %d p99 encoded per user; %.2f µs to take + encode, %.2f µs to decode + restore\n",
            r.stateCost.medianBytes, r.stateCost.p99Bytes, r.stateCost.encodeMicros, r.stateCost.decodeMicros)
        if beckon_alloc_counting() != 0 {
            out += String(format: "allocations:  %.2f per event\n", r.allocationsPerEvent)
        } else {
            out += "allocations:  not counted (beckon-bench links the counting allocator; beckon does not)\n"
        }
        out += String(format: "load+compile: %.1f ms for %d rules", r.compileMs, r.rules)
        if r.compileRules > 0 { out += String(format: "; %.0f ms for %d rules", r.compileManyMs, r.compileRules) }
        out += "\n"
        if r.scaleRules > 0 {
            out += String(
                format: "rule count:   %@ events/s with %d rules (%.2f× the time of %d rules)\n", rate(r.scaleInProcess),
                r.scaleRules,
                r.inProcess / r.scaleInProcess, r.rules)
        }
        out += "fires:        " + r.fires.map { "\($0.0) \($0.1)" }.joined(separator: ", ") + "\n"
        if let ref = r.reference {
            out +=
                ref.matches
                ? "reference:    every rule's fires equal \(ref.path)\n"
                : "reference:    DIFFERS from \(ref.path): "
                    + ref.diff.map { "\($0.0) ref \($0.1) got \($0.2)" }.joined(separator: ", ") + "\n"
        }
        return out
    }

    static func json(_ r: Result) -> Value {
        func d(_ x: Double) -> Value { .double((x * 100).rounded() / 100) }
        var m = ValueMap([
            ("users", .int(Int64(r.users))), ("events", .int(Int64(r.events))), ("rules", .int(Int64(r.rules))),
            ("cores", .int(Int64(ProcessInfo.processInfo.activeProcessorCount))),
            ("events_per_s_in_process", .int(Int64(r.inProcess))), ("events_per_s_end_to_end", .int(Int64(r.endToEnd))),
            ("events_per_s_end_to_end_cores", .int(Int64(r.endToEndCores))), ("decoding_workers", .int(Int64(r.decodingWorkers))),
            ("events_per_s_decode", .int(Int64(r.decode))), ("bad_lines", .int(Int64(r.badLines))),
            ("peak_rss_kb", .int(Int64(r.peakRSSKB))), ("state_bytes_per_user", d(r.stateBytesPerUser)),
            ("encoded_state_bytes_median", .int(Int64(r.stateCost.medianBytes))),
            ("encoded_state_bytes_p99", .int(Int64(r.stateCost.p99Bytes))),
            ("state_encode_us_per_user", d(r.stateCost.encodeMicros)),
            ("state_decode_us_per_user", d(r.stateCost.decodeMicros)),
            ("allocations_per_event", beckon_alloc_counting() != 0 ? d(r.allocationsPerEvent) : .null),
            ("compile_ms", d(r.compileMs)),
            ("scale_rules", .int(Int64(r.scaleRules))), ("events_per_s_in_process_scaled", .int(Int64(r.scaleInProcess))),
            ("compile_rules", .int(Int64(r.compileRules))), ("compile_ms_many", d(r.compileManyMs)),
            ("fires", .map(ValueMap(r.fires.map { ($0.0, .int(Int64($0.1))) }))),
        ])
        if let ref = r.reference {
            m[string: "matches_reference"] = .bool(ref.matches)
            m[string: "reference"] = .string(ref.path)
        }
        return .map(m)
    }
}
