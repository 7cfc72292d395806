import BeckonCore

/// The ingest endpoints' request bodies: Segment's HTTP Tracking API (`/v1/track`, `/v1/identify`, `/v1/screen`,
/// `/v1/page`, `/v1/group`, `/v1/alias`, one event each, and `/v1/batch`, `{"batch": [...]}`).
///
/// A request is all or nothing: the first bad event makes it a 400 that says which event and why, and nothing of it
/// is stored. Limits as Segment's: ``maxEventBytes`` an event, ``maxRequestBytes`` a request.
enum Ingest {
    static let maxEventBytes = 32 * 1024
    static let maxRequestBytes = 500 * 1024

    /// Why a request was refused.
    struct Problem: Error {
        var message: String
        /// The event's place in the batch (0-based), when one event is at fault.
        var event: Int?
        /// The byte in the event's (or the body's) JSON where the problem was found, 1-based.
        var column: Int?

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

    /// The events of a request body, decoded, with their input log records.
    /// `kind` is the endpoint's event type (`nil` for a batch); `now` the service's clock at arrival.
    static func events(
        _ body: [UInt8], kind: Event.Kind?, now: Int64, clock: ClockMode, decoder: SegmentDecoder
    ) throws(Problem) -> ([BoundEvent], InputLog) {
        var ranges: [Range<Int>]
        var sentAt: Int64?
        if kind == nil {
            do {
                let batch = try SegmentBatch(body[...])
                ranges = batch.events
                sentAt = batch.sentAt
            } catch {
                throw Problem(message: "the body is not a batch: \(error.message)", column: error.column)
            }
        } else {
            ranges = [0..<body.count]
        }
        let arrival =
            clock == .wall
            ? Arrival(kind: kind, receivedAt: now, sentAt: sentAt, latest: now)
            : Arrival(kind: kind, receivedAt: nil, sentAt: sentAt)
        var events: [BoundEvent] = []
        var log = InputLog()
        log.arrival(arrival)
        events.reserveCapacity(ranges.count)
        for (i, r) in ranges.enumerated() {
            let at = kind == nil ? i : nil
            guard r.count <= maxEventBytes else {
                throw Problem(message: "the event is \(r.count) bytes; the limit is \(maxEventBytes)", event: at)
            }
            let e: BoundEvent
            do {
                e = try decoder.decode(body[r], arrival: arrival)
            } catch {
                throw Problem(message: error.message, event: at, column: error.column)
            }
            events.append(e)
            log.event(body[r])
        }
        return (events, log)
    }
}
