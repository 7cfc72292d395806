import Foundation
import Testing

@testable import BeckonCore

/// `schedule`: a rule that runs at a time for every known user, once or at every matching local time.
struct ScheduleTriggerTests {
    static let weekly = """
        version: 1
        campaign: digest
        rules:
          - id: monday_digest
            schedule: every monday 10:00
            if: default(user.plan, "") != "pro"
            do:
              - email: { template: weekly_digest, to: "${default(user.email, null)}" }
        """

    static let once = """
        version: 1
        campaign: launch
        rules:
          - id: launch_news
            schedule: 2026-03-05T09:00:00Z
            do:
              - push: { body: It is here }
        """

    func run(_ rules: String, _ events: [Event], until: String) throws -> [FiredAction] {
        let engine = Engine(ruleSet: try load(rules))
        var out = events.flatMap { engine.process($0).actions }
        out += engine.advance(to: t(until)).actions
        return out
    }

    /// 2026-03-02 and 03-09 are Mondays: each known user gets one run a week, at 10:00 in their own zone.
    @Test func everyMondayAtTenInTheUsersZone() throws {
        let events: [Event] = [
            identify("ann", at: "2026-03-01T08:00:00Z", [("email", .string("ann@example.com"))]),
            identify(
                "bo", at: "2026-03-01T08:00:00Z",
                [("email", .string("bo@example.com")), ("timezone", .string("America/New_York"))]),
        ]
        let out = try run(Self.weekly, events, until: "2026-03-10T00:00:00Z")
        let runs: [String] = out.map { "\($0.userID) \(Timestamp(milliseconds: $0.time))" }
        #expect(
            runs == [
                "ann 2026-03-02T10:00:00Z", "bo 2026-03-02T15:00:00Z", "ann 2026-03-09T10:00:00Z", "bo 2026-03-09T14:00:00Z",
            ])
        #expect(Set(out.map(\.id)).count == 4)
    }

    /// Letting a long span pass an instant at a time (`dry-run --until`, `report --until`) hands over the same actions
    /// in the same order as one ``Engine/advance(to:)``, each instant's in an outcome of its own, so that no outcome
    /// holds more than one instant's.
    @Test func aLongSpanIsHandedOverAnInstantAtATime() throws {
        let daily = """
            version: 1
            campaign: c
            rules:
              - id: daily
                schedule: every day 18:00
                do: [ { set: { a: 1 } } ]
            """
        func engine() throws -> Engine {
            let engine = Engine(ruleSet: try load(daily))
            for user in ["ann", "bo", "cy"] { _ = engine.process(identify(user, at: "2026-03-01T08:00:00Z", [])) }
            return engine
        }
        let whole = try engine().advance(to: t("2026-03-31T00:00:00Z")).actions.map(\.id)
        var outcomes: [[String]] = []
        let stepped = try engine()
        stepped.advance(to: t("2026-03-31T00:00:00Z")) { outcomes.append($0.actions.map(\.id)) }
        // 30 evenings (March 1 to 30), each an 18:00 for all three (one zone).
        #expect(whole.count == 3 * 30)
        #expect(outcomes.flatMap { $0 } == whole)
        #expect(outcomes.map(\.count) == Array(repeating: 3, count: 30))
        #expect(stepped.clock == t("2026-03-31T00:00:00Z"))
    }

    /// The condition is read at each run, on the user's state then.
    @Test func conditionsAreReadAtEachRun() throws {
        let events: [Event] = [
            identify("ann", at: "2026-03-01T08:00:00Z", [("email", .string("ann@example.com"))]),
            identify("ann", at: "2026-03-03T08:00:00Z", [("plan", .string("pro"))]),
        ]
        let out = try run(Self.weekly, events, until: "2026-03-17T00:00:00Z")
        #expect(out.map { Timestamp(milliseconds: $0.time).description } == ["2026-03-02T10:00:00Z"])
    }

    /// A one-off runs once for the users known before it, not for those who come after.
    @Test func aOneOffRunsOnceForTheUsersKnownBefore() throws {
        let events: [Event] = [
            track("Opened", "ann", at: "2026-03-01T08:00:00Z"), track("Opened", "ann", at: "2026-03-04T08:00:00Z"),
            track("Opened", "bo", at: "2026-03-05T09:00:00Z"), track("Opened", "ann", at: "2026-03-05T09:00:00Z"),
            track("Opened", "cy", at: "2026-03-06T08:00:00Z"),
        ]
        let out = try run(Self.once, events, until: "2026-04-01T00:00:00Z")
        #expect(out.map(\.userID) == ["ann", "bo"])
        #expect(out.allSatisfy { $0.time == t("2026-03-05T09:00:00Z") })
    }

    /// Every user's timer is one pending action, set again after each run: the queue does not grow with events.
    @Test func oneTimerPerUser() throws {
        let engine = Engine(ruleSet: try load(Self.weekly))
        for i in 0..<500 {
            engine.process(
                track("Opened", "ann", at: Timestamp(milliseconds: t("2026-03-01T00:00:00Z") + Int64(i) * 60_000).description))
        }
        #expect(engine.pendingCount == 1)
        #expect(engine.timerCount == 1)
    }

    @Test func mistakes() {
        func errors(_ replacing: String, _ with: String) -> [String] {
            let text: String = Self.weekly.replacingOccurrences(of: replacing, with: with)
            return diagnostics(text).filter { $0.severity == .error }.map(\.message)
        }
        #expect(
            errors("every monday 10:00", "mondays at 10") == [
                "'schedule' expects a time like 2026-03-05T10:00:00Z or every monday 10:00, found 'mondays at 10'"
            ])
        #expect(
            errors("    if:", "    where: 'true'\n    if:") == [
                "'where' does not go with `schedule`: it runs at its time, not on an event"
            ])
        // A misspelt day (and an `at`) gets the schedule it probably meant; what no day is near gets the form.
        func suggestion(_ schedule: String) -> String? {
            diagnostics(Self.weekly.replacingOccurrences(of: "every monday 10:00", with: schedule)).first?.suggestion
        }
        #expect(suggestion("every fryday at 10:00") == "did you mean 'every friday 10:00'?")
        #expect(suggestion("every weekdya 09:30") == "did you mean 'every weekday 09:30'?")
        #expect(suggestion("every someday 10:00")?.hasPrefix("write an RFC 3339 instant") == true)
        #expect(suggestion("every friday 25:00")?.hasPrefix("write an RFC 3339 instant") == true)
        #expect(AtSpec.nearest("tusday 10:00", keeping: ["next"]) == "tuesday 10:00")
    }
}
