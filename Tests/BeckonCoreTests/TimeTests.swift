import BeckonCore
import PropertyBased
import Testing

/// Runs events, then lets time pass to `until`, and returns every fired action in order.
func firedWithTime(_ rs: CompiledRuleSet, _ events: [Event], until: String? = nil) -> [FiredAction] {
    let engine = Engine(ruleSet: rs)
    var out = events.flatMap { engine.process($0).actions }
    if let until { out += engine.advance(to: t(until)).actions }
    return out
}

func rule(_ body: String, settings: String? = nil) throws -> CompiledRuleSet {
    try load(
        "version: 1\nruleset: r\nrules:\n  - id: x\n" + body.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n")
            + "\n", settings: settings)
}

struct HistoryFunctionTests {
    let berlin = [("timezone", Value.string("Europe/Berlin"))]

    @Test func sumOfAProperty() throws {
        let rs = try rule(
            "on: Order Completed\nif: sum(\"Order Completed\", \"total\", \"30d\") >= 100\ndo: [ { deep_link: vip } ]")
        let orders = [
            ("2026-01-01T10:00:00Z", 40.0), ("2026-01-10T10:00:00Z", 50.5), ("2026-01-20T10:00:00Z", 10.0),
            ("2026-02-25T10:00:00Z", 99.0),
        ]
        let events = orders.map { track("Order Completed", at: $0.0, props: [("total", .double($0.1))]) }
        // 40 + 50.5 + 10 reaches 100 on Jan 20; on Feb 25 only that order is in the 30 days.
        #expect(fired(rs, events).map(\.time) == [t("2026-01-20T10:00:00Z")])
    }

    @Test func activeDaysCountsDistinctLocalDays() throws {
        let rs = try rule("on: Opened\nif: active_days(\"Opened\", \"7d\") >= 3\ndo: [ { deep_link: x } ]")
        // 23:30 UTC on Jan 1 is Jan 2 in Berlin: four opens on only two Berlin days.
        let events = [
            identify(at: "2026-01-01T00:00:00Z", berlin), track("Opened", at: "2026-01-01T10:00:00Z"),
            track("Opened", at: "2026-01-01T23:30:00Z"), track("Opened", at: "2026-01-02T10:00:00Z"),
            track("Opened", at: "2026-01-02T12:00:00Z"),
        ]
        #expect(fired(rs, events).isEmpty)
    }

    @Test func activeDaysFiresOnTheThirdDay() throws {
        let rs = try rule("on: Opened\nif: active_days(\"*\", \"7d\") == 3\ndo: [ { deep_link: x } ]")
        let events = [
            identify(at: "2026-01-01T00:00:00Z", berlin), track("Opened", at: "2026-01-01T10:00:00Z"),
            track("Saved", at: "2026-01-01T23:30:00Z"), track("Opened", at: "2026-01-02T10:00:00Z"),
            track("Opened", at: "2026-01-03T10:00:00Z"),
        ]
        // Jan 1 (Berlin), Jan 2 (the 23:30 UTC save and the 10:00 open), Jan 3.
        #expect(fired(rs, events).map(\.time) == [t("2026-01-03T10:00:00Z")])
    }

    @Test func averagePerDayAndPerInterval() throws {
        let rs = try rule(
            "on: Opened\nif: average(\"Opened\", \"7d\") >= 1.0 && average(\"Opened\", \"2h\", \"1h\") >= 1.0\ndo: [ { deep_link: x } ]"
        )
        var events = (0..<6).map { track("Opened", at: "2026-01-0\($0 + 1)T09:00:00Z") }
        events.append(track("Opened", at: "2026-01-07T09:30:00Z"))
        events.append(track("Opened", at: "2026-01-07T10:00:00Z"))
        // Opens per day over 7 days stay ≥ 1; the last two hours hold 1 open (0.5 an hour) at 09:30 and 2 at 10:00.
        #expect(fired(rs, events).map(\.time) == [t("2026-01-07T10:00:00Z")])
    }

