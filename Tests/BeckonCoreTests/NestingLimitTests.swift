import BeckonCore
import BeckonYAML
import Foundation
import Testing

/// Every construct that puts one expression inside another counts toward `Parser.maxDepth`, so that no expression
/// (or segment) makes the parser, the checker, the compiled closures, the analysis or an explanation recurse deeper
/// than the limit allows.
struct NestingLimitTests {
    struct Construct: Sendable, CustomStringConvertible {
        var name: String
        /// The construct `n` levels deep.
        var make: @Sendable (Int) -> String
        var description: String { name }
    }

    static let constructs: [Construct] = [
        Construct(name: "not") { String(repeating: "!", count: $0) + "true" },
        Construct(name: "negation") { String(repeating: "-", count: $0) + "x == 1" },
        Construct(name: "negated parentheses") {
            String(repeating: "-(", count: $0) + "1" + String(repeating: ")", count: $0) + " == 1"
        },
        Construct(name: "field selection") { "x" + String(repeating: ".a", count: $0) + " == 1" },
        Construct(name: "indexing") { "x" + String(repeating: "[0]", count: $0) + " == 1" },
        Construct(name: "method calls") { "x" + String(repeating: ".size()", count: $0) + " == 1" },
        Construct(name: "additions") { Array(repeating: "1", count: $0 + 1).joined(separator: " + ") + " > 0" },
        Construct(name: "multiplications") { Array(repeating: "x", count: $0 + 1).joined(separator: " * ") + " > 0" },
        Construct(name: "comparisons") { Array(repeating: "x", count: $0 + 1).joined(separator: " == ") },
        Construct(name: "or") { Array(repeating: "x", count: $0 + 1).joined(separator: " || ") },
        Construct(name: "and") { Array(repeating: "x", count: $0 + 1).joined(separator: " && ") },
        Construct(name: "ternaries") { String(repeating: "x ? 1 : ", count: $0) + "2 == 1" },
        Construct(name: "lists") { String(repeating: "[", count: $0) + "1" + String(repeating: "]", count: $0) + " == x" },
        Construct(name: "calls") { String(repeating: "size(", count: $0) + "x" + String(repeating: ")", count: $0) + " > 0" },
    ]

    /// About 2,400 levels of any construct (a 3–20 KB condition) is refused as `limit_exceeded`, not a crash.
    @Test(arguments: constructs)
    func deepExpressionsAreRefused(_ c: Construct) throws {
        var n = 2_400
        var text = c.make(n)
        while text.unicodeScalars.count > Parser.maxLength {
            n /= 2
            text = c.make(n)
        }
        do {
            _ = try Parser.parse(text)
            Issue.record("\(c.name) \(n) deep parsed")
        } catch {
            #expect(error.id == .limitExceeded, "\(error.message)")
            #expect(error.message == "expression nests more than \(Parser.maxDepth) levels deep")
            // The error is where the limit is passed: within the first 64 levels' worth of text.
            #expect(error.span.start < c.make(Parser.maxDepth + 1).unicodeScalars.count, "\(error.span)")
        }
    }

    /// The deepest expression of each construct that parses compiles, evaluates, and evaluates with a trace, on a
    /// thread with a small stack.
    @Test(arguments: constructs)
    func theDeepestAllowedExpressionRunsOnASmallStack(_ c: Construct) throws {
        var n = Parser.maxDepth + 2
        while n > 0, (try? Parser.parse(c.make(n))) == nil { n -= 1 }
        try #require(n >= Parser.maxDepth / 2 - 2, "\(c.name): only \(n) levels parse")
        let text = c.make(n)
        let ran = onSmallStack {
            for tracing in [false, true] {
                let env = TestEnvironment(["x": .dyn])
                let compiler = ExprCompiler(environment: env, tracing: tracing)
                guard let e = compiler.compile(text) else { continue }
                let scope = EvalScope()
                scope.bindings = ["x": .int(1)]
                if tracing { scope.trace = ExprTrace() }
                _ = e.evaluate(scope)
                _ = scope.trace?.summary()
            }
        }
        #expect(ran)
    }

