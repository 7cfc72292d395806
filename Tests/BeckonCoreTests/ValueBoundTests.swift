import BeckonCore
import Testing

/// Bounds on what one event or one user can make Beckon build or keep.
struct ValueBoundTests {
    /// A value's size counts strings by their UTF-8 bytes, 2 for a list's or map's brackets, 8 for a number, and
    /// stops walking once past the limit.
    @Test func aValuesByteSizeCountsItsMembersAndStopsPastTheLimit() {
        let nested = Value.list([.string("héllo"), .map(ValueMap([("k", .int(1)), ("l", .list([.bool(true)]))]))])
        // 2 + 6 + (2 + 1 + 8 + 1 + (2 + 8))
        #expect(nested.byteSize(upTo: 1_000) == 30)
        let long = Value.list((0..<1_000).map { _ in .string(String(repeating: "x", count: 100)) })
        let size = long.byteSize(upTo: 250)
        #expect(size > 250 && size <= 2 + 300)
    }

    @Test func aSetThatWouldGrowPastTheLimitIsRefusedWithAWarning() throws {
        let rs = try load(
            campaign(actions: "    do:\n      - set: { log: '${default(user.log, \"x\") + default(user.log, \"x\")}' }\n"))
        let engine = Engine(ruleSet: rs)
        var warnings: [String] = []
        for m in 0..<40 {
            let out = engine.process(
                track("Opened", at: Timestamp(milliseconds: t("2026-03-01T00:00:00Z") + Int64(m) * 1000).description))
            warnings += out.actions.flatMap(\.warnings)
        }
        guard case .string(let log)? = engine.profile(of: "u1")!.attributes[rs.attributeSlots["log"]!] else {
            Issue.record("no log attribute")
            return
        }
        #expect(log.utf8.count <= ValueLimits.maxAttributeBytes)
        #expect(log.utf8.count > ValueLimits.maxAttributeBytes / 2)
        #expect(warnings.contains { $0.contains("not set") })
    }

    @Test func attributesNoRuleReadsAreKeptUpToTheLimit() throws {
        let rs = try load(campaign())
        let engine = Engine(ruleSet: rs)
        for k in 0..<(ValueLimits.maxOtherAttributes + 10) {
            engine.process(identify("u1", at: "2026-03-01T09:00:00Z", [("trait\(k)", .int(Int64(k)))]))
        }
        #expect(engine.profile(of: "u1")!.otherAttributes?.count == ValueLimits.maxOtherAttributes)
        #expect(engine.stats.attributesNotKept == 10)
    }

    @Test func nestedComprehensionsStopAtTheStepBudget() {
        let xs = Value.list((0..<2000).map { .int(Int64($0)) })
        let v = eval("xs.exists(x, xs.exists(y, x + y < 0))", ["xs": xs])
        guard case .error(let e) = v else {
            Issue.record("expected an error, got \(v)")
            return
        }
        #expect(e.message.contains("steps"))
        // Below the budget the same expression is evaluated.
        let small = Value.list((0..<500).map { .int(Int64($0)) })
        #expect(eval("xs.exists(x, xs.exists(y, x + y < 0))", ["xs": small]).isTrue == false)
    }

    /// Work inside an iteration is charged too: a function over a long string or list costs its length
    /// (``ValueLimits/bytesPerStep``, ``ValueLimits/membersPerStep``), so 1,000 iterations each concatenating 30 KB
    /// spend the budget where 1,000 iterations over short strings do not.
    ///
    /// (Two cases charge a call that fails at once, `int(…)`: the charge comes before the call, and a test that
    /// scanned 64,000,000 members or a gigabyte to spend the budget would take half a minute in a debug build.)
    @Test(arguments: ["xs.exists(x, size(s + s) < 0)", "xs.exists(x, int(s) == 1)", "xs.exists(x, int(big) == 1)"])
    func workInsideIterationsIsCharged(_ expr: String) {
        let xs = Value.list((0..<40_000).map { .int(Int64($0)) })
        let big = Value.list((1...64_000).map { .int(-Int64($0)) })
        let long = Value.string(String(repeating: "a", count: 30 * 1024))
        guard case .error(let e) = eval(expr, ["xs": xs, "s": long, "big": big]) else {
            Issue.record("expected the budget to be spent")
            return
        }
        #expect(e.message.contains("steps"))
        // The same iterations over short values are within it.
        if !expr.contains("int(") {
            #expect(!eval(expr, ["xs": xs, "s": .string("ab"), "big": .list([.int(-1)])]).isError)
        } else if case .error(let short) = eval(expr, ["xs": xs, "s": .string("ab"), "big": .list([.int(-1)])]) {
            #expect(!short.message.contains("steps"))
        }
    }

    /// `size` and indexing take the same time whatever the length: they are not charged by it.
    @Test func sizeAndIndexingAreNotChargedByLength() {
        let xs = Value.list((0..<100_000).map { .int(Int64($0)) })
        #expect(!eval("xs.exists(x, size(xs) < 0 || xs[0] < 0)", ["xs": xs]).isError)
    }

    /// A deadline (the playground's time limit) stops an event's expressions as if the budget were spent.
    @Test func aDeadlineStopsEvaluation() throws {
        let rs = try load(campaign(on: "on: x", if: "event.properties.xs.exists(a, event.properties.xs.exists(b, a + b < 0))"))
        let engine = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        engine.evaluationDeadline = .now
        let line =
            #"{"type":"track","event":"x","userId":"u","timestamp":"2026-01-05T09:00:00Z","properties":{"xs":["#
            + (0..<900).map(String.init).joined(separator: ",") + "]}}"
        let started = ContinuousClock.now
        let out = engine.process(try SegmentDecoder(ruleSet: rs).decode(line))
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(out.verdicts.first?.verdict.code == "if")
    }

    @Test(arguments: [
        "s + s", "s.replace('a', s)", "[s, s, s, s].join('')",
    ])
    func builtStringsStopAtTheLimit(_ expr: String) {
        let s = Value.string(String(repeating: "a", count: ValueLimits.maxBuiltBytes / 2 + 1))
        guard case .error(let e) = eval(expr, ["s": s]) else {
            Issue.record("expected an error")
            return
        }
        #expect(e.message.contains("larger than"))
        #expect(!eval(expr, ["s": .string("ab")]).isError)
    }

    @Test func explanationsAreBounded() throws {
        let rs = try load(campaign(if: "event.properties.xs.exists(x, x > 100000)"))
        let engine = Engine(ruleSet: rs, options: .init(explain: true))
        let xs = Value.list((0..<5000).map { .int(Int64($0)) })
        let out = engine.process(track("Opened", at: "2026-03-01T09:00:00Z", props: [("xs", xs)]))
        let text = out.verdicts.map(\.verdict.summary).joined() + out.verdicts.flatMap(\.clauses).map(\.detail).joined()
        #expect(text.count < 100_000)
        #expect(text.contains("more values not shown"))
    }
}
