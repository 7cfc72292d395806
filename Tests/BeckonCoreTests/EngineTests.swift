import BeckonCore
import Foundation
import Testing

struct TriggerTests {
    @Test func trackEventFiresAndOtherEventsDoNot() throws {
        let rs = try load(campaign(on: "on: Opened"))
        #expect(fired(rs, [track("Opened", at: "2026-01-05T09:00:00Z")]).count == 1)
        #expect(fired(rs, [track("Closed", at: "2026-01-05T09:00:00Z")]).isEmpty)
    }

    @Test func listOfEvents() throws {
        let rs = try load(campaign(on: "on: [Opened, Resumed]"))
        #expect(fired(rs, [track("Resumed", at: "2026-01-05T09:00:00Z")]).count == 1)
        #expect(fired(rs, [track("Paused", at: "2026-01-05T09:00:00Z")]).isEmpty)
    }

    @Test func screenViews() throws {
        let rs = try load(campaign(on: "on_screen: Settings"))
        #expect(fired(rs, [screen("Settings", at: "2026-01-05T09:00:00Z")]).count == 1)
        #expect(fired(rs, [screen("Home", at: "2026-01-05T09:00:00Z")]).isEmpty)
        // A track event of the same name is not a screen view.
        #expect(fired(rs, [track("Settings", at: "2026-01-05T09:00:00Z")]).isEmpty)
    }

    @Test func attributeChangeAnyValue() throws {
        let rs = try load(campaign(on: "on_change: plan"))
        let events = [
            identify(at: "2026-01-05T09:00:00Z", [("plan", "free")]),
            identify(at: "2026-01-05T10:00:00Z", [("plan", "free")]),  // same value: no change
            identify(at: "2026-01-05T11:00:00Z", [("plan", "pro")]),
        ]
        #expect(fired(rs, events).map(\.time) == [t("2026-01-05T09:00:00Z"), t("2026-01-05T11:00:00Z")])
    }

    @Test func attributeChangesTo() throws {
        let rs = try load(campaign(on: "on_change: plan\n    to: [pro, enterprise]"))
        let events = [
            identify(at: "2026-01-05T09:00:00Z", [("plan", "free")]),
            identify(at: "2026-01-05T10:00:00Z", [("plan", "pro")]),
        ]
        #expect(fired(rs, events).map(\.time) == [t("2026-01-05T10:00:00Z")])
    }

    @Test func attributeChangesFromTo() throws {
        let rs = try load(campaign(on: "on_change: plan\n    from: pro\n    to: free"))
        let a = [
            identify(at: "2026-01-05T09:00:00Z", [("plan", "pro")]), identify(at: "2026-01-05T10:00:00Z", [("plan", "free")]),
        ]
        #expect(fired(rs, a).count == 1)
        let b = [
            identify(at: "2026-01-05T09:00:00Z", [("plan", "enterprise")]),
            identify(at: "2026-01-05T10:00:00Z", [("plan", "free")]),
        ]
        #expect(fired(rs, b).isEmpty)
    }

    @Test func firstValueChangesFromNull() throws {
        let rs = try load(campaign(on: "on_change: plan\n    from: null"))
        #expect(fired(rs, [identify(at: "2026-01-05T09:00:00Z", [("plan", "pro")])]).count == 1)
    }

    @Test func setActionTriggersOnChangeRules() throws {
        let rs = try load(
            """
            version: 1
            ruleset: r
            rules:
              - id: upgrade
                on: Purchased
                do:
                  - set: { tier: gold }
              - id: congratulate
                on_change: tier
                to: gold
                do:
                  - message: { surface: launch, title: "You are ${change.to} now (was ${string(change.from)})" }
            """)
        let out = fired(rs, [track("Purchased", at: "2026-01-05T09:00:00Z")])
        #expect(out.map(\.kind) == ["set", "message"])
        #expect(out[1].trigger == "change:tier")
        if case .map(let m)? = out[1]["message"] { #expect(m[string: "title"]?.stringValue == "You are gold now (was null)") }
    }

    @Test func cascadesStopAtTheDepthLimit() throws {
        let rs = try load(
            """
            version: 1
            ruleset: r
            rules:
              - id: start
                on: Go
                do: [ { set: { n: 1 } } ]
              - id: loop
                on_change: n
                do: [ { set: { n: "${user.n + 1}" } } ]
            """)
        let engine = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        let out = engine.process(track("Go", at: "2026-01-05T09:00:00Z"))
        #expect(out.actions.count == 1 + 8)
        #expect(out.verdicts.last?.verdict.code == "cascade_limit")
    }
}

struct ConditionTests {
    @Test func whereTestsTheEvent() throws {
        let rs = try load(campaign(where: "event.properties.source != \"widget\""))
        #expect(fired(rs, [track("Opened", at: "2026-01-05T09:00:00Z", props: [("source", "icon")])]).count == 1)
        #expect(fired(rs, [track("Opened", at: "2026-01-05T09:00:00Z", props: [("source", "widget")])]).isEmpty)
    }

    @Test func ifTestsTheUser() throws {
        let rs = try load(campaign(if: "user.plan == \"pro\""))
        let pro = [identify(at: "2026-01-05T08:00:00Z", [("plan", "pro")]), track("Opened", at: "2026-01-05T09:00:00Z")]
        let free = [identify(at: "2026-01-05T08:00:00Z", [("plan", "free")]), track("Opened", at: "2026-01-05T09:00:00Z")]
        #expect(fired(rs, pro).count == 1)
        #expect(fired(rs, free).isEmpty)
        // A missing attribute makes the condition fail, not crash; explain says why.
        #expect(verdicts(rs, [track("Opened", at: "2026-01-05T09:00:00Z")]) == [["r:if"]])
    }

