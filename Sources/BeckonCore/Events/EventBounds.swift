extension BoundEvent {
    /// What in the event passes a bound of docs/reference/limits.md, if anything (`nil` within them all).
    ///
    /// These are the bounds ``SegmentDecoder`` holds event lines to, where each is a bad line at its column; the engine
    /// checks them again for events a library user builds (``Engine/process(_:)-(Event)`` refuses such an event).
    public var boundProblem: String? {
        if timestamp < 0 || timestamp >= SegmentDecoder.maxTimeMs {
            return "the time (\(timestamp) ms since 1970) is outside 1970 to \(SegmentDecoder.lastYear)"
        }
        // (No array of the ids: an event within the bounds, the common case, is checked without allocating.)
        func tooLong(_ what: String, _ text: String?) -> String? {
            (text?.utf8.count ?? 0) > SegmentDecoder.maxIDBytes ? "the \(what) is over \(SegmentDecoder.maxIDBytes) bytes" : nil
        }
        if let why = tooLong("user id", userID) ?? tooLong("name", name) ?? tooLong("messageId", messageID) { return why }
        for t in traits {
            if t.name.utf8.count > SegmentDecoder.maxIDBytes {
                return "a trait name is over \(SegmentDecoder.maxIDBytes) bytes"
            }
            if t.value.byteSize(upTo: ValueLimits.maxAttributeBytes) > ValueLimits.maxAttributeBytes {
                return "trait '\(t.name)' is over \(ValueLimits.maxAttributeBytes) bytes (the limit of an attribute)"
            }
        }
        return nil
    }

    /// ``boundProblem`` is `nil` (the engine's check, on every event).
    @inline(__always) var isWithinBounds: Bool { boundProblem == nil }
}