    /// Runs `body` on a thread with a 1 MiB stack, an eighth of a main thread's (a stack overflow would crash the
    /// test run). The deepest expression needs less than that even in a debug build. Under a sanitizer
    /// (scripts/sanitize.sh), whose instrumented frames are larger, the stack is 4 MiB.
    func onSmallStack(_ body: @escaping @Sendable () -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            body()
            done.signal()
        }
        let sanitized = ["__asan_init", "__tsan_init"].contains { (name: String) in dlsym(nil, name) != nil }
        thread.stackSize = sanitized ? 4 << 20 : 1 << 20
        thread.start()
        return done.wait(timeout: .now() + 60) == .success
    }

    /// In a rule file, the error points at the place in the file where the limit is passed.
    @Test func theErrorPointsIntoTheFile() throws {
        let yaml = campaign(if: String(repeating: "!", count: 2_400) + "true")
        let d = try #require(diagnostics(yaml).first)
        #expect(d.id == .limitExceeded)
        // `    if: '` is 9 columns; the 64th `!` makes the 65th level (the whole expression is the first).
        #expect(d.location.position == SourcePosition(line: 6, column: 10 + 63))
    }

    // MARK: Segments

    /// `count` segments, each using the one before once, or eight times (`((s && s) && (s && s)) && (…)`).
    static func segmentChain(_ count: Int, eightUses: Bool = false, reversed: Bool = false) -> String {
        var lines = ["  s0: user.plan == \"pro\""]
        for i in 1..<count {
            let s = "s\(i - 1)"
            let four = "(\(s) && \(s)) && (\(s) && \(s))"
            lines.append("  s\(i): " + (eightUses ? "(\(four)) && (\(four))" : s))
        }
        if reversed { lines.reverse() }
        return "version: 1\ncampaign: c\nsegments:\n" + lines.joined(separator: "\n") + "\n"
            + "rules:\n  - id: r\n    on: Opened\n    if: s\(count - 1)\n    do: [ { deep_link: \"app://x\" } ]\n"
    }

    /// A use of a segment is a level: a condition with its segments written out nests at most `Parser.maxDepth`
    /// levels, in whatever order the segments are written. `s0` is 3 levels and `s1: s0` 4, so the rule's
    /// `if: s60` is 64 levels and `if: s61` 65.
    @Test(arguments: [false, true])
    func segmentsCountTowardTheDepthLimit(_ reversed: Bool) throws {
        #expect(diagnostics(Self.segmentChain(61, reversed: reversed)).isEmpty)
        let rule = diagnostics(Self.segmentChain(62, reversed: reversed))
        #expect(rule.map(\.id) == [.limitExceeded], "\(rule)")
        #expect(rule.first?.location.position.line == 62 + 7)
        // A segment past the limit is reported once, where the chain passes it: `s62: s61` is 65 levels.
        let segment = diagnostics(Self.segmentChain(64, reversed: reversed)).filter { $0.id == .limitExceeded }
        #expect(segment.count == 2, "\(segment)")
        #expect(segment.contains { $0.message.contains("with segment 's61' written out, this condition nests 65 levels") })
        // Thousands of segments in a chain: refused, not a stack overflow.
        #expect(diagnostics(Self.segmentChain(3_000, reversed: reversed)).filter { $0.id == .limitExceeded }.count == 2)
    }

    /// The deepest chain of segments runs on a small stack, traced or not.
    @Test func theDeepestChainOfSegmentsRunsOnASmallStack() throws {
        let set = try load(Self.segmentChain(61))
        let ran = onSmallStack {
            let engine = Engine(ruleSet: set, options: .init(explain: true))
            _ = engine.process(identify(at: "2026-01-01T00:00:00Z", [("plan", .string("pro"))]))
            _ = engine.process(track("Opened", at: "2026-01-01T00:00:01Z"))
        }
        #expect(ran)
    }

    /// Fifteen segments, each using the one before eight times, is 8^14 uses written out: compiling, the analysis,
    /// evaluating and explaining each look at every segment once.
    @Test func segmentsUsedManyTimesAreEvaluatedOnce() throws {
        let set = try load(Self.segmentChain(15, eightUses: true))
        let engine = Engine(ruleSet: set, options: .init(explain: true))
        let outcome = engine.process(track("Opened", at: "2026-01-01T00:00:00Z"))
        #expect(outcome.verdicts.count == 1)
    }
}
