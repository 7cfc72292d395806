import Foundation
import Testing

@testable import BeckonCore

/// A broadcast over stored users (``Engine/reach(_:)``), letting users go once saved (``Engine/evict(_:)``), an edited
/// schedule moving the runs already set, and the audience's size (``AudienceCounter``).
struct ReachTests {
    static let opened = """
        version: 1
        campaign: app
        rules:
          - id: hello
            on: Opened
            do:
              - message: { surface: home, title: Hi }
        """

    /// `weekly` with its time edited to `time`.
    static func weekly(_ time: String = "every monday 10:00") -> String {
        """
        version: 1
        campaign: digest
        rules:
          - id: monday_digest
            schedule: \(time)
            if: default(user.plan, "") != "pro"
            do:
              - email: { template: weekly_digest, to: "${default(user.email, null)}" }
        """
    }

    /// Users stored under rules with no schedule, who send nothing afterwards: `count` of them, every third on "pro".
    static func storedUsers(_ count: Int) throws -> MemoryStateBackend {
        let backend = MemoryStateBackend()
        let engine = Engine(ruleSet: try load(opened), store: SavedStateStore(backend: backend))
        for i in 0..<count {
            let id = "u\(i)"
            engine.process(
                identify(
                    id, at: "2026-02-20T08:00:00Z",
                    [("email", .string("\(id)@example.com")), ("plan", .string(i % 3 == 0 ? "pro" : "free"))]))
        }
        try engine.saveStates()
        return backend
    }

    /// Stored users an engine has never held get the weekly run when reached, and only then; each is let go after the
    /// checkpoint and loaded again when the run comes due, which fires it once for each.
    @Test func aScheduleReachesStoredUsersWhoSendNothing() throws {
        let backend = try Self.storedUsers(30)
        let rs = try load(Self.weekly())
        func engine() -> Engine {
            let e = Engine(ruleSet: rs, store: SavedStateStore(backend: backend))
            e.restore(stream: StreamState(clock: t("2026-02-28T00:00:00Z"), latestTime: 0, nextTimerID: 1, ahead: []))
            e.rebuildTimers()
            return e
        }
        // Without the reach, nobody stored is known to the schedule.
        #expect(engine().advance(to: t("2026-03-03T00:00:00Z")).actions.isEmpty)

        let live = engine()
        live.notesColdLoads = true
        let loaded = live.reach((0..<30).map { "u\($0)" } + ["nobody"])
        #expect(loaded.count == 30)
        #expect(live.residentUsers == 30)
        try live.saveStates()
        #expect(live.evict(loaded) == 30)
        #expect(live.residentUsers == 0)
        // Reaching again sets nothing twice.
        let again = live.reach(["u1", "u2"])
        #expect(again == ["u1", "u2"])
        try live.saveStates()
        live.evict(again)

        let fired = live.advance(to: t("2026-03-03T00:00:00Z")).actions
        #expect(fired.count == 20)
        #expect(Set(fired.map(\.userID)).count == 20)
        #expect(fired.allSatisfy { $0.time == t("2026-03-02T10:00:00Z") })
        #expect(!fired.contains { ["u0", "u3", "u27"].contains($0.userID) })
        // The users the timers loaded are named, let go once written, and come back for the next run.
        #expect(Set(live.takeColdLoads()).count == 30)
        try live.saveStates()
        #expect(live.evict((0..<30).map { "u\($0)" }) == 30)
        let next = live.advance(to: t("2026-03-10T00:00:00Z")).actions
        #expect(next.count == 20)
        #expect(next.allSatisfy { $0.time == t("2026-03-09T10:00:00Z") })
    }

