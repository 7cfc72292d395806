/// A growable vector of plain entries in memory it owns: a user's fire records (by rule) and history log (by series
/// and time), which the engine keeps sorted and searches in place.
///
/// Noncopyable and 16 bytes (a pointer, a count, a capacity): a profile holds one per kind of entry and reads and
/// changes it in place; it frees its memory when the profile goes. Indices from outside are checked.
struct RawVector<Element: BitwiseCopyable>: ~Copyable {
    private var base: UnsafeMutablePointer<Element>? = nil
    private var size: Int32 = 0
    private var room: Int32 = 0

    init() {}

    deinit { base?.deallocate() }

    @inline(__always) var count: Int { Int(size) }
    @inline(__always) var isEmpty: Bool { size == 0 }
    /// Entries it has room for without growing.
    var capacity: Int { Int(room) }

    /// Entry `i` (checked: `0 <= i < count`), read or changed in place.
    @inline(__always) subscript(_ i: Int) -> Element {
        unsafeAddress {
            precondition(UInt(bitPattern: i) < UInt(size), "index out of range")
            return UnsafePointer(base.unsafelyUnwrapped + i)
        }
        unsafeMutableAddress {
            precondition(UInt(bitPattern: i) < UInt(size), "index out of range")
            return base.unsafelyUnwrapped + i
        }
    }

    /// Entry `i`, known to be in range (see ``ScratchStack``): checked in debug builds only.
    @inline(__always) subscript(inRange i: Int) -> Element {
        unsafeAddress {
            assert(UInt(bitPattern: i) < UInt(size), "index out of range")
            return UnsafePointer(base.unsafelyUnwrapped + i)
        }
        unsafeMutableAddress {
            assert(UInt(bitPattern: i) < UInt(size), "index out of range")
            return base.unsafelyUnwrapped + i
        }
    }

    /// The last entry, if any.
    @inline(__always) var last: Element? { size == 0 ? nil : base.unsafelyUnwrapped[Int(size) - 1] }

    /// The first index in `from..<to` whose entry is not `isBelow` the sought one, for entries sorted so that every
    /// entry below comes first (a binary search; `from` and `to` are checked once).
    @inline(__always) func lowerBound(from: Int = 0, to: Int? = nil, _ isBelow: (Element) -> Bool) -> Int {
        let to = to ?? Int(size)
        precondition(from >= 0 && from <= to && to <= Int(size), "search range out of range")
        guard let base else { return from }
        var lo = from
        var hi = to
        while lo < hi {
            let mid = (lo + hi) >> 1
            if isBelow(base[mid]) { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Puts `x` at index `i` (checked: `0 <= i <= count`), moving the entries from `i` on one place up.
    mutating func insert(_ x: Element, at i: Int) {
        precondition(i >= 0 && i <= Int(size), "insert index out of range")
        if size == room { grow() }
        let p = base.unsafelyUnwrapped
        if i < Int(size) { (p + i + 1).update(from: p + i, count: Int(size) - i) }  // overlapping: moves like memmove
        (p + i).initialize(to: x)
        size += 1
    }

    @inline(__always) mutating func append(_ x: Element) {
        if size == room { grow() }
        (base.unsafelyUnwrapped + Int(size)).initialize(to: x)
        size += 1
    }

    /// Drops the entries in `range` (checked), moving the later ones down.
    mutating func removeSubrange(_ range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= Int(size), "remove range out of range")
        guard !range.isEmpty, let p = base else { return }
        if range.upperBound < Int(size) {
            (p + range.lowerBound).update(from: p + range.upperBound, count: Int(size) - range.upperBound)
        }
        size -= Int32(range.count)
    }

    /// Drops the last `n` entries (checked: `0 <= n <= count`).
    @inline(__always) mutating func removeLast(_ n: Int) {
        precondition(n >= 0 && n <= Int(size), "cannot remove more than there are")
        size -= Int32(n)
    }

    /// Copies the entries in `source` to start at `destination` (both checked; they may overlap), as `memmove`.
    mutating func copy(_ source: Range<Int>, to destination: Int) {
        precondition(source.lowerBound >= 0 && source.upperBound <= Int(size), "copy source out of range")
        precondition(destination >= 0 && destination + source.count <= Int(size), "copy destination out of range")
        guard !source.isEmpty, let p = base else { return }
        (p + destination).update(from: p + source.lowerBound, count: source.count)
    }

    /// Every entry, in order (a copy).
    var elements: [Element] { (0..<Int(size)).map { base.unsafelyUnwrapped[$0] } }

    /// Asks the CPU for the entries' memory, at most `maxLines` cache lines of it (a hint).
    @inline(__always) func prefetch(maxLines: Int) {
        Prefetch.range(base, bytes: Int(size) * MemoryLayout<Element>.stride, maxLines: maxLines)
    }

    private mutating func grow() {
        // The first allocation holds about 32 bytes (four history entries, one fire record or lifetime stat): most
        // users have one of the larger kinds, if any.
        let grown = max(max(1, 32 / MemoryLayout<Element>.stride), Int(room) * 2)
        precondition(grown <= Int(Int32.max), "vector too long")
        let new = UnsafeMutablePointer<Element>.allocate(capacity: grown)
        if let base {
            new.initialize(from: base, count: Int(size))
            base.deallocate()
        }
        base = new
        room = Int32(grown)
    }
}

/// A fixed table of counters, added to in place (`nonmutating`: the table is a handle to its memory, so an owner can
/// hold it in a `let` and count without an exclusivity check). Indices are checked.
struct CounterTable: ~Copyable {
    private let base: UnsafeMutablePointer<Int>
    let count: Int

    init(count: Int) {
        self.count = count
        base = .allocate(capacity: max(1, count))
        base.initialize(repeating: 0, count: max(1, count))
    }

    deinit { base.deallocate() }

    @inline(__always) subscript(_ i: Int) -> Int {
        precondition(UInt(bitPattern: i) < UInt(count), "counter out of range")
        return base[i]
    }

    /// Adds `n` to counter `i`, an index the owner derives from its own compiled tables (a rule's row and a counter's
    /// place in it): checked in debug builds only, as ``FlatTable``'s `subscript(inRange:)`.
    @inline(__always) func add(_ n: Int, at i: Int) {
        assert(UInt(bitPattern: i) < UInt(count), "counter out of range")
        base[i] &+= n
    }
}

/// A stack of plain entries the engine reuses for its per-round work lists: a round pushes a frame of entries,
/// filters it in place and pops it, so that a round allocates nothing once the stack has grown to the largest round.
/// Frames nest (a round may run inside another's work), and are addressed by index: growing moves the memory.
struct ScratchStack<Element: BitwiseCopyable>: ~Copyable {
    private var entries = RawVector<Element>()

    init() {}

    /// Entries in use, over every frame.
    var count: Int { entries.count }

    /// Entry `i` of the stack, an index of a frame the caller pushed (so in range): checked in debug builds only, as
    /// ``FlatTable``'s `subscript(inRange:)`.
    @inline(__always) subscript(_ i: Int) -> Element {
        get { entries[inRange: i] }
        set { entries[inRange: i] = newValue }
    }

    @inline(__always) mutating func push(_ x: Element) { entries.append(x) }

    /// Drops the entries from `start` on (a frame's end).
    @inline(__always) mutating func pop(to start: Int) { entries.removeLast(entries.count - start) }
}