    /// Why a condition was false is a traced second evaluation; `whyNot: false` (`beckon report`) keeps the verdict
    /// and leaves it out.
    @Test func whyNotIsLeftOutOnlyWhenAsked() throws {
        let rs = try load(campaign(where: "event.properties.source != \"widget\""))
        let event = track("Opened", at: "2026-01-05T09:00:00Z", props: [("source", "widget")])
        func why(_ options: Engine.Options) -> String?? {
            guard let v = Engine(ruleSet: rs, options: options).process(event).verdicts.first?.verdict,
                case .conditionFalse(_, _, let why) = v
            else { return nil }
            return .some(why)
        }
        #expect(why(.init(recordVerdicts: true)) == .some(.some(#"event.properties.source = "widget", needs != "widget""#)))
        #expect(why(.init(recordVerdicts: true, whyNot: false)) == .some(.none))
        #expect(why(.init(explain: true, whyNot: false))??.isEmpty == false, "explain always says why")
    }

    @Test func audienceAppliesToEveryRuleOfTheFile() throws {
        let rs = try load(
            """
            version: 1
            campaign: c
            audience: context.locale in ["en_US", "de"]
            rules:
              - id: a
                on: Opened
                do: [ { deep_link: "app://a" } ]
              - id: b
                on: Opened
                do: [ { deep_link: "app://b" } ]
            """)
        #expect(fired(rs, [track("Opened", at: "2026-01-05T09:00:00Z", context: [("locale", "de")])]).count == 2)
        #expect(fired(rs, [track("Opened", at: "2026-01-05T09:00:00Z", context: [("locale", "fr")])]).isEmpty)
    }

    @Test func contextFallsBackToTheLastSeenValue() throws {
        let rs = try load(campaign(if: "context.locale == \"de\""))
        let events = [
            track("Other", at: "2026-01-05T08:00:00Z", context: [("locale", "de")]), track("Opened", at: "2026-01-05T09:00:00Z"),
        ]
        #expect(fired(rs, events).count == 1)
    }

    @Test func segmentsAreNamedConditions() throws {
        let rs = try load(
            """
            version: 1
            campaign: c
            segments:
              heavy: count("Opened", "7d") >= 3
              heavy_pro: heavy && user.plan == "pro"
            rules:
              - id: r
                on: Opened
                if: heavy_pro
                do: [ { deep_link: "app://x" } ]
            """)
        var events = [identify(at: "2026-01-01T00:00:00Z", [("plan", "pro")])]
        events += (0..<3).map { track("Opened", at: "2026-01-0\($0 + 2)T09:00:00Z") }
        #expect(fired(rs, events).count == 1)  // the third open (the triggering event counts)
    }

    @Test func historyFunctions() throws {
        let rs = try load(
            campaign(
                if: """
                    count("Opened", "lifetime") == 3 && count("Saved", "24h") == 1 && seen("Saved") && !seen("Never") && \
                    days_since("Saved") == 0 && days_since(timestamp("2026-01-01T09:30:00Z")) == 2 && last_seen("Saved") < now && first_seen("Opened") < last_seen("Opened")
                    """))
        let events = [
            track("Opened", at: "2026-01-01T09:00:00Z"), track("Opened", at: "2026-01-02T09:00:00Z"),
            track("Saved", at: "2026-01-02T10:00:00Z"), track("Opened", at: "2026-01-03T09:30:00Z"),
        ]
        #expect(fired(rs, events).count == 1)
    }

    @Test func countWithAPropertyFilter() throws {
        let rs = try load(campaign(if: "count(\"Message Accepted\", \"lifetime\", {\"rule\": \"r\"}) == 0"))
        let events = [
            track("Opened", at: "2026-01-01T09:00:00Z"),
            track("Message Accepted", at: "2026-01-01T09:01:00Z", props: [("rule", "other")]),
            track("Opened", at: "2026-01-02T09:00:00Z"),
            track("Message Accepted", at: "2026-01-02T09:01:00Z", props: [("rule", "r")]),
            track("Opened", at: "2026-01-03T09:00:00Z"),
        ]
        #expect(fired(rs, events).map(\.time) == [t("2026-01-01T09:00:00Z"), t("2026-01-02T09:00:00Z")])
    }

    @Test func campaignWindowIsInclusiveStartExclusiveEnd() throws {
        let rs = try load(
            """
            version: 1
            campaign: c
            start: 2026-01-05T00:00:00Z
            end: 2026-01-06T00:00:00Z
            rules:
              - id: r
                on: Opened
                do: [ { deep_link: "app://x" } ]
            """)
        let times = ["2026-01-04T23:59:59Z", "2026-01-05T00:00:00Z", "2026-01-05T23:59:59Z", "2026-01-06T00:00:00Z"]
        let out = fired(rs, times.enumerated().map { track("Opened", "u\($0.offset)", at: $0.element) })
        #expect(out.map(\.userID) == ["u1", "u2"])
    }

    @Test func disabledRulesNeverFire() throws {
        let rs = try load(campaign(extra: "    enabled: false\n"))
        #expect(fired(rs, [track("Opened", at: "2026-01-05T09:00:00Z")]).isEmpty)
    }
}

struct LimitTests {
    func opens(_ times: [String], user: String = "u1") -> [Event] { times.map { track("Opened", user, at: $0) } }

    @Test func perUser() throws {
        let rs = try load(campaign(limit: "{ per_user: 2 }"))
        #expect(fired(rs, opens(["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"])).count == 2)
    }