    /// With a bound on users loaded, a run due for more users stops at the bound, says something is overdue, and goes
    /// on once those are written and let go: every user fires once, and no more than the bound are held at a time.
    @Test func aRunLoadsAtMostTheBoundBeforeTheyAreLetGo() throws {
        let backend = try Self.storedUsers(30)
        let live = Engine(ruleSet: try load(Self.weekly()), store: SavedStateStore(backend: backend))
        live.restore(stream: StreamState(clock: t("2026-02-28T00:00:00Z"), latestTime: 0, nextTimerID: 1, ahead: []))
        live.rebuildTimers()
        live.notesColdLoads = true
        let loaded = live.reach((0..<30).map { "u\($0)" })
        try live.saveStates()
        live.evict(loaded)
        #expect(live.residentUsers == 0)
        live.maxColdLoads = 7
        var fired: [String] = []
        var rounds = 0
        var mostHeld = 0
        repeat {
            fired += live.advance(to: t("2026-03-03T00:00:00Z")).actions.map(\.userID)
            mostHeld = max(mostHeld, live.residentUsers)
            try live.saveStates()
            live.evict(live.takeColdLoads())
            rounds += 1
        } while live.hasOverdue && rounds < 20
        #expect(rounds == 5)
        #expect(mostHeld == 7)
        #expect(fired.count == 20)
        #expect(Set(fired).count == 20)
        #expect(!live.hasOverdue)
        // Without a bound one call fires them all.
        let backend2 = try Self.storedUsers(30)
        let all = Engine(ruleSet: try load(Self.weekly()), store: SavedStateStore(backend: backend2))
        all.restore(stream: StreamState(clock: t("2026-02-28T00:00:00Z"), latestTime: 0, nextTimerID: 1, ahead: []))
        all.notesColdLoads = true
        all.reach((0..<30).map { "u\($0)" })
        #expect(all.advance(to: t("2026-03-03T00:00:00Z")).actions.count == 20)
        #expect(!all.hasOverdue)
    }

    /// A user changed since their state was taken is not let go (their newer state would be lost).
    @Test func aChangedUserIsNotEvicted() throws {
        let backend = try Self.storedUsers(2)
        let e = Engine(ruleSet: try load(Self.weekly()), store: SavedStateStore(backend: backend))
        e.restore(stream: StreamState(clock: t("2026-02-27T00:00:00Z"), latestTime: 0, nextTimerID: 1, ahead: []))
        _ = e.reach(["u0", "u1"])
        #expect(e.profile(of: "u0")?.pending.map(\.due) == [t("2026-03-02T10:00:00Z")])
        try e.saveStates()
        e.process(identify("u1", at: "2026-02-28T08:00:00Z", [("plan", .string("pro"))]))
        #expect(e.evict(["u0", "u1"]) == 1)
        #expect(e.profile(of: "u1")?.userID == "u1")
        try e.saveStates()
        #expect(e.evict(["u1"]) == 1)
        let bytes = try #require(try backend.read("u1"))
        let state = try UserState(decoding: bytes)
        #expect(state.attributes.contains { a in a.name == "plan" && JSONWriter.encode(a.value) == "\"pro\"" })
    }

    /// Editing a schedule's time moves the runs already set to the new time, from a reload's carried state and from
    /// a stored state alike; an unchanged schedule keeps its runs (an overdue one still fires, late).
    @Test func anEditedScheduleMovesThePendingRuns() throws {
        let backend = MemoryStateBackend()
        let before = Engine(ruleSet: try load(Self.weekly()), store: SavedStateStore(backend: backend))
        before.process(identify("ann", at: "2026-03-03T08:00:00Z", [("email", .string("ann@example.com"))]))
        #expect(before.profile(of: "ann")?.pending.first?.due == t("2026-03-09T10:00:00Z"))
        try before.saveStates()

        let edited = try load(Self.weekly("every wednesday 09:00"))
        let carried = Engine(ruleSet: edited, carryingStateFrom: before)
        #expect(carried.profile(of: "ann")?.pending.map(\.due) == [t("2026-03-04T09:00:00Z")])
        #expect(carried.advance(to: t("2026-03-05T00:00:00Z")).actions.map(\.time) == [t("2026-03-04T09:00:00Z")])

        let fromStore = Engine(ruleSet: edited, store: SavedStateStore(backend: backend))
        fromStore.restore(stream: before.streamState)
        #expect(fromStore.profile(of: "ann")?.pending.map(\.due) == [t("2026-03-04T09:00:00Z")])

        // Unchanged: an overdue run is not moved past (it fires when its timer is reached).
        let same = Engine(ruleSet: try load(Self.weekly()), store: SavedStateStore(backend: backend))
        same.restore(stream: StreamState(clock: t("2026-03-12T00:00:00Z"), latestTime: 0, nextTimerID: 9, ahead: []))
        #expect(same.profile(of: "ann")?.pending.map(\.due) == [t("2026-03-09T10:00:00Z")])
    }

