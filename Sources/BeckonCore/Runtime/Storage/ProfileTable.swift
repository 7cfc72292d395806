/// The in-memory store's profiles: an open-addressing table keyed by each profile's own `userID` (linear probing, at
/// most 7/8 full).
///
/// A slot is the id's hash and the profile (16 bytes, no dictionary entry repeating the id as its key); a probe
/// compares hashes and reads a profile only when they match, and counts no references, so a full table costs little
/// more to search. The table holds a reference on every profile in it and lends them (``Borrowed``) to the engine,
/// which reads them for an event without counting. The hash is ``ByteHash`` over the id's UTF-8 with a seed drawn per
/// table (which makes ids prepared to collide harder to find; it is not a cryptographic defence).
final class ProfileTable {
    private struct Slot {
        /// 0: empty. Else the id's ``hash(of:)`` (whose lowest bit is always 1), with bit 1 set when the id is ASCII
        /// (compared then with ``Bytes/equal(_:ascii:)``).
        var hash: UInt64
        /// Retained by the table while it is in a slot, and lent.
        var profile: Borrowed<UserProfile>?
    }

    // The table is the engine's to use from one thread (folder invariant 5): no run-time exclusivity checks in release.
    #if DEBUG
        private var slots: UnsafeMutablePointer<Slot>
        private var capacity = 16
        private(set) var count = 0
    #else
        @exclusivity(unchecked) private var slots: UnsafeMutablePointer<Slot>
        @exclusivity(unchecked) private var capacity = 16
        @exclusivity(unchecked) private(set) var count = 0
    #endif
    private let seed = UInt64.random(in: 0...UInt64.max)

