import BeckonCore
import Testing

/// Request bodies of `beckon serve`'s ingest: all or nothing, the bad event named, Segment's limits.
struct SegmentRequestTests {
    let decoder: SegmentDecoder

    init() throws { decoder = SegmentDecoder(ruleSet: try load(campaign(on: "on: Opened"))) }

    func events(_ body: String, kind: Event.Kind? = nil) throws(SegmentRequest.Problem) -> [BoundEvent] {
        try SegmentRequest.events(Array(body.utf8), kind: kind, arrival: Arrival(receivedAt: 1_000_000), decoder: decoder)
            .events
    }

    @Test func aProblemNamesTheEventAndWhy() {
        #expect {
            try events(#"{"batch":[{"type":"track","event":"Opened","userId":"a"},{"type":"track","event":"Opened"}]}"#)
        } throws: { error in
            let p = error as! SegmentRequest.Problem
            return p.event == 1 && p.message.contains("userId")
        }
    }

    @Test func aRequestOverTheLimitIsRefused() {
        let one =
            #"{"type":"track","event":"Opened","userId":"a","properties":{"p":"\#(String(repeating: "x", count: 20_000))"}}"#
        let body = #"{"batch":["# + Array(repeating: one, count: 26).joined(separator: ",") + "]}"
        #expect(body.utf8.count > SegmentRequest.maxRequestBytes)
        #expect {
            try events(body)
        } throws: { error in
            (error as! SegmentRequest.Problem).message.contains("limit is \(SegmentRequest.maxRequestBytes)")
        }
        // Just under the limit, the same events are taken.
        let fits = #"{"batch":["# + Array(repeating: one, count: 24).joined(separator: ",") + "]}"
        #expect((try? events(fits))?.count == 24)
    }

    @Test func anEventOverTheLimitIsRefused() throws {
        func event(_ bytes: Int) -> String {
            let head = #"{"type":"track","event":"Opened","userId":"a","properties":{"p":""#
            let tail = #""}}"#
            return head + String(repeating: "x", count: bytes - head.utf8.count - tail.utf8.count) + tail
        }
        #expect(try events(#"{"batch":["# + event(SegmentRequest.maxEventBytes) + "]}").count == 1)
        #expect {
            try events(
                #"{"batch":[{"type":"track","event":"Opened","userId":"a"},"# + event(SegmentRequest.maxEventBytes + 1) + "]}")
        } throws: { error in
            let p = error as! SegmentRequest.Problem
            return p.event == 1 && p.message.contains("limit is \(SegmentRequest.maxEventBytes)")
        }
    }

    @Test func oneCallTakesItsTypeFromTheEndpoint() throws {
        let e = try events(#"{"event":"Opened","userId":"a","timestamp":"2026-01-01T00:00:00Z"}"#, kind: .track)
        #expect(e.map(\.kind) == [.track])
        #expect(throws: SegmentRequest.Problem.self) { try events(#"{"event":"Opened","userId":"a"}"#) }
    }
}
