import BeckonCore
import Foundation
import Testing

/// `push` and `email` actions, a missing address as a visible skip, and caps per channel (`channel_limits`).
struct ChannelTests {
    static let rules = """
        version: 1
        campaign: cart
        rules:
          - id: nudge
            on: Product Added
            do:
              - push:
                  title: Still thinking?
                  body: "${event.properties.product} is waiting"
                  deep_link: "shop://cart"
                  data: { sku: "${event.properties.sku}" }
          - id: mail
            on: Product Added
            do:
              - email: { template: cart_reminder, to: "${user.email}", data: { product: "${event.properties.product}" } }
          - id: banner
            on: Product Added
            do:
              - message: { surface: home, title: Your cart }
        """

    static let settings = """
        version: 1
        settings: shop
        channel_limits:
          push: { per_calendar_day: 2 }
          email: { per_week: 1 }
        """

    func added(_ time: String, _ product: String = "Shoes") -> Event {
        track("Product Added", at: time, props: [("product", .string(product)), ("sku", .string("s-1"))])
    }

    @Test func pushAndEmailCarryTheirFields() throws {
        let rs = try load(Self.rules)
        let out = fired(
            rs, [identify(at: "2026-01-01T09:00:00Z", [("email", .string("ann@example.com"))]), added("2026-01-01T10:00:00Z")])
        let push = try #require(out.first { $0.kind == "push" })
        #expect(
            push.json.contains(
                #""action":"push","push":{"title":"Still thinking?","body":"Shoes is waiting","deep_link":"shop://cart","data":{"sku":"s-1"}}"#
            ))
        let email = try #require(out.first { $0.kind == "email" })
        #expect(
            email.json.contains(#""email":{"template":"cart_reminder","to":"ann@example.com","data":{"product":"Shoes"}}"#))
    }

    /// No address at fire time: the email comes out as `skipped` with the reason and what it would have sent; it does
    /// not count toward the email cap, so the first email after the address is known still goes out.
    @Test func aMissingAddressIsAVisibleSkip() throws {
        let rs = try load(Self.rules, settings: Self.settings)
        let out = fired(
            rs,
            [
                added("2026-01-01T10:00:00Z"), identify(at: "2026-01-01T10:30:00Z", [("email", .string("ann@example.com"))]),
                added("2026-01-01T11:00:00Z"),
            ])
        let mails = out.filter { $0.rule == "mail" }
        #expect(mails.map(\.kind) == ["skipped", "email"])
        #expect(mails[0].json.contains(#""channel":"email""#))
        #expect(mails[0].json.contains(#""reason":"no address: the email's `to` has no value for this user""#))
        #expect(mails[0].json.contains(#""email":{"template":"cart_reminder","to":null"#))
    }

    @Test func anEmptyAddressIsSkippedToo() throws {
        let rs = try load(Self.rules)
        let out = fired(rs, [identify(at: "2026-01-01T09:00:00Z", [("email", .string("  "))]), added("2026-01-01T10:00:00Z")])
        #expect(out.first { $0.rule == "mail" }?.json.contains("the email's `to` is empty for this user") == true)
    }

