import BeckonCore
import BeckonTools
import BeckonYAML

/// The fuzz targets' bodies: each takes any bytes and runs one front door of Beckon on them, the way a user's input
/// reaches it. Nothing here may crash, hang or grow without bound for any input.
///
/// The libFuzzer harnesses in `Fuzz/` call these (`scripts/fuzz.sh`), and the test suite runs every committed seed
/// and every input a fuzzer once crashed on (`Fuzz/regressions/TARGET/`) through them.
public enum FuzzEntry {
    /// The targets by name, as `scripts/fuzz.sh` and `Fuzz/regressions/` name them.
    public static let targets: [(name: String, run: @Sendable (UnsafeBufferPointer<UInt8>) -> Void)] = [
        ("rules", rules), ("expression", expression), ("events", events), ("textproto", textProto), ("state", state),
        ("requests", requests),
    ]

    /// A rule file: the YAML loader, the file parser, the compiler and the analysis, then the diagnostics rendered
    /// with their source lines and carets.
    public static func rules(_ bytes: UnsafeBufferPointer<UInt8>) {
        let text = String(decoding: bytes, as: UTF8.self)
        let loaded = RuleLoader.load(texts: [("fuzz.yaml", text)])
        _ = loaded.rendered()
        if let rs = loaded.ruleSet { _ = Engine(ruleSet: rs) }
    }

    /// An expression: parsed, checked and compiled against a few variables of each kind, evaluated, and evaluated
    /// again with tracing to render an explanation.
    public static func expression(_ bytes: UnsafeBufferPointer<UInt8>) {
        let text = String(decoding: bytes, as: UTF8.self)
        for tracing in [false, true] {
            let compiler = ExprCompiler(environment: FuzzEnvironment(), tracing: tracing, checkTypes: !tracing)
            guard let e = compiler.compile(text) else { return }
            let scope = EvalScope()
            scope.bindings = FuzzEnvironment.bindings
            if tracing { scope.trace = ExprTrace() }
            _ = e.evaluate(scope)
            _ = scope.trace?.summary()
        }
    }

    /// An event stream: every line decoded against a rule set that reads properties, context, traits and history,
    /// waits, sequences and cascades, processed with explanations on, then time run a month on.
    public static func events(_ bytes: UnsafeBufferPointer<UInt8>) {
        let engine = Engine(ruleSet: eventRules, options: .init(explain: true, trackGoals: true))
        let decoder = SegmentDecoder(ruleSet: eventRules)
        var start = 0
        for i in 0...bytes.count where i == bytes.count || bytes[i] == 10 {
            let line = UnsafeBufferPointer(rebasing: bytes[start..<i])
            start = i + 1
            guard let event = try? decoder.decode(line) else { continue }
            let out = engine.process(event)
            for a in out.actions { _ = a.json }
            for v in out.verdicts { _ = v.verdict.summary }
        }
        if engine.latestEventTime != Int64.min {
            _ = engine.advance(to: min(engine.latestEventTime, Int64(1) << 44) + 30 * Milliseconds.day)
        }
    }

    /// A request body of `beckon serve`'s ingest (``SegmentRequest``): as a batch and as one `track` call, on the live
    /// clock and as a replay; what it accepts is processed, then time runs a month on. A fleet's ingest, which decodes
    /// with ``SegmentDecoder/logging``, must take the same bodies with the same ids, and refuse the others alike.
    public static func requests(_ bytes: UnsafeBufferPointer<UInt8>) {
        let body = Array(bytes)
        let decoder = SegmentDecoder(ruleSet: eventRules)
        let now: Int64 = 1_780_000_000_000
        for kind in [nil, Event.Kind.track] {
            for arrival in [Arrival(receivedAt: now, latest: now), Arrival(receivedAt: nil)] {
                let decoded = Result { () throws(SegmentRequest.Problem) in
                    try SegmentRequest.events(body, kind: kind, arrival: arrival, decoder: decoder)
                }
                let logged = Result { () throws(SegmentRequest.Problem) in
                    try SegmentRequest.events(body, kind: kind, arrival: arrival, decoder: .logging)
                }
                precondition(sameIngest(decoded, logged), "the logging decoder and the rules' disagree")
                guard let r = try? decoded.get() else { continue }
                precondition(r.events.count == r.ranges.count, "an event without its bytes")
                let engine = Engine(ruleSet: eventRules)
                for e in r.events { for a in engine.process(e).actions { _ = a.json } }
                engine.advance(to: min(engine.latestEventTime, Int64(1) << 44) + 30 * Milliseconds.day)
            }
        }
    }

    /// Whether two decodings of one request body take it alike (the same events' ids, kinds, times and bytes) or
    /// refuse it alike (the same problem at the same place).
    static func sameIngest(
        _ a: Result<SegmentRequest.Decoded, SegmentRequest.Problem>,
        _ b: Result<SegmentRequest.Decoded, SegmentRequest.Problem>
    ) -> Bool {
        switch (a, b) {
        case (.success(let x), .success(let y)):
            return x.ranges == y.ranges
                && zip(x.events, y.events).allSatisfy { e, f in
                    e.userID == f.userID && e.previousID == f.previousID && e.kind == f.kind && e.timestamp == f.timestamp
                        && e.name == f.name && e.messageID == f.messageID
                }
        case (.failure(let x), .failure(let y)):
            return x.message == y.message && x.event == y.event && x.column == y.column
        default: return false
        }
    }