    /// A one-off moved into the past is dropped for the users it was set for, not fired.
    @Test func aOneOffMovedIntoThePastIsDropped() throws {
        let before = Engine(ruleSet: try load(Self.weekly("2026-03-20T09:00:00Z")))
        before.process(identify("ann", at: "2026-03-10T08:00:00Z", []))
        before.advance(to: t("2026-03-12T00:00:00Z"))
        let after = Engine(ruleSet: try load(Self.weekly("2026-03-11T09:00:00Z")), carryingStateFrom: before)
        #expect(after.profile(of: "ann")?.pending.isEmpty == true)
        #expect(after.advance(to: t("2026-04-01T00:00:00Z")).actions.isEmpty)
    }

    /// The audience's size: the rule's `if` on each stored user, merged ids not counted, bad bytes counted apart.
    @Test func audienceSizeCountsStoredUsers() throws {
        let backend = try Self.storedUsers(30)
        backend.overwrite("broken", bytes: [1, 2, 3])
        let scratch = Engine(ruleSet: try load(Self.opened))
        scratch.process(identify("anon-1", at: "2026-02-20T08:00:00Z", []))
        var merged = try #require(scratch.state(of: "anon-1"))
        merged.mergedInto = "u1"
        try backend.write([SavedState(userID: "anon-1", bytes: merged.encoded(), nextDue: nil, mergedInto: "u1")])
        let rs = try load(Self.weekly())
        var counter = try #require(AudienceCounter(ruleSet: rs, rule: "digest/monday_digest", now: t("2026-03-01T00:00:00Z")))
        let rows = backend.rows.values.sorted { $0.userID < $1.userID }.map { (userID: $0.userID, bytes: $0.bytes) }
        for page in stride(from: 0, to: rows.count, by: 7) { counter.add(Array(rows[page..<min(page + 7, rows.count)])) }
        #expect(counter.size == AudienceSize(users: 20, stored: 30, undecodable: 1))
        #expect(!counter.stopped)
        // With a deadline passed, counting stops where it is (the console's playground: within its 2,000 ms).
        var late = try #require(AudienceCounter(ruleSet: rs, rule: "digest/monday_digest", now: t("2026-03-01T00:00:00Z")))
        late.deadline = .now - .seconds(1)
        late.add(rows)
        #expect(late.stopped && late.size == AudienceSize())
        #expect(AudienceCounter(ruleSet: rs, rule: "digest/nope", now: 0) == nil)
        #expect(AudienceCounter(ruleSet: rs, rule: "monday_digest", now: 0) != nil)
    }
}

/// Letting profiles go from the in-memory table (backward-shift deletion) keeps every other user findable.
struct ProfileRemovalTests {
    @Test func removingUsersKeepsTheOthersFindable() {
        let store = InMemoryStateStore()
        var rng = SystemRandomNumberGenerator()
        var held: Set<String> = []
        for round in 0..<20 {
            for i in 0..<300 {
                let id = "u\(round)-\(i)"
                _ = store.profile(for: id, create: true) { UserProfile(userID: id, attributeCount: 0, contextCount: 0) }
                held.insert(id)
            }
            for id in held.shuffled(using: &rng).prefix(200) {
                #expect(store.remove(id))
                held.remove(id)
            }
            #expect(!store.remove("never-seen"))
            #expect(store.userCount == held.count)
        }
        for id in held { #expect(store.profile(for: id, create: false) { fatalError() }?.userID == id) }
        #expect(Set(store.allProfiles().map(\.userID)) == held)
    }
}