    @Test(arguments: [
        // (window, event times, the evaluation event, expected count). In Berlin: 23:30 UTC on the 4th is the 5th;
        // 22:30 UTC is still the 4th; Sunday the 1st is last week; 23:00 UTC on Feb 28 is 00:00 on Mar 1.
        ("calendar day", ["2026-03-04T23:30:00Z", "2026-03-05T08:00:00Z"], "2026-03-05T12:00:00Z", 2),
        ("calendar day", ["2026-03-04T22:30:00Z", "2026-03-05T08:00:00Z"], "2026-03-05T12:00:00Z", 1),
        ("calendar week", ["2026-03-01T12:00:00Z", "2026-03-02T08:00:00Z"], "2026-03-05T12:00:00Z", 1),
        ("calendar month", ["2026-02-28T22:59:00Z", "2026-02-28T23:00:00Z"], "2026-03-05T12:00:00Z", 1),
        ("3 calendar days", ["2026-03-02T22:59:00Z", "2026-03-02T23:00:00Z"], "2026-03-05T12:00:00Z", 1),
        ("2 calendar months", ["2026-01-31T22:00:00Z", "2026-02-01T12:00:00Z"], "2026-03-05T12:00:00Z", 1),
    ])
    func calendarWindowsInTheUsersZone(_ window: String, _ times: [String], _ at: String, _ expected: Int) throws {
        let rs = try rule("on: Check\nif: count(\"E\", \"\(window)\") == \(expected)\ndo: [ { deep_link: x } ]")
        let events = [identify(at: "2026-01-01T00:00:00Z", berlin)] + times.map { track("E", at: $0) } + [track("Check", at: at)]
        #expect(fired(rs, events).count == 1)
        // And one more event in the window breaks the equality: the count is exact, not approximate.
        let more =
            [identify(at: "2026-01-01T00:00:00Z", berlin)] + times.map { track("E", at: $0) } + [
                track("E", at: at), track("Check", at: at),
            ]
        #expect(fired(rs, more).isEmpty)
    }

    @Test func calendarDayWithoutAZoneIsUTC() throws {
        let rs = try rule("on: Check\nif: count(\"E\", \"calendar day\") == 1\ndo: [ { deep_link: x } ]")
        let events = [
            track("E", at: "2026-03-04T23:30:00Z"), track("E", at: "2026-03-05T00:30:00Z"),
            track("Check", at: "2026-03-05T12:00:00Z"),
        ]
        #expect(fired(rs, events).count == 1)
    }

    /// Berlin springs forward on 2026-03-29 (a 23-hour day) and falls back on 2026-10-25 (25 hours).
    @Test(arguments: [
        (["2026-03-28T23:00:00Z", "2026-03-29T21:59:00Z"], "2026-03-29T21:59:30Z", 2),  // 00:00 and 23:59 local, 23 h apart
        (["2026-03-28T22:59:00Z"], "2026-03-29T21:59:30Z", 0),  // 23:59 on the 28th
        (["2026-10-24T22:00:00Z", "2026-10-25T22:59:00Z"], "2026-10-25T22:59:30Z", 2),  // 00:00 and 23:59 local, 25 h apart
        (["2026-10-24T21:59:00Z"], "2026-10-25T22:59:30Z", 0),
    ])
    func calendarDayAcrossDST(_ times: [String], _ at: String, _ expected: Int) throws {
        let rs = try rule("on: Check\nif: count(\"E\", \"calendar day\") == \(expected)\ndo: [ { deep_link: x } ]")
        let events = [identify(at: "2026-01-01T00:00:00Z", berlin)] + times.map { track("E", at: $0) } + [track("Check", at: at)]
        #expect(fired(rs, events).count == 1)
    }

    @Test func invalidWindowsAreRejectedAtLoadTime() {
        #expect(diagnostics(campaign(if: "sum(\"O\", \"total\", \"lifetime\") > 1")).contains { $0.id == .invalidWindow })
        #expect(diagnostics(campaign(if: "count(\"O\", \"5 fortnights\") > 1")).contains { $0.id == .invalidWindow })
        #expect(diagnostics(campaign(if: "average(\"O\", \"calendar week\", \"1d\") > 1")).contains { $0.id == .invalidWindow })
    }
}

struct DelayTests {
    @Test func waitFiresExactlyThenAndOnlyOnce() throws {
        let rs = try rule("on: Signed In\nwait: 24h\ndo: [ { deep_link: x } ]")
        let engine = Engine(ruleSet: rs)
        #expect(engine.process(track("Signed In", at: "2026-03-01T10:00:00Z")).actions.isEmpty)
        #expect(engine.advance(to: t("2026-03-02T09:59:59.999Z")).actions.isEmpty)
        let due = engine.advance(to: t("2026-03-02T10:00:00Z")).actions
        #expect(due.map(\.time) == [t("2026-03-02T10:00:00Z")])
        #expect(engine.advance(to: t("2026-03-09T10:00:00Z")).actions.isEmpty)
        #expect(engine.pendingCount == 0)
    }