    @Test func perUserIsExactBeyondAHundred() throws {
        let rs = try load(campaign(limit: "{ per_user: 150 }"))
        let times = (0..<200).map { Timestamp(milliseconds: t("2026-01-01T00:00:00Z") + Int64($0) * 60_000).description }
        #expect(fired(rs, opens(times)).count == 150)
    }

    @Test func perSessionResetsAfterInactivity() throws {
        let rs = try load(campaign(limit: "{ per_session: 1 }"))
        // Default sessions: a new one after 30 minutes without events.
        let out = fired(
            rs, opens(["2026-01-01T09:00:00Z", "2026-01-01T09:10:00Z", "2026-01-01T09:39:59Z", "2026-01-01T10:10:00Z"]))
        #expect(out.map(\.time) == [t("2026-01-01T09:00:00Z"), t("2026-01-01T10:10:00Z")])
    }

    @Test func perSessionWithStartEvents() throws {
        let rs = try load(
            campaign(on: "on: Tapped", limit: "{ per_session: 1 }"),
            settings: """
                version: 1
                settings: s
                sessions: { start_on: [Opened], timeout: 2h }
                """)
        let events = [
            track("Opened", at: "2026-01-01T09:00:00Z"), track("Tapped", at: "2026-01-01T09:01:00Z"),
            track("Tapped", at: "2026-01-01T09:02:00Z"), track("Opened", at: "2026-01-01T09:03:00Z"),
            track("Tapped", at: "2026-01-01T09:04:00Z"),
        ]
        #expect(fired(rs, events).map(\.time) == [t("2026-01-01T09:01:00Z"), t("2026-01-01T09:04:00Z")])
    }

    @Test(arguments: [
        ("per_minute", ["2026-01-01T09:00:00Z", "2026-01-01T09:00:59Z", "2026-01-01T09:01:00Z"], [0, 2]),
        ("per_hour", ["2026-01-01T09:00:00Z", "2026-01-01T09:59:59Z", "2026-01-01T10:00:00Z"], [0, 2]),
        ("per_day", ["2026-01-01T09:00:00Z", "2026-01-02T08:59:59Z", "2026-01-02T09:00:00Z"], [0, 2]),
        ("per_week", ["2026-01-01T09:00:00Z", "2026-01-08T08:59:59Z", "2026-01-08T09:00:00Z"], [0, 2]),
        ("per_month", ["2026-01-15T09:00:00Z", "2026-02-15T08:59:59Z", "2026-02-15T09:00:00Z"], [0, 2]),
        // Calendar limits reset when the user's day, week (Monday) or month begins, not a window's length after a fire.
        ("per_calendar_day", ["2026-01-01T23:00:00Z", "2026-01-01T23:59:59Z", "2026-01-02T00:00:00Z"], [0, 2]),
        // 2026-01-04 is a Sunday, 01-05 a Monday.
        ("per_calendar_week", ["2026-01-04T09:00:00Z", "2026-01-04T23:59:59Z", "2026-01-05T00:00:00Z"], [0, 2]),
        ("per_calendar_month", ["2026-01-31T22:00:00Z", "2026-01-31T23:00:00Z", "2026-02-01T00:00:00Z"], [0, 2]),
        // A rolling day blocks the next morning's; a calendar day allows it.
        ("per_day", ["2026-01-01T23:00:00Z", "2026-01-02T08:00:00Z", "2026-01-02T23:00:00Z"], [0, 2]),
        ("per_calendar_day", ["2026-01-01T23:00:00Z", "2026-01-02T08:00:00Z", "2026-01-02T23:00:00Z"], [0, 1]),
    ])
    func windows(_ key: String, _ times: [String], _ firing: [Int]) throws {
        let rs = try load(campaign(limit: "{ \(key): 1 }"))
        #expect(fired(rs, opens(times)).map(\.time) == firing.map { t(times[$0]) })
    }

    @Test func aCalendarDayIsTheUsersDay() throws {
        // 03:00 and 04:30 UTC are 22:00 and 23:30 on Jan 1 in New York (one day: the second is blocked); 05:30 UTC is
        // 00:30 on Jan 2 there (a new day).
        let rs = try load(campaign(limit: "{ per_calendar_day: 1 }"))
        var events = [identify(at: "2026-01-01T00:00:00Z", [("timezone", "America/New_York")])]
        events += opens(["2026-01-02T03:00:00Z", "2026-01-02T04:30:00Z", "2026-01-02T05:30:00Z"])
        #expect(fired(rs, events).map(\.time) == [t("2026-01-02T03:00:00Z"), t("2026-01-02T05:30:00Z")])
    }

    @Test func explainSaysWhichCalendarLimitBlocksAndWhenItFrees() throws {
        let rs = try load(campaign(limit: "{ per_calendar_day: 1, per_day: 5 }"))
        let engine = Engine(ruleSet: rs, options: Engine.Options(recordVerdicts: true, explain: true))
        _ = engine.process(track("Opened", at: "2026-01-01T09:00:00Z"))
        let out = engine.process(track("Opened", at: "2026-01-01T10:00:00Z"))
        let text = out.verdicts.compactMap { v -> String? in
            if case .limited(let hit) = v.verdict { return hit.summary } else { return nil }
        }.joined(separator: "\n")
        #expect(text.contains("per_calendar_day"), "\(text)")
        #expect(text.contains("2026-01-02T00:00:00Z"), "\(text)")
    }

    @Test func perMonthAtTheEndOfAMonth() throws {
        // One month back from Feb 28 is Jan 28, so a fire on Jan 31 still counts; from Mar 1 it is Feb 1.
        let rs = try load(campaign(limit: "{ per_month: 1 }"))
        let times = ["2026-01-31T09:00:00Z", "2026-02-28T09:00:00Z", "2026-03-01T00:00:00Z"]
        #expect(fired(rs, opens(times)).map(\.time) == [t(times[0]), t(times[2])])
    }

