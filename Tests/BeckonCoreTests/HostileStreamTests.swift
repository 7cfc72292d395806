import BeckonCore
import Testing

/// Streams that must lose no send and double none: duplicates, replays, wrong clocks, odd ids.
struct DuplicateTests {
    /// A reminder 1 hour after `A`, for every user.
    let reminder = "on: A\nwait: 1h\ndo: [ { deep_link: x } ]"

    @Test func aDuplicateBringsNothingDueAndTheNextEventDoes() throws {
        let rs = try rule(reminder)
        let engine = Engine(ruleSet: rs)
        engine.process(track("A", "ann", at: "2026-03-01T09:00:00Z", id: "a1"))
        engine.process(track("B", "bob", at: "2026-03-01T09:00:00Z", id: "b1"))
        // Bob's event sent again, stamped past Ann's due time: a duplicate moves no clock, so nothing comes due in an
        // outcome a caller skips.
        let dup = engine.process(track("B", "bob", at: "2026-03-01T11:00:00Z", id: "b1"))
        #expect(dup.status == .duplicate)
        #expect(dup.actions.isEmpty && dup.verdicts.isEmpty)
        let next = engine.process(track("B", "bob", at: "2026-03-01T11:00:00Z", id: "b2"))
        #expect(next.actions.map(\.userID) == ["ann"])
        #expect(next.actions.map(\.time) == [t("2026-03-01T10:00:00Z")])
    }

