import BeckonCommands
import BeckonTools
import Foundation
import Testing

/// Golden explain traces, in both formats.
struct ExplainTests {
    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var rules: String
        var events: String
        var user: String
        var rule: String?
        var until: String?
        var description: String { name }
    }

    static let cases = [
        Case(
            name: "firefox_alice", rules: "campaigns/firefox", events: "samples/firefox/default_browser.jsonl", user: "alice",
            rule: "prompt_default_browser"),
        Case(
            name: "stampbook_noa", rules: "rules/stampbook", events: "samples/stampbook/claim_before_opening.jsonl", user: "noa"),
        Case(
            name: "timers_a", rules: "Tests/BeckonCommandsTests/Fixtures/dryrun/timers/rules.yaml",
            events: "Tests/BeckonCommandsTests/Fixtures/dryrun/timers/events.jsonl", user: "a", until: "+3d"),
        Case(
            name: "bossup_reprompt", rules: "rules/bossup", events: "samples/bossup/ios_facebook_denied_reprompt.jsonl",
            user: "ben",
            rule: "reprompt_tracking"),
        // Events off the tracking plan: each says what does not fit; the converted values show as the rule saw them.
        Case(
            name: "off_plan_a", rules: "Tests/BeckonCommandsTests/Fixtures/dryrun/off_plan",
            events: "Tests/BeckonCommandsTests/Fixtures/dryrun/off_plan/events.jsonl", user: "a"),
    ]

    /// The status, and standard output then standard error (its paths relative to the project).
    func run(_ c: Case, _ format: ExplainRunner.Format) -> (Int32, String, stdout: String) {
        let root = SeedRuleSetTests.root
        let console = StringConsole()
        let status = ExplainRunner.run(
            .init(
                paths: [root.appendingPathComponent(c.rules).path], events: root.appendingPathComponent(c.events).path,
                user: c.user,
                rule: c.rule, format: format, until: c.until),
            console: console)
        return (status, console.stdout + Snapshot.relative(console.stderr), console.stdout)
    }

    @Test(arguments: cases)
    func text(_ c: Case) {
        let (status, out, _) = run(c, .text)
        #expect(status == 0)
        Snapshot.assert(out, named: "explain/\(c.name).txt")
    }

    @Test(arguments: cases)
    func json(_ c: Case) throws {
        let (status, out, stdout) = run(c, .json)
        #expect(status == 0)
        #expect((try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) != nil)
        Snapshot.assert(out, named: "explain/\(c.name).json")
    }

    @Test func unknownRuleSuggestsTheNearest() {
        let root = SeedRuleSetTests.root
        let console = StringConsole()
        let status = ExplainRunner.run(
            .init(
                paths: [root.appendingPathComponent("rules/stampbook").path],
                events: root.appendingPathComponent("samples/stampbook/not_claimed.jsonl").path, user: "oli",
                rule: "welcome_notifcation"),
            console: console)
        #expect(status == 64)
        #expect(console.stderr.contains("did you mean 'welcome_notification'?"))
    }
}
