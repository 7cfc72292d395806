/// The entries of a ``MessageIDWindow`` in one allocation: a header (how many entries are stored, how many of those
/// are forgotten, the hash index once there are many) and the entries after it: one object for a user's ids, where a
/// class holding an array made two.
///
/// Entries are plain data (`BitwiseCopyable`): nothing is deinitialized but the header. Indices are checked.
final class MessageIDStorage: ManagedBuffer<MessageIDStorage.Header, MessageIDWindow.Entry> {
    struct Header {
        /// Entries stored, forgotten ones included.
        var count: Int32 = 0
        /// Entries before `head` are forgotten.
        var head: Int32 = 0
        var index: Set<UInt64>?
    }

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

    /// Drops the first `k` entries in place (checked: `0 <= k <= head`), moving the rest down.
    func dropFirst(_ k: Int) {
        let n = Int(header.count)
        precondition(k >= 0 && k <= Int(header.head), "drop out of range")
        withUnsafeMutablePointerToElements { $0.update(from: $0 + k, count: n - k) }
        header.count = Int32(n - k)
        header.head -= Int32(k)
    }

    /// New storage with room for `capacity` entries, holding this one's entries from `first` on (checked: `first <=
    /// head`, and they fit), its index and the rest of its forgotten prefix.
    func moved(from first: Int, capacity: Int) -> MessageIDStorage {
        let n = Int(header.count)
        precondition(first >= 0 && first <= Int(header.head) && n - first <= capacity, "move out of range")
        let new = MessageIDStorage.make(capacity: capacity)
        withUnsafeMutablePointerToElements { from in
            new.withUnsafeMutablePointerToElements { to in to.initialize(from: from + first, count: n - first) }
        }
        new.header = Header(count: Int32(n - first), head: header.head - Int32(first), index: header.index)
        return new
    }
}