    @Test func anEventAfterTheDueTimeFiresItFirst() throws {
        let rs = try rule("on: Signed In\nwait: 1h\ndo: [ { deep_link: x } ]")
        let out = fired(rs, [track("Signed In", at: "2026-03-01T10:00:00Z"), track("Other", "u2", at: "2026-03-01T12:00:00Z")])
        #expect(out.map(\.time) == [t("2026-03-01T11:00:00Z")])
    }

    @Test func atTheNextLocalTime() throws {
        let rs = try rule("on: Signed In\nat: \"10:00\"\ndo: [ { deep_link: x } ]")
        let events = [
            identify(at: "2026-03-01T00:00:00Z", [("timezone", "America/New_York")]),
            track("Signed In", at: "2026-03-03T16:00:00Z"),
        ]  // 11:00 in New York: tomorrow at 10:00
        #expect(firedWithTime(rs, events, until: "2026-03-10T00:00:00Z").map(\.time) == [t("2026-03-04T15:00:00Z")])
    }

    @Test func waitThenAtAcrossDST() throws {
        // Berlin: on 2026-03-28 10:00 is 09:00 UTC; after the switch, 10:00 is 08:00 UTC.
        let rs = try rule("on: Signed In\nwait: 1d\nat: \"10:00\"\ndo: [ { deep_link: x } ]")
        let events = [
            identify(at: "2026-03-01T00:00:00Z", [("timezone", "Europe/Berlin")]),
            track("Signed In", at: "2026-03-28T12:00:00Z"),
        ]
        #expect(firedWithTime(rs, events, until: "2026-04-05T00:00:00Z").map(\.time) == [t("2026-03-30T08:00:00Z")])
    }

    @Test func nextWeekday() throws {
        let rs = try rule("on: Signed In\nat: \"next weekday 09:30\"\ndo: [ { deep_link: x } ]")
        // Friday evening UTC → Monday 09:30 UTC.
        let events = [track("Signed In", at: "2026-03-06T18:00:00Z")]
        #expect(firedWithTime(rs, events, until: "2026-03-20T00:00:00Z").map(\.time) == [t("2026-03-09T09:30:00Z")])
    }

    @Test func retriggerPolicies() throws {
        let times = ["2026-03-01T10:00:00Z", "2026-03-01T10:30:00Z"]
        func run(_ policy: String) throws -> [Int64] {
            let rs = try rule("on: A\nwait: 1h\nretrigger: \(policy)\ndo: [ { deep_link: x } ]")
            return firedWithTime(rs, times.map { track("A", at: $0) }, until: "2026-03-02T00:00:00Z").map(\.time)
        }
        #expect(try run("keep") == [t("2026-03-01T11:00:00Z")])
        #expect(try run("restart") == [t("2026-03-01T11:30:00Z")])
        #expect(try run("add") == [t("2026-03-01T11:00:00Z"), t("2026-03-01T11:30:00Z")])
    }

    @Test func recheckReEvaluatesTheCondition() throws {
        let events = [
            identify(at: "2026-03-01T09:00:00Z", [("plan", "free")]), track("A", at: "2026-03-01T10:00:00Z"),
            identify(at: "2026-03-01T10:30:00Z", [("plan", "pro")]),
        ]
        let without = try rule("on: A\nwait: 1h\nif: user.plan == \"free\"\ndo: [ { deep_link: x } ]")
        let with = try rule("on: A\nwait: 1h\nrecheck: true\nif: user.plan == \"free\"\ndo: [ { deep_link: x } ]")
        #expect(firedWithTime(without, events, until: "2026-03-02T00:00:00Z").count == 1)
        #expect(firedWithTime(with, events, until: "2026-03-02T00:00:00Z").isEmpty)
    }

    @Test func limitsHoldWhenTheActionComesDue() throws {
        let rs = try rule("on: A\nwait: 1h\nretrigger: add\nlimit: { per_user: 1 }\ndo: [ { deep_link: x } ]")
        let out = firedWithTime(
            rs, [track("A", at: "2026-03-01T10:00:00Z"), track("A", at: "2026-03-01T10:10:00Z")], until: "2026-03-02T00:00:00Z")
        #expect(out.map(\.time) == [t("2026-03-01T11:00:00Z")])
    }