    /// At most 2 pushes a calendar day and 1 email a rolling week, across rules; the in-app message has no cap.
    @Test func eachChannelHasItsOwnCap() throws {
        let rs = try load(Self.rules, settings: Self.settings)
        let events =
            [identify(at: "2026-01-01T09:00:00Z", [("email", .string("ann@example.com"))])]
            + ["2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z", "2026-01-01T23:00:00Z", "2026-01-02T00:30:00Z"].map {
                added($0)
            }
        let v = verdicts(rs, events)
        #expect(v[1] == ["nudge:fired", "mail:fired", "banner:fired"])
        #expect(v[2] == ["nudge:fired", "mail:channel_limit:per_week", "banner:fired"])
        #expect(v[3] == ["nudge:channel_limit:per_calendar_day", "mail:channel_limit:per_week", "banner:fired"])
        #expect(v[4] == ["nudge:fired", "mail:channel_limit:per_week", "banner:fired"])
        let engine = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        for e in events.dropLast() { engine.process(e) }
        let blocked = engine.process(added("2026-01-01T23:30:00Z")).verdicts.first { $0.qualifiedID == "cart/nudge" }
        #expect(
            blocked?.verdict.summary
                == "push channel limit per_calendar_day reached (2 of 2 today (the user's calendar day)); frees at 2026-01-02T00:00:00Z"
        )
    }

    /// `global_limit` counts every channel: with one message a day overall, the push rule's fire uses it up.
    @Test func theGlobalLimitCountsEveryChannel() throws {
        let rs = try load(Self.rules, settings: "version: 1\nsettings: s\nglobal_limit: { per_day: 1 }\n")
        let v = verdicts(rs, [added("2026-01-01T10:00:00Z")])
        #expect(v[0] == ["nudge:fired", "mail:global_limit:per_day", "banner:global_limit:per_day"])
    }

    /// A `transactional` rule (an order confirmation) is neither held by the caps nor counted toward them: with one
    /// message a day overall and two pushes a calendar day, the receipt goes every time and the others are unmoved.
    @Test func aTransactionalRuleIsOutsideTheCaps() throws {
        let rules =
            Self.rules + """

                  - id: receipt
                    on: Product Added
                    transactional: true
                    do:
                      - push: { body: "Receipt for ${event.properties.product}" }
                """
        let settings = Self.settings + "\nglobal_limit: { per_day: 1 }\n"
        let rs = try load(rules, settings: settings)
        let v = verdicts(rs, ["2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"].map { added($0) })
        #expect(v[0] == ["nudge:fired", "mail:global_limit:per_day", "banner:global_limit:per_day", "receipt:fired"])
        #expect(
            v[1] == ["nudge:global_limit:per_day", "mail:global_limit:per_day", "banner:global_limit:per_day", "receipt:fired"])
        #expect(v[2].last == "receipt:fired")
        // Without it, the receipt is capped like the others (and its fire counts toward them).
        let capped = try load(rules.replacingOccurrences(of: "    transactional: true\n", with: ""), settings: settings)
        #expect(verdicts(capped, [added("2026-01-01T10:00:00Z")])[0].last == "receipt:global_limit:per_day")
        #expect(diagnostics(rules.replacingOccurrences(of: "true\n", with: "yes please\n")).count == 1)
    }

    /// A skipped email leaves the email cap where it was, a sent one uses it; the series survives a state round trip.
    @Test func channelCountsSurviveSavedState() throws {
        let rs = try load(Self.rules, settings: Self.settings)
        let first = Engine(ruleSet: rs)
        first.process(identify(at: "2026-01-01T09:00:00Z", [("email", .string("ann@example.com"))]))
        first.process(added("2026-01-01T10:00:00Z"))
        let state = try #require(first.state(of: "u1"))
        let second = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        try second.restore(state)
        let v = second.process(added("2026-01-02T10:00:00Z")).verdicts.map(\.verdict.code)
        #expect(v == ["fired", "channel_limit:per_week", "fired"])
    }

    @Test func validation() {
        func errors(_ action: String, settings: String? = nil) -> [String] {
            diagnostics(
                "version: 1\ncampaign: c\nrules:\n  - id: r\n    on: Opened\n    do:\n      - \(action)\n", settings: settings
            ).map(\.message)
        }
        #expect(errors("push: { title: Hi }") == ["push needs 'body' (text)"])
        #expect(errors("email: { template: t }") == ["email needs 'to' (text)"])
        #expect(errors("email: { template: t, to: ann.example.com }") == ["'ann.example.com' is not an address"])
        #expect(
            errors("push: { body: Hi, image: cart.png }") == [
                "a push image is a web address the device downloads, not 'cart.png'"
            ])
        #expect(
            errors("push: { body: Hi }", settings: "version: 1\nsettings: s\nchannel_limits: { push: { per_user: 1 } }\n")
                .isEmpty)
        #expect(
            errors("push: { body: Hi }", settings: "version: 1\nsettings: s\nchannel_limits: { push: { cooldown: 1h } }\n")
                .first?.hasPrefix("unknown key 'cooldown' in channel_limits.push") == true)
        #expect(
            errors("push: { body: Hi }", settings: "version: 1\nsettings: s\nchannel_limits: { sms: { per_day: 1 } }\n")
                .first?.hasPrefix("unknown key 'sms' in channel_limits") == true)
    }

    /// "At most one in-app message per session" and "at most 3 pushes ever": `per_session` counts the channel's fires
    /// since the session began (a new session after the timeout starts again from 0), `per_user` all of them.
    @Test func perSessionAndPerUserCapsCountTheChannel() throws {
        let settings = """
            version: 1
            settings: shop
            sessions: { timeout: 30m }
            channel_limits:
              message: { per_session: 1 }
              push: { per_user: 3 }
            """
        let rs = try load(Self.rules, settings: settings)
        let times = [
            "2026-01-01T10:00:00Z", "2026-01-01T10:10:00Z",  // one session
            "2026-01-01T12:00:00Z", "2026-01-01T12:05:00Z",  // the next, after the timeout
            "2026-01-02T09:00:00Z",
        ]
        let v = verdicts(rs, times.map { added($0) })
        #expect(
            v.map { $0.first { $0.hasPrefix("banner:") } } == [
                "banner:fired", "banner:channel_limit:per_session", "banner:fired", "banner:channel_limit:per_session",
                "banner:fired",
            ])
        #expect(
            v.map { $0.first { $0.hasPrefix("nudge:") } } == [
                "nudge:fired", "nudge:fired", "nudge:fired", "nudge:channel_limit:per_user", "nudge:channel_limit:per_user",
            ])
        // The words of explain, and the lifetime count kept in saved state.
        let engine = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        for e in times.prefix(3) { engine.process(added(e)) }
        let again = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        try again.restore(try #require(engine.state(of: "u1")))
        let out = again.process(added("2026-01-03T09:00:00Z")).verdicts
        #expect(
            out.first { $0.qualifiedID == "cart/nudge" }?.verdict.summary
                == "push channel limit per_user reached (3 of 3 fires used)")
        #expect(out.first { $0.qualifiedID == "cart/banner" }?.verdict.code == "fired")
        // Without the caps every one fires.
        #expect(verdicts(try load(Self.rules), times.map { added($0) }).allSatisfy { !$0.joined().contains("limit") })
    }

    /// `channel_limit_never_binds`: a channel no rule sends on, or a global cap that always blocks first.
    @Test func capsThatCanNeverBind() {
        func warnings(_ settings: String) -> [String] {
            diagnostics(Self.rules, settings: "version: 1\nsettings: s\n" + settings)
                .filter { $0.id == .channelLimitNeverBinds }.map(\.message)
        }
        #expect(warnings("channel_limits: { push: { per_day: 3 } }").isEmpty)
        #expect(
            warnings("global_limit: { per_calendar_day: 2 }\nchannel_limits: { push: { per_calendar_day: 3 } }") == [
                "push per_calendar_day: 3 never binds: global_limit per_calendar_day: 2 counts every channel and blocks first"
            ])
        // A calendar day lies within the last 25 hours, but not always within the last 24 (a day clocks go back).
        #expect(warnings("global_limit: { per_hour: 1 }\nchannel_limits: { push: { per_calendar_day: 2 } }").isEmpty)
        #expect(warnings("global_limit: { per_week: 2 }\nchannel_limits: { push: { per_calendar_day: 2 } }").count == 1)
        #expect(warnings("global_limit: { per_day: 2 }\nchannel_limits: { push: { per_calendar_day: 2 } }").isEmpty)
        #expect(warnings("global_limit: { per_calendar_month: 2 }\nchannel_limits: { push: { per_calendar_week: 2 } }").isEmpty)
        #expect(warnings("global_limit: { per_user: 5 }\nchannel_limits: { email: { per_week: 5 } }").count == 1)
        #expect(
            warnings("global_limit: { per_session: 1 }\nchannel_limits: { message: { per_session: 1 } }") == [
                "message per_session: 1 never binds: global_limit per_session: 1 counts every channel and blocks first"
            ])
        #expect(warnings("global_limit: { per_session: 2 }\nchannel_limits: { message: { per_session: 1 } }").isEmpty)
        #expect(warnings("global_limit: { per_user: 3 }\nchannel_limits: { push: { per_user: 4 } }").count == 1)
        #expect(
            warnings("channel_limits: { message: { per_day: 1 }, email: { per_day: 1 } }").isEmpty,
            "every channel is used by a rule")
        #expect(
            diagnostics(
                "version: 1\ncampaign: c\nrules:\n  - id: r\n    on: Opened\n    do: [ { push: { body: Hi } } ]\n",
                settings: "version: 1\nsettings: s\nchannel_limits: { email: { per_day: 1 } }\n"
            )
            .map(\.message).contains("no enabled rule sends on the email channel, so this cap never binds"))
    }
}

