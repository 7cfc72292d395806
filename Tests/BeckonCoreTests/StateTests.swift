import BeckonCore
import BeckonYAML
import Foundation
import PropertyBased
import Testing

/// A user's state as bytes: taken, encoded, decoded and restored, it continues as if nothing had happened.
struct StateTests {
    /// Rules using every construct that keeps state per user: limits of each kind, rolling and calendar windows,
    /// sessions, `sum`, delays with `at` and `retrigger`, `unless`, correlated sequences, quiet hours, flows, inbox,
    /// `on_change`, re-prompts, arbitration and the global cap.
    static let rules = """
        version: 1
        campaign: everything
        rules:
          - id: capped
            on: Opened
            limit: { per_user: 6, per_session: 1, per_day: 3, cooldown: 5m }
            do: [ { message: { surface: home, title: "Hi ${default(user.plan, 'none')}" } } ]
          - id: rival
            on: Opened
            priority: 2
            if: 'count("Opened", "3d") >= 3'
            limit: { per_week: 2 }
            do: [ { message: { surface: home, title: Rival } } ]
          - id: every_third
            on: Level
            limit: { every_occurrence: 3 }
            do: [ { emit: { event: Level Milestone } } ]
          - id: on_second
            on: Level
            limit: { on_occurrence: 2, per_month: 1 }
            do: [ { set: { leveled: true, plan: gold } } ]
          - id: plan_changed
            on_change: plan
            do: [ { notify: { id: "plan_${change.to}", message: "Now ${change.to}" } } ]
          - id: read
            on: Read
            do: [ { mark_read: "${event.properties.id}" } ]
          - id: remind
            on: Signed In
            wait: 1d
            unless: { event: Stamp Claimed }
            retrigger: add
            do: [ { notify: { id: remind, message: "claim ${default(event.properties.stamp, 'it')}" } } ]
          - id: morning
            on: Signed In
            wait: 2h
            at: "weekday 09:30"
            retrigger: restart
            do: [ { screen: tips } ]
          - id: stuck
            sequence: [Added, { event: Checkout, where: "event.properties.total > 50" }]
            within: 1h
            correlate: cart_id
            do: [ { message: { surface: checkout, title: Help } } ]
          - id: spent
            on: Purchase
            if: 'sum("Purchase", "price", "7d") > 100.0'
            limit: { cooldown: 1d }
            do: [ { deep_link: "app://vip" } ]
          - id: reprompt_att
            on: Opened
            reprompt: { after: Answered, when: { status: denied }, wait: 3d, times: 2 }
            do: [ { prompt: att } ]
          - id: back_again
            on: Opened
            if: 'seen("Signed Up") && days_since("Signed Up") >= 1 && count("*", "2d") >= 2'
            limit: { per_user: 1 }
            do: [ { screen: welcome_back } ]
        """

    static let polite = """
        version: 1
        ruleset: polite
        defaults:
          quiet_hours: { from: "22:00", to: "08:00" }
        flows:
          - id: onboarding
            version: 1
            steps: [intro, profile, finish_step]
        rules:
          - id: digest
            on: Digest Ready
            do: [ { notify: { id: digest, message: "Your week" } } ]
          - id: flow_start
            on: Signed Up
            do: [ { flow: { start: onboarding } } ]
          - id: flow_step
            on: Step Completed
            do: [ { flow: { complete: onboarding, step: "${event.properties.step}" } } ]
        """

    static let settings = """
        version: 1
        settings: app
        sessions: { start_on: [Signed In], timeout: 30m }
        global_limit: { per_session: 2, per_day: 4 }
        dedup_window: 1d
        """

    static func ruleSet(_ rules: String = StateTests.rules) throws -> CompiledRuleSet {
        let r = RuleLoader.load(texts: [
            ("everything.yaml", rules), ("polite.yaml", polite), ("settings.yaml", settings),
        ])
        guard let set = r.ruleSet else {
            Issue.record("rules did not load:\n\(r.rendered())")
            throw LoadFailed()
        }
        return set
    }