    @Test func everyDuplicateWithinTheWindowIsCaughtWhateverTheCount() throws {
        let rs = try load(campaign())
        let engine = Engine(ruleSet: rs)
        let base = t("2026-03-01T00:00:00Z")
        let events = (0..<1000).map {
            track("Opened", "u1", at: Timestamp(milliseconds: base + Int64($0) * 60_000).description, id: "m\($0)")
        }
        for e in events { #expect(engine.process(e).status == .processed) }
        // The whole history replayed once, a day later: every event is caught.
        for e in events { #expect(engine.process(e).status == .duplicate) }
        #expect(engine.stats.duplicates == 1000)
        #expect(engine.stats.events == 2000)
    }

    @Test func idsAreForgottenAfterTheWindowAndMemoryFollowsTheWindow() throws {
        let rs = try load(campaign(), settings: "version: 1\nsettings: s\ndedup_window: 1h\n")
        let engine = Engine(ruleSet: rs)
        let base = t("2026-03-01T00:00:00Z")
        func at(_ minutes: Int) -> String { Timestamp(milliseconds: base + Int64(minutes) * 60_000).description }
        for m in 0..<600 { engine.process(track("Opened", "u1", at: at(m), id: "m\(m)")) }
        // 10 hours of one id a minute: only the last hour's are remembered.
        let small = engine.profile(of: "u1")!.approximateBytes
        #expect(engine.process(track("Opened", "u1", at: at(600), id: "m599")).status == .duplicate)
        #expect(engine.process(track("Opened", "u1", at: at(600), id: "m540")).status == .processed)
        for m in 601..<1200 { engine.process(track("Opened", "u1", at: at(m), id: "n\(m)")) }
        #expect(engine.profile(of: "u1")!.approximateBytes < small + 4096)
    }

    @Test func anEmptyMessageIDIsNoID() throws {
        let rs = try load(campaign())
        let engine = Engine(ruleSet: rs)
        #expect(engine.process(track("Opened", "u1", at: "2026-03-01T09:00:00Z", id: "")).status == .processed)
        #expect(engine.process(track("Opened", "u1", at: "2026-03-01T09:01:00Z", id: "")).status == .processed)
        #expect(engine.stats.duplicates == 0)
        // And their actions have distinct ids (an empty id is not hashed as if it were one).
        let once = try rule("on: A\ndo: [ { deep_link: x } ]")
        let e2 = Engine(ruleSet: once)
        let a = e2.process(track("A", "u1", at: "2026-03-01T09:00:00Z", id: "")).actions.map(\.id)
        let b = e2.process(track("A", "u1", at: "2026-03-01T09:01:00Z", id: "")).actions.map(\.id)
        #expect(a.count == 1 && b.count == 1 && a != b)
    }

    /// An event from a device a year ahead does not make the user's window forget their earlier ids.
    @Test func aSkewedEventKeepsTheUsersWindow() throws {
        let rs = try load(campaign())
        let engine = Engine(ruleSet: rs)
        let base = t("2026-03-01T09:00:00Z")
        func at(_ minutes: Int) -> String { Timestamp(milliseconds: base + Int64(minutes) * 60_000).description }
        let mine = (0..<10).map { track("Opened", "u1", at: at($0), id: "m\($0)") }
        for (k, e) in mine.enumerated() {
            engine.process(e)
            engine.process(track("Opened", "bob", at: at(k), id: "b\(k)"))
        }
        engine.process(track("Opened", "u1", at: "2027-03-01T09:00:00Z", id: "skewed"))
        for e in mine { #expect(engine.process(e).status == .duplicate) }
    }

    /// A burst of ids leaves no memory behind once its ids leave the window.
    @Test func aBurstsMemoryGoesWithItsIDs() throws {
        let rs = try load(campaign(), settings: "version: 1\nsettings: s\ndedup_window: 1h\n")
        let engine = Engine(ruleSet: rs)
        let base = t("2026-03-01T00:00:00Z")
        engine.process(track("Opened", "u1", at: Timestamp(milliseconds: base).description, id: "first"))
        let before = engine.profile(of: "u1")!.approximateBytes
        for k in 0..<10_000 {
            engine.process(track("Opened", "u1", at: Timestamp(milliseconds: base + Int64(k)).description, id: "m\(k)"))
        }
        #expect(engine.profile(of: "u1")!.approximateBytes > before + 100_000)
        for k in 0..<4 {
            let later = Timestamp(milliseconds: base + Int64(2 + k) * 3_600_000).description
            engine.process(track("Opened", "u1", at: later, id: "later\(k)"))
        }
        #expect(engine.profile(of: "u1")!.approximateBytes < before + 4096)
    }
}

struct ClockSkewTests {
    let reminder = "on: A\nwait: 1d\ndo: [ { deep_link: x } ]"

    @Test func oneDeviceSetToNextYearFiresNoOtherUsersTimer() throws {
        let rs = try rule(reminder)
        let engine = Engine(ruleSet: rs)
        engine.process(track("A", "ann", at: "2026-03-01T09:00:00Z"))
        engine.process(track("B", "bob", at: "2026-03-01T09:05:00Z"))
        let skewed = engine.process(track("B", "eve", at: "2027-03-01T09:00:00Z"))
        #expect(skewed.actions.isEmpty)
        // The stream goes on at its real time: Ann's reminder comes due at its own time, not before.
        #expect(engine.process(track("B", "bob", at: "2026-03-02T08:00:00Z")).actions.isEmpty)
        let due = engine.process(track("B", "bob", at: "2026-03-02T09:30:00Z"))
        #expect(due.actions.map(\.userID) == ["ann"])
        #expect(due.actions.map(\.time) == [t("2026-03-02T09:00:00Z")])
    }

    /// Two devices far ahead at different times do not vouch for each other's time.
    @Test func devicesFarAheadAtDifferentTimesDoNotMoveTheClock() throws {
        let rs = try rule(reminder)
        let engine = Engine(ruleSet: rs)
        engine.process(track("A", "ann", at: "2026-03-01T09:00:00Z"))
        engine.process(track("B", "bob", at: "2026-03-01T09:05:00Z"))
        for (user, time) in [
            ("eve", "2027-03-01T09:00:00Z"), ("mal", "2026-12-01T09:00:00Z"), ("eve", "2027-03-02T09:00:00Z"),
            ("oz", "2026-06-01T09:00:00Z"), ("mal", "2026-12-02T09:00:00Z"),
        ] {
            #expect(engine.process(track("B", user, at: time)).actions.isEmpty, "\(user) \(time)")
        }
        #expect(engine.process(track("B", "bob", at: "2026-03-02T08:00:00Z")).actions.isEmpty)
        let due = engine.process(track("B", "bob", at: "2026-03-02T09:30:00Z"))
        #expect(due.actions.map(\.userID) == ["ann"])
        #expect(due.actions.map(\.time) == [t("2026-03-02T09:00:00Z")])
    }

    @Test func theSkewedUsersOwnTimersStillFollowTheirEvents() throws {
        let rs = try rule(reminder)
        let engine = Engine(ruleSet: rs)
        engine.process(track("A", "eve", at: "2026-03-01T09:00:00Z"))
        engine.process(track("B", "bob", at: "2026-03-01T09:05:00Z"))
        let own = engine.process(track("B", "eve", at: "2027-03-01T09:00:00Z"))
        #expect(own.actions.map(\.userID) == ["eve"])
    }

    @Test func aRealGapIsCrossedByTheSecondUserAfterIt() throws {
        let rs = try rule(reminder)
        let engine = Engine(ruleSet: rs)
        engine.process(track("A", "ann", at: "2026-03-01T09:00:00Z"))
        engine.process(track("B", "bob", at: "2026-03-01T09:05:00Z"))
        // Thirty days later (past the 7-day skew bound): the first user alone does not bring Ann's reminder due…
        #expect(engine.process(track("B", "bob", at: "2026-03-31T09:00:00Z")).actions.isEmpty)
        // … the next user's event confirms the time, and it fires (at its own due time).
        let due = engine.process(track("B", "cat", at: "2026-03-31T09:01:00Z"))
        #expect(due.actions.map(\.time) == [t("2026-03-02T09:00:00Z")])
    }

    @Test func withinTheBoundOneEventMovesTheClock() throws {
        let rs = try rule(reminder)
        let engine = Engine(ruleSet: rs)
        engine.process(track("A", "ann", at: "2026-03-01T09:00:00Z"))
        engine.process(track("B", "bob", at: "2026-03-01T09:05:00Z"))
        let due = engine.process(track("B", "bob", at: "2026-03-03T09:00:00Z"))
        #expect(due.actions.map(\.userID) == ["ann"])
    }

    @Test func theBoundIsASetting() throws {
        let rs = try rule(reminder, settings: "version: 1\nsettings: s\nclock_skew: 1h\n")
        let engine = Engine(ruleSet: rs)
        engine.process(track("A", "ann", at: "2026-03-01T09:00:00Z"))
        engine.process(track("B", "bob", at: "2026-03-01T09:05:00Z"))
        #expect(engine.process(track("B", "bob", at: "2026-03-03T09:00:00Z")).actions.isEmpty)
        #expect(engine.process(track("B", "cat", at: "2026-03-03T09:00:00Z")).actions.map(\.userID) == ["ann"])
    }
}
