import BeckonCore
import Foundation
import Testing

struct FlowTests {
    let yaml = """
        version: 1
        ruleset: r
        flows:
          - id: signup
            version: 3
            params: { theme: dark }
            steps:
              - intro
              - { id: account, back: false }
              - { id: invite, skip_if: "default(user.solo, false)" }
              - done_step
            finish: welcome_home
            migrate:
              - from: 2
                steps: { old_account: account, old_invite: invite }
        rules:
          - id: start
            on: Start
            do: [ { flow: { start: signup } } ]
          - id: step
            on: Step Done
            do: [ { flow: { complete: signup, step: "${event.properties.step}" } } ]
          - id: resume
            on: Opened
            do: [ { flow: { resume: signup } } ]
        """

    func screens(_ events: [Event]) throws -> [(String, ValueMap)] {
        try fired(load(yaml), events).compactMap { a in
            guard a.kind == "screen", let s = a["screen"]?.stringValue, case .map(let p)? = a["params"] else { return nil }
            return (s, p)
        }
    }

    func step(_ id: String, at time: String) -> Event { track("Step Done", at: time, props: [("step", .string(id))]) }

    @Test func walksTheStepsWithProgressAndFinishes() throws {
        let s = try screens([
            track("Start", at: "2026-03-01T10:00:00Z"), step("intro", at: "2026-03-01T10:01:00Z"),
            step("account", at: "2026-03-01T10:02:00Z"), step("invite", at: "2026-03-01T10:03:00Z"),
            step("done_step", at: "2026-03-01T10:04:00Z"),
        ])
        #expect(s.map(\.0) == ["intro", "account", "invite", "done_step", "welcome_home"])
        #expect(s.prefix(4).map { $0.1[string: "step"].map { JSONWriter.encode($0) } ?? "" } == ["1", "2", "3", "4"])
        #expect(s.prefix(4).allSatisfy { $0.1[string: "total"].map { JSONWriter.encode($0) } == "4" })
        #expect(s.prefix(4).map { $0.1[string: "back"]?.isTrue ?? true } == [true, false, false, false])
        #expect(s.allSatisfy { $0.1[string: "theme"]?.stringValue == "dark" })
    }

    @Test func skippedStepsAreNotCounted() throws {
        let s = try screens([
            identify(at: "2026-03-01T09:00:00Z", [("solo", true)]), track("Start", at: "2026-03-01T10:00:00Z"),
            step("intro", at: "2026-03-01T10:01:00Z"), step("account", at: "2026-03-01T10:02:00Z"),
        ])
        #expect(s.map(\.0) == ["intro", "account", "done_step"])
        #expect(s.allSatisfy { $0.1[string: "total"].map { JSONWriter.encode($0) } == "3" })
    }

    @Test func resumeShowsTheFirstUnfinishedStep() throws {
        let s = try screens([
            track("Start", at: "2026-03-01T10:00:00Z"), step("account", at: "2026-03-01T10:01:00Z"),
            track("Opened", at: "2026-03-02T10:00:00Z"),
        ])
        // account done out of order: intro is still the first unfinished step.
        #expect(s.map(\.0) == ["intro", "intro", "intro"])
    }

    @Test func resumeDoesNothingOutsideTheFlow() throws {
        #expect(try screens([track("Opened", at: "2026-03-02T10:00:00Z")]).isEmpty)
    }

    @Test func olderVersionsAreMigrated() throws {
        let legacy = Value.map(ValueMap([("version", 2), ("step", "old_invite")]))
        let s = try screens([
            identify(at: "2026-03-01T09:00:00Z", [("signup", legacy)]), track("Opened", at: "2026-03-01T10:00:00Z"),
        ])
        #expect(s.map(\.0) == ["invite"])
        #expect(s.first?.1[string: "step"].map { JSONWriter.encode($0) } == "3")
    }

    @Test func stateIsAnAttributeRulesCanRead() throws {
        let rs = try load(
            yaml + """

                  - id: congratulate
                    on_change: signup
                    if: user.signup.done
                    do: [ { deep_link: "app://done" } ]
                """)
        let events =
            [track("Start", at: "2026-03-01T10:00:00Z")]
            + ["intro", "account", "invite", "done_step"].enumerated().map {
                step($0.element, at: "2026-03-01T10:0\($0.offset + 1):00Z")
            }
        #expect(fired(rs, events).filter { $0.kind == "deep_link" }.count == 1)
    }

    @Test func unknownFlowsAndStepsAreRejected() {
        let bad = yaml.replacingOccurrences(of: "flow: { resume: signup }", with: "flow: { resume: signpu }")
        #expect(diagnostics(bad).contains { $0.id == .unknownFlow && $0.message.contains("did you mean 'signup'") })
        let badStep = yaml.replacingOccurrences(of: "steps: { old_account: account", with: "steps: { old_account: acount")
        #expect(diagnostics(badStep).contains { $0.id == .unknownFlow })
    }
}
