import PropertyBased
import Testing

@testable import BeckonCore

/// Flat predicates (conditions that are conjunctions of slot or count tests) and the simple-rule gate decide exactly
/// what the general evaluation decides: an engine that does not record verdicts uses them, one that records verdicts
/// runs the closures and the general limit checks.
struct PredicateTests {
    @Test func conjunctionsOfSimpleTestsBecomePredicates() throws {
        let cases: [(String, Int?)] = [
            ("user.a == 1", 1),
            ("user.a == 1 && event.properties.p > 2.5", 2),
            ("\"x\" < user.a && user.flag && count(\"e1\", \"1h\") >= 2", 3),
            ("user.a in [\"a\", \"b\"] && count(\"e1\", \"lifetime\") < 3", 2),
            ("user.flag", 1),
            ("user.a == 1 || user.b == 2", nil),
            ("!(user.a == 1)", nil),
            ("user.a + 1 == 2", nil),
            ("user.a == user.b", nil),
            ("count(\"e1\", \"calendar day\") > 1", nil),
            ("has(user.a) && user.a == 1", nil),
        ]
        for (condition, terms) in cases {
            let rs = try load(rules([condition]))
            #expect(rs.rules[0].ifExpr?.predicate?.terms.count == terms, "\(condition)")
        }
    }

    @Test func predicatesDecideLikeTheClosures() async {
        await propertyCheck(count: 150, input: Gen.int(in: 0...Int(Int32.max))) { seed in
            var rng = SplitMix(seed: UInt64(seed))
            let conditions = (0..<6).map { _ in Self.condition(&rng) }
            let limits = (0..<6).map { _ in Self.limits[rng.next(in: 0...Self.limits.count - 1)] }
            guard let rs = try? load(rules(conditions, limits: limits)) else { return }
            #expect(rs.rules.allSatisfy { $0.ifExpr?.predicate != nil && $0.gate != nil })
            let events = Self.stream(&rng)
            let fast = Engine(ruleSet: rs)
            let closures = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
            for e in events {
                let a = fast.process(e).actions.map(\.rule)
                let b = closures.process(e).actions.map(\.rule)
                #expect(a == b, "\(conditions) on \(e)")
            }
            #expect(fast.stats.blocked == closures.stats.blocked)
            #expect(fast.stats.triggered == closures.stats.triggered)
            #expect(fast.stats.fired == closures.stats.fired)
        }
    }

    /// Every kind of limit, alone or with the global cap, decides the same fires on the fast path (no verdicts
    /// recorded: the gate for the kinds it names, the general check for the rest) as on the general path; and the gate
    /// takes exactly the rules whose kinds it names.
    @Test func everyLimitKindDecidesAlikeOnBothPaths() async throws {
        let values: [LimitKind: [String]] = [
            .onOccurrence: ["1", "2", "3"], .everyOccurrence: ["1", "2", "3"], .perUser: ["1", "2", "4"],
            .perSession: ["1", "2"], .perMinute: ["1", "2"], .perHour: ["1", "2"], .perDay: ["1", "3"],
            .perWeek: ["2", "4"], .perMonth: ["3", "5"], .cooldown: ["10m", "1h", "2d"], .perCalendarDay: ["1", "3"],
            .perCalendarWeek: ["2", "4"], .perCalendarMonth: ["3", "5"],
        ]
        #expect(Set(values.keys) == Set(LimitKind.allCases), "a new kind needs values here")
        for kind in LimitKind.allCases {
            let rs = try load(Self.limited("\(kind.key): \(values[kind]![0])"))
            #expect((rs.rules[0].gate != nil) == LimitKind.decidedByGate.contains(kind), "\(kind)")
        }
        let seeds = Gen.int(in: 0...Int(Int32.max))
        await propertyCheck(count: 60, input: seeds) { seed in
            var rng = SplitMix(seed: UInt64(seed))
            for kind in LimitKind.allCases {
                let v = values[kind]!
                let own = "\(kind.key): \(v[rng.next(in: 0...v.count - 1)])"
                let global = kind.rawValue < LimitKind.perUser.rawValue || rng.next(in: 0...1) == 0 ? nil : own
                let settings = """
                    version: 1
                    settings: app
                    sessions: { start_on: [start], timeout: 30m }
                    """ + (global.map { "\nglobal_limit: { \($0) }" } ?? "")
                guard let rs = try? load(Self.limited(own), settings: settings) else { return }
                var events: [Event] = []
                var at = t("2026-03-01T10:00:00Z")
                for _ in 0..<rng.next(in: 10...60) {
                    let gaps = [5, 40, 300, 1_500, 4_000, 30_000, 200_000, 700_000]
                    at += Int64(gaps[rng.next(in: 0...gaps.count - 1)]) * 1000
                    let user = "u\(rng.next(in: 1...2))"
                    let time = Timestamp(milliseconds: at).description
                    events.append(
                        rng.next(in: 0...5) == 0
                            ? track("start", user, at: time)
                            : track("e1", user, at: time, props: [("p", .int(Int64(rng.next(in: 6...8))))]))
                }
                let fast = Engine(ruleSet: rs)
                let general = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
                for e in events {
                    #expect(fast.process(e).actions.map(\.json) == general.process(e).actions.map(\.json), "\(own)")
                }
                #expect(fast.stats.fired == general.stats.fired, "\(own), global \(global ?? "none")")
                #expect(fast.stats.blocked == general.stats.blocked, "\(own), global \(global ?? "none")")
            }
        }
    }