    /// A cel-spec test file in protocol-buffer text format, parsed and run as `beckon conformance cel` runs it.
    public static func textProto(_ bytes: UnsafeBufferPointer<UInt8>) {
        _ = try? ConformanceRunner.run(text: String(decoding: bytes, as: UTF8.self))
    }

    /// A user's saved state (``UserState/init(decoding:)``): decoded; what decodes is restored into an engine, which
    /// then processes the user's next events and lets a month pass, and its state must encode and decode again.
    public static func state(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let s = try? UserState(decoding: Array(bytes)) else { return }
        let engine = Engine(ruleSet: eventRules, options: .init(explain: true))
        try? engine.restore(s)
        let at = min(max(s.clock, 0), SegmentDecoder.maxTimeMs - 1)
        for (i, name) in ["Opened", "Added", "Bought", "Signed In"].enumerated() {
            engine.process(
                Event(
                    kind: .track, name: name, userID: s.userID, timestamp: at, messageID: "fuzz\(i)",
                    properties: ValueMap([("cart", .int(1)), ("amount", .double(20))])))
        }
        engine.advance(to: min(engine.latestEventTime, Int64(1) << 44) + 30 * Milliseconds.day)
        if let after = engine.state(of: s.userID) {
            precondition((try? UserState(decoding: after.encoded())) != nil, "a restored state does not encode again")
        }
    }

    /// Seeds for the state target: the encoded states of users after a stream over ``eventRules`` that leaves them
    /// attributes, history, fire records, delayed actions, partial sequences and an inbox.
    public static func stateSeeds() -> [[UInt8]] {
        let engine = Engine(ruleSet: eventRules)
        let t0: Int64 = 1_772_445_600_000
        for u in 0..<4 {
            let user = "user\(u)"
            engine.process(
                Event(
                    kind: .identify, userID: user, timestamp: t0,
                    traits: ValueMap([("plan", .string("pro")), ("name", .string("Ada \(u)"))])))
            for (i, name) in ["Opened", "Opened", "Added", "Signed In", "Opened", "Bought"].prefix(2 + u).enumerated() {
                engine.process(
                    Event(
                        kind: .track, name: name, userID: user, timestamp: t0 + Int64(i) * 600_000, messageID: "\(u)-\(i)",
                        properties: ValueMap([("cart", .int(Int64(u))), ("n", .int(2)), ("amount", .double(12.5))]),
                        context: ValueMap([("locale", "en_GB")])))
            }
        }
        return engine.states().sorted { $0.userID < $1.userID }.map { $0.encoded() }
    }

    /// The rule set the event target decodes against.
    static let eventRules: CompiledRuleSet = {
        let yaml = """
            version: 1
            campaign: fuzz
            audience: default(context.locale, "en") != "xx"
            segments:
              busy: count("Opened", "7d") >= 3
            rules:
              - id: hi
                on: Opened
                where: default(event.properties.n, 0) > 1 || event.properties.tags.exists(t, t == "a")
                if: busy || default(user.plan, "") == "pro"
                limit: { per_user: 3, per_day: 1, cooldown: 1h }
                do:
                  - message: { surface: launch, title: "Hi ${default(user.name, '')}", body: "${event.properties}" }
                  - set: { seen: "${default(user.seen, 0) + 1}" }
              - id: changed
                on_change: seen
                do: [ { notify: { id: "n${user.seen}", message: "seen" } } ]
              - id: later
                on: Signed In
                wait: 1d
                unless: Opened
                recheck: true
                do: [ { deep_link: "app://later" } ]
              - id: journey
                sequence: [Opened, Added, Bought]
                within: 1h
                correlate: cart
                do: [ { emit: { event: Converted, payload: { cart: "${event.properties.cart}" } } } ]
              - id: on_screen
                on_screen: Settings
                if: sum("Bought", "amount", "30d") > 10.5
                do: [ { mark_read: "n1" } ]
            goals:
              - { id: bought, event: Bought, within: 7d }
            """
        guard let rs = RuleLoader.load(texts: [("fuzz.yaml", yaml)]).ruleSet else {
            fatalError("the fuzz rule set does not load:\n" + RuleLoader.load(texts: [("fuzz.yaml", yaml)]).rendered())
        }
        return rs
    }()
}

/// Variables of each kind for the expression target (no Beckon functions: those need a user and a clock).
final class FuzzEnvironment: ExpressionEnvironment {
    static let bindings: [String: Value] = [
        "i": .int(7), "u": .uint(3), "d": .double(2.5), "s": .string("héllo"), "b": .bool(true), "n": .null,
        "xs": .list([.int(1), .string("a"), .list([.int(2)])]),
        "m": .map(ValueMap([("k", .string("v")), ("n", .int(1))])),
    ]
    func variable(_ name: String) -> VariableBinding? {
        FuzzEnvironment.bindings[name] != nil ? VariableBinding.binding(name, type: .dyn) : nil
    }
    func function(_ name: String) -> CustomFunction? { nil }
    var variableNames: [String] { Array(FuzzEnvironment.bindings.keys) }
    var functionNames: [String] { [] }
}
