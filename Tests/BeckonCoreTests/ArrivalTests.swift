import BeckonCore
import Testing

/// The time of an event that arrived at `beckon serve` (``Arrival``) and the batch body's split (``SegmentBatch``).
struct ArrivalTests {
    let decoder: SegmentDecoder
    let now = t("2026-06-01T12:00:00Z")

    init() throws { decoder = SegmentDecoder(ruleSet: try load(campaign(on: "on: Opened"))) }

    func decode(_ json: String, _ arrival: Arrival) throws -> BoundEvent {
        try decoder.decode(Array(json.utf8)[...], arrival: arrival)
    }

    @Test func withoutATimestampAnEventHappensWhenItArrives() throws {
        let e = try decode(#"{"event":"Opened","userId":"u"}"#, Arrival(kind: .track, receivedAt: now, latest: now))
        #expect(e.kind == .track)
        #expect(e.timestamp == now)
    }

    @Test func theServicesClockReplacesTheClientsReceivedAt() throws {
        let e = try decode(
            #"{"type":"track","event":"Opened","userId":"u","timestamp":"2026-06-01T11:00:00Z","sentAt":"2026-06-01T11:00:10Z","receivedAt":"2020-01-01T00:00:00Z"}"#,
            Arrival(receivedAt: now, latest: now))
        // The device's clock was 59 m 50 s behind: its timestamp is moved by receivedAt − sentAt.
        #expect(e.timestamp == t("2026-06-01T11:59:50Z"))
    }

    @Test func aBatchsSentAtStandsForEventsWithoutTheirOwn() throws {
        let e = try decode(
            #"{"type":"track","event":"Opened","userId":"u","timestamp":"2026-06-01T13:00:00Z"}"#,
            Arrival(receivedAt: now, sentAt: t("2026-06-01T13:00:05Z"), latest: now))
        #expect(e.timestamp == t("2026-06-01T11:59:55Z"))
    }

    @Test func anEventStampedAheadOfTheServiceIsTakenAsArrivingNow() throws {
        let e = try decode(
            #"{"type":"track","event":"Opened","userId":"u","timestamp":"2027-01-01T00:00:00Z"}"#,
            Arrival(receivedAt: now, latest: now))
        #expect(e.timestamp == now)
        let past = try decode(
            #"{"type":"track","event":"Opened","userId":"u","timestamp":"2026-03-01T00:00:00Z"}"#,
            Arrival(receivedAt: now, latest: now))
        #expect(past.timestamp == t("2026-03-01T00:00:00Z"))
    }

    @Test func aReplayKeepsTheEventsOwnTimesAndNeedsThem() throws {
        let e = try decode(
            #"{"type":"track","event":"Opened","userId":"u","timestamp":"2027-01-01T00:00:00Z"}"#,
            Arrival(receivedAt: nil))
        #expect(e.timestamp == t("2027-01-01T00:00:00Z"))
        #expect(throws: DecodeError.self) {
            try decode(#"{"type":"track","event":"Opened","userId":"u"}"#, Arrival(receivedAt: nil))
        }
    }

    @Test func aBatchSplitsIntoItsEventsByteRanges() throws {
        let body = Array(
            #" {"batch": [ {"type":"track","a":[1,{"b":"]"}]} , {"type":"identify"} ], "context": {"x": 1}, "sentAt": "2026-06-01T12:00:00Z"} "#
                .utf8)
        let b = try SegmentBatch(body[...])
        #expect(
            b.events.map { String(decoding: body[$0], as: UTF8.self) } == [
                #"{"type":"track","a":[1,{"b":"]"}]}"#, #"{"type":"identify"}"#,
            ])
        #expect(b.sentAt == now)
        #expect(try SegmentBatch(Array(#"{"batch":[]}"#.utf8)[...]).events.isEmpty)
    }

    @Test(arguments: [
        #"{"batch": {}}"#, #"{"batch": [1]}"#, #"{"batch": [{}"#, #"{"events": []}"#, #"[]"#, #"{"batch": []} x"#,
        #"{"batch": [], "sentAt": "yesterday"}"#, "",
        // A key given twice: which list of events, or which time, is meant cannot be told.
        #"{"batch": [], "batch": [{"type":"track"}]}"#,
        #"{"batch": [], "sentAt": "2026-06-01T12:00:00Z", "sentAt": "2026-06-01T13:00:00Z"}"#,
    ])
    func aBodyThatIsNotABatchIsAnError(_ text: String) {
        #expect(throws: DecodeError.self) { try SegmentBatch(Array(text.utf8)[...]) }
    }
}