    @Test func rollingCountsMoreThanOne() throws {
        let rs = try load(campaign(limit: "{ per_day: 2 }"))
        let out = fired(
            rs,
            opens([
                "2026-01-01T09:00:00Z", "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z", "2026-01-02T09:00:00Z",
                "2026-01-02T09:30:00Z",
            ]))
        // At 2026-01-02T09:00 the window (01T09:00, 02T09:00] holds one fire (10:00); at 09:30 it holds two.
        #expect(out.map(\.time) == [t("2026-01-01T09:00:00Z"), t("2026-01-01T10:00:00Z"), t("2026-01-02T09:00:00Z")])
    }

    @Test func cooldown() throws {
        let rs = try load(campaign(limit: "{ cooldown: 7d }"))
        let out = fired(rs, opens(["2026-01-01T09:00:00Z", "2026-01-08T08:59:59Z", "2026-01-08T09:00:00Z"]))
        #expect(out.map(\.time) == [t("2026-01-01T09:00:00Z"), t("2026-01-08T09:00:00Z")])
    }

    @Test func onNthOccurrenceCountsSuppressedTriggers() throws {
        let rs = try load(campaign(if: "user.ok == true", limit: "{ on_occurrence: 3 }"))
        // Occurrence 1 and 2 fail `if`, yet they count: the third occurrence fires.
        var events = [identify(at: "2026-01-01T00:00:00Z", [("ok", false)])]
        events += opens(["2026-01-01T09:00:00Z", "2026-01-01T10:00:00Z"])
        events.append(identify(at: "2026-01-01T10:30:00Z", [("ok", true)]))
        events += opens(["2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"])
        #expect(fired(rs, events).map(\.time) == [t("2026-01-01T11:00:00Z")])
    }

    @Test func everyNthOccurrence() throws {
        let rs = try load(campaign(limit: "{ every_occurrence: 2 }"))
        let times = (1...6).map { "2026-01-01T0\($0):00:00Z" }
        #expect(fired(rs, opens(times)).map(\.time) == [1, 3, 5].map { t(times[$0]) })
    }

    @Test func defaultsApplyKeyByKey() throws {
        let rs = try load(
            """
            version: 1
            campaign: c
            defaults:
              limit: { per_user: 1, cooldown: 1d }
            rules:
              - id: own
                on: Opened
                limit: { per_user: 3 }
                do: [ { deep_link: "app://own" } ]
              - id: inherited
                on: Opened
                do: [ { deep_link: "app://inherited" } ]
            """)
        let out = fired(
            rs, opens(["2026-01-01T09:00:00Z", "2026-01-01T10:00:00Z", "2026-01-02T10:00:00Z", "2026-01-03T10:00:00Z"]))
        // `own` keeps the default cooldown but its own per_user of 3.
        #expect(out.filter { $0.rule == "own" }.count == 3)
        #expect(out.filter { $0.rule == "inherited" }.count == 1)
    }

    /// Two rules that show a message, on Opened and on Saved.
    static let twoMessageRules = """
        version: 1
        campaign: c
        rules:
          - id: a
            on: Opened
            do: [ { message: { surface: launch, title: A } } ]
          - id: b
            on: Saved
            do: [ { message: { surface: toolbar, title: B } } ]
        """

    /// "At most two messages a calendar day", across rules: the third of Jan 1 is blocked; Jan 2 starts afresh at
    /// midnight, where a rolling `per_day` would still count the evening's.
    @Test func globalCapPerCalendarDay() throws {
        let rs = try load(
            Self.twoMessageRules, settings: "version: 1\nsettings: s\nglobal_limit: { per_calendar_day: 2 }\n")
        let events = [
            track("Opened", at: "2026-01-01T20:00:00Z"), track("Saved", at: "2026-01-01T21:00:00Z"),
            track("Opened", at: "2026-01-01T22:00:00Z"), track("Saved", at: "2026-01-02T00:10:00Z"),
            track("Opened", at: "2026-01-02T00:20:00Z"), track("Saved", at: "2026-01-02T00:30:00Z"),
        ]
        #expect(
            fired(rs, events).map(\.time) == [
                t("2026-01-01T20:00:00Z"), t("2026-01-01T21:00:00Z"), t("2026-01-02T00:10:00Z"),
                t("2026-01-02T00:20:00Z"),
            ])
    }

    @Test func globalCapAcrossRulesAndFiles() throws {
        let settings = """
            version: 1
            settings: s
            global_limit: { per_session: 1, per_day: 2 }
            """
        let rs = try load(
            Self.twoMessageRules + """

                  - id: link
                    on: Saved
                    do: [ { deep_link: "app://not-a-message" } ]
                """, settings: settings)
        let events = [
            track("Opened", at: "2026-01-01T09:00:00Z"), track("Saved", at: "2026-01-01T09:05:00Z"),
            track("Opened", at: "2026-01-01T11:00:00Z"), track("Opened", at: "2026-01-01T13:00:00Z"),
            track("Opened", at: "2026-01-02T09:00:01Z"),
        ]
        let out = fired(rs, events)
        let messageTimes: [Int64] = out.filter { $0.kind == "message" }.map(\.time)
        let expected: [Int64] = [t("2026-01-01T09:00:00Z"), t("2026-01-01T11:00:00Z"), t("2026-01-02T09:00:01Z")]
        #expect(messageTimes == expected)
        #expect(out.filter { $0.kind == "deep_link" }.count == 1)  // not capped: not a message
    }
}

