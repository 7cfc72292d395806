import BeckonCore
import Testing

/// `conversion_values`: the highest-priority event of a window from install, reported only when it rises.
struct ConversionValueTests {
    static func file(_ values: String, window: String = "24h", rules: String = "rules: []") -> String {
        """
        version: 1
        ruleset: skan
        conversion_values:
          - id: cv
            starts_on: Installed
            window: \(window)
            values:
        \(values)
            emit: CV
        \(rules)
        """
    }

    static let table = """
              - { event: Purchase, value: 63 }
              - { event: Registered, value: 50 }
              - { event: Opened, value: 20 }
        """

    func values(_ events: [Event]) throws -> [String] {
        fired(try load(Self.file(Self.table)), events).filter { $0.kind == "emit" }.map {
            "\($0.userID) \($0.rule)"
        }
    }

    @Test func eachRiseWithinTheWindowIsReportedAndNothingElse() throws {
        let out = try values([
            track("Installed", at: "2026-01-01T00:00:00Z"), track("Opened", at: "2026-01-01T00:00:01Z"),
            track("Opened", at: "2026-01-01T01:00:00Z"), track("Purchase", at: "2026-01-01T02:00:00Z"),
            track("Registered", at: "2026-01-01T03:00:00Z"), track("Purchase", at: "2026-01-01T04:00:00Z"),
        ])
        #expect(out == ["u1 cv_20", "u1 cv_63"])
    }

    @Test func theWindowClosesAndNeedsAStart() throws {
        let out = try values([
            track("Installed", at: "2026-01-01T00:00:00Z"), track("Opened", at: "2026-01-01T23:59:59.999Z"),
            track("Purchase", at: "2026-01-02T00:00:00Z"), track("Purchase", "nobody", at: "2026-01-01T00:00:00Z"),
        ])
        #expect(out == ["u1 cv_20"])
        // A second install does not reopen it: the window is from the first.
        let again = try values([
            track("Installed", at: "2026-01-01T00:00:00Z"), track("Installed", at: "2026-02-01T00:00:00Z"),
            track("Opened", at: "2026-02-01T00:00:01Z"),
        ])
        #expect(again.isEmpty)
    }

    @Test func theUpdateCarriesTheValues() throws {
        let out = fired(
            try load(Self.file(Self.table)),
            [
                track("Installed", at: "2026-01-01T00:00:00Z"), track("Opened", at: "2026-01-01T00:01:00Z"),
                track("Purchase", at: "2026-01-01T00:02:00Z"),
            ])
        #expect(out.last?.json.contains(#""attributes":{"cv":63}"#) == true)
        #expect(
            out.filter { $0.kind == "emit" }.last?.json.contains(
                #""event":"CV","payload":{"conversion_value":63,"previous_value":20,"event":"Purchase"}"#) == true)
    }

    @Test func mistakesInTheTable() {
        func errors(_ text: String) -> [String] { diagnostics(text).filter { $0.severity == .error }.map(\.message) }
        #expect(
            errors(Self.file("          - { event: Opened, value: 64 }")) == ["a conversion value is 0 to 63 (six bits), not 64"])
        #expect(
            errors(Self.file("          - { event: Opened, value: 20 }\n          - { event: Opened, value: 30 }")) == [
                "'Opened' is in the table twice (line 8)"
            ])
        #expect(
            errors(Self.file("          - { event: Opened, value: 20 }\n          - { event: Bought, value: 20 }")) == [
                "value 20 is also 'Opened''s: each row needs its own priority"
            ])
        #expect(errors(Self.file("          - { event: Opened, value: 20 }", window: "0s")) == ["a window of 0 never opens"])
        #expect(
            errors(
                Self.file(
                    "          - { event: Opened, value: 20 }",
                    rules: "rules:\n  - id: cv_20\n    on: Opened\n    do: [ { deep_link: \"app://x\" } ]")) == [
                    "conversion value rule 'cv_20' has the id of the rule at line 11"
                ])
    }
}
