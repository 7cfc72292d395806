/// The `messageId`s one user sent within the de-duplication window, so that every duplicate within the window is
/// caught, however many ids the user sent, in memory bounded by the window.
///
/// An id is kept as its 64-bit ``ByteHash`` with the time it arrived (the user's clock then): 16 bytes, plus 8 to 16 in
/// an index of their places once more than ``indexThreshold`` ids are in the window (``MessageIDStorage``). Two
/// distinct ids of one user collide with probability about n²/2⁶⁵ for n ids in the window (below 10⁻⁹ for 100,000
/// ids): then the second is taken for a duplicate.
///
/// One word in the profile's row (``ProfileRow``); the entries in one allocation (``MessageIDStorage``) made on the
/// user's first `messageId`.
struct MessageIDWindow: ~Copyable {
    struct Entry: BitwiseCopyable {
        var hash: UInt64
        var time: Int64
    }
    /// In arrival order, so arrival times never decrease.
    private var storage: MessageIDStorage?

    static let indexThreshold = 32

    init() {}

    /// A window holding `ids`, oldest first, after the `expired` ids it had forgotten but not dropped yet (as
    /// ``snapshot`` and ``expired`` gave them): the same window as the one saved, down to when it next compacts.
    init(restoring ids: [(hash: UInt64, time: Int64)], expired: [(hash: UInt64, time: Int64)] = []) {
        guard !ids.isEmpty || !expired.isEmpty else { return }
        let s = MessageIDStorage.make(capacity: max(2, expired.count + ids.count))
        for id in expired { s.append(Entry(hash: id.hash, time: id.time)) }
        for id in ids { s.append(Entry(hash: id.hash, time: id.time)) }
        s.header.head = Int32(expired.count)
        if ids.count > MessageIDWindow.indexThreshold { s.buildIndex() }
        storage = s
    }

    /// Ids in the window.
    var count: Int { storage.map { Int($0.header.count - $0.header.head) } ?? 0 }

    /// Whether `hash` is in the window (without recording anything).
    func contains(_ hash: UInt64) -> Bool {
        guard let s = storage else { return false }
        if s.hasIndex { return s.indexContains(hash) }
        for k in Int(s.header.head)..<Int(s.header.count) where s[k].hash == hash { return true }
        return false
    }

    /// Forgets the ids that arrived at or before `horizon`, then remembers `hash`, arriving at `time`; `false` when it
    /// is already in the window (a duplicate), and then nothing is remembered.
    mutating func insert(_ hash: UInt64, at time: Int64, forgettingUpTo horizon: Int64) -> Bool {
        var s = storage ?? MessageIDStorage.make(capacity: 2)
        var first = Int(s.header.head)
        var n = Int(s.header.count)
        while first < n && s[first].time <= horizon {
            if s.hasIndex { s.indexRemove(first) }
            first += 1
        }
        s.header.head = Int32(first)
        // Compact once half is forgotten: each entry moves at most once on average. Memory is given back once the ids
        // left fill under a quarter of it, so that a burst's memory goes when its ids leave the window.
        if first > 0 && first * 2 >= n {
            if (n - first) * 4 < s.room && s.room > 16 {
                s = s.moved(from: first, capacity: max(2, (n - first) * 2))
            } else {
                s.dropFirst(first)
            }
            first = 0
            n = Int(s.header.count)
        }
        storage = s
        if contains(hash) { return false }
        if n == s.room {
            s = s.moved(from: 0, capacity: n * 2)
            storage = s
        }
        // Arrival times never decrease (a caller's guarded time may, at a stream's start).
        s.append(Entry(hash: hash, time: n > 0 ? max(time, s[n - 1].time) : time))
        if s.hasIndex {
            if n + 1 - first < MessageIDWindow.indexThreshold / 2 { s.dropIndex() } else { s.indexAdd(n) }
        } else if n + 1 - first > MessageIDWindow.indexThreshold {
            s.buildIndex()
        }
        return true
    }

    /// Approximate heap bytes held (for `beckon bench`'s state per user).
    var bytes: Int { storage.map { 40 + $0.room * 16 + $0.indexBytes } ?? 0 }

    /// The ids in the window, oldest first (a user's state, ``UserState/messageIDs``).
    var snapshot: [(hash: UInt64, time: Int64)] {
        guard let s = storage else { return [] }
        return (Int(s.header.head)..<Int(s.header.count)).map { (s[$0].hash, s[$0].time) }
    }

    /// The ids forgotten but still stored, oldest first (``UserState/expiredMessageIDs``): they go when the window
    /// compacts, once half of what it stores is forgotten. A saved state keeps them, so that its bytes change at one
    /// end only from one save to the next (docs/state.md).
    var expired: [(hash: UInt64, time: Int64)] {
        guard let s = storage else { return [] }
        return (0..<Int(s.header.head)).map { (s[$0].hash, s[$0].time) }
    }
}
