/// Everything Beckon keeps about one user: attributes, event history, fire records, session, inbox.
///
/// A reference type so that a ``StateStore`` can hand the engine the live profile to update in place. Times are
/// milliseconds since 1970, read only from events. This file declares where a profile's state is kept (the storage
/// layer: its slot rows, and the hot fields that skip run-time exclusivity checks); what a profile means and how it
/// changes is in `Runtime/UserProfile.swift`.
public final class UserProfile {
    public let userID: String
    /// What the engine reads and changes for most events: attributes, context, clock, session, event count, history,
    /// fire records, recent messageIds. Only the engine's thread touches it, one access at a time (folder invariant
    /// 5): in release builds without run-time exclusivity checks.
    #if DEBUG
        var row: ProfileRow
    #else
        @exclusivity(unchecked) var row: ProfileRow
    #endif
    /// What most users never need (an inbox, timers, partial sequences, the global cap's record, attributes no rule
    /// reads), allocated on first use: a profile stays small for the users who need none of it.
    var extras: ProfileExtras?

    public init(userID: String, attributeCount: Int, contextCount: Int) {
        self.userID = userID
        row = ProfileRow(attributeCount: attributeCount, contextCount: contextCount)
    }

    /// Empties the profile in place, its id kept (a user merged into another keeps only the pointer): the row is
    /// replaced whole (the old one's memory freed, its slots with it), the extras dropped.
    func reset() {
        row = ProfileRow(attributeCount: row.attributes.count, contextCount: row.context.count)
        extras = nil
    }

    /// Asks the CPU for the memory the engine reads for most events: the attribute row, the fire records and the
    /// history (a hint; see ``ProfileTable``'s prefetch steps).
    @inline(__always) func prefetchState() {
        row.attributes.prefetch()
        row.records.prefetch(maxLines: 2)
        row.history.prefetch()
    }
}