    init() {
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Slot(hash: 0, profile: nil), count: capacity)
    }

    deinit {
        for i in 0..<capacity {
            guard let b = slots[i].profile else { continue }
            let p = b.object
            Borrowed.reclaim(p)
            Unmanaged.passUnretained(p).release()
        }
        slots.deallocate()
    }

    /// The id's hash in this table: bit 0 always set (so never 0), bit 1 clear (the slot's ASCII flag).
    @inline(__always) func hash(of id: String) -> UInt64 { ByteHash.hash(id, seed: seed) & ~3 | 1 }

    static let asciiFlag: UInt64 = 2

    /// The profile of `userID`, whose ``hash(of:)`` is `h`, lent while it is in the table; with `create`, a new one
    /// from `make` (given the id) when there is none.
    @inline(__always) func profile(
        for userID: String, hash h: UInt64, create: Bool, make: (String) -> UserProfile
    )
        -> Borrowed<UserProfile>?
    {
        if let p = profile(for: userID, hash: h) { return p }
        return create ? insert(make(userID), hash: h) : nil
    }

    /// The profile of `userID`, whose ``hash(of:)`` is `h`, lent while it is in the table; `nil` when there is none.
    @inline(__always) func profile(for userID: String, hash h: UInt64) -> Borrowed<UserProfile>? {
        let mask = capacity - 1
        var i = home(h)
        while slots[i].hash != 0 {
            let stored = slots[i].hash
            if stored & ~Self.asciiFlag == h, let p = slots[i].profile,
                p.with({ stored & Self.asciiFlag != 0 ? Bytes.equal(userID, ascii: $0.userID) : Bytes.equal($0.userID, userID) })
            {
                return p
            }
            i = (i + 1) & mask
        }
        return nil
    }

    /// Puts `made`, whose id's ``hash(of:)`` is `h` and which the table does not hold, in the table, and lends it.
    @inline(never) func insert(_ made: UserProfile, hash h: UInt64) -> Borrowed<UserProfile> {
        let mask = capacity - 1
        var i = home(h)
        while slots[i].hash != 0 { i = (i + 1) & mask }
        _ = Unmanaged.passRetained(made)
        let p = Borrowed(lending: made)
        slots[i] = Slot(hash: Bytes.isASCII(made.userID) ? h | Self.asciiFlag : h, profile: p)
        count += 1
        if count * 8 > capacity * 7 { resize(to: capacity * 2) }
        return p
    }

    /// Takes `userID`'s profile out of the table (backward-shift deletion: the entries after it in its run move up, so
    /// no search ever stops early and no tombstone is left). Returns whether it was there.
    @discardableResult
    func remove(_ userID: String) -> Bool {
        let h = hash(of: userID)
        let mask = capacity - 1
        var i = home(h)
        while slots[i].hash != 0 {
            let stored = slots[i].hash
            if stored & ~Self.asciiFlag == h, let p = slots[i].profile, p.with({ $0.userID == userID }) {
                let object = p.object
                Borrowed.reclaim(object)
                Unmanaged.passUnretained(object).release()
                var hole = i
                var j = (i + 1) & mask
                while slots[j].hash != 0 {
                    // An entry may fill the hole when its first slot is not in the (cyclic) range after the hole up to it.
                    let first = home(slots[j].hash)
                    let stays = hole <= j ? (hole < first && first <= j) : (hole < first || first <= j)
                    if !stays {
                        slots[hole] = slots[j]
                        hole = j
                    }
                    j = (j + 1) & mask
                }
                slots[hole] = Slot(hash: 0, profile: nil)
                count -= 1
                return true
            }
            i = (i + 1) & mask
        }
        return false
    }

    /// Every profile, in no particular order.
    var profiles: [UserProfile] { (0..<capacity).compactMap { slots[$0].profile?.object } }

    /// Makes room for `n` profiles without growing again.
    func reserveCapacity(_ n: Int) {
        var size = capacity
        while n * 8 > size * 7 { size *= 2 }
        if size > capacity { resize(to: size) }
    }

    // Prefetching, in three steps a few events apart (see ``Engine/process(_:into:each:)``): each step reads only
    // memory the step before asked for. Hints only: none changes the table or a profile.

    /// The index of the slot where the search for the id whose hash is `h` starts.
    @inline(__always) private func home(_ h: UInt64) -> Int { Self.home(h, capacity) }

    /// The first slot for hash `h` (its two flag bits left out) in a table of `capacity` slots.
    @inline(__always) private static func home(_ h: UInt64, _ capacity: Int) -> Int {
        Int(truncatingIfNeeded: h >> 2) & (capacity - 1)
    }

    /// How many slots from an id's first the prefetch steps look at: two cache lines of slots. Under linear probing
    /// 95% of ids are within 8 slots of their first at 3/4 full and 90% at 7/8 (only 62% and 56% are in it).
    static let prefetchProbes = 8

    /// Step 1: fetch the slots where the search for the id whose ``hash(of:)`` is `h` starts.
    @inline(__always) func prefetchSlot(hash h: UInt64) {
        Prefetch.range(slots + home(h), bytes: Self.prefetchProbes * MemoryLayout<Slot>.stride, maxLines: 3)
    }

    /// The profile of the id whose hash is `h`, if it is within the first ``prefetchProbes`` slots (and so in memory
    /// step 1 fetched); a hint, not a look-up: another id of the same hash would do as well.
    @inline(__always) func nearProfile(hash h: UInt64) -> Borrowed<UserProfile>? {
        let mask = capacity - 1
        var i = home(h)
        for _ in 0..<Self.prefetchProbes {
            let slot = slots[i]
            if slot.hash & ~Self.asciiFlag == h { return slot.profile }
            if slot.hash == 0 { return nil }
            i = (i + 1) & mask
        }
        return nil
    }

    private func resize(to size: Int) {
        let old = slots
        let oldCapacity = capacity
        slots = .allocate(capacity: size)
        slots.initialize(repeating: Slot(hash: 0, profile: nil), count: size)
        capacity = size
        let mask = size - 1
        for j in 0..<oldCapacity where old[j].hash != 0 {
            var i = Self.home(old[j].hash, size)
            while slots[i].hash != 0 { i = (i + 1) & mask }
            slots[i] = old[j]
        }
        old.deallocate()
    }
}
