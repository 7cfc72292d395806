import Testing

@testable import BeckonCore

/// The bounds of docs/reference/limits.md that no other suite exercises at their edge: each holds exactly at its
/// value and says what happened beyond it.
struct BoundTests {
    /// `retrigger: add` keeps at most 16 pending actions of one rule per user; a 17th trigger is `pending`.
    @Test func pendingActionsPerRuleStopAtSixteen() throws {
        let rs = try rule("on: A\nwait: 1d\nretrigger: add\ndo: [ { deep_link: x } ]")
        let engine = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        var verdicts: [String] = []
        for minute in 0..<20 {
            let out = engine.process(track("A", at: "2026-03-01T10:\(minute < 10 ? "0" : "")\(minute):00Z"))
            verdicts += out.verdicts.map(\.verdict.code)
        }
        #expect(verdicts.filter { $0 == "scheduled" }.count == 16, "\(verdicts)")
        #expect(verdicts.filter { $0 == "pending" }.count == 4, "\(verdicts)")
        #expect(engine.advance(to: t("2026-03-03T00:00:00Z")).actions.count == 16)
    }

    /// A sequence rule follows at most 32 correlation keys per user: the 33rd forgets the stalest, whose completion
    /// then fires nothing, while every other key still completes.
    @Test func sequenceKeysPerUserStopAtThirtyTwo() throws {
        let rs = try rule("sequence: [Added, Bought]\nwithin: 1d\ncorrelate: cart\ndo: [ { deep_link: x } ]")
        func run(keys: Int) -> [String] {
            let engine = Engine(ruleSet: rs)
            for k in 0..<keys {
                _ = engine.process(
                    track("Added", at: "2026-03-01T10:\(k < 10 ? "0" : "")\(k):00Z", props: [("cart", .string("c\(k)"))]))
            }
            return (0..<keys).compactMap { k in
                engine.process(track("Bought", at: "2026-03-01T11:00:00Z", props: [("cart", .string("c\(k)"))])).actions
                    .isEmpty ? nil : "c\(k)"
            }
        }
        #expect(run(keys: 32).count == 32)
        #expect(run(keys: 33) == (1..<33).map { "c\($0)" })
    }

    /// All of a pattern's distinct character classes hold at most 100,000 scalar ranges together: beyond, the pattern
    /// is refused when compiled (a pattern from event data can be that long: a line holds 1 MiB).
    @Test func regexClassRangesHaveALimit() throws {
        // Scalars two apart, so that no two ranges merge.
        func pattern(ranges: Int) -> String {
            var s = "["
            for k in 0..<ranges { s.unicodeScalars.append(Unicode.Scalar(0x1_0000 + 2 * k)!) }
            return s + "]"
        }
        let within = try RegexProgram(pattern(ranges: RegexLimits.maxClassRanges))
        #expect(within.matches("\u{10000}"))
        #expect(!within.matches("\u{10001}"))
        do {
            _ = try RegexProgram(pattern(ranges: RegexLimits.maxClassRanges + 1))
            Issue.record("compiled")
        } catch {
            #expect(error.message.contains("100000"), "\(error.message)")
        }
    }

    /// An expression is at most 16,384 characters: one longer is refused as `limit_exceeded`, before it is parsed.
    @Test func expressionsHaveALengthLimit() throws {
        let terms = (0..<3_000).map { "x == \($0)" }
        var text = ""
        for t in terms where text.count + t.count + 4 <= Parser.maxLength { text += text.isEmpty ? t : " || " + t }
        #expect(text.count <= Parser.maxLength)
        let long = text + String(repeating: " ", count: Parser.maxLength - text.count) + "|| x == 0"
        #expect(long.count > Parser.maxLength)
        do {
            _ = try Parser.parse(long)
            Issue.record("an expression of \(long.count) characters parsed")
        } catch {
            #expect(error.id == "limit_exceeded")
            #expect(error.message.contains("16384"), "\(error.message)")
        }
    }

    /// Names longer than 256 characters get no "did you mean": the comparison would cost their length squared.
    @Test func suggestionsAreForNamesUpTo256Characters() {
        let near = String(repeating: "a", count: 200)
        #expect(Suggest.nearest(near + "b", in: [near + "c"]) == near + "c")
        let far = String(repeating: "a", count: 300)
        #expect(Suggest.nearest(far + "b", in: [far + "c"]) == nil)
    }
}