    @Test func actionsSeeTheTriggeringEvent() throws {
        let rs = try rule(
            "on: A\nwait: 1h\ndo: [ { screen: { id: s, params: { ref: \"${event.properties.ref}\", at: \"${now}\" } } } ]")
        let a = try #require(
            firedWithTime(rs, [track("A", at: "2026-03-01T10:00:00Z", props: [("ref", "r1")])], until: "2026-03-02T00:00:00Z")
                .first)
        #expect(a.json.contains(#""params":{"ref":"r1","at":"2026-03-01T11:00:00Z"}"#))
    }
}

struct AbsenceTests {
    let yaml =
        "on: Signed In\nwait: 24h\nunless: { event: Stamp Claimed, where: 'event.properties.stamp_id == \"welcome\"' }\ndo: [ { deep_link: remind } ]"

    @Test func remindsWhenNothingHappened() throws {
        let out = firedWithTime(try rule(yaml), [track("Signed In", at: "2026-03-01T10:00:00Z")], until: "2026-03-05T00:00:00Z")
        #expect(out.map(\.time) == [t("2026-03-02T10:00:00Z")])
    }

    @Test func theExceptionEventCancels() throws {
        let events = [
            track("Signed In", at: "2026-03-01T10:00:00Z"),
            track("Stamp Claimed", at: "2026-03-02T09:59:59Z", props: [("stamp_id", "welcome")]),
        ]
        #expect(firedWithTime(try rule(yaml), events, until: "2026-03-05T00:00:00Z").isEmpty)
    }

    @Test func anExceptionThatDoesNotMatchItsConditionDoesNotCancel() throws {
        let events = [
            track("Signed In", at: "2026-03-01T10:00:00Z"),
            track("Stamp Claimed", at: "2026-03-01T12:00:00Z", props: [("stamp_id", "paris")]),
        ]
        #expect(firedWithTime(try rule(yaml), events, until: "2026-03-05T00:00:00Z").count == 1)
    }

    @Test func atExactlyTheDeadlineTheTimerHasAlreadyFired() throws {
        let events = [
            track("Signed In", at: "2026-03-01T10:00:00Z"),
            track("Stamp Claimed", at: "2026-03-02T10:00:00Z", props: [("stamp_id", "welcome")]),
        ]
        #expect(firedWithTime(try rule(yaml), events).map(\.time) == [t("2026-03-02T10:00:00Z")])
    }

    @Test func unlessNeedsADelay() {
        #expect(diagnostics(campaign(extra: "    unless: Claimed\n")).contains { $0.id == .invalidTrigger })
    }

    /// Against a plain model: the timer fires exactly once, exactly 6 hours after the first trigger that is not
    /// cancelled, never late or twice.
    @Test func timersMatchAModel() async throws {
        let rs = try rule("on: A\nwait: 6h\nunless: B\ndo: [ { deep_link: x } ]")
        let steps = zip(Gen.int(in: 0...4 * 3600), Gen.bool()).array(of: 1...40)
        await propertyCheck(count: 200, input: steps) { steps in
            var at = t("2026-03-01T00:00:00Z")
            var events: [Event] = []
            for (gap, isA) in steps {
                at += Int64(gap) * 1000
                events.append(track(isA ? "A" : "B", at: Timestamp(milliseconds: at).description))
            }
            // The model: one pending timer at most (retrigger keep).
            var expected: [Int64] = []
            var pending: Int64?
            for e in events {
                if let p = pending, p <= e.timestamp {
                    expected.append(p)
                    pending = nil
                }
                if e.name == "B" { pending = nil } else if pending == nil { pending = e.timestamp + 6 * 3_600_000 }
            }
            if let p = pending { expected.append(p) }
            let got = firedWithTime(rs, events, until: "2026-04-01T00:00:00Z").map(\.time)
            #expect(got == expected)
        }
    }
}

struct SequenceTests {
    let yaml = "sequence: [Added To Cart, Checkout Started, Order Completed]\nwithin: 1h\ndo: [ { deep_link: x } ]"

