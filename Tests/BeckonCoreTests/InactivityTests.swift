import Foundation
import Testing

@testable import BeckonCore

/// `inactive_for`: a rule that fires once when a user has had no activity for that long.
struct InactivityTests {
    static let rules = """
        version: 1
        campaign: winback
        rules:
          - id: miss_you
            inactive_for: 7d
            if: default(user.plan, "") != "pro"
            limit: { per_user: 3 }
            do:
              - push: { body: "We miss you" }
        """

    func day(_ d: Int, _ hour: Int = 10) -> String {
        let t = Timestamp(milliseconds: t("2026-03-01T00:00:00Z") + Int64(d) * 86_400_000 + Int64(hour) * 3_600_000)
        return t.description
    }

    /// The fire times (as days after 2026-03-01) of a user's stream, with time run on to day 60.
    func fires(_ events: [Event], rules: String = InactivityTests.rules) throws -> [Double] {
        let engine = Engine(ruleSet: try load(rules))
        var out = events.flatMap { engine.process($0).actions }
        out += engine.advance(to: t(day(60))).actions
        return out.filter { $0.kind == "push" }.map { Double($0.time - t("2026-03-01T00:00:00Z")) / 86_400_000 }
    }

    @Test func firesOnceAWeekAfterTheLastActivity() throws {
        #expect(try fires([track("Opened", at: day(0)), track("Opened", at: day(2))]) == [9 + 10.0 / 24])
    }

    @Test func activityBeforeTheWeekStartsTheCountAgain() throws {
        var events: [Event] = [0, 6, 12].map { track("Opened", at: day($0)) }
        events.append(screen("Home", at: day(13)))
        #expect(try fires(events) == [20 + 10.0 / 24])
    }

    /// Once per spell of inactivity: a return starts a new one (here the return is 8 days later: the first spell's
    /// fire comes at day 7, before the return is processed).
    @Test func eachSpellFiresOnce() throws {
        let expected: [Double] = [7 + 10.0 / 24, 15 + 10.0 / 24]
        #expect(try fires([track("Opened", at: day(0)), track("Opened", at: day(8))]) == expected)
    }

    /// An identify is not activity; the condition is read when the week is over, on the user's state then.
    @Test func identifyIsNotActivityAndConditionsAreReadAtTheEnd() throws {
        #expect(try fires([track("Opened", at: day(0)), identify(at: day(5), [("name", .string("Ann"))])]) == [7 + 10.0 / 24])
        #expect(try fires([track("Opened", at: day(0)), identify(at: day(5), [("plan", .string("pro"))])]).isEmpty)
    }

    /// Other users' events move the stream's clock: the week ends without the user coming back.
    @Test func theStreamClockBringsItDue() throws {
        let engine = Engine(ruleSet: try load(Self.rules))
        engine.process(track("Opened", "ann", at: day(0)))
        engine.process(track("Opened", "cy", at: day(4)))
        let out = engine.process(track("Opened", "bob", at: day(7, 11))).actions
        #expect(out.map(\.userID) == ["ann"])
    }

    /// Every event moves the one timer; the queue keeps one entry per user, not one per event.
    @Test func theQueueDoesNotGrowWithEvents() throws {
        let engine = Engine(ruleSet: try load(Self.rules))
        for i in 0..<2_000 {
            engine.process(track("Opened", at: Timestamp(milliseconds: t(day(0)) + Int64(i) * 60_000).description))
        }
        #expect(engine.timerCount == 1)
        #expect(engine.pendingCount == 1)
        let fired = engine.advance(to: t(day(30))).actions
        #expect(fired.count == 1)
        // Triggered is counted when the time comes (not per event that moved it).
        #expect(engine.stats.triggered == [1])
        #expect(engine.stats.fired == [1])
        #expect(fired.first?.time == t(day(0)) + 1_999 * 60_000 + 7 * 86_400_000)
    }

    @Test func mistakes() {
        func errors(_ extra: String) -> [String] {
            diagnostics(Self.rules.replacingOccurrences(of: "    inactive_for: 7d\n", with: "    inactive_for: 7d\n" + extra))
                .filter { $0.severity == .error }.map(\.message)
        }
        #expect(
            errors("    where: 'true'\n") == [
                "'where' does not go with `inactive_for`: it fires when nothing has happened, at the end of the wait"
            ])
        #expect(errors("    wait: 1h\n").count == 1)
        #expect(errors("    on: Opened\n") == ["rule 'miss_you' has more than one kind of trigger"])
    }
}
