extension BoundEvent {
    /// A bound of docs/reference/limits.md that an event passes.
    public enum BoundBreach: Sendable, Equatable {
        case time
        case userID
        case name
        case messageID
        case traitName
        /// The trait with this name.
        case traitValue(String)
    }

    /// Which bound of docs/reference/limits.md the event passes, if any (`nil` within them all). The one check: the
    /// engine makes it on every event (without making a string), ``boundProblem`` words it.
    ///
    /// These are the bounds ``SegmentDecoder`` holds event lines to, where each is a bad line at its column; the engine
    /// checks them again for events a library user builds (``Engine/process(_:)-(Event)`` refuses such an event).
    public var boundBreach: BoundBreach? {
        if timestamp < 0 || timestamp > SegmentDecoder.maxTimeMs { return .time }
        let max = SegmentDecoder.maxIDBytes
        if userID.utf8.count > max { return .userID }
        if name.utf8.count > max { return .name }
        if (messageID?.utf8.count ?? 0) > max { return .messageID }
        for t in traits {
            if t.name.utf8.count > max { return .traitName }
            if t.value.byteSize(upTo: ValueLimits.maxAttributeBytes) > ValueLimits.maxAttributeBytes {
                return .traitValue(t.name)
            }
        }
        return nil
    }

    /// ``boundBreach`` in words.
    public var boundProblem: String? {
        guard let breach = boundBreach else { return nil }
        let max = SegmentDecoder.maxIDBytes
        switch breach {
        case .time: return "the time (\(timestamp) ms since 1970) is outside 1970 to \(SegmentDecoder.lastYear)"
        case .userID: return "the user id is over \(max) bytes"
        case .name: return "the name is over \(max) bytes"
        case .messageID: return "the messageId is over \(max) bytes"
        case .traitName: return "a trait name is over \(max) bytes"
        case .traitValue(let name):
            return "trait '\(name)' is over \(ValueLimits.maxAttributeBytes) bytes (the limit of an attribute)"
        }
    }

    /// ``boundBreach`` is `nil` (the engine's check, on every event).
    @inline(__always) var isWithinBounds: Bool { boundBreach == nil }
}