    @Test func inOrderWithinTheWindow() throws {
        let events = [
            track("Added To Cart", at: "2026-03-01T10:00:00Z"), track("Viewed", at: "2026-03-01T10:05:00Z"),
            track("Checkout Started", at: "2026-03-01T10:20:00Z"), track("Order Completed", at: "2026-03-01T10:59:59Z"),
        ]
        #expect(fired(try rule(yaml), events).map(\.time) == [t("2026-03-01T10:59:59Z")])
    }

    @Test func tooSlow() throws {
        let events = [
            track("Added To Cart", at: "2026-03-01T10:00:00Z"), track("Checkout Started", at: "2026-03-01T10:20:00Z"),
            track("Order Completed", at: "2026-03-01T11:00:00Z"),
        ]
        #expect(fired(try rule(yaml), events).isEmpty)
    }

    @Test func wrongOrder() throws {
        let events = [
            track("Checkout Started", at: "2026-03-01T10:00:00Z"), track("Added To Cart", at: "2026-03-01T10:01:00Z"),
            track("Order Completed", at: "2026-03-01T10:02:00Z"),
        ]
        #expect(fired(try rule(yaml), events).isEmpty)
    }

    @Test func aLaterStartStillCounts() throws {
        // The first cart is too old by the time of the order, but the second one is not.
        let events = [
            track("Added To Cart", at: "2026-03-01T09:00:00Z"), track("Added To Cart", at: "2026-03-01T09:50:00Z"),
            track("Checkout Started", at: "2026-03-01T10:00:00Z"), track("Order Completed", at: "2026-03-01T10:30:00Z"),
        ]
        #expect(fired(try rule(yaml), events).count == 1)
    }

    @Test func aMatchIsConsumed() throws {
        let events = [
            track("Added To Cart", at: "2026-03-01T10:00:00Z"), track("Checkout Started", at: "2026-03-01T10:10:00Z"),
            track("Order Completed", at: "2026-03-01T10:20:00Z"), track("Order Completed", at: "2026-03-01T10:25:00Z"),
        ]
        #expect(fired(try rule(yaml), events).count == 1)
    }

    @Test func correlatedOnAProperty() throws {
        let rs = try rule("sequence: [Added To Cart, Order Completed]\nwithin: 1h\ncorrelate: cart_id\ndo: [ { deep_link: x } ]")
        let events = [
            track("Added To Cart", at: "2026-03-01T10:00:00Z", props: [("cart_id", "a")]),
            track("Order Completed", at: "2026-03-01T10:10:00Z", props: [("cart_id", "b")]),
            track("Order Completed", at: "2026-03-01T10:20:00Z", props: [("cart_id", "a")]),
        ]
        #expect(fired(rs, events).map(\.time) == [t("2026-03-01T10:20:00Z")])
    }

    @Test func stepConditions() throws {
        let rs = try rule(
            "sequence: [A, { event: B, where: 'event.properties.ok == true' }]\nwithin: 1h\ndo: [ { deep_link: x } ]")
        let events = [
            track("A", at: "2026-03-01T10:00:00Z"), track("B", at: "2026-03-01T10:10:00Z", props: [("ok", false)]),
            track("B", at: "2026-03-01T10:20:00Z", props: [("ok", true)]),
        ]
        #expect(fired(rs, events).map(\.time) == [t("2026-03-01T10:20:00Z")])
    }

    @Test func sequencesNeedWithin() {
        #expect(diagnostics(campaign(on: "sequence: [A, B]")).contains { $0.id == .missingKey })
        #expect(diagnostics(campaign(on: "sequence: [A]\n    within: 1h")).contains { $0.id == .invalidTrigger })
    }
}

struct QuietHoursTests {
    func run(_ then: String, at time: String) throws -> [Int64] {
        let rs = try rule("on: A\nquiet_hours: { from: \"22:00\", to: \"08:00\", then: \(then) }\ndo: [ { deep_link: x } ]")
        let events = [identify(at: "2026-03-01T00:00:00Z", [("timezone", "Europe/Berlin")]), track("A", at: time)]
        return firedWithTime(rs, events, until: "2026-03-05T00:00:00Z").map(\.time)
    }

    @Test func outsideQuietHoursItIsImmediate() throws {
        #expect(try run("hold", at: "2026-03-02T12:00:00Z") == [t("2026-03-02T12:00:00Z")])
    }

