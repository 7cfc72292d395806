import BeckonCore

/// The ingest endpoints' request bodies (``SegmentRequest``), with their input log records and the JSON of a
/// refusal.
enum Ingest {
    /// The events of a request body, decoded, with their input log records. `kind` is the endpoint's event type
    /// (`nil` for a batch); `now` the service's clock at arrival.
    static func events(
        _ body: [UInt8], kind: Event.Kind?, now: Int64, clock: ClockMode, decoder: SegmentDecoder
    ) throws(SegmentRequest.Problem) -> ([BoundEvent], InputLog) {
        let request = try decode(body, kind: kind, now: now, clock: clock, decoder: decoder)
        var log = InputLog()
        guard !request.ranges.isEmpty else { return ([], log) }  // (an empty batch logs nothing)
        log.arrival(request.arrival)
        for r in request.ranges { log.event(body[r]) }
        return (request.events, log)
    }

    /// The events of a request body as they arrived `now` on `clock` (on the wall clock an event stamped ahead of
    /// `now` is taken as arriving now), with each one's byte range and the request's arrival: what both services log.
    static func decode(
        _ body: [UInt8], kind: Event.Kind?, now: Int64, clock: ClockMode, decoder: SegmentDecoder
    ) throws(SegmentRequest.Problem) -> (events: [BoundEvent], ranges: [Range<Int>], arrival: Arrival) {
        let arrival = clock == .wall ? Arrival(receivedAt: now, latest: now) : Arrival(receivedAt: nil)
        return try SegmentRequest.events(body, kind: kind, arrival: arrival, decoder: decoder)
    }
}

extension SegmentRequest.Problem {
    /// The body of a 400: `{"success": false, "error": …, "event": N, "column": C}`.
    var json: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("success")
        w.value(.bool(false))
        w.key("error")
        w.string(message)
        if let event {
            w.key("event")
            w.value(.int(Int64(event)))
        }
        if let column {
            w.key("column")
            w.value(.int(Int64(column)))
        }
        w.endObject()
        return w.output
    }
}