/// `ActionKind.fields` (what campaign tests check expectations against) describes what the engine writes: every
/// field of every kind fired here, and every key of its maps, is in it.
struct ActionFieldsTests {
    @Test func eachKindsFieldsAreThoseItFires() throws {
        let rules = """
            version: 1
            ruleset: all
            rules:
              - id: every_kind
                on: Go
                do:
                  - message: { surface: home, template: t, title: Hi, body: B, image: "https://x.example/i.png", buttons: [{ label: A, deep_link: "all://a" }], data: { k: 1 } }
                  - screen: { id: welcome, params: { back: false } }
                  - deep_link: "all://home"
                  - notify: { id: hi, sender: Team, message: Hello, link: "all://inbox", data: { k: 1 } }
                  - push: { title: T, body: B, deep_link: "all://p", image: "https://x.example/i.png", data: { k: v }, to: tok }
                  - email: { template: t, to: a@b.example, subject: S, data: { k: 1 } }
                  - email: { template: t, to: "${user.nobody}" }
                  - mark_read: hi
                  - prompt: att
                  - emit: { event: Sent, payload: { k: 1 } }
                  - set: { plan: gold }
                  - unset: plan
            """
        let engine = Engine(ruleSet: try load(rules))
        let out = engine.process(Event(kind: .track, name: "Go", userID: "u", timestamp: t("2026-01-01T00:00:00Z")))
        let kinds = out.actions.map(\.kind)
        #expect(Set(kinds).isSuperset(of: ["message", "screen", "deep_link", "notify", "push", "email", "skipped"]))
        for a in out.actions {
            let kind = try #require(ActionKind(rawValue: a.kind), "\(a.kind)")
            for (field, value) in a.fields {
                let known = kind.fields[field]
                #expect(known != nil, "\(a.kind) writes '\(field)', which ActionKind.fields leaves out")
                guard let keys = known ?? nil, case .map(let m) = value else { continue }
                for case .string(let k) in m.entries.map(\.key) {
                    #expect(keys.contains(k), "\(a.kind).\(field) writes '\(k)', which ActionKind.fields leaves out")
                }
            }
        }
    }
}
