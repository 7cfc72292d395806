/// The entries of a ``MessageIDWindow`` in one allocation: a header (how many entries are stored, how many of those
/// are forgotten, the hash index once there are many) and the entries after it: one object for a user's ids, where a
/// class holding an array made two.
///
/// The index, for windows of many ids, is an open-addressing table of the entries' places (4 bytes a slot, at most
/// half full, linear probing, a removal shifting its run back): the ids are hashes already, so a slot is found from
/// an id's low bits without hashing it again, in a fifth of the memory a `Set<UInt64>` took (1 KB for 100 ids against
/// 2.1 KB). It indexes the entries from `head` on; a compaction, which moves them, rebuilds it.
///
/// Entries are plain data (`BitwiseCopyable`): nothing is deinitialized but the header; the index is freed with the
/// storage. Indices are checked.
final class MessageIDStorage: ManagedBuffer<MessageIDStorage.Header, MessageIDWindow.Entry> {
    struct Header {
        /// Entries stored, forgotten ones included.
        var count: Int32 = 0
        /// Entries before `head` are forgotten.
        var head: Int32 = 0
        /// Slots of the index less one (a power of two less one), when there is an index.
        var mask: Int32 = 0
        /// The index: each slot an entry's place + 1, or 0 for none.
        var index: UnsafeMutablePointer<UInt32>?
    }

    deinit { header.index?.deallocate() }

    /// Empty storage with room for at least `capacity` entries.
    static func make(capacity: Int) -> MessageIDStorage {
        precondition(capacity > 0 && capacity <= Int(Int32.max), "message id storage too large")
        return unsafeDowncast(create(minimumCapacity: capacity) { _ in Header() }, to: MessageIDStorage.self)
    }

    /// Entries it has room for (what the allocation holds, at least what was asked).
    var room: Int { min(capacity, Int(Int32.max)) }

    /// Entry `i` (checked: `0 <= i < header.count`).
    subscript(_ i: Int) -> MessageIDWindow.Entry {
        precondition(i >= 0 && i < Int(header.count), "index out of range")
        return withUnsafeMutablePointerToElements { $0[i] }
    }

    /// Appends `entry` (checked: there is room).
    func append(_ entry: MessageIDWindow.Entry) {
        let n = Int(header.count)
        precondition(n < room, "no room")
        withUnsafeMutablePointerToElements { ($0 + n).initialize(to: entry) }
        header.count += 1
    }

    /// Drops the first `k` entries in place (checked: `0 <= k <= head`), moving the rest down (and rebuilding the
    /// index, if there is one, for their new places).
    func dropFirst(_ k: Int) {
        let n = Int(header.count)
        precondition(k >= 0 && k <= Int(header.head), "drop out of range")
        withUnsafeMutablePointerToElements { $0.update(from: $0 + k, count: n - k) }
        header.count = Int32(n - k)
        header.head -= Int32(k)
        if hasIndex && k > 0 { buildIndex() }
    }

    /// New storage with room for `capacity` entries, holding this one's entries from `first` on (checked: `first <=
    /// head`, and they fit), the rest of its forgotten prefix, and an index if this one has one.
    func moved(from first: Int, capacity: Int) -> MessageIDStorage {
        let n = Int(header.count)
        precondition(first >= 0 && first <= Int(header.head) && n - first <= capacity, "move out of range")
        let new = MessageIDStorage.make(capacity: capacity)
        withUnsafeMutablePointerToElements { from in
            new.withUnsafeMutablePointerToElements { to in to.initialize(from: from + first, count: n - first) }
        }
        new.header.count = Int32(n - first)
        new.header.head = header.head - Int32(first)
        if hasIndex {
            if first == 0 {
                // The places are the same: the index moves over as it is.
                new.header.index = header.index
                new.header.mask = header.mask
                header.index = nil
            } else {
                new.buildIndex()
            }
        }
        return new
    }

    // MARK: The index

    var hasIndex: Bool { header.index != nil }

    /// Bytes the index takes.
    var indexBytes: Int { header.index == nil ? 0 : (Int(header.mask) + 1) * 4 }

    /// Whether an entry from `head` on holds `hash` (checked: there is an index).
    func indexContains(_ hash: UInt64) -> Bool {
        let table = header.index!
        let mask = Int(header.mask)
        var slot = Self.home(hash, mask)
        return withUnsafeMutablePointerToElements { entries in
            while table[slot] != 0 {
                if entries[Int(table[slot]) - 1].hash == hash { return true }
                slot = (slot + 1) & mask
            }
            return false
        }
    }

    /// Indexes entry `place` (checked: there is an index, the place is stored), growing the table to keep it at
    /// most half full.
    func indexAdd(_ place: Int) {
        precondition(hasIndex && place >= 0 && place < Int(header.count), "index place out of range")
        let live = Int(header.count - header.head)
        if live * 2 > Int(header.mask) + 1 { return buildIndex() }
        put(place, header.index!, Int(header.mask))
    }

    /// Takes entry `place` out of the index (checked: there is an index, the place is stored), shifting back the
    /// entries probed past it so that every lookup still finds its entry.
    func indexRemove(_ place: Int) {
        precondition(hasIndex && place >= 0 && place < Int(header.count), "index place out of range")
        let table = header.index!
        let mask = Int(header.mask)
        withUnsafeMutablePointerToElements { entries in
            var hole = Self.home(entries[place].hash, mask)
            while table[hole] != 0 && Int(table[hole]) != place + 1 { hole = (hole + 1) & mask }
            guard table[hole] != 0 else { return }
            table[hole] = 0
            var next = (hole + 1) & mask
            while table[next] != 0 {
                let home = Self.home(entries[Int(table[next]) - 1].hash, mask)
                // The entry at `next` may move to the hole when its home is not in (hole, next], cyclically.
                let between = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next)
                if !between {
                    table[hole] = table[next]
                    table[next] = 0
                    hole = next
                }
                next = (next + 1) & mask
            }
        }
    }

    /// A new index of the entries from `head` on, at most 40% full (so that it grows by half again before it is
    /// rebuilt).
    func buildIndex() {
        header.index?.deallocate()
        let live = Int(header.count - header.head)
        var slots = 64
        while slots * 2 < live * 5 { slots *= 2 }
        let table = UnsafeMutablePointer<UInt32>.allocate(capacity: slots)
        table.initialize(repeating: 0, count: slots)
        header.index = table
        header.mask = Int32(slots - 1)
        for place in Int(header.head)..<Int(header.count) { put(place, table, slots - 1) }
    }

    /// No index.
    func dropIndex() {
        header.index?.deallocate()
        header.index = nil
        header.mask = 0
    }

    /// The slot where an id's probe starts: its low bits (the ids are hashes already).
    @inline(__always) private static func home(_ hash: UInt64, _ mask: Int) -> Int { Int(truncatingIfNeeded: hash) & mask }

    private func put(_ place: Int, _ table: UnsafeMutablePointer<UInt32>, _ mask: Int) {
        var slot = Self.home(self[place].hash, mask)
        while table[slot] != 0 { slot = (slot + 1) & mask }
        table[slot] = UInt32(place + 1)
    }
}
