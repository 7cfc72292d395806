import BeckonCore
import BeckonStore
import Foundation
import Testing

/// Identity merge: an identify with `anonymousId` and `userId`, or an alias, makes two ids one user.
struct IdentityTests {
    static let rules = """
        version: 1
        campaign: cart
        rules:
          - id: abandoned
            on: Product Added
            wait: 2h
            unless: Order Completed
            do:
              - push: { body: "Your ${event.properties.product} is waiting" }
          - id: twice
            on: Opened
            limit: { per_user: 2 }
            do:
              - message: { surface: home, title: Hi }
          - id: welcome
            on: Signed Up
            do:
              - notify: { id: welcome, message: Welcome }
          - id: loyal
            on: Opened
            if: count("Opened", "lifetime") == 3
            do:
              - set: { loyal: true }
        """

    func anon(_ name: String, at time: String, _ props: [(String, Value)] = []) -> Event {
        track(name, "anon-1", at: time, props: props)
    }

    func signIn(
        _ user: String = "ann", anonymousID: String = "anon-1", at time: String, _ traits: [(String, Value)] = []
    )
        -> Event
    {
        Event(kind: .identify, userID: user, timestamp: t(time), traits: ValueMap(traits), previousID: anonymousID)
    }

    /// What came due before a sign-in fires before the merge, for the id it was set for: the same whether or not
    /// another user's event moved the stream's clock past it first (as the wall clock had, live).
    @Test func whatCameDueBeforeASignInFiresForItsOwnIDWhateverOtherUsersSent() throws {
        let rs = try load(Self.rules)
        func pushes(_ events: [Event]) -> [String] {
            let engine = Engine(ruleSet: rs)
            return events.flatMap { engine.process($0).actions }.filter { $0.rule == "abandoned" }.map {
                "\($0.userID) \(Timestamp(milliseconds: $0.time))"
            }
        }
        let added = anon("Product Added", at: "2026-03-01T09:00:00Z", [("product", .string("shoes"))])
        let signedIn = signIn(at: "2026-03-01T11:30:00Z")
        let other = track("Opened", "zed", at: "2026-03-01T11:10:00Z")
        let alone = pushes([added, signedIn])
        #expect(alone == ["anon-1 2026-03-01T11:00:00Z"])
        #expect(pushes([added, other, signedIn]) == alone)
        // Not due yet at the sign-in: it moves with the merge and fires for the known user.
        #expect(
            pushes([added, signIn(at: "2026-03-01T10:30:00Z"), track("Opened", "zed", at: "2026-03-01T12:00:00Z")]) == [
                "ann 2026-03-01T11:00:00Z"
            ])
    }

    func lines(_ rs: CompiledRuleSet, _ events: [Event], until: String? = nil) -> [String] {
        let engine = Engine(ruleSet: rs)
        var out = events.flatMap { engine.process($0).actions.map { "\($0.userID) \($0.rule) \($0.kind)" } }
        if let until { out += engine.advance(to: t(until)).actions.map { "\($0.userID) \($0.rule) \($0.kind)" } }
        return out
    }

    /// The anonymous cart's timer moves to the known user: an order under the known id cancels it…
    @Test func anOrderAfterSignInCancelsTheAnonymousCartsPush() throws {
        let rs = try load(Self.rules)
        let out = lines(
            rs,
            [
                anon("Product Added", at: "2026-01-01T10:00:00Z", [("product", .string("Shoes"))]),
                signIn(at: "2026-01-01T10:30:00Z"), track("Order Completed", "ann", at: "2026-01-01T11:00:00Z"),
            ], until: "2026-01-02T00:00:00Z")
        #expect(out.isEmpty)
    }

    /// …and without the order it fires once, for the known user, with the anonymous event's fields.
    @Test func withoutAnOrderThePushGoesToTheKnownUser() throws {
        let rs = try load(Self.rules)
        let engine = Engine(ruleSet: rs)
        engine.process(anon("Product Added", at: "2026-01-01T10:00:00Z", [("product", .string("Shoes"))]))
        engine.process(signIn(at: "2026-01-01T10:30:00Z"))
        let fired = engine.advance(to: t("2026-01-02T00:00:00Z")).actions
        #expect(fired.map(\.userID) == ["ann"])
        #expect(fired.first?.json.contains(#""body":"Your Shoes is waiting""#) == true)
        #expect(fired.first?.time == t("2026-01-01T12:00:00Z"))
        #expect(engine.stats.merges == 1)
    }

    /// After the merge, events under either id reach the one user: limits and history count both.
    @Test func eitherIDReachesTheMergedUser() throws {
        let rs = try load(Self.rules)
        let out = lines(
            rs,
            [
                anon("Opened", at: "2026-01-01T10:00:00Z"), signIn(at: "2026-01-01T10:01:00Z"),
                anon("Opened", at: "2026-01-01T10:02:00Z"), track("Opened", "ann", at: "2026-01-01T10:03:00Z"),
            ])
        #expect(out == ["anon-1 twice message", "ann twice message", "ann loyal set"])
    }

    /// Counts add: the anonymous fire and the known user's count toward `per_user: 2` together.
    @Test func fireRecordsAdd() throws {
        let rs = try load(Self.rules)
        let out = lines(
            rs,
            [
                track("Opened", "ann", at: "2026-01-01T09:00:00Z"), anon("Opened", at: "2026-01-01T10:00:00Z"),
                signIn(at: "2026-01-01T10:01:00Z"), track("Opened", "ann", at: "2026-01-01T10:02:00Z"),
            ])
        #expect(out.filter { $0.hasSuffix("twice message") } == ["ann twice message", "anon-1 twice message"])
    }

    /// A merge across two engines (a fleet's two partitions): the earlier id's engine hands its state over, the
    /// known user's takes it over; the known user ends as one engine's merge leaves them, and the earlier id's later
    /// events, sent on, are theirs.
    @Test func aHandOverBetweenEnginesIsTheOneEngineMerge() throws {
        let rs = try load(Self.rules)
        let before: [Event] = [
            identify("ann", at: "2026-01-01T09:00:00Z", [("plan", .string("pro"))]),
            track("Opened", "ann", at: "2026-01-01T09:05:00Z"),
            anon("Signed Up", at: "2026-01-01T09:40:00Z"),
            anon("Product Added", at: "2026-01-01T09:50:00Z", [("product", .string("Scarf"))]),
            anon("Opened", at: "2026-01-01T09:55:00Z"),
        ]
        let after: [Event] = [signIn(at: "2026-01-01T10:00:00Z"), anon("Opened", at: "2026-01-01T10:05:00Z")]
        let one = Engine(ruleSet: rs)
        for e in before + after { one.process(e) }

        let separate = Engine.Options(mergesIdentities: false)
        let anonymous = Engine(ruleSet: rs, options: separate)
        let known = Engine(ruleSet: rs, options: separate)
        for e in before { (e.userID == "ann" ? known : anonymous).process(e) }
        let handed = anonymous.handOver("anon-1", to: "ann")
        #expect(handed?.pending.count == 1)
        known.takeOver("anon-1", state: handed, into: "ann")
        for e in after { known.process(e) }
        #expect(known.state(of: "ann")?.encoded() == one.state(of: "ann")?.encoded())
        #expect(known.mergedTarget(of: "anon-1") == "ann")
        #expect(anonymous.state(of: "anon-1")?.mergedInto == "ann")
        #expect(anonymous.state(of: "anon-1")?.pending.isEmpty == true)
        // The timers moved: the cart's push is the known user's, and the anonymous engine's finds nothing.
        #expect(anonymous.advance(to: t("2026-01-02T00:00:00Z")).actions.isEmpty)
        #expect(known.advance(to: t("2026-01-02T00:00:00Z")).actions.map(\.userID) == ["ann"])
        // A second hand-over of the same id brings nothing (a retried or second sign-in).
        #expect(anonymous.handOver("anon-1", to: "ann") == nil)
    }

    /// Attributes: both kept, the known user's value wins a conflict; the inbox is the union.
    @Test func conflictsFollowTheDocumentedRules() throws {
        let rs = try load(Self.rules)
        let engine = Engine(ruleSet: rs)
        engine.process(identify("ann", at: "2026-01-01T09:00:00Z", [("plan", .string("pro")), ("lang", .string("de"))]))
        engine.process(
            Event(
                kind: .identify, userID: "anon-1", timestamp: t("2026-01-01T09:30:00Z"),
                traits: ValueMap([("plan", .string("free")), ("color", .string("red"))])))
        engine.process(anon("Signed Up", at: "2026-01-01T09:40:00Z"))
        engine.process(signIn(at: "2026-01-01T10:00:00Z"))
        let ann = try #require(engine.state(of: "ann"))
        #expect(
            ann.attributes.map { "\($0.name)=\(JSONWriter.encode($0.value))" } == [
                #"color="red""#, #"lang="de""#, #"plan="pro""#,
            ])
        #expect(ann.inbox.map(\.id) == ["welcome"])
        let anonState = try #require(engine.state(of: "anon-1"))
        #expect(anonState.mergedInto == "ann")
        #expect(anonState.attributes.isEmpty && anonState.inbox.isEmpty && anonState.pending.isEmpty)
    }

    /// A rule pending for both ids: the later-scheduled action (the newer cart) is the one kept.
    @Test func theNewerCartsTimerWins() throws {
        let rs = try load(Self.rules)
        let engine = Engine(ruleSet: rs)
        engine.process(track("Product Added", "ann", at: "2026-01-01T09:00:00Z", props: [("product", .string("Boots"))]))
        engine.process(anon("Product Added", at: "2026-01-01T10:00:00Z", [("product", .string("Scarf"))]))
        engine.process(signIn(at: "2026-01-01T10:30:00Z"))
        let fired = engine.advance(to: t("2026-01-02T00:00:00Z")).actions
        #expect(fired.map(\.time) == [t("2026-01-01T12:00:00Z")])
        #expect(fired.first?.json.contains("Your Scarf is waiting") == true)
    }

    /// A retried copy of an identify merges nothing: after a second person signed in with the same anonymous id,
    /// the copy of the first sign-in does not take the id back.
    @Test func aDuplicateIdentifyChangesNothing() throws {
        let rs = try load(Self.rules)
        let engine = Engine(ruleSet: rs)
        func signInWithID(_ user: String, _ id: String, at time: String) -> Event {
            Event(kind: .identify, userID: user, timestamp: t(time), messageID: id, previousID: "anon-1")
        }
        engine.process(anon("Opened", at: "2026-01-01T10:00:00Z"))
        engine.process(signInWithID("ann", "m1", at: "2026-01-01T10:01:00Z"))
        engine.process(signInWithID("bob", "m2", at: "2026-01-01T11:00:00Z"))
        #expect(engine.process(signInWithID("ann", "m1", at: "2026-01-01T11:01:00Z")).status == .duplicate)
        #expect(engine.process(anon("Opened", at: "2026-01-01T11:02:00Z")).actions.map(\.userID) == ["bob"])
    }

    /// `alias` (previousId → userId) merges as an identify with both ids does.
    @Test func aliasMerges() throws {
        let rs = try load(Self.rules)
        let engine = Engine(ruleSet: rs)
        engine.process(track("Product Added", "old-id", at: "2026-01-01T10:00:00Z"))
        engine.process(Event(kind: .alias, userID: "new-id", timestamp: t("2026-01-01T10:10:00Z"), previousID: "old-id"))
        #expect(engine.advance(to: t("2026-01-01T13:00:00Z")).actions.map(\.userID) == ["new-id"])
    }

    /// A shared device: a second person signing in with the same anonymous id takes its later events; what the
    /// first brought stays with the first.
    @Test func aSecondSignInRepointsTheAnonymousID() throws {
        let rs = try load(Self.rules)
        let out = lines(
            rs,
            [
                anon("Opened", at: "2026-01-01T10:00:00Z"), signIn(at: "2026-01-01T10:01:00Z"),
                signIn("bob", at: "2026-01-01T11:00:00Z"), anon("Opened", at: "2026-01-01T11:01:00Z"),
            ])
        #expect(out == ["anon-1 twice message", "bob twice message"])
    }

    /// Merging back and forth never makes a cycle.
    @Test func mergesNeverCycle() throws {
        let rs = try load(Self.rules)
        let engine = Engine(ruleSet: rs)
        engine.process(track("Opened", "a", at: "2026-01-01T10:00:00Z"))
        engine.process(Event(kind: .alias, userID: "b", timestamp: t("2026-01-01T10:01:00Z"), previousID: "a"))
        engine.process(Event(kind: .alias, userID: "a", timestamp: t("2026-01-01T10:02:00Z"), previousID: "b"))
        engine.process(Event(kind: .alias, userID: "c", timestamp: t("2026-01-01T10:03:00Z"), previousID: "b"))
        let out = engine.process(track("Opened", "a", at: "2026-01-01T10:04:00Z")).actions
        #expect(out.map(\.userID) == ["c"])
        #expect(engine.state(of: "c")?.records.first { $0.rule == "cart/twice" }?.fires == 2)
    }

    /// The pointer is state: after a restart from SQLite the anonymous id's events still reach the known user, and
    /// the moved timer fires once.
    @Test func theMergeSurvivesARestart() throws {
        let rs = try load(Self.rules)
        let events = [
            anon("Product Added", at: "2026-01-01T10:00:00Z", [("product", .string("Shoes"))]),
            anon("Opened", at: "2026-01-01T10:05:00Z"), signIn(at: "2026-01-01T10:30:00Z"),
            anon("Opened", at: "2026-01-01T10:40:00Z"), anon("Opened", at: "2026-01-01T10:50:00Z"),
            // Into a saved pointer: after a restart anon-1 is restored as one, and anon-2 goes to ann through it.
            track("Opened", "anon-2", at: "2026-01-01T10:55:00Z"),
            Event(kind: .alias, userID: "anon-1", timestamp: t("2026-01-01T10:56:00Z"), previousID: "anon-2"),
            track("Opened", "anon-2", at: "2026-01-01T10:57:00Z"),
            track("Tick", "zed", at: "2026-01-01T13:00:00Z"),
        ]
        let whole = StateTests.run(Engine(ruleSet: rs), events[...], until: StateTests.end(events))
        #expect(whole.count == 5)
        #expect(whole.filter { $0.contains(#""userId":"ann""#) }.count == 3)
        for cut in 1..<events.count {
            let restarted = try SQLiteStateTests.withDatabase { path in
                try StateTests.runWithRestart(rs, events, cut: cut) { try SQLiteStateBackend(path: path) }
            }
            #expect(restarted.actions == whole, "cut at \(cut)")
        }
    }

    /// An id some event named as its `userId` is a known user, and no identify or alias merges it into another: the
    /// write key is in every app, and such a merge handed the victim's inbox, later actions and devices to whoever
    /// sent it. The flag is saved with the user; an anonymous visitor still merges on sign-in; a fleet's hand-over
    /// refuses the same.
    @Test func aKnownUserIsNeverMergedIntoAnother() throws {
        let rs = try load(Self.rules)
        let decoder = SegmentDecoder(ruleSet: rs)
        let engine = Engine(ruleSet: rs)
        func send(_ e: Engine, _ type: String, _ ids: String, _ rest: String = "", at minute: Int) throws {
            let line =
                #"{"type":""# + type + #"",\#(ids),"messageId":"m\#(minute)","timestamp":"2026-03-01T09:0\#(minute):00Z""#
                + rest + "}"
            e.process(try decoder.decode(line))
        }
        try send(engine, "track", #""userId":"victim""#, #","event":"Signed Up""#, at: 0)
        try send(engine, "identify", #""anonymousId":"victim","userId":"mallory""#, at: 1)
        try send(engine, "alias", #""previousId":"victim","userId":"mallory""#, at: 2)
        #expect(engine.state(of: "victim")?.mergedInto == nil)
        #expect(engine.profile(of: "victim")?.inbox.map(\.id) == ["welcome"])
        #expect(engine.profile(of: "mallory")?.inbox.isEmpty ?? true)
        #expect(engine.stats.mergesRefused == 2)
        #expect(engine.stats.merges == 0)

        // An anonymous visitor (only ever an `anonymousId`) merges into the user who signs in.
        try send(engine, "track", #""anonymousId":"anon-9""#, #","event":"Signed Up""#, at: 3)
        try send(engine, "identify", #""anonymousId":"anon-9","userId":"zoe""#, at: 4)
        #expect(engine.state(of: "anon-9")?.mergedInto == "zoe")
        #expect(engine.profile(of: "zoe")?.inbox.map(\.id) == ["welcome"])
        #expect(engine.state(of: "zoe")?.known == true)

        // Saved and restored, the victim is still known; a fleet's hand-over refuses too, and leaves no pointer.
        let saved = try #require(engine.state(of: "victim"))
        #expect(saved.known)
        let fromBytes = try UserState(decoding: saved.encoded())
        let fromJSON = try UserState(json: Array(saved.json.utf8))
        #expect(fromBytes.known && fromJSON.known)
        let other = Engine(ruleSet: rs)
        try other.restore(try UserState(decoding: saved.encoded()))
        try send(other, "identify", #""anonymousId":"victim","userId":"mallory""#, at: 5)
        #expect(other.state(of: "victim")?.mergedInto == nil)
        #expect(other.handOver("victim", to: "mallory") == nil)
        #expect(other.state(of: "victim")?.mergedInto == nil)
        #expect(other.profile(of: "victim")?.inbox.map(\.id) == ["welcome"])
    }

    /// A merged state's bytes (format 2) and JSON read back the same; version-1 bytes still read.
    @Test func thePointerIsEncoded() throws {
        let rs = try load(Self.rules)
        let engine = Engine(ruleSet: rs)
        engine.process(anon("Opened", at: "2026-01-01T10:00:00Z"))
        engine.process(signIn(at: "2026-01-01T10:01:00Z"))
        let s = try #require(engine.state(of: "anon-1"))
        #expect(try UserState(decoding: s.encoded()).mergedInto == "ann")
        #expect(try UserState(json: Array(s.json.utf8)).mergedInto == "ann")
        #expect(s.json.hasSuffix(#""mergedInto":"ann","devices":[],"known":false}"#))
    }
}

/// The decoder finds the earlier id: an identify's `anonymousId` beside `userId`, an alias's `previousId`.
struct IdentityDecodingTests {
    @Test func previousIDs() throws {
        let d = SegmentDecoder(ruleSet: try load(IdentityTests.rules))
        func previous(_ line: String) throws -> String? { try d.decode(line).previousID }
        let at = #""timestamp":"2026-01-01T10:00:00Z""#
        #expect(try previous(#"{"type":"identify","userId":"ann","anonymousId":"a-1",\#(at)}"#) == "a-1")
        #expect(try previous(#"{"type":"identify","anonymousId":"a-1",\#(at)}"#) == nil)
        #expect(try previous(#"{"type":"identify","userId":"ann","anonymousId":"ann",\#(at)}"#) == nil)
        #expect(try previous(#"{"type":"track","event":"E","userId":"ann","anonymousId":"a-1",\#(at)}"#) == nil)
        #expect(try previous(#"{"type":"alias","userId":"ann","previousId":"a-1",\#(at)}"#) == "a-1")
        #expect(throws: DecodeError.self) { try previous(#"{"type":"alias","userId":"ann",\#(at)}"#) }
        #expect(throws: DecodeError.self) { try previous(#"{"type":"alias","anonymousId":"a","previousId":"b",\#(at)}"#) }
    }
}