    /// A random stream over those rules: three users, every event the rules read, gaps from seconds to days, late
    /// events, messageIds repeated by the same user, identify calls changing plans and zones. Each pick's digits
    /// choose the user, the event, the gap and the rest independently.
    static func stream(_ picks: [Int]) -> [Event] {
        var at = t("2026-03-02T07:00:00Z")
        let names = [
            "Opened", "Opened", "Level", "Signed In", "Stamp Claimed", "Added", "Checkout", "Checkout", "Purchase",
            "Answered", "Digest Ready", "Signed Up", "Step Completed", "Read", "identify",
        ]
        let gaps: [Int64] = [20_000, 60_000, 300_000, 600_000, 1_800_000, 3 * 3_600_000, 26 * 3_600_000]
        var lastID: [String: String] = [:]
        var events: [Event] = []
        for (i, x) in picks.enumerated() {
            let user = "u\(x % 3)"
            let name = names[(x / 3) % names.count]
            let y = x / 42
            at += gaps[y % gaps.count]
            // One event in seven late by up to an hour; one in nine repeats this user's previous messageId.
            let time = y % 7 == 3 ? at - Int64(y % 60) * 60_000 : at
            let id: String? = y % 9 == 4 ? lastID[user] : (y % 5 == 0 ? nil : "m\(i)")
            if let id { lastID[user] = id }
            if name == "identify" {
                let plans = ["free", "pro", "gold"]
                events.append(
                    Event(
                        kind: .identify, userID: user, timestamp: time, messageID: id,
                        traits: ValueMap([
                            ("plan", .string(plans[y % 3])),
                            ("timezone", .string(y % 2 == 0 ? "Europe/Paris" : "America/New_York")),
                            ("nickname", .string("n\(y % 4)")),
                        ])))
                continue
            }
            var props: [(String, Value)] = []
            switch name {
            case "Added", "Checkout": props = [("cart_id", .int(Int64(y % 2))), ("total", .double(Double(30 + y % 60)))]
            case "Purchase": props = [("price", .double(Double(20 + y % 70)))]
            case "Answered": props = [("status", .string(y % 3 == 0 ? "authorized" : "denied"))]
            case "Step Completed": props = [("step", .string(["intro", "profile", "finish_step"][y % 3]))]
            case "Read": props = [("id", .string(y % 2 == 0 ? "remind" : "plan_gold"))]
            case "Signed In": props = [("stamp", .string("s\(y % 5)"))]
            default: break
            }
            events.append(
                Event(
                    kind: .track, name: name, userID: user, timestamp: time, messageID: id, properties: ValueMap(props),
                    context: ValueMap([("locale", .string(y % 2 == 0 ? "fr_FR" : "en_US"))])))
        }
        return events
    }

    /// Every action, as JSON (ids, times and fields), of `events`, and with `until`, of time running on to then.
    static func run(_ engine: Engine, _ events: ArraySlice<Event>, until: Int64? = nil) -> [String] {
        var out = events.flatMap { engine.process($0).actions.map(\.json) }
        if let until { out += engine.advance(to: until).actions.map(\.json) }
        return out
    }

    /// 30 days after the last event.
    static func end(_ events: [Event]) -> Int64 { (events.map(\.timestamp).max() ?? 0) + 30 * 86_400_000 }

    /// `engine`'s users and stream, through bytes, into a new engine for `ruleSet`.
    static func reloaded(_ engine: Engine, into ruleSet: CompiledRuleSet) throws -> Engine {
        let next = Engine(ruleSet: ruleSet)
        next.restore(stream: try StreamState(decoding: engine.streamState.encoded()))
        for s in engine.states() { try next.restore(try UserState(decoding: s.encoded())) }
        return next
    }

    /// Events far ahead of the stream's clock wait for another user's to move it, and the waiting ones are saved with
    /// the stream: a restored engine (another process, whose profile table hashes with another seed) must still see
    /// that the next event is the same user's. Found by the property below: u2's identify a day later was taken as
    /// confirmed, moved the clock, and its plan change did not fire.
    @Test func aRestoredEngineKnowsWhoseEventsWaitToMoveTheClock() throws {
        let rs = try StateTests.ruleSet()
        let events = StateTests.stream([1343, 1028, 3194] + Array(repeating: 0, count: 17))
        let straight = StateTests.run(Engine(ruleSet: rs), events[...], until: StateTests.end(events))
        let first = Engine(ruleSet: rs)
        var actions = StateTests.run(first, events[..<1])
        actions += StateTests.run(try StateTests.reloaded(first, into: rs), events[1...], until: StateTests.end(events))
        #expect(actions == straight)
        #expect(straight.contains { $0.contains(#""rule":"plan_changed""#) })
    }

