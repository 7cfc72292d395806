/// The `messageId`s one user sent within the de-duplication window, so that every duplicate within the window is
/// caught, however many ids the user sent, in memory bounded by the window.
///
/// An id is kept as its 64-bit ``ByteHash`` with the time it arrived (the user's clock then): 16 bytes, plus 8 to 16 in
/// a hash set once more than ``indexThreshold`` ids are in the window. Two distinct ids of one user collide with
/// probability about n²/2⁶⁵ for n ids in the window (below 10⁻⁹ for 100,000 ids): then the second is taken for a
/// duplicate.
///
/// A class, allocated on a user's first `messageId`: a profile without ids keeps one word for it.
final class MessageIDWindow {
    /// In arrival order, so arrival times never decrease. Entries before `head` are forgotten.
    private var entries: ContiguousArray<(hash: UInt64, time: Int64)> = []
    private var head = 0
    /// The hashes of the entries from `head` on, while there are more than ``indexThreshold`` of them (a scan is
    /// quicker below that).
    private var index: Set<UInt64>?

    static let indexThreshold = 32

    /// Ids in the window.
    var count: Int { entries.count - head }

    /// Whether `hash` is in the window (without recording anything).
    func contains(_ hash: UInt64) -> Bool {
        if let index { return index.contains(hash) }
        return entries[head...].contains { $0.hash == hash }
    }

    /// Forgets the ids that arrived at or before `horizon`, then remembers `hash`, arriving at `time`; `false` when it
    /// is already in the window (a duplicate), and then nothing is remembered.
    func insert(_ hash: UInt64, at time: Int64, forgettingUpTo horizon: Int64) -> Bool {
        while head < entries.count && entries[head].time <= horizon {
            index?.remove(entries[head].hash)
            head += 1
        }
        // Compact once half is forgotten: each entry moves at most once on average. Memory is given back once the ids
        // left fill under a quarter of it, so that a burst's memory goes when its ids leave the window.
        if head > 0 && head * 2 >= entries.count {
            if count * 4 < entries.capacity && entries.capacity > 16 {
                entries = ContiguousArray(entries[head...])
            } else {
                entries.removeFirst(head)
            }
            head = 0
        }
        if let index {
            if index.contains(hash) { return false }
        } else {
            for k in head..<entries.count where entries[k].hash == hash { return false }
        }
        // Arrival times never decrease (a caller's guarded time may, at a stream's start).
        entries.append((hash, max(time, entries.last?.time ?? time)))
        if index != nil {
            index!.insert(hash)
            if count < MessageIDWindow.indexThreshold / 2 { index = nil }
        } else if count > MessageIDWindow.indexThreshold {
            index = Set(entries[head...].map(\.hash))
        }
        return true
    }

    /// Approximate bytes held (for `beckon bench`'s state per user).
    var bytes: Int { 48 + entries.capacity * 16 + (index.map { $0.capacity * 16 } ?? 0) }

    /// The ids in the window, oldest first (a user's state, ``UserState/messageIDs``).
    var snapshot: [(hash: UInt64, time: Int64)] { Array(entries[head...]) }

    /// A window holding `ids`, oldest first (as ``snapshot`` gave them).
    convenience init(restoring ids: [(hash: UInt64, time: Int64)]) {
        self.init()
        entries = ContiguousArray(ids)
        if count > MessageIDWindow.indexThreshold { index = Set(ids.map(\.hash)) }
    }
}