struct ArbitrationTests {
    let yaml = """
        version: 1
        campaign: c
        rules:
          - id: low
            on: Opened
            priority: 5
            do: [ { message: { surface: launch, title: Low } } ]
          - id: high
            on: Opened
            priority: 10
            do: [ { message: { surface: launch, title: High } } ]
          - id: tie
            on: Opened
            priority: 10
            do: [ { message: { surface: launch, title: Tie } } ]
          - id: other_surface
            on: Opened
            priority: 1
            do: [ { message: { surface: toolbar, title: Other } } ]
        """

    @Test func largerPriorityWinsPerSurfaceAndLosersAreRecorded() throws {
        let rs = try load(yaml)
        let engine = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        let out = engine.process(track("Opened", at: "2026-01-01T09:00:00Z"))
        #expect(out.actions.map(\.rule) == ["high", "other_surface"])
        let lost = out.verdicts.filter { $0.verdict.code == "lost" }
        #expect(lost.map(\.qualifiedID).sorted() == ["c/low", "c/tie"])
        #expect(lost.allSatisfy { $0.verdict.summary.contains("lost to c/high") })
    }

    @Test func aLimitedRuleDoesNotTakePartInArbitration() throws {
        let rs = try load(
            yaml.replacingOccurrences(
                of: "priority: 10\n    do: [ { message: { surface: launch, title: High } } ]",
                with: "priority: 10\n    limit: { per_user: 1 }\n    do: [ { message: { surface: launch, title: High } } ]"))
        let out = fired(rs, [track("Opened", at: "2026-01-01T09:00:00Z"), track("Opened", at: "2026-01-01T10:00:00Z")])
        #expect(
            out.filter { $0.kind == "message" && $0.time == t("2026-01-01T10:00:00Z") }.map(\.rule) == ["tie", "other_surface"])
    }
}

struct ActionTests {
    func one(_ action: String, _ events: [Event]? = nil) throws -> [FiredAction] {
        let rs = try load(campaign(actions: "    do:\n      - \(action)\n"))
        return fired(rs, events ?? [track("Opened", at: "2026-01-05T09:00:00Z", props: [("email", " User@Example.com ")])])
    }

