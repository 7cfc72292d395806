/// Plain entries in one buffer the table owns, written once when it is built and read by index: what the engine reads
/// of rules, series, event plans and predicate terms on its hot path, without an array's reference count or
/// uniqueness check per read.
///
/// Noncopyable: its owner (the rule set, a predicate) holds it and it frees its buffer when the owner goes.
struct FlatTable<Entry: BitwiseCopyable>: ~Copyable, @unchecked Sendable {
    // @unchecked: written only in `init`, then only read.
    private let base: UnsafeMutablePointer<Entry>
    let count: Int

    init(_ entries: [Entry]) {
        count = entries.count
        base = .allocate(capacity: max(1, entries.count))
        base.initialize(from: entries, count: entries.count)
    }

    deinit { base.deallocate() }

    /// Entry `i` (checked: `0 <= i < count`), read in place: reading one field of it loads that field only.
    @inline(__always) subscript(_ i: Int) -> Entry {
        unsafeAddress {
            precondition(UInt(bitPattern: i) < UInt(count), "flat table index out of range")
            return UnsafePointer(base + i)
        }
    }

    @inline(__always) subscript(_ i: Int32) -> Entry {
        unsafeAddress {
            precondition(UInt(bitPattern: Int(i)) < UInt(count), "flat table index out of range")
            return UnsafePointer(base + Int(i))
        }
    }

    /// Entry `i`, for an index produced with the table — a loop over `0..<count`, a rule index from the same compiled
    /// rule set — so known to be in range: checked in debug builds (the tests), not in release builds, where a check
    /// per read is a measurable share of deciding a predicate (folder invariant 3).
    @inline(__always) subscript(inRange i: Int) -> Entry {
        unsafeAddress {
            assert(UInt(bitPattern: i) < UInt(count), "flat table index out of range")
            return UnsafePointer(base + i)
        }
    }

    /// Every entry (a copy).
    var entries: [Entry] { (0..<count).map { base[$0] } }
}