    @Test func heldUntilTheWindowEnds() throws {
        // 22:30 in Berlin → 08:00 Berlin (07:00 UTC) the next morning.
        #expect(try run("hold", at: "2026-03-02T21:30:00Z") == [t("2026-03-03T07:00:00Z")])
        // 07:59 Berlin is still quiet; 08:00 is not.
        #expect(try run("hold", at: "2026-03-03T06:59:00Z") == [t("2026-03-03T07:00:00Z")])
        #expect(try run("hold", at: "2026-03-03T07:00:00Z") == [t("2026-03-03T07:00:00Z")])
    }

    @Test func dropped() throws {
        #expect(try run("drop", at: "2026-03-02T21:30:00Z").isEmpty)
    }

    @Test func aDelayedActionDueInQuietHoursIsHeldToo() throws {
        let rs = try rule("on: A\nwait: 12h\nquiet_hours: { from: \"22:00\", to: \"08:00\" }\ndo: [ { deep_link: x } ]")
        let events = [
            identify(at: "2026-03-01T00:00:00Z", [("timezone", "Europe/Berlin")]), track("A", at: "2026-03-02T12:00:00Z"),
        ]
        #expect(firedWithTime(rs, events, until: "2026-03-05T00:00:00Z").map(\.time) == [t("2026-03-03T07:00:00Z")])
    }
}

struct ScheduleTests {
    @Test func startAndEndInAGivenZone() throws {
        let rs = try load(
            """
            version: 1
            campaign: c
            timezone: Europe/Berlin
            start: 2026-03-01T09:00:00
            end: 2026-03-02T00:00:00
            rules:
              - id: r
                on: A
                do: [ { deep_link: x } ]
            """)
        let times = ["2026-03-01T07:59:59Z", "2026-03-01T08:00:00Z", "2026-03-01T22:59:59Z", "2026-03-01T23:00:00Z"]
        #expect(fired(rs, times.enumerated().map { track("A", "u\($0.offset)", at: $0.element) }).map(\.userID) == ["u1", "u2"])
    }

    @Test func startInEachUsersZone() throws {
        let rs = try load(
            """
            version: 1
            campaign: c
            timezone: user
            start: 2026-03-01T09:00:00
            rules:
              - id: r
                on: A
                do: [ { deep_link: x } ]
            """)
        let events = [
            identify("tokyo", at: "2026-02-01T00:00:00Z", [("timezone", "Asia/Tokyo")]),
            identify("ny", at: "2026-02-01T00:00:00Z", [("timezone", "America/New_York")]),
            track("A", "tokyo", at: "2026-03-01T00:00:00Z"),  // 09:00 in Tokyo
            track("A", "ny", at: "2026-03-01T00:00:00Z"),
        ]  // 19:00 the day before in New York
        #expect(fired(rs, events).map(\.userID) == ["tokyo"])
    }
}

struct RepromptTests {
    let yaml = """
        on: [Application Opened, Signed In]
        reprompt: { after: Tracking Permission Answered, when: { status: denied }, wait: 14d, times: 2 }
        do: [ { screen: tracking_onboarding } ]
        """

    func answer(_ status: String, at time: String) -> Event {
        track("Tracking Permission Answered", at: time, props: [("status", .string(status))])
    }

    @Test func asksAgainAfterTheWaitAtMostTimes() throws {
        let events = [
            answer("denied", at: "2026-03-01T10:00:00Z"),
            track("Application Opened", at: "2026-03-10T10:00:00Z"),  // 9 days: too early
            track("Application Opened", at: "2026-03-15T10:00:00Z"),  // 14 days: asks
            answer("denied", at: "2026-03-15T10:01:00Z"),
            track("Signed In", at: "2026-03-20T10:00:00Z"),  // 5 days after the new denial: no
            track("Application Opened", at: "2026-03-29T10:01:00Z"),  // 14 days: asks (2nd)
            answer("denied", at: "2026-03-29T10:02:00Z"),
            track("Application Opened", at: "2026-04-30T10:00:00Z"),
        ]  // times used up
        #expect(fired(try rule(yaml), events).map(\.time) == [t("2026-03-15T10:00:00Z"), t("2026-03-29T10:01:00Z")])
    }

    @Test func notAfterConsent() throws {
        let events = [
            answer("denied", at: "2026-03-01T10:00:00Z"), answer("authorized", at: "2026-03-02T10:00:00Z"),
            track("Application Opened", at: "2026-04-01T10:00:00Z"),
        ]
        let v = verdicts(try rule(yaml), events)
        #expect(v.last == ["x:reprompt"])
    }
}