    @Test func aStreamCutAnywhereAndRestoredGivesTheSameActions() async throws {
        let rs = try StateTests.ruleSet()
        let picks = Gen.int(in: 0...10_000).array(of: 20...90)
        let cuts = Gen.int(in: 0...1_000).array(of: 3...3)
        await propertyCheck(count: 60, input: picks, cuts) { picks, cuts in
            let events = StateTests.stream(picks)
            let straight = StateTests.run(Engine(ruleSet: rs), events[...], until: StateTests.end(events))
            for c in cuts.map({ $0 % (events.count + 1) }) {
                let first = Engine(ruleSet: rs)
                var actions = StateTests.run(first, events[..<c])
                let second = try #require(try? StateTests.reloaded(first, into: rs))
                actions += StateTests.run(second, events[c...], until: StateTests.end(events))
                #expect(actions == straight, "cut at \(c) of \(events.count)")
                if actions != straight { return }
            }
        }
    }

    /// Long streams cut at every point. They exercise every rule (checked, so that the test cannot pass by firing
    /// nothing), duplicates, late events, held and delayed actions.
    @Test func longStreamsCutAtEveryPoint() throws {
        let rs = try StateTests.ruleSet()
        var rulesFired: Set<String> = []
        var kinds: Set<String> = []
        for seed in 0..<3 {
            var g = SplitMix(seed: UInt64(seed))
            let events = StateTests.stream((0..<140).map { _ in Int(g.next() % 100_000) })
            let engine = Engine(ruleSet: rs)
            let straight = StateTests.run(engine, events[...], until: StateTests.end(events))
            #expect(engine.stats.duplicates > 0 && engine.stats.late > 0 && engine.stats.scheduled.reduce(0, +) > 0)
            for a in straight {
                if let r = a.split(separator: "\"rule\":\"").dropFirst().first?.split(separator: "\"").first {
                    rulesFired.insert(String(r))
                }
            }
            kinds.formUnion(
                straight.compactMap { $0.split(separator: "\"action\":\"").dropFirst().first?.prefix(4) }.map(String.init))
            for c in 0...events.count {
                let first = Engine(ruleSet: rs)
                var actions = StateTests.run(first, events[..<c])
                actions += StateTests.run(try StateTests.reloaded(first, into: rs), events[c...], until: StateTests.end(events))
                #expect(actions == straight, "seed \(seed), cut at \(c) of \(events.count)")
                if actions != straight { return }
            }
        }
        #expect(rulesFired == Set(rs.rules.map(\.id)), "rules never fired: \(Set(rs.rules.map(\.id)).subtracting(rulesFired))")
    }

    /// The same through a ``SavedStateStore``: every event's state written as bytes, the engine and its memory thrown
    /// away at the cut, and a new one started over the same backend (users load on their first event or timer).
    @Test func aSavedStoreRestartsWhereItStopped() async throws {
        let rs = try StateTests.ruleSet()
        let picks = Gen.int(in: 0...10_000).array(of: 20...90)
        let cut = Gen.int(in: 0...1_000)
        await propertyCheck(count: 40, input: picks, cut) { picks, cut in
            let events = StateTests.stream(picks)
            let straight = StateTests.run(Engine(ruleSet: rs), events[...], until: StateTests.end(events))
            let c = cut % (events.count + 1)
            let backend = MemoryStateBackend()
            let restarted = try! StateTests.runWithRestart(rs, events, cut: c) { backend }
            #expect(StateTests.byUser(restarted.actions) == StateTests.byUser(straight), "cut at \(c) of \(events.count)")
            #expect(restarted.failures == 0)
        }
    }

    /// The actions of `events` with a restart at `c`: a first engine over a ``SavedStateStore`` on `backend()`
    /// processes the events before the cut and flushes; it is dropped, and a second engine over a new store on
    /// `backend()` (which starts with no user loaded) takes the stream's state and the rest of the events.
    static func runWithRestart(
        _ rs: CompiledRuleSet, _ events: [Event], cut c: Int, backend: () throws -> any StateBackend
    ) throws -> (actions: [String], failures: Int) {
        var actions: [String] = []
        var stream: [UInt8] = []
        do {
            let first = Engine(ruleSet: rs, store: SavedStateStore(backend: try backend()))
            actions = run(first, events[..<c])
            try first.saveStates()
            stream = first.streamState.encoded()
        }
        let store = SavedStateStore(backend: try backend())
        let second = Engine(ruleSet: rs, store: store)
        second.restore(stream: try StreamState(decoding: stream))
        second.rebuildTimers()
        #expect(store.userCount == 0)
        actions += run(second, events[c...], until: end(events))
        return (actions, store.decodingFailures.count)
    }