    @Test func message() throws {
        let a = try #require(
            try one(
                """
                message:
                          surface: launch
                          template: modal
                          title: "Hello ${user.id}"
                          body: Body
                          image: hero.png
                          buttons:
                            - { label: Go, deep_link: "app://go" }
                            - { label: Later, action: dismiss }
                """
            ).first)
        #expect(a.kind == "message")
        #expect(
            a.json.contains(
                #""message":{"surface":"launch","template":"modal","title":"Hello u1","body":"Body","image":"hero.png","buttons":[{"label":"Go","deep_link":"app://go"},{"label":"Later","action":"dismiss"}]}"#
            ))
    }

    @Test func screenWithParams() throws {
        let a = try #require(
            try one("screen: { id: email_input, params: { email: \"${event.properties.email.trim()}\", step: 2 } }").first)
        #expect(a.json.contains(#""screen":"email_input","params":{"email":"User@Example.com","step":2}"#))
    }

    @Test func screenShortForm() throws {
        #expect(try one("screen: welcome").first?["screen"]?.stringValue == "welcome")
    }

    @Test func deepLink() throws {
        #expect(try one("deep_link: \"app-settings:\"").first?["url"]?.stringValue == "app-settings:")
    }

    @Test func notifyAndMarkRead() throws {
        let rs = try load(
            """
            version: 1
            ruleset: inbox
            rules:
              - id: welcome
                on: Signed In
                do:
                  - notify: { id: welcome, sender: Team, message: "Welcome!", link: "app://stamp/welcome" }
              - id: opened
                on: Notification Opened
                do:
                  - mark_read: "${event.properties.notification_id}"
            """)
        let engine = Engine(ruleSet: rs)
        let a = engine.process(track("Signed In", at: "2026-01-05T09:00:00Z")).actions
        #expect(
            a.first?.json.contains(
                #""notification":{"id":"welcome","sender":"Team","message":"Welcome!","link":"app://stamp/welcome"},"unread":1"#)
                == true)
        #expect(engine.profile(of: "u1")?.unreadCount == 1)
        let b = engine.process(track("Notification Opened", at: "2026-01-05T09:01:00Z", props: [("notification_id", "welcome")]))
            .actions
        #expect(b.first?.json.contains(#""notification":{"id":"welcome"},"found":true,"unread":0"#) == true)
        #expect(engine.profile(of: "u1")?.inbox.first?.read == true)
    }

    @Test func prompt() throws {
        #expect(try one("prompt: att").first?["permission"]?.stringValue == "att")
    }

    @Test func emitWithComputedPayload() throws {
        let a = try #require(
            try one(
                """
                emit:
                          event: AppInstall
                          payload:
                            event_id: "${sha256('AppInstall:' + user.id)}"
                            user_data: { em: "${sha256(event.properties.email.trim().lowerAscii())}" }
                            tracking: true
                """
            ).first)
        #expect(a["event"]?.stringValue == "AppInstall")
        #expect(a.json.contains(#""user_data":{"em":"b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514"}"#))
        #expect(a.json.contains(#""tracking":true"#))
    }

    /// A field that cannot be computed is named in its warning by its place in the action (made only then), and an
    /// emit's payload leaves out what came out null, at every depth, and keeps the rest in its order.
    @Test func warningsNameTheFieldAndAnEmitLeavesOutNulls() throws {
        let payload =
            #"{ first: "${event.properties.email.trim()}", missing: "${event.properties.nope.size()}", "#
            + #"user_data: { em: "${event.properties.nope.trim()}", kept: [1, "${null}", { x: "${null}" }] }, last: true }"#
        let emit = try #require(try one("emit: { event: Lead, payload: \(payload) }").first)
        #expect(
            emit.json.contains(
                #""event":"Lead","payload":{"first":"User@Example.com","user_data":{"kept":[1,null,{}]},"last":true}"#),
            "\(emit.json)")
        #expect(emit.warnings.map { $0.prefix(while: { $0 != ":" }) } == ["payload.missing", "payload.user_data.em"])
        let nope = "event.properties.nope"
        let message = try one(
            "message: { surface: launch, title: \"${\(nope).trim()}\", "
                + "buttons: [{ label: OK, deep_link: \"${\(nope).trim()}\" }], data: { n: \"${\(nope).size()}\" } }")
        #expect(
            message.first?.warnings.map { $0.prefix(while: { $0 != ":" }) } == ["title", "buttons[0].deep_link", "data.n"])
        // Nothing fails: no warning, and the payload as written.
        let clean = try #require(try one(#"emit: { event: Lead, payload: { a: 1, b: { c: "${user.id}" } } }"#).first)
        #expect(clean.warnings.isEmpty)
        #expect(clean.json.contains(#""payload":{"a":1,"b":{"c":"u1"}}"#), "\(clean.json)")
    }

    @Test func setAndUnset() throws {
        let rs = try load(
            """
            version: 1
            ruleset: r
            rules:
              - id: s
                on: A
                do:
                  - set: { plan: pro, seen_at: "${event.timestamp}", count: "${count('A', 'lifetime')}" }
              - id: u
                on: B
                do:
                  - unset: plan
            """)
        let engine = Engine(ruleSet: rs)
        let a = engine.process(track("A", at: "2026-01-05T09:00:00Z")).actions[0]
        #expect(a.json.contains(#""attributes":{"plan":"pro","seen_at":"2026-01-05T09:00:00Z","count":1}"#))
        let p = try #require(engine.profile(of: "u1"))
        #expect(p.attributes[rs.attributeSlots["plan"]!]?.stringValue == "pro")
        _ = engine.process(track("B", at: "2026-01-05T10:00:00Z"))
        #expect(p.attributes[rs.attributeSlots["plan"]!] == nil)
    }

    @Test func settingNullRemovesTheAttribute() throws {
        let rs = try load(
            campaign(
                actions:
                    "    do:\n      - set: { plan: \"${null}\", kept: 1 }\n      - deep_link: \"${string(has(user.plan))}\"\n"))
        let engine = Engine(ruleSet: rs)
        _ = engine.process(identify(at: "2026-01-05T08:00:00Z", [("plan", "pro")]))
        let out = engine.process(track("Opened", at: "2026-01-05T09:00:00Z")).actions
        #expect(out.last?["url"]?.stringValue == "false")
        #expect(engine.profile(of: "u1")?.attributes[rs.attributeSlots["plan"]!] == nil)
    }

    @Test func aFailedFieldIsNullWithAWarning() throws {
        let a = try #require(try one("screen: { id: s, params: { name: \"${user.first_name}\" } }").first)
        #expect(a.json.contains(#""params":{"name":null}"#))
        #expect(a.warnings.first?.contains("user attribute 'first_name' is not set") == true)
    }

    @Test func idsAreDeterministicAndDistinct() throws {
        let rs = try load(campaign(actions: "    do:\n      - deep_link: a\n      - deep_link: b\n"))
        let events = [track("Opened", at: "2026-01-05T09:00:00Z", id: "m1"), track("Opened", at: "2026-01-05T10:00:00Z")]
        let first = fired(rs, events).map(\.id)
        let again = fired(rs, events).map(\.id)
        #expect(first == again)
        #expect(Set(first).count == 4)
        #expect(first.allSatisfy { $0.count == 32 })
    }
}

struct StreamTests {
    @Test func duplicateMessageIDsAreProcessedOnce() throws {
        let rs = try load(campaign())
        let e = track("Opened", at: "2026-01-05T09:00:00Z", id: "same")
        let engine = Engine(ruleSet: rs)
        #expect(engine.process(e).actions.count == 1)
        #expect(engine.process(e).status == .duplicate)
        #expect(engine.stats.duplicates == 1)
    }

    @Test func lateEventsAreCountedAtTheirTimeButEvaluatedAtTheUsersClock() throws {
        let rs = try load(campaign(if: "count(\"Opened\", \"1h\") >= 2", limit: "{ cooldown: 1h }"))
        let engine = Engine(ruleSet: rs)
        _ = engine.process(track("Opened", at: "2026-01-05T10:00:00Z"))
        let late = engine.process(track("Opened", at: "2026-01-05T09:30:00Z"))
        #expect(late.late)
        // Both opens are within the hour before the user's clock (10:00): the late event fires at 10:00.
        #expect(late.actions.map(\.time) == [t("2026-01-05T10:00:00Z")])
        // The user's clock never goes back, so the cooldown still holds at 10:30.
        #expect(engine.process(track("Opened", at: "2026-01-05T10:30:00Z")).actions.isEmpty)
    }
}