/// RFC 3339 text of timestamps: whole seconds, and fractions without trailing zeros, in place.
struct TimestampTextTests {
    @Test(arguments: [
        (Int64(1_780_000_000_000), "2026-05-28T20:26:40Z"), (1_780_000_000_123, "2026-05-28T20:26:40.123Z"),
        (1_780_000_000_120, "2026-05-28T20:26:40.12Z"), (1_780_000_000_100, "2026-05-28T20:26:40.1Z"),
        (1_780_000_000_001, "2026-05-28T20:26:40.001Z"), (0, "1970-01-01T00:00:00Z"), (-1, "1969-12-31T23:59:59.999Z"),
    ])
    func millisecondsAreWrittenWithoutTrailingZeros(_ ms: Int64, _ text: String) {
        #expect(Timestamp(milliseconds: ms).description == text)
        #expect(Timestamp.parse(text)?.milliseconds == ms)
    }

    /// A leap second is read as the last second of its minute, fraction kept (docs/events.md); 61 is no second.
    @Test func aLeapSecondIsTheLastSecondOfItsMinute() {
        #expect(Timestamp.parse("2016-12-31T23:59:60Z")?.description == "2016-12-31T23:59:59Z")
        #expect(Timestamp.parse("2016-12-31T23:59:60.5Z")?.description == "2016-12-31T23:59:59.5Z")
        #expect(Timestamp.parse("2016-12-31T18:59:60-05:00")?.description == "2016-12-31T23:59:59Z")
        #expect(Timestamp.parse("2016-12-31T23:59:61Z") == nil)
    }

    @Test func nanosecondsKeepEveryDigitThatIsNotATrailingZero() throws {
        #expect(try Timestamp(seconds: 0, nanos: 123_456_789).description == "1970-01-01T00:00:00.123456789Z")
        #expect(try Timestamp(seconds: 0, nanos: 5).description == "1970-01-01T00:00:00.000000005Z")
        #expect(try Timestamp(seconds: 0, nanos: 500_000_000).description == "1970-01-01T00:00:00.5Z")
    }
}

/// A session ends by its timeout with or without an event (docs/time.md, "Sessions"): a delayed action due after it
/// fires outside any session, so `per_session` caps hold what one visit shows, not what reaches a user who is away.
struct SessionTimeoutTests {
    static let rules = """
        version: 1
        campaign: app
        rules:
          - id: banner
            on: App Opened
            do: [ { message: { surface: home, title: Hi } } ]
          - id: follow_up
            on: App Opened
            wait: 5m
            do: [ { message: { surface: home, title: Still here? } } ]
          - id: welcome_push
            on: App Opened
            wait: 1d
            limit: { per_user: 1 }
            do: [ { push: { body: Welcome } } ]
          - id: win_back
            on: App Opened
            wait: 14d
            limit: { per_session: 1 }
            do: [ { push: { body: We miss you } } ]
        """
    static let settings = "version: 1\nsettings: s\nsessions: { timeout: 30m }\nglobal_limit: { per_session: 1 }\n"

    @Test func delayedActionsAfterTheTimeoutAreOutsideTheSession() throws {
        let rs = try load(Self.rules, settings: Self.settings)
        let engine = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        var seen: [String] = []
        func note(_ o: EventOutcome) {
            seen += o.verdicts.map { "\($0.qualifiedID.split(separator: "/")[1]):\($0.verdict.code)" }
        }
        note(engine.process(track("App Opened", at: "2026-03-01T09:00:00Z")))
        note(engine.advance(to: t("2026-03-16T09:00:00Z")))
        // The banner uses the visit's one message; the 5-minute follow-up is in the same session and blocked; the
        // day-later push and the 14-day win-back come while the user is away, each outside any session.
        #expect(
            seen == [
                "follow_up:scheduled", "welcome_push:scheduled", "win_back:scheduled", "banner:fired",
                "follow_up:global_limit:per_session", "welcome_push:fired", "win_back:fired",
            ], "\(seen)")
        // The next event begins a new session: the banner may fire again.
        seen = []
        note(engine.process(track("App Opened", at: "2026-03-16T18:00:00Z")))
        #expect(seen.contains("banner:fired"), "\(seen)")
    }
}