    /// Action lines by user: timers of users with no later event come due in a different order across users.
    static func byUser(_ xs: [String]) -> [String: [String]] {
        Dictionary(grouping: xs) { x in String(x.split(separator: "\"userId\":\"").dropFirst().first?.prefix(2) ?? "") }
    }

    @Test func anEditedRuleSetKeepsWhatStillHasAName() throws {
        let old = try StateTests.ruleSet()
        let engine = Engine(ruleSet: old)
        let t0 = t("2026-03-02T10:00:00Z")
        for (i, name) in ["Opened", "Opened", "Signed In", "Added", "Level", "Level"].enumerated() {
            engine.process(
                Event(
                    kind: .track, name: name, userID: "u1", timestamp: t0 + Int64(i) * 60_000, messageID: "m\(i)",
                    properties: ValueMap([("cart_id", .int(1)), ("total", .double(10))])))
        }
        let before = try #require(engine.state(of: "u1"))
        #expect(before.records.map(\.rule).contains("everything/capped"))
        #expect(before.pending.map(\.rule).sorted() == ["everything/morning", "everything/remind"])
        #expect(before.sequences.map(\.rule) == ["everything/stuck"])

        // `capped` removed, `fresh` added, `rival`'s window widened from a week to four.
        var edited = StateTests.rules.replacingOccurrences(
            of: """
                  - id: capped
                    on: Opened
                    limit: { per_user: 6, per_session: 1, per_day: 3, cooldown: 5m }
                    do: [ { message: { surface: home, title: "Hi ${default(user.plan, 'none')}" } } ]

                """, with: "")
        edited = edited.replacingOccurrences(of: "limit: { per_week: 2 }", with: "limit: { per_month: 2 }")
        edited += """

              - id: fresh
                on: Opened
                limit: { per_user: 1 }
                do: [ { screen: fresh } ]
            """
        let new = try StateTests.ruleSet(edited)
        #expect(new.rule(named: "everything/capped") == nil)
        let carried = Engine(ruleSet: new, carryingStateFrom: engine)
        #expect(carried.streamState == engine.streamState)
        let after = try #require(carried.state(of: "u1"))
        // The removed rule's record and its series are gone; the rest is as it was.
        #expect(!after.records.map(\.rule).contains("everything/capped"))
        #expect(after.records.map(\.rule) == before.records.map(\.rule).filter { $0 != "everything/capped" })
        #expect(!after.series.map(\.key).contains("f:everything/capped"))
        #expect(
            after.series.first { $0.key == "e:Opened" }?.times == before.series.first { $0.key == "e:Opened" }?.times)
        #expect(after.pending.map(\.id) == before.pending.map(\.id))
        #expect(after.sequences.map(\.best) == before.sequences.map(\.best))
        #expect(after.encoded().count < before.encoded().count)
        // The new rule starts empty and fires; `rival`'s fires recorded under the week still count in the month.
        let next = carried.process(track("Opened", "u1", at: "2026-03-02T10:10:00Z", id: "m9"))
        #expect(next.actions.map(\.rule).contains("fresh"))
        // The delayed actions still come due, under the new rule set, with the ids they would have had.
        let due = carried.advance(to: t0 + 2 * 86_400_000).actions
        let dueBefore = engine.advance(to: t0 + 2 * 86_400_000).actions
        #expect(due.map(\.id) == dueBefore.map(\.id))
        #expect(due.map(\.time) == dueBefore.map(\.time))
    }

    /// The encoding's version-1 bytes for a fixed user: a change of format shows here (regenerate only with a new
    /// version number, and keep reading the old one).
    /// The stream of the user whose state is pinned in Fixtures/user-state-v1.hex (and .json).
    static let pinnedUserEvents = [
        identify("ada", at: "2026-03-02T09:00:00Z", [("plan", "pro"), ("timezone", "Europe/Paris"), ("vip", true)]),
        track("Opened", "ada", at: "2026-03-02T09:01:00Z", id: "a1", context: [("locale", "fr_FR")]),
        track("Signed In", "ada", at: "2026-03-02T09:02:00Z", id: "a2", props: [("stamp", "gold")]),
        track("Added", "ada", at: "2026-03-02T09:03:00Z", id: "a3", props: [("cart_id", 7), ("total", 80.5)]),
        track("Purchase", "ada", at: "2026-03-02T09:04:00Z", id: "a4", props: [("price", 12.25)]),
        track("Signed Up", "ada", at: "2026-03-02T09:05:00Z", id: "a5"),
        track("Level", "ada", at: "2026-03-02T09:06:00Z"),
        track("Level", "ada", at: "2026-03-02T09:07:00Z"),
    ]

    /// The pinned user's push device (format version 3 pins it).
    static let pinnedDevice = Device(
        token: "a1b2c3d4", platform: .ios, app: "com.example.stampbook", firstSeen: t("2026-03-02T09:06:30Z"),
        lastSeen: t("2026-03-02T09:07:00Z"), pushEnabled: true)

    @Test func formatBytesAreStable() throws {
        let rs = try StateTests.ruleSet()
        let engine = Engine(ruleSet: rs)
        for e in Self.pinnedUserEvents { engine.process(e) }
        engine.report(Self.pinnedDevice, for: "ada")
        let bytes = try #require(engine.state(of: "ada")).encoded()
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "Fixtures/user-state-v5.hex")
        if ProcessInfo.processInfo.environment["BECKON_UPDATE_GOLDEN"] != nil {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try (hex + "\n").write(to: url, atomically: true, encoding: .utf8)
        }
        let golden = try String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(hex == golden)
        // And the golden bytes restore into a user who continues as the original does.
        let decoded = try UserState(decoding: bytes)
        let other = Engine(ruleSet: rs)
        other.restore(stream: engine.streamState)
        try other.restore(decoded)
        let later = track("Opened", "ada", at: "2026-03-03T12:00:00Z", id: "a9")
        #expect(other.process(later).actions.map(\.json) == engine.process(later).actions.map(\.json))
    }

    /// Version-1 bytes (before `mergedInto`) still read, as the same user.
    @Test func versionOneBytesStillRead() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
        func bytes(_ name: String) throws -> [UInt8] {
            let hex = try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            var out: [UInt8] = []
            var i = hex.startIndex
            while i < hex.endIndex {
                let j = hex.index(i, offsetBy: 2)
                out.append(UInt8(hex[i..<j], radix: 16)!)
                i = j
            }
            return out
        }
        let v1 = try bytes("user-state-v1.hex")
        #expect(v1[3] == 1)
        let read = try UserState(decoding: v1)
        #expect(read.mergedInto == nil)
        // Version 2 (before `devices`) reads too; each re-encodes as the same user.
        let v2 = try bytes("user-state-v2.hex")
        #expect(v2[3] == 2)
        let read2 = try UserState(decoding: v2)
        #expect(read2.devices.isEmpty)
        #expect(read.encoded() == read2.encoded())
        var withDevice = read2
        withDevice.devices = [Self.pinnedDevice]
        // Version 3 (its messageIds after the history, oldest first) reads as that user with the device; the user's
        // bytes today are version 4's.
        let v3 = try bytes("user-state-v3.hex")
        #expect(v3[3] == 3)
        let read3 = try UserState(decoding: v3)
        #expect(read3.devices == [Self.pinnedDevice])
        #expect(read3.messageIDs.map(\.hash) == withDevice.messageIDs.map(\.hash))
        #expect(read3.expiredMessageIDs.isEmpty)
        #expect(read3.encoded() == withDevice.encoded())
        // Version 4 (before `known`) reads as that user, not known; the user's bytes today are version 5's.
        let v4 = try bytes("user-state-v4.hex")
        #expect(v4[3] == 4)
        let read4 = try UserState(decoding: v4)
        #expect(!read4.known)
        #expect(read4.encoded() == withDevice.encoded())
        #expect(withDevice.encoded() == (try bytes("user-state-v5.hex")))
    }

    /// Ids past the dedup window that the engine forgot but still stores are saved as expired, after the ids within
    /// it, at the end of the bytes: a restored user treats both as the original does, and two saves in a row share
    /// the older ids' bytes at their end (what keeps PostgreSQL's log of a save small: docs/state.md).
    @Test func expiredMessageIDsAreSavedLastAndRestoreAsForgotten() throws {
        let rs = try StateTests.ruleSet()
        let engine = Engine(ruleSet: rs)
        // An id every 3 hours; the rule set's window is a day.
        func at(_ k: Int, minute: Int = 0) -> String {
            Timestamp(milliseconds: t("2026-03-01T00:00:00Z") + Int64(k) * 3 * 3_600_000 + Int64(minute) * 60_000)
                .description
        }
        for k in 0...10 { engine.process(track("Opened", "ada", at: at(k), id: "m\(k)")) }
        let saved = try #require(engine.state(of: "ada"))
        // At hour 30 the window starts after hour 6: m0 to m2 are forgotten, stored until half of what is stored is.
        #expect(saved.expiredMessageIDs.count == 3)
        #expect(saved.messageIDs.count == 8)
        let bytes = saved.encoded()
        let read = try UserState(decoding: bytes)
        #expect(read.messageIDs.map(\.hash) == saved.messageIDs.map(\.hash))
        #expect(read.messageIDs.map(\.time) == saved.messageIDs.map(\.time))
        #expect(read.expiredMessageIDs.map(\.hash) == saved.expiredMessageIDs.map(\.hash))
        #expect(read.expiredMessageIDs.map(\.time) == saved.expiredMessageIDs.map(\.time))
        #expect(read.encoded() == bytes)
        #expect(try UserState(json: Array(read.json.utf8)).encoded() == bytes)

        let restored = Engine(ruleSet: rs)
        restored.restore(stream: engine.streamState)
        try restored.restore(read)
        #expect(restored.state(of: "ada")!.encoded() == bytes)
        for (k, duplicate) in [(1, false), (2, false), (3, true), (10, true)] {
            let again = track("Opened", "ada", at: at(10, minute: 1), id: "m\(k)")
            let a = engine.process(again)
            let b = restored.process(again)
            #expect((a.status == .duplicate) == duplicate, "m\(k)")
            #expect(b.status == a.status, "m\(k)")
            #expect(b.actions.map(\.json) == a.actions.map(\.json))
        }

        // One more event: the ids saved before, but the newest (now relative to a newer one), are the same bytes at
        // the end of the next save.
        let before = try #require(engine.state(of: "ada")).encoded()
        engine.process(track("Opened", "ada", at: at(10, minute: 2), id: "m11"))
        let after = try #require(engine.state(of: "ada")).encoded()
        let shared = zip(before.reversed(), after.reversed()).prefix { $0 == $1 }.count
        let stored = saved.messageIDs.count + saved.expiredMessageIDs.count + 2
        #expect(shared >= (stored - 1) * 9)
    }

    @Test func badBytesAreErrorsNotCrashes() async throws {
        let rs = try StateTests.ruleSet()
        let engine = Engine(ruleSet: rs)
        for e in StateTests.stream(Array(0..<80).map { $0 * 7_919 % 100_000 }) { engine.process(e) }
        let good = engine.states().map { $0.encoded() }
        #expect(!good.isEmpty)
        // Every truncation of a real state fails to decode, with the offset where it ran out.
        for b in good {
            for n in 0..<b.count {
                #expect(throws: StateDecodingError.self) { try UserState(decoding: Array(b[..<n])) }
            }
            #expect(throws: StateDecodingError.self) { try UserState(decoding: b + [0]) }
        }
        // Random flips decode or fail; what decodes restores and runs.
        let flips = Gen.int(in: 0...1_000_000).array(of: 1...4)
        await propertyCheck(count: 400, input: flips) { flips in
            var b = good[flips[0] % good.count]
            for f in flips { b[f % b.count] ^= UInt8(truncatingIfNeeded: f >> 8 | 1) }
            guard let s = try? UserState(decoding: b) else { return }
            let e = Engine(ruleSet: rs)
            try? e.restore(s)
            e.process(track("Opened", s.userID, at: "2026-04-01T00:00:00Z"))
            e.advance(to: t("2026-05-01T00:00:00Z"))
        }
        // A later version is refused by name.
        var later = good[0]
        later[3] = UserState.formatVersion + 1
        #expect(throws: StateDecodingError.self) { try UserState(decoding: later) }
        #expect(throws: StateRestoreError.userExists(engine.states()[0].userID)) { try engine.restore(engine.states()[0]) }
    }
}
