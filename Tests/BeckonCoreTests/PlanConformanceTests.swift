import BeckonYAML
import Testing

@testable import BeckonCore

/// Events off the tracking plan (docs/events.md#events-off-the-tracking-plan): lossless conversions, and what does not
/// fit named and counted, the event processed all the same.
struct PlanConformanceTests {
    static let plan = """
        version: 1
        tracking_plan: shop
        events:
          Order Completed:
            properties:
              revenue: { type: number }
              items: { type: int }
              coupon: { type: string }
              gift: { type: bool }
        traits:
          age: { type: int }
        """
    static let rules = """
        version: 1
        campaign: shop
        rules:
          - id: big_order
            on: Order Completed
            if: default(user.age, 0) >= 18
            where: event.properties.revenue > 10 && event.properties.items >= 2 && event.properties.coupon != "" && !event.properties.gift
            do:
              - message: { surface: home, title: Thanks }
        """

    static func decoder(plan: Bool = true) throws -> (CompiledRuleSet, SegmentDecoder) {
        var texts: [(path: String, text: String)] = [("rules.yaml", rules)]
        if plan { texts.append(("plan.yaml", Self.plan)) }
        let r = RuleLoader.load(texts: texts)
        let rs = try #require(r.ruleSet, "\(r.rendered())")
        return (rs, SegmentDecoder(ruleSet: rs))
    }

    static func order(_ props: String, at minute: Int = 0) -> String {
        #"{"type":"track","event":"Order Completed","userId":"a","timestamp":"2026-01-01T10:0\#(minute):00Z","properties":{\#(props)}}"#
    }

    @Test func whatConvertsWithoutLossIsConvertedAndTheRestIsNamed() {
        func fit(_ v: Value, _ t: PlanType) -> String {
            switch PlanNames.fit(v, t) {
            case .fits: "fits"
            case .converted(let c): "converted " + JSONWriter.encode(c)
            case .offPlan(let kind): "off: " + kind
            }
        }
        #expect(fit(.string("18.50"), .number) == "converted 18.5")
        #expect(fit(.string("lots"), .number) == "off: a string")
        #expect(fit(.string("NaN"), .number) == "off: a string")
        #expect(fit(.double(2), .int) == "converted 2")
        #expect(fit(.double(2.5), .int) == "off: a number")
        #expect(fit(.string("2"), .int) == "converted 2")
        #expect(fit(.int(3), .string) == "converted \"3\"")
        #expect(fit(.string("true"), .bool) == "converted true")
        #expect(fit(.string("yes"), .bool) == "off: a string")
        #expect(fit(.int(3), .number) == "fits")
        #expect(fit(.null, .number) == "fits")
        #expect(fit(.list([]), .object) == "off: a list")
        #expect(fit(.string("2026-01-01T10:00:00Z"), .timestamp) == "fits")
        #expect(fit(.bool(true), .any) == "fits")
    }

    /// With the plan, `"18.50"`, `"2"`, `3`, `"false"` and the trait `"30"` reach the rule converted and it fires; the
    /// events fit. Without it, the rule sees the strings and does not.
    @Test func theRulesSeeConvertedValues() throws {
        let identify = #"{"type":"identify","userId":"a","timestamp":"2026-01-01T09:00:00Z","traits":{"age":"30"}}"#
        let order = Self.order(#""revenue":"18.50","items":"2","coupon":3,"gift":"false""#)
        let (rs, decoder) = try Self.decoder()
        let engine = Engine(ruleSet: rs)
        let events = [try decoder.decode(identify), try decoder.decode(order)]
        #expect(events.allSatisfy { $0.offPlan.isEmpty })
        #expect(events.map { engine.process($0).actions.count } == [0, 1])
        #expect(engine.stats.offPlan == 0)

        let (plain, loose) = try Self.decoder(plan: false)
        let without = Engine(ruleSet: plain)
        #expect([try loose.decode(identify), try loose.decode(order)].map { without.process($0).actions.count } == [0, 0])
    }

    /// What does not convert is named (each field, and an event or screen the plan does not list); the event is still
    /// processed, and counted.
    @Test func whatDoesNotFitIsNamedAndCounted() throws {
        let (rs, decoder) = try Self.decoder()
        let engine = Engine(ruleSet: rs)
        let bad = try decoder.decode(Self.order(#""revenue":"lots","items":2.5,"coupon":"X""#))
        #expect(
            bad.offPlan == [
                "property 'revenue' of 'Order Completed' is a string, the plan says number",
                "property 'items' of 'Order Completed' is a number, the plan says int",
            ])
        let unknown = try decoder.decode(
            #"{"type":"track","event":"Wishlist Viewed","userId":"a","timestamp":"2026-01-01T10:05:00Z"}"#)
        #expect(unknown.offPlan == ["event 'Wishlist Viewed' is not in the tracking plan"])
        let trait = try decoder.decode(
            #"{"type":"identify","userId":"a","timestamp":"2026-01-01T10:06:00Z","traits":{"age":"thirty"}}"#)
        #expect(trait.offPlan == ["trait 'age' is a string, the plan says int"])
        for e in [bad, unknown, trait] { engine.process(e) }
        #expect(engine.stats.offPlan == 3)
        #expect(engine.stats.events == 3)
    }

    /// Screens when the plan lists them: a listed screen fits whether or not a rule knows it, an unlisted one is named
    /// (as a `screen` and as a `page`), and without a screens list every screen fits. (A name the rules know is looked
    /// up by its id, an unknown one in the plan's names: both ways must agree.)
    @Test func screensThePlanDoesNotListAreNamed() throws {
        let rules = """
            version: 1
            campaign: app
            rules:
              - id: home
                on_screen: Home
                do:
                  - message: { surface: home, title: Hi }
            """
        let plan = Self.plan + "\nscreens: [Home, Settings]\n"
        func decoder(_ plan: String) throws -> SegmentDecoder {
            let r = RuleLoader.load(texts: [("rules.yaml", rules), ("plan.yaml", plan)])
            return SegmentDecoder(ruleSet: try #require(r.ruleSet, "\(r.rendered())"))
        }
        func screen(_ name: String, _ type: String = "screen") -> String {
            #"{"type":"\#(type)","name":"\#(name)","userId":"a","timestamp":"2026-01-01T10:00:00Z"}"#
        }
        let listing = try decoder(plan)
        #expect(try listing.decode(screen("Home")).offPlan.isEmpty)
        #expect(try listing.decode(screen("Settings")).offPlan.isEmpty)
        #expect(try listing.decode(screen("Cart")).offPlan == ["screen 'Cart' is not in the tracking plan"])
        #expect(try listing.decode(screen("Cart", "page")).offPlan == ["screen 'Cart' is not in the tracking plan"])
        #expect(try listing.decode(screen("Cart")).isOffPlan)
        #expect(try !listing.decode(screen("Home")).isOffPlan)
        let open = try decoder(Self.plan)
        #expect(try open.decode(screen("Cart")).offPlan.isEmpty)
        #expect(try open.decode(screen("Home")).offPlan.isEmpty)
        let order = try open.decode(Self.order(#""revenue":12"#))
        #expect(order.offPlan.isEmpty && !order.isOffPlan)
    }
}
