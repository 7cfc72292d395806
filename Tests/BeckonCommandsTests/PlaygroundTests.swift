import BeckonCore
import Foundation
import Testing

@testable import BeckonCommands
@testable import BeckonTools

/// The console's playground over texts: diagnostics where the mistake is, the dry-run rows, and its limits.
struct PlaygroundTests {
    static let rules = """
        version: 1
        ruleset: shop
        rules:
          - id: welcome
            on: Signed In
            limit: { per_user: 1 }
            do:
              - message: { surface: launch, template: hello }

        """
    static let events = [
        #"{"type":"track","userId":"u1","event":"Signed In","timestamp":"2026-03-01T10:00:00Z"}"#,
        #"{"type":"track","userId":"u1","event":"Signed In","timestamp":"2026-03-01T11:00:00Z"}"#,
        "not json",
    ].joined(separator: "\r\n")

    @Test func runsTheEditedFileOverTheEvents() {
        let r = Playground.run(
            files: [("shop.yaml", "version: 1\nruleset: old\n")], path: "shop.yaml", edited: Self.rules,
            events: Self.events, until: nil)
        #expect(r.errors == 0 && r.ran && r.stopped == nil)
        let rows = r.rows.map { "\($0.result.mark) \($0.rule) \($0.kind ?? "-")" }
        #expect(rows == ["✓ shop/welcome message", "✗ shop/welcome -"])
        #expect(r.badLines.count == 1 && r.badLines[0].hasPrefix("events:3:1: bad event"))
        #expect(r.perRule.map(\.notFired) == ["limit:per_user 1"])
    }

    @Test func linesEndAsDryRunReadsThem() {
        let lines = Playground.lines("a\r\nb\rc\n \t\nd\u{2028}e\n").map { String(decoding: $0, as: UTF8.self) }
        #expect(lines == ["a", "b", "c", "", "d\u{2028}e"])
        // A line separator inside a JSON string is part of the event; a blank line is no line of the limit.
        let events =
            #"{"type":"track","userId":"u1","event":"Signed In","timestamp":"2026-03-01T10:00:00Z","properties":{"note":"x\#u{2028}y"}}"#
        var limits = Playground.Limits()
        limits.eventLines = 1
        let r = Playground.run(
            files: [], path: "a.yaml", edited: Self.rules, events: events + "\n\n", until: nil, limits: limits)
        #expect(r.stopped == nil && r.badLines.isEmpty && r.rows.count == 1)
    }

    @Test func diagnosticsSayWhere() {
        let broken = Self.rules.replacingOccurrences(of: "per_user", with: "per_usr")
        let r = Playground.run(files: [], path: "shop.yaml", edited: broken, events: Self.events, until: nil)
        #expect(!r.ran && r.errors == 1)
        let p = r.problems.first
        #expect(p?.file == "shop.yaml" && p?.line == 6 && p?.column == 14)
        #expect(p?.rendered.contains("did you mean 'per_user'") == true)
    }

    /// A file the rules name (a destination's key file) is a name in the playground: nothing is read from disk, so
    /// the page cannot tell whether a file on the server exists or what it holds.
    @Test func filesTheRulesNameAreNotRead() {
        let settings = """
            version: 1
            settings: push
            destinations:
              - name: ios
                url: https://api.push.apple.com
                apns: { topic: app, team_id: T, key_id: K, key_file: /etc/shadow, ca_file: /etc/hostname }
              - name: android
                url: https://fcm.googleapis.com
                fcm: { service_account_file: /etc/hostname }

            """
        let r = Playground.run(
            files: [("settings.yaml", settings)], path: "a.yaml", edited: Self.rules, events: Self.events, until: nil)
        #expect(!r.problems.contains { $0.message.contains("/etc/") }, "\(r.problems.map(\.message))")
        #expect(r.ran)
    }

    @Test func limitsHold() {
        var limits = Playground.Limits()
        limits.runMilliseconds = 0
        var r = Playground.run(files: [], path: "a.yaml", edited: Self.rules, events: Self.events, until: nil, limits: limits)
        #expect(r.stopped == "stopped before line 1: over the playground's 0 ms" && r.rows.isEmpty)
        limits = Playground.Limits()
        limits.eventLines = 2
        r = Playground.run(files: [], path: "a.yaml", edited: Self.rules, events: Self.events, until: nil, limits: limits)
        #expect(r.stopped == "the events are over the playground's 2 lines" && !r.ran)
        limits = Playground.Limits()
        limits.ruleBytes = 10
        r = Playground.run(files: [], path: "a.yaml", edited: Self.rules, events: Self.events, until: nil, limits: limits)
        #expect(r.stopped == "the rule file is over the playground's 0 KiB" && r.problems.isEmpty)
        r = Playground.run(files: [], path: "a.yaml", edited: Self.rules, events: Self.events, until: "+91d")
        #expect(r.stopped == "until is more than 90d after the last event")
        limits = Playground.Limits()
        limits.rows = 1
        r = Playground.run(files: [], path: "a.yaml", edited: Self.rules, events: Self.events, until: nil, limits: limits)
        #expect(r.rows.count == 1 && r.rowsLeftOut == 1)
    }
}
