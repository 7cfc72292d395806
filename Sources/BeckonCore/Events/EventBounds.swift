extension BoundEvent {
    /// What in the event passes a bound of docs/reference/limits.md, if anything (`nil` within them all).
    ///
    /// These are the bounds ``SegmentDecoder`` holds event lines to, where each is a bad line at its column; the engine
    /// checks them again for events a library user builds (``Engine/process(_:)-(Event)`` refuses such an event).
    public var boundProblem: String? {
        if timestamp < 0 || timestamp >= SegmentDecoder.maxTimeMs {
            return "the time (\(timestamp) ms since 1970) is outside 1970 to \(SegmentDecoder.lastYear)"
        }
        for (what, text) in [("user id", userID), ("name", name), ("messageId", messageID ?? "")]
        where text.utf8.count > SegmentDecoder.maxIDBytes {
            return "the \(what) is over \(SegmentDecoder.maxIDBytes) bytes"
        }
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

    /// ``boundProblem`` is `nil`: the engine's check, cheap for the common event (a time in range, short ids, no
    /// traits).
    @inline(__always) var isWithinBounds: Bool {
        timestamp >= 0 && timestamp < SegmentDecoder.maxTimeMs && userID.utf8.count <= SegmentDecoder.maxIDBytes
            && name.utf8.count <= SegmentDecoder.maxIDBytes && (messageID?.utf8.count ?? 0) <= SegmentDecoder.maxIDBytes
            && (traits.isEmpty || boundProblem == nil)
    }
}
