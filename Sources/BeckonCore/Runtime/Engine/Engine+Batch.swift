extension Engine {
    /// Processes `events` in order, exactly as ``process(_:into:)`` would one after the other, handing each event's
    /// outcome to `each` (in place: it is reset when the next event is processed) before the next event is processed.
    ///
    /// What it adds is time: processing an event mostly waits for memory — the event, its user's slot in the store,
    /// the user's profile and state — when users are many. While it works on one event, it asks the CPU for the
    /// memory of the events a few places ahead, in steps (event, then slot, then profile, then state), so that those
    /// loads overlap. The hints read nothing that could change a result. With a store other than the in-memory one,
    /// only events are fetched ahead.
    public func process(_ events: Span<BoundEvent>, into out: inout EventOutcome, each: (inout EventOutcome) -> Void) {
        guard events.count > 0 else { return }
        // The caller's span keeps every event alive for the call: they are read borrowed, counting no reference.
        BorrowedList.withBorrowedList(events) { process($0, into: &out, each: each) }
    }

    private func process(_ events: BorrowedList<BoundEvent>, into out: inout EventOutcome, each: (inout EventOutcome) -> Void) {
        let n = events.count
        guard let table = memoryTable else {
            for i in 0..<n {
                if i + Lookahead.event < n { events[i + Lookahead.event].prefetch(bytes: Lookahead.objectBytes) }
                events[i].with { process($0, into: &out) }
                each(&out)
            }
            return
        }
        table.with { table in
            // The user ids' hashes, computed once (at the slot step) for the later steps and the look-up itself.
            var hashes = InlineArray<11, UInt64>(repeating: 0)  // Lookahead.ring of them
            for j in 0..<min(n, Lookahead.slot) { hashes[j % Lookahead.ring] = events[j].with { table.hash(of: $0.userID) } }
            for i in 0..<n {
                if i + Lookahead.event < n { events[i + Lookahead.event].prefetch(bytes: Lookahead.objectBytes) }
                if i + Lookahead.slot < n {
                    let h = events[i + Lookahead.slot].with { table.hash(of: $0.userID) }
                    hashes[(i + Lookahead.slot) % Lookahead.ring] = h
                    table.prefetchSlot(hash: h)
                }
                if i + Lookahead.profile < n {
                    table.nearProfile(hash: hashes[(i + Lookahead.profile) % Lookahead.ring])?.prefetch(
                        bytes: Lookahead.objectBytes)
                }
                if i + Lookahead.state < n {
                    table.nearProfile(hash: hashes[(i + Lookahead.state) % Lookahead.ring])?.with { $0.prefetchState() }
                    events[i + Lookahead.state].with { $0.prefetchProperties() }
                }
                events[i].with { process($0, userHash: hashes[i % Lookahead.ring], into: &out) }
                each(&out)
            }
        }
    }

    /// How many events ahead each step of ``process(_:into:each:)`` fetches (each step reads what the one before
    /// fetched, so each is nearer than the one before it), and how much of an object a step fetches.
    enum Lookahead {
        static let event = 16
        static let slot = 10
        static let profile = 6
        static let state = 3
        /// Hashes kept from the slot step to the look-up: `slot + 1` (the size of the batch's inline ring).
        static let ring = 11
        /// Bytes fetched from the start of an event object and of a profile object: more than their stored properties
        /// take (a hint past an object's end is harmless).
        static let objectBytes = 192
    }
}
