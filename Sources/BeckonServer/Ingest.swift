import BeckonCore

/// The ingest endpoints' request bodies (``SegmentRequest``) and their input log records.
package enum Ingest {
    /// The input log record of a decoded request: its arrival, then each event's bytes (an empty batch: none).
    package static func record(_ body: [UInt8], _ request: SegmentRequest.Decoded) -> InputLog {
        var log = InputLog()
        guard !request.ranges.isEmpty else { return log }
        log.arrival(request.arrival)
        for r in request.ranges { log.event(body[r]) }
        return log
    }

    /// The events of a request body as they arrived `now` on `clock` (on the wall clock an event stamped ahead of
    /// `now` is taken as arriving now), with each one's byte range and the request's arrival: what both services log.
    package static func decode(
        _ body: [UInt8], kind: Event.Kind?, now: Int64, clock: ClockMode, decoder: SegmentDecoder
    ) throws(SegmentRequest.Problem) -> SegmentRequest.Decoded {
        let arrival = clock == .wall ? Arrival(receivedAt: now, latest: now) : Arrival(receivedAt: nil)
        return try SegmentRequest.events(body, kind: kind, arrival: arrival, decoder: decoder)
    }
}
