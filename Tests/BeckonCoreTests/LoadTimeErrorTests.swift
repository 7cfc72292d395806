import Testing

@testable import BeckonCore
@testable import BeckonYAML

/// Values that used to load and then fail (or trap) at run time are errors when the rules load, each at its place.
struct LoadTimeErrorTests {
    // MARK: Durations

    @Test func durationsHaveAMaximumOfOneHundredYears() {
        let hundredYears: Int64 = 3_155_760_000_000
        #expect(DSLDuration.maxMilliseconds == hundredYears)
        #expect(DSLDuration.parse("36525d") == hundredYears)
        #expect(DSLDuration.parse("5217w6d") == hundredYears)
        #expect(DSLDuration.parse("36525d1ms") == nil)
        #expect(DSLDuration.parse("300000000w") == nil)
        #expect(DSLDuration.parse("15250284420w") == nil)
        #expect(DSLDuration.parse(String(repeating: "9", count: 40) + "ms") == nil)
        #expect(DSLDuration.parse("36525d36525d") == nil)
        #expect(DSLDuration.read("300000000w") == .tooLong)
        #expect(DSLDuration.read("300000000x") == .invalid)
    }

    /// Every key that takes a duration refuses one over the maximum, at its position.
    @Test func everyDurationKeyRefusesTooLongADuration() throws {
        let long = "300000000w"
        let yaml = """
            version: 1
            campaign: c
            goals:
              - { id: g, event: Bought, within: \(long) }
            rules:
              - id: waits
                on: Opened
                wait: \(long)
                limit: { cooldown: \(long) }
                do: [ { deep_link: "app://x" } ]
              - id: sequence
                sequence: [Opened, Bought]
                within: \(long)
                if: count("Opened", "\(long)") > 0
                do: [ { deep_link: "app://x" } ]
              - id: reprompt
                on: Opened
                reprompt: { after: Answered, wait: \(long) }
                do: [ { deep_link: "app://x" } ]
            """
        let settings = """
            version: 1
            settings: s
            sessions: { timeout: \(long) }
            dedup_window: \(long)
            """
        let found = diagnostics(yaml, settings: settings).filter { $0.severity == .error }
        let at = found.map { "\($0.location.file):\($0.location.position)" }.sorted()
        #expect(
            at == [
                "rules.yaml:13:13", "rules.yaml:14:25", "rules.yaml:18:40", "rules.yaml:4:37", "rules.yaml:8:11",
                "rules.yaml:9:24", "settings.yaml:3:22", "settings.yaml:4:15",
            ], "\(found)")
        #expect(found.allSatisfy { $0.message.contains("100 years (36525d)") }, "\(found)")
    }

    /// With durations bounded, a delayed action, a cooldown and `--until` stay within the engine's times.
    @Test func theLongestDurationRunsWithoutOverflow() throws {
        let set = try load(
            """
            version: 1
            campaign: c
            rules:
              - id: r
                on: Opened
                wait: 36525d
                limit: { cooldown: 36525d }
                if: count("Opened", "36525d") > 0
                do: [ { deep_link: "app://x" } ]
            """)
        let engine = Engine(ruleSet: set)
        _ = engine.process(track("Opened", at: "2527-01-01T00:00:00Z"))
        let later = engine.advance(to: t("2527-01-01T00:00:00Z") + DSLDuration.maxMilliseconds)
        #expect(later.actions.count == 1)
    }

    // MARK: UTC offsets

    @Test(arguments: ["+99:99", "+24:00", "-24:00", "+23:60", "+00:60"])
    func offsetsBeyondTwentyThreeFiftyNineAreRefused(_ offset: String) {
        #expect(Timestamp.parse("2026-01-01T00:00:00" + offset) == nil)
        #expect(Timestamp.offsetProblem("2026-01-01T00:00:00" + offset)?.contains("out of range") == true)
        #expect(Zone(offset) == nil)
    }

    @Test(arguments: ["+23:59", "-23:59", "+00:00", "-00:00", "+05:30"])
    func offsetsWithinRangeAreRead(_ offset: String) {
        #expect(Timestamp.parse("2026-01-01T00:00:00" + offset) != nil)
    }

    @Test func anOffsetOutOfRangeIsAnErrorAtItsPlace() throws {
        let yaml = """
            version: 1
            campaign: c
            start: 2026-01-01T00:00:00+99:99
            timezone: "+24:00"
            rules:
              - id: r
                on: Opened
                if: now > timestamp("2026-01-01T00:00:00+99:99") && days_since("2026-01-01T00:00:00-25:00") > 1
                do: [ { deep_link: "app://x" } ]
            """
        let found = diagnostics(yaml).filter { $0.severity == .error }
        let at = found.map { "\($0.location.position) \($0.id)" }.sorted()
        #expect(
            at == ["3:8 invalid_timestamp", "4:11 invalid_value", "8:25 invalid_timestamp", "8:68 invalid_timestamp"], "\(found)")
        #expect(
            found.first { $0.location.position.line == 3 }?.message.contains("the UTC offset '+99:99' is out of range") == true)
    }

    // MARK: Declared types

    static let plan = """
        version: 1
        tracking_plan: p
        events:
          Bought:
            properties:
              amount: { type: number }
              paid: { type: bool }
              sku: { type: string }
        """

    func typeErrors(_ condition: String) -> [Diagnostic] {
        let yaml =
            "version: 1\ncampaign: c\nrules:\n  - id: r\n    on: Bought\n    if: '\(condition)'\n    do: [ { deep_link: \"a://x\" } ]\n"
        return RuleLoader.load(texts: [("rules.yaml", yaml), ("plan.yaml", Self.plan)]).diagnostics.filter {
            $0.severity == .error
        }
    }

    /// A property declared `number` compared with a string (or used as one) can never be true: a type error.
    @Test(
        arguments: [
            ("event.properties.amount == \"10\"", "write 10 without quotes to compare numbers"),
            ("event.properties.amount != \"10\"", "write 10 without quotes to compare numbers"),
            ("event.properties.amount > \"10\"", "write 10 without quotes to compare numbers"),
            ("\"ten\" == event.properties.amount", "compare it with a number"),
            ("event.properties.amount in [\"1\", \"2\"]", nil),
            ("event.properties.amount.startsWith(\"1\")", nil),
            ("event.properties.paid == \"true\"", "write true without quotes to compare with a true/false value"),
            ("event.properties.sku == 10", "compare it with a string (in quotes)"),
        ] as [(String, String?)])
    func comparisonsThatCanNeverHoldAreTypeErrors(_ condition: String, _ hint: String?) throws {
        let d = try #require(typeErrors(condition).first, "no error for \(condition)")
        #expect(d.id == .expressionType, "\(d)")
        #expect(d.location.position.line == 6)
        if let hint { #expect(d.suggestion == hint, "\(d)") }
    }

    @Test(arguments: [
        "event.properties.amount == 10", "event.properties.amount > 9.5", "event.properties.amount in [1, 2.5]",
        "event.properties.amount + 1 > 2", "double(event.properties.amount) >= 1.0", "-event.properties.amount < 0",
        "event.properties.amount == null", "string(event.properties.amount) == \"10\"",
    ])
    func numbersStillCompareWithNumbers(_ condition: String) {
        #expect(typeErrors(condition).isEmpty, "\(typeErrors(condition))")
    }

    /// The negation of the least 64-bit integer is no constant: the analysis that prints a comparison's constant
    /// trapped on it (`--9223372036854775808`), and validate and dry-run died with SIGILL.
    @Test(arguments: [
        "event.properties.m == --9223372036854775808", "event.properties.m == -(-9223372036854775808)",
        "event.properties.m > 1 && event.properties.m == --9223372036854775808",
        "event.properties.m < 1 || -(-9223372036854775808) == event.properties.m",
    ])
    func negatingTheLeastIntegerIsNoConstant(_ condition: String) {
        let yaml = "version: 1\ncampaign: c\nrules:\n  - id: r\n    on: Bought\n    if: '\(condition)'\n"
        let result = RuleLoader.load(texts: [("rules.yaml", yaml + "    do: [ { deep_link: \"a://x\" } ]\n")])
        #expect(result.diagnostics.allSatisfy { $0.location.position.line == 6 }, "\(result.rendered())")
    }

    // MARK: Every problem in one run

    /// A rule with a bad id still has its other problems reported.
    @Test func aBadIdDoesNotHideTheRestOfTheRule() {
        let yaml = """
            version: 1
            campaign: c
            rules:
              - id: Bad-Id
                on: Opened
                if: user.plan = 1
                limit: { per_dya: 1 }
                do: [ { prompt: atx } ]
              - on: Opened
                if: nope(
                do: []
            """
        let ids = Set(diagnostics(yaml).map(\.id.rawValue))
        #expect(
            ids == [
                "invalid_identifier", "expression_syntax", "unknown_key", "invalid_action", "missing_key",
            ], "\(diagnostics(yaml))")
    }

    /// One mistake, one error: a goal exposed by a rule that did not compile (its `unless` event misspelt) is not
    /// also reported as exposed by a rule the file does not have; a rule the file really lacks still is.
    @Test func aRuleThatFailedIsNotReportedMissingElsewhere() {
        func errors(_ exposure: String) -> [String] {
            let yaml = """
                version: 1
                campaign: shop
                rules:
                  - id: cart_push
                    on: Added To Cart
                    wait: 1h
                    unless: { event: Order Completd }
                    do: [ { push: { title: Your cart, body: Still there } } ]
                goals:
                  - { id: ordered, event: Order Completed, within: 1d, exposure: \(exposure) }
                """
            let plan = """
                version: 1
                tracking_plan: shop
                events: { Added To Cart: {}, Order Completed: {} }
                """
            return RuleLoader.load(texts: [("shop.yaml", yaml), ("plan.yaml", plan)]).diagnostics
                .filter { $0.severity == .error }.map(\.message)
        }
        #expect(errors("cart_push") == ["the tracking plan has no event 'Order Completd'; did you mean 'Order Completed'?"])
        #expect(errors("cart_pusj").count == 2)
        #expect(errors("cart_pusj").last?.hasPrefix("goal 'ordered' is exposed by rule 'cart_pusj'") == true)
    }

    /// Analysis warnings of rules that compile are reported alongside the errors of others.
    @Test func warningsAreReportedAlongsideErrors() {
        let yaml = """
            version: 1
            campaign: c
            rules:
              - id: broken
                on: Opened
                if: nope(
                do: [ { deep_link: "app://x" } ]
              - id: never
                on: Opened
                if: user.plan == "a" && user.plan == "b"
                do: [ { deep_link: "app://x" } ]
            """
        let found = diagnostics(yaml)
        #expect(found.contains { $0.id == .expressionSyntax })
        #expect(found.contains { $0.id == .neverTrue && $0.severity == .warning }, "\(found)")
    }

    // MARK: History series

    /// Each distinct event a history function counts is a series; past `HistoryLog.maxSeries` (the series number a
    /// history entry keeps in the bits above its time) the rules do not load, at the file whose rules crossed it. The
    /// bound is lowered here to keep the test quick; the real one loads the same way.
    @Test func historySeriesHaveALimit() {
        #expect(HistoryLog.maxSeries == 1 << (64 - Int(HistoryLog.timeBits)))
        let limit = 1_000
        func file(_ name: String, series: Range<Int>) -> (String, String) {
            let calls = series.map { "count(\"e\($0)\", \"1d\")" }.joined(separator: ",")
            return (
                name,
                "version: 1\ncampaign: \(name)\nrules:\n  - { id: r, on: Opened, if: '[\(calls)].size() > 0', do: [ { deep_link: x } ] }\n"
            )
        }
        let at = RuleLoader.load(texts: [file("a", series: 0..<600), file("b", series: 600..<limit)], maxSeries: limit)
        #expect(at.ruleSet != nil, "\(at.rendered())")
        let over = RuleLoader.load(
            texts: [file("a", series: 0..<600), file("b", series: 600..<(limit + 1)), file("c", series: 2_000..<2_600)],
            maxSeries: limit)
        #expect(over.ruleSet == nil)
        let errors = over.diagnostics.filter { $0.severity == .error }
        #expect(errors.map(\.id) == [.limitExceeded])
        #expect(errors.first?.message.contains("more than 1000 history series") == true, "\(errors)")
        #expect(errors.first?.location.file == "b")
    }
}
