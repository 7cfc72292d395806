import BeckonCore
import Foundation
import Testing

/// A/B tests: `variants:` on a rule or a whole file.
struct VariantTests {
    static let ruleTest = """
        version: 1
        campaign: cart
        rules:
          - id: nudge
            on: Product Added
            do:
              - push: { body: Your cart is waiting }
            variants:
              - { id: control, weight: 20, control: true }
              - { id: plain, weight: 40 }
              - { id: urgent, weight: 40, do: [ { push: { body: Selling fast } } ] }
        """

    static let fileTest = """
        version: 1
        campaign: onboarding
        variants:
          - { id: control, weight: 10, control: true }
          - { id: tour, weight: 90 }
        rules:
          - id: first
            on: Opened
            do: [ { message: { surface: home, title: Hi } } ]
          - id: second
            on: Saved
            do: [ { message: { surface: home, title: Saved } } ]
        """

    func added(_ user: String) -> Event { track("Product Added", user, at: "2026-01-01T10:00:00Z") }

    /// The assignment the guide spells out (with its Python): these indexes were computed by that Python for the test
    /// `shop/welcome` (a rule's own) with weights 50/30/20.
    @Test func theAssignmentIsTheOneTheGuideSpellsOut() throws {
        let rs = try load(
            """
            version: 1
            campaign: shop
            rules:
              - id: welcome
                on: Opened
                do: [ { message: { surface: home, title: Hi } } ]
                variants:
                  - { id: a, weight: 50 }
                  - { id: b, weight: 30 }
                  - { id: c, weight: 20 }
            """)
        let v = try #require(rs.rules.first?.variants)
        #expect((0..<12).map { v.index(of: "u\($0)") } == [0, 0, 0, 1, 1, 2, 1, 0, 2, 1, 1, 0])
    }

    @Test func eachUserGetsOneVariantInTheWeightsShares() throws {
        let rs = try load(Self.ruleTest)
        let engine = Engine(ruleSet: rs)
        var counts: [String: Int] = [:]
        for i in 0..<10_000 {
            let a = engine.process(added("user-\(i)")).actions
            #expect(a.count == 1)
            let json = a[0].json
            let v = ["control", "plain", "urgent"].first { json.contains(#""variant":"\#($0)""#) }!
            counts[v, default: 0] += 1
            switch v {
            case "control": #expect(a[0].kind == "held_back")
            case "plain": #expect(json.contains(#""body":"Your cart is waiting""#))
            default: #expect(json.contains(#""body":"Selling fast""#))
            }
        }
        // 20/40/40 of 10,000: each within 4 standard deviations (±160, ±196).
        #expect(abs(counts["control"]! - 2_000) < 160)
        #expect(abs(counts["plain"]! - 4_000) < 196)
        #expect(abs(counts["urgent"]! - 4_000) < 196)
    }

    /// The variant is a function of the user and the test's name: the same in another engine, and unchanged when
    /// the rule's actions, conditions or other rules change.
    @Test func assignmentIsStableAcrossEdits() throws {
        let before = try load(Self.ruleTest)
        var text: String = Self.ruleTest.replacingOccurrences(of: "Your cart is waiting", with: "Come back")
        text = text.replacingOccurrences(of: "    on: Product Added\n", with: "    on: Product Added\n    where: 'true'\n")
        text += "\n  - id: other\n    on: Product Added\n    do: [ { deep_link: \"shop://x\" } ]\n"
        let edited = try load(text)
        let a = try #require(before.rule(named: "nudge")?.variants)
        let b = try #require(edited.rule(named: "nudge")?.variants)
        for i in 0..<1_000 { #expect(a.index(of: "u\(i)") == b.index(of: "u\(i)")) }
    }

    /// A file's test puts a user in the same variant for every rule of the file.
    @Test func aFilesTestIsOneVariantPerUserAcrossItsRules() throws {
        let rs = try load(Self.fileTest)
        let engine = Engine(ruleSet: rs)
        for i in 0..<300 {
            let user = "u\(i)"
            let first = engine.process(track("Opened", user, at: "2026-01-01T10:00:00Z")).actions[0]
            let second = engine.process(track("Saved", user, at: "2026-01-01T10:01:00Z")).actions[0]
            let firstTour: Bool = first.json.contains(#""variant":"tour""#)
            let secondTour: Bool = second.json.contains(#""variant":"tour""#)
            #expect(firstTour == secondTour)
            #expect((first.kind == "held_back") != firstTour)
        }
    }

    @Test func mistakes() {
        func errors(_ replacing: String, _ with: String, in text: String = Self.ruleTest) -> [String] {
            let edited: String = text.replacingOccurrences(of: replacing, with: with)
            return diagnostics(edited).filter { $0.severity == .error }.map(\.message)
        }
        let two =
            "\n      - { id: plain, weight: 40 }\n      - { id: urgent, weight: 40, do: [ { push: { body: Selling fast } } ] }"
        #expect(errors(two, "") == ["one variant is no test: give at least two (one may be `control: true`)"])
        #expect(
            errors("{ id: plain, weight: 40 }", "{ id: plain, weight: 40, control: true }") == [
                "'control' is the control already: a test has one control"
            ])
        #expect(errors("id: urgent", "id: plain") == ["variant 'plain' is defined twice"])
        #expect(
            errors("weight: 40 }", "weight: 0 }") == [
                "'weight' is a share of users in percent (more than 0, at most 100), not '0'"
            ])
        #expect(
            errors("variants:", "holdout: 10%\nvariants:", in: Self.fileTest) == [
                "a file with variants has its control group among them, not a holdout"
            ])
        let nested: String = Self.fileTest + "\n    variants:\n      - { id: a, weight: 50 }\n      - { id: b, weight: 50 }\n"
        #expect(errors("", "", in: nested) == ["this campaign has variants already: a rule of it cannot have its own"])
    }

    /// `variant_weights`: weights that do not add up to 100 still work (as shares of their sum), with a warning.
    @Test func weightsThatDoNotAddUpAreAWarning() {
        let text: String = Self.ruleTest.replacingOccurrences(of: "{ id: plain, weight: 40 }", with: "{ id: plain, weight: 30 }")
        let messages: [String] = diagnostics(text).filter { $0.id == .variantWeights }.map(\.message)
        #expect(messages == ["the variants' weights add up to 90%, not 100%: they are used as shares of 90"])
        #expect(diagnostics(Self.ruleTest).filter { $0.id == .variantWeights }.isEmpty)
    }
}
