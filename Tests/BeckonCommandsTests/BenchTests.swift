import Foundation
import Testing

@testable import BeckonCommands
@testable import BeckonCore
@testable import BeckonTools

/// `beckon bench`: on a reduced workload of the shared benchmark, every rule's fires equal the shared Python
/// reference's (Fixtures/bench/ref.json, made by scripts/bench-fixture.sh).
struct BenchTests {
    static let workload = Snapshot.fixtures.appendingPathComponent("bench")

    @Test func firesEqualTheReference() throws {
        var o = BenchRunner.Options(
            workload: Self.workload.path, reference: Self.workload.appendingPathComponent("ref.json").path)
        o.scaleRules = 0
        o.compileRules = 0
        o.repeats = 1
        let r = try BenchRunner.measure(o, console: StringConsole())
        #expect(r.events == 25_000 && r.users == 300 && r.rules == 50)
        let ref = try #require(r.reference)
        #expect(ref.matches, "differs: \(ref.diff)")
        #expect(r.fires.allSatisfy { $0.1 > 0 }, "every rule fires on this workload")
        #expect(r.inProcess > 0 && r.endToEnd > 0)
    }

    @Test func jsonHasTheFieldsTheIssueNames() throws {
        var o = BenchRunner.Options(workload: Self.workload.path, format: .json)
        o.scaleRules = 100
        o.compileRules = 200
        o.repeats = 1
        let console = StringConsole()
        #expect(BenchRunner.run(o, console: console) == 0)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(console.stdout.utf8)) as? [String: Any])
        for key in ["events_per_s_in_process", "events_per_s_end_to_end", "peak_rss_kb", "state_bytes_per_user", "fires"] {
            #expect(json[key] != nil, "missing \(key)")
        }
        #expect(json["scale_rules"] as? Int == 100)
        #expect(json["compile_rules"] as? Int == 200)
    }

    @Test func rulesTranslateToTheDSL() throws {
        let w = try BenchWorkload(dir: Self.workload.path)
        let yaml = try w.rulesYAML(extra: 5)
        #expect(
            yaml.contains(
                "  - id: r01\n    on: 'purchase'\n    if: 'event.properties.price > 50.0 && user.country in [\"US\", \"CA\"]'\n"))
        #expect(yaml.contains("count(\"app_open\", \"604800s\") >= 10"))
        #expect(yaml.contains("limit: { cooldown: 86400s }"))
        #expect(yaml.contains("  - id: x4\n    on: 'bench_extra_0'"))
    }

    /// Blocks are counted by index; the index must name the same code the verdict has.
    @Test func blockIndexesMatchCodes() {
        let hit = { (key: String) in LimitHit(key: key, count: 1, max: 1, freesAt: nil) }
        var verdicts: [Verdict] = [
            .notLive("x"), .lostTo(rule: "a", priority: 1, ownPriority: 0), .cascadeLimit(8), .alreadyPending(due: 0),
            .cancelled(by: "e", due: 0), .quietHours(heldUntil: nil), .quietHours(heldUntil: 5),
        ]
        for c in Clause.allCases { verdicts.append(.conditionFalse(clause: c, value: .bool(false), why: nil)) }
        for k in Verdict.limitKeys { verdicts += [.limited(hit(k)), .globalLimited(hit(k))] }
        for v in verdicts {
            let i = v.blockIndex
            #expect(i != nil && Verdict.blockCodes[i!] == v.code, "\(v.code)")
        }
        #expect(Verdict.fired.blockIndex == nil)
    }

    /// The engine's literal places of limits and blocks name the codes they stand for.
    @Test func literalIndexesNameTheirCodes() {
        let keys = Verdict.limitKeys
        #expect(keys[Verdict.LimitIndex.onOccurrence] == "on_occurrence")
        #expect(keys[Verdict.LimitIndex.everyOccurrence] == "every_occurrence")
        #expect(keys[Verdict.LimitIndex.perUser] == "per_user")
        #expect(keys[Verdict.LimitIndex.perSession] == "per_session")
        #expect(keys[Verdict.LimitIndex.cooldown] == "cooldown")
        #expect(keys == LimitKind.allCases.map(\.key))
        let codes = Verdict.blockCodes
        #expect(codes.count == Verdict.blockCodeCount)
        #expect(codes[Verdict.BlockIndex.whereClause] == "where")
        #expect(codes[Verdict.BlockIndex.ifClause] == "if")
        #expect(codes[Verdict.BlockIndex.perUser] == "limit:per_user")
        #expect(codes[Verdict.BlockIndex.perSession] == "limit:per_session")
        #expect(codes[Verdict.BlockIndex.cooldown] == "limit:cooldown")
    }
}