    /// A rule with a gate-friendly `where` and the limit `limit`, beside one with none, on other surfaces.
    static func limited(_ limit: String) -> String {
        """
        version: 1
        campaign: c
        rules:
          - id: limited
            on: e1
            where: event.properties.p != 7
            limit: { \(limit) }
            do: [ { message: { surface: s, title: A } } ]
          - id: free
            on: e1
            do: [ { message: { surface: t, title: B } } ]
        """
    }

    // MARK: Random conditions and streams

    static let limits = ["", "{ per_user: 2 }", "{ cooldown: 20m }", "{ per_session: 1 }", "{ per_user: 3, cooldown: 10m }"]
    static let literals = ["1", "2", "2.5", "2.0", "\"a\"", "\"b\"", "\"é\"", "true", "false", "null"]
    static let lists = ["[\"a\", \"b\"]", "[1, 2]", "[2.5, 3.0]", "[true]"]
    static let values: [Value?] = [
        nil, .int(1), .int(2), .double(2.0), .double(2.5), .double(.nan), .string("a"), .string("b"), .string("é"),
        .string("B"), .bool(true), .bool(false),
    ]

    static func condition(_ rng: inout SplitMix) -> String {
        (0..<rng.next(in: 1...4)).map { _ in term(&rng) }.joined(separator: " && ")
    }

    static func term(_ rng: inout SplitMix) -> String {
        let ops = ["==", "!=", "<", "<=", ">", ">="]
        let op = ops[rng.next(in: 0...5)]
        switch rng.next(in: 0...9) {
        case 0: return "user.flag"
        case 1: return "user.a in \(lists[rng.next(in: 0...3)])"
        case 2:
            return "count(\"e1\", \"\(["1h", "lifetime"][rng.next(in: 0...1)])\") \(op) \(["1", "2", "2.5"][rng.next(in: 0...2)])"
        case 3: return "\(literals[rng.next(in: 0...8)]) \(op) user.b"
        default:
            let operand = ["user.a", "user.b", "event.properties.p", "event.properties.q"][rng.next(in: 0...3)]
            let literal = literals[rng.next(in: 0...(op == "==" || op == "!=" ? 9 : 8))]
            return "\(operand) \(op) \(literal)"
        }
    }

    static func stream(_ rng: inout SplitMix) -> [Event] {
        var out: [Event] = []
        var at = t("2026-03-01T10:00:00Z")
        for _ in 0..<rng.next(in: 5...25) {
            at += Int64(rng.next(in: 1...1200)) * 1000
            let time = Timestamp(milliseconds: at).description
            let user = "u\(rng.next(in: 1...3))"
            if rng.next(in: 0...3) == 0 {
                var traits: [(String, Value)] = []
                for name in ["a", "b", "flag"] {
                    if let v = values[rng.next(in: 0...values.count - 1)] { traits.append((name, v)) }
                }
                out.append(identify(user, at: time, traits))
            } else {
                var props: [(String, Value)] = []
                for name in ["p", "q"] {
                    if let v = values[rng.next(in: 0...values.count - 1)] { props.append((name, v)) }
                }
                out.append(track("e1", user, at: time, props: props))
            }
        }
        return out
    }
}

/// Rules on `e1`, one per condition, each emitting its own event.
private func rules(_ conditions: [String], limits: [String] = []) -> String {
    var s = "version: 1\ncampaign: c\nrules:\n"
    for (i, c) in conditions.enumerated() {
        s += "  - id: r\(i)\n    on: e1\n    if: '\(c)'\n    do: [ { emit: { event: r\(i) } } ]\n"
        if i < limits.count, !limits[i].isEmpty { s += "    limit: \(limits[i])\n" }
    }
    return s
}

/// A small deterministic generator (SplitMix64), so a failing seed reproduces.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func next(in r: ClosedRange<Int>) -> Int { r.lowerBound + Int(next() % UInt64(r.count)) }
}
