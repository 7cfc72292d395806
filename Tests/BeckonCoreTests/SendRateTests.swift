import Testing

@testable import BeckonCore

/// A schedule's `rate:` (docs/time.md#a-send-rate-rate): a run fires for at most that many users per window, the rest
/// wait for the next window in order, each keeping its run's id; the window is kept in the stream's state.
struct SendRateTests {
    static func rules(rate: String?) -> String {
        """
        version: 1
        campaign: news
        rules:
          - id: news
            schedule: 2026-03-02T10:00:00Z
        \(rate.map { "    rate: \($0)\n" } ?? "")    do:
              - message: { surface: home, title: News }
        """
    }

    static func engine(rate: String?) throws -> Engine {
        let e = Engine(ruleSet: try load(rules(rate: rate)), options: .init(recordVerdicts: true))
        for i in 0..<20 { e.process(identify("u\(i)", at: "2026-03-01T08:00:00Z", [("plan", .string("free"))])) }
        return e
    }

    @Test func aRunFiresAtMostTheRatePerWindowAndTheRestWaitInOrder() throws {
        let paced = try Self.engine(rate: "7/min")
        let first = paced.advance(to: t("2026-03-02T10:00:30Z"))
        #expect(first.actions.count == 7)
        #expect(first.actions.allSatisfy { $0.time == t("2026-03-02T10:00:00Z") })
        #expect(first.verdicts.filter { $0.verdict.code == "rate" }.count == 13)
        #expect(
            paced.streamState.rates == [StreamState.Rate(rule: "news/news", start: t("2026-03-02T10:00:00Z"), fired: 7)])
        let rest = paced.advance(to: t("2026-03-02T10:10:00Z")).actions
        let minutes = [t("2026-03-02T10:01:00Z"), t("2026-03-02T10:02:00Z")]
        #expect(rest.map(\.time) == Array(repeating: minutes[0], count: 7) + Array(repeating: minutes[1], count: 6))
        let all = Array(first.actions) + Array(rest)
        #expect(Set(all.map(\.userID)).count == 20)
        // The same runs as without a rate: each action's id is its run's.
        let unpaced = try Self.engine(rate: nil).advance(to: t("2026-03-02T10:10:00Z")).actions
        #expect(unpaced.count == 20)
        #expect(Set(all.map(\.id)) == Set(unpaced.map(\.id)))
        // The users waiting keep their order: the first seven in line fire first.
        #expect(first.actions.map(\.userID) == Array(unpaced.map(\.userID).prefix(7)))
    }

    /// A restart in the middle of a window goes on counting it: the window is in the stream's state.
    @Test func theWindowSurvivesACheckpoint() throws {
        let e = try Self.engine(rate: "7/min")
        _ = e.advance(to: t("2026-03-02T10:00:00Z"))
        let stream = try StreamState(decoding: e.streamState.encoded())
        #expect(stream == e.streamState)
        #expect(stream.rates.first?.fired == 7)
        let again = Engine(ruleSet: try load(Self.rules(rate: "7/min")))
        for s in e.states() { try again.restore(s) }
        again.restore(stream: stream)
        again.rebuildTimers()
        #expect(again.advance(to: t("2026-03-02T10:00:59Z")).actions.isEmpty)
        #expect(again.advance(to: t("2026-03-02T10:01:00Z")).actions.count == 7)
        // A stream state of format version 1 (no windows) is still read.
        var v1 = StreamState(clock: 5, latestTime: 5, nextTimerID: 3, ahead: []).encoded()
        v1[3] = 1
        v1.removeLast()
        #expect(try StreamState(decoding: v1).clock == 5)
    }

    @Test func aRateIsCheckedWhereItIsWritten() {
        func messages(_ yaml: String) -> [String] { diagnostics(yaml).map(\.message) }
        #expect(messages(Self.rules(rate: "7/min")).isEmpty)
        #expect(messages(Self.rules(rate: "10000/hour")).isEmpty)
        #expect(
            messages(Self.rules(rate: "7/fortnight")) == [
                "'rate' expects a count per second, minute, hour or day, found '7/fortnight'"
            ])
        #expect(messages(Self.rules(rate: "0/min")).count == 1)
        let onEvent = """
            version: 1
            campaign: news
            rules:
              - id: news
                on: Opened
                rate: 10/min
                do:
                  - message: { surface: home, title: News }
            """
        #expect(messages(onEvent) == ["'rate' paces a `schedule`'s runs, and this rule has no `schedule`"])
        #expect(SendRate.parse("10000/min") == SendRate(count: 10_000, perMs: 60_000))
        #expect(SendRate.parse("10_000/min")?.count == 10_000)
        #expect(SendRate.parse("10000") == nil)
    }
}
