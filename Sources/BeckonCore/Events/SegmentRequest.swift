/// A request body of Segment's HTTP Tracking API, as `beckon serve` takes it: one event (`/v1/track`, `/v1/identify`,
/// `/v1/screen`, `/v1/page`, `/v1/group`, `/v1/alias`) or a batch (`/v1/batch`, `{"batch": [...]}`), all or nothing.
/// The first bad event makes the whole request a ``Problem`` that names it; limits are Segment's.
public enum SegmentRequest {
    /// The most bytes one event may have in a request (Segment's 32 KB).
    public static let maxEventBytes = 32 * 1024
    /// The most bytes a request body may have (Segment's 500 KB).
    public static let maxRequestBytes = 500 * 1024

    /// Why a request is refused.
    public struct Problem: Error, Sendable {
        public var message: String
        /// The event's place in the batch (0-based), when one event is at fault.
        public var event: Int?
        /// The byte in the event's (or the body's) JSON where the problem was found, 1-based.
        public var column: Int?
        public init(message: String, event: Int? = nil, column: Int? = nil) {
            self.message = message
            self.event = event
            self.column = column
        }
    }

    /// A request's events, each one's byte range in the body, and the arrival they were decoded with.
    public typealias Decoded = (events: [BoundEvent], ranges: [Range<Int>], arrival: Arrival)

    /// The events of `body`, in order, with their byte ranges and the arrival they were decoded with (a batch's
    /// `sentAt` added to `arrival`). `kind` is the endpoint's event type, `nil` for a batch.
    public static func events(
        _ body: [UInt8], kind: Event.Kind?, arrival: Arrival, decoder: SegmentDecoder
    ) throws(Problem) -> Decoded {
        guard body.count <= maxRequestBytes else {
            throw Problem(message: "the request is \(body.count) bytes; the limit is \(maxRequestBytes)")
        }
        var arrival = arrival
        arrival.kind = kind
        var ranges: [Range<Int>]
        if kind == nil {
            do {
                let batch = try SegmentBatch(body[...])
                ranges = batch.events
                arrival.sentAt = batch.sentAt
            } catch {
                throw Problem(message: "the body is not a batch: \(error.message)", column: error.column)
            }
        } else {
            ranges = [0..<body.count]
        }
        var events: [BoundEvent] = []
        events.reserveCapacity(ranges.count)
        for (i, r) in ranges.enumerated() {
            let at = kind == nil ? i : nil
            guard r.count <= maxEventBytes else {
                throw Problem(message: "the event is \(r.count) bytes; the limit is \(maxEventBytes)", event: at)
            }
            do {
                events.append(try decoder.decode(body[r], arrival: arrival))
            } catch {
                throw Problem(message: error.message, event: at, column: error.column)
            }
        }
        return (events, ranges, arrival)
    }
}