/// Every kind of block is counted under its own code in ``Engine/stats``.
struct StatsCodeTests {
    @Test(arguments: [
        ("{ per_user: 1 }", "limit:per_user"),
        ("{ per_session: 1 }", "limit:per_session"),
        ("{ cooldown: 1h }", "limit:cooldown"),
        ("{ on_occurrence: 1 }", "limit:on_occurrence"),
        ("{ every_occurrence: 2 }", "limit:every_occurrence"),
        ("{ per_hour: 1 }", "limit:per_hour"),
        ("{ per_month: 1 }", "limit:per_month"),
    ])
    func limitBlocksAreCountedByKey(limit: String, code: String) throws {
        let rs = try load(campaign(limit: limit))
        let engine = Engine(ruleSet: rs)
        for m in 0..<2 { engine.process(track("Opened", at: "2026-01-05T09:0\(m):00Z")) }
        #expect(engine.stats.blocked[0] == [code: 1])
        #expect(engine.stats.triggered[0] == 2)
        #expect(engine.stats.fired[0] + engine.stats.blocked[0].values.reduce(0, +) == 2)
    }

    @Test func conditionBlocksAreCountedByClause() throws {
        let rs = try load(campaign(where: "event.properties.n > 1", if: "user.plan == \"pro\""))
        let engine = Engine(ruleSet: rs)
        engine.process(track("Opened", at: "2026-01-05T09:00:00Z", props: [("n", .int(0))]))
        engine.process(track("Opened", at: "2026-01-05T09:01:00Z", props: [("n", .int(2))]))
        #expect(engine.stats.blocked[0] == ["where": 1, "if": 1])
        #expect(engine.eventCount == 2)
    }
}

/// Action JSON: plain strings are copied as they are, the rest escaped.
struct JSONWriterTests {
    @Test func stringsAreEscapedOnlyWhereNeeded() {
        #expect(JSONWriter.encode(.string("plain é ✓")) == "\"plain é ✓\"")
        #expect(JSONWriter.encode(.string("a\"b\\c\nd\te\u{1}")) == #""a\"b\\c\nd\te\u0001""#)
        #expect(JSONWriter.encode(.map(ValueMap([("k\"", .string("v"))]))) == #"{"k\"":"v"}"#)
    }

    @Test func nestedContainersGetTheirCommas() {
        let v: Value = .map(
            ValueMap([
                ("a", .list([.int(1), .map(ValueMap([("b", .list([])), ("c", .map(ValueMap()))])), .null])),
                ("d", .list([.list([.bool(true)]), .list([])])), ("e", .string("x")),
            ]))
        #expect(JSONWriter.encode(v) == #"{"a":[1,{"b":[],"c":{}},null],"d":[[true],[]],"e":"x"}"#)
        #expect(JSONWriter.encode(.list([.map(ValueMap()), .map(ValueMap([("k", .int(2))]))])) == #"[{},{"k":2}]"#)
    }

    /// An action line copies the JSON made once per rule (its unit and rule, and an action with constant fields):
    /// it must be what writing every member one by one gives, for every kind of action and values that need escapes.
    @Test func actionLinesFromPrecomputedJSONEqualTheMemberByMemberOnes() throws {
        let rs = try load(
            #"""
            version: 1
            campaign: greet
            rules:
              - id: every_kind
                on: Opened
                do:
                  - message:
                      surface: launch
                      title: "Tab \t and \"quotes\""
                      buttons: [{ label: Go, deep_link: "app://x?a=1&b=2" }, { label: Not now, action: dismiss }]
                  - screen: { id: welcome, params: { back: false, step: 2 } }
                  - deep_link: "app://settings"
                  - prompt: att
                  - emit: { event: Converted, payload: { value: 9.5, currency: EUR } }
                  - deep_link: "app://hello/${user.name}"
            """#)
        let out = fired(rs, [track("Opened", at: "2026-01-05T09:00:00Z", id: "m-1")])
        #expect(out.map(\.kind) == ["message", "screen", "deep_link", "prompt", "emit", "deep_link"])
        for a in out {
            var general = a
            general.fields = a.fields  // its own fields: written member by member
            #expect(a.json == general.json)
            guard case .map(let m) = try JSONValue.parse(a.json) else {
                Issue.record("not an object: \(a.json)")
                continue
            }
            #expect(
                m.entries.prefix(7).map { $0.key.stringValue ?? "" }
                    == ["id", "time", "userId", "campaign", "rule", "trigger", "action"])
            #expect(m[string: "campaign"]?.stringValue == "greet")
            #expect(m[string: "rule"]?.stringValue == "every_kind")
            #expect(m[string: "id"]?.stringValue == a.id)
        }
    }
}

/// The in-memory store and the outcome a caller reuses across events.
struct StoreAndOutcomeTests {
    @Test func storeFindsEveryUserAcrossGrowth() {
        let store = InMemoryStateStore()
        var made: [UserProfile] = []
        for i in 0..<5_000 {
            let id = "user-\(i)" + (i % 7 == 0 ? String(repeating: "x", count: 20) : "")
            let p = store.profile(for: id, create: true) { UserProfile(userID: id, attributeCount: 1, contextCount: 0) }
            made.append(p!)
        }
        #expect(store.userCount == 5_000)
        #expect(store.allProfiles().count == 5_000)
        for (i, p) in made.enumerated() {
            let id = "user-\(i)" + (i % 7 == 0 ? String(repeating: "x", count: 20) : "")
            let found = store.profile(for: id, create: false) { fatalError("not asked to create") }
            #expect(found === p)
        }
        #expect(store.profile(for: "user-5000", create: false) { fatalError() } == nil)
    }

    /// Processing a batch (which fetches events and users ahead) gives what processing one event at a time gives,
    /// across many users, new users mid-batch and the store growing.
    @Test func aBatchIsTheSameAsOneEventAtATime() throws {
        let rs = try load(
            campaign(
                on: "on: [Opened, Closed]", if: "count(\"Opened\", \"1h\") >= 2 && user.plan != \"x\"",
                limit: "{ per_user: 3, cooldown: 10m }"))
        var events: [BoundEvent] = (0..<1_000).map { u in
            rs.bind(identify("u\(u)", at: "2026-01-05T08:00:00Z", [("plan", .string(u % 4 == 0 ? "x" : "free"))]))
        }
        var seed: UInt64 = 42
        for i in 0..<6_000 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let user = "u\(Int(seed >> 33) % (i < 3_000 ? 300 : 1_500))"
            let at = Timestamp(milliseconds: t("2026-01-05T09:00:00Z") + Int64(i) * 7_000).description
            events.append(rs.bind(track(i % 3 == 0 ? "Closed" : "Opened", user, at: at)))
        }
        let one = Engine(ruleSet: rs)
        var expected: [String] = []
        for e in events { expected += one.process(e).actions.map(\.json) }
        #expect(expected.count > 500)
        // The in-memory store (the engine borrows its profiles and fetches ahead), and a store of a service's own
        // (reached through the protocol, told of every change).
        let other = CountingStore()
        for store in [InMemoryStateStore(), other] as [any StateStore] {
            let batch = Engine(ruleSet: rs, store: store)
            var got: [String] = []
            var out = EventOutcome()
            batch.process(events.span, into: &out) { got += $0.actions.map(\.json) }
            #expect(got == expected)
            #expect(batch.stats.fired == one.stats.fired)
        }
        #expect(other.updates == events.count)
    }

    /// An outcome reused across events holds each event's actions only — compact ones (constant fields), whole ones
    /// (computed fields) and those of a cascade, with their own triggers — whatever the events before it held; each
    /// action reads, and writes as JSON, as a fresh outcome's does.
    @Test func actionsKeptCompactReadAsTheyFired() throws {
        let rs = try load(
            """
            version: 1
            ruleset: r
            rules:
              - id: greet
                on: Opened
                do:
                  - message: { surface: launch, title: Hi }
                  - set: { tier: "${event.properties.tier}" }
                  - emit: { event: Greeted, payload: { n: "${event.properties.n}" } }
              - id: tiered
                on_change: tier
                do:
                  - message: { surface: launch, title: Tier }
                  - deep_link: "app://tier"
              - id: bye
                on: Closed
                do:
                  - message: { surface: launch, title: Bye }
            """)
        let reused = Engine(ruleSet: rs)
        let fresh = Engine(ruleSet: rs)
        var out = EventOutcome()
        var seen = 0
        var cascaded = 0
        var tiers: [String: String] = [:]
        for i in 0..<60 {
            let user = "user-\(i % 7)" + (i % 3 == 0 ? String(repeating: "x", count: 20) : "")
            let at = Timestamp(milliseconds: t("2026-01-05T09:00:00Z") + Int64(i) * 60_000).description
            let e =
                i % 4 == 3
                ? track("Closed", user, at: at)
                : track(
                    "Opened", user, at: at, props: [("tier", .string(i % 2 == 0 ? "gold" : "silver")), ("n", .int(Int64(i)))])
            reused.process(rs.bind(e), into: &out)
            // As a fresh outcome holds them (so nothing is left of the events before) …
            let expected = fresh.process(rs.bind(e)).actions.map(\.json)
            #expect(out.actions.map(\.json) == expected)
            // … written as read …
            var w = JSONWriter()
            var written: [String] = []
            for k in out.actions.indices {
                out.actions.write(k, to: &w)
                written.append(w.output)
                w.removeAll()
            }
            #expect(written == expected)
            // … and each with its own user and trigger: the event's, or the attribute change's.
            for a in out.actions {
                #expect(a.userID == user)
                #expect(a.trigger == (a.rule == "tiered" ? "change:tier" : e.name))
            }
            var rules = ["bye"]
            if case .string(let tier)? = e.properties[string: "tier"] {
                rules =
                    ["greet", "greet", "greet"] + (tiers.updateValue(tier, forKey: user) != tier ? ["tiered", "tiered"] : [])
            }
            #expect(out.actions.map(\.rule) == rules)
            seen += expected.count
            cascaded += out.actions.count { $0.rule == "tiered" }
        }
        #expect(seen > 100)
        #expect(cascaded > 20)
        // A collection of actions made whole keeps them as they are.
        let whole = Array(fresh.process(rs.bind(track("Opened", "v", at: "2026-01-06T09:00:00Z"))).actions)
        #expect(FiredActions(whole).map(\.json) == whole.map(\.json))
    }

    /// A store that is not the in-memory one: profiles in a dictionary, changes counted.
    final class CountingStore: StateStore {
        var profiles: [String: UserProfile] = [:]
        var updates = 0
        func profile(for userID: String, create: Bool, make: () -> UserProfile) -> UserProfile? {
            if let p = profiles[userID] { return p }
            guard create else { return nil }
            let p = make()
            profiles[userID] = p
            return p
        }
        func didUpdate(_ profile: UserProfile) { updates += 1 }
        var userCount: Int { profiles.count }
        func allProfiles() -> [UserProfile] { Array(profiles.values) }
    }

    @Test func anOutcomeIsResetForEachEvent() throws {
        let rs = try load(campaign(on: "on: Opened"))
        let engine = Engine(ruleSet: rs)
        var out = EventOutcome()
        engine.process(rs.bind(track("Opened", at: "2026-01-05T09:00:00Z")), into: &out)
        #expect(out.actions.count == 1)
        engine.process(rs.bind(track("Closed", at: "2026-01-05T09:01:00Z")), into: &out)
        #expect(out.actions.isEmpty)
        #expect(out.status == .processed)
        engine.process(rs.bind(track("Opened", "u2", at: "2026-01-05T09:02:00Z")), into: &out)
        #expect(out.actions.map(\.userID) == ["u2"])
    }
}
