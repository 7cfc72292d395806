import CBeckon

/// Where user profiles live. The engine asks for a profile, changes it in place, then tells the store.
///
/// ``InMemoryStateStore`` is the implementation here; a database-backed store loads a profile in
/// ``profile(for:create:)`` and writes it back in ``didUpdate(_:)``.
public protocol StateStore: AnyObject {
    /// The profile of `userID`; a new empty one when `create` is true and there is none.
    func profile(for userID: String, create: Bool, make: () -> UserProfile) -> UserProfile?
    /// Called after the engine has changed `profile`.
    func didUpdate(_ profile: UserProfile)
    var userCount: Int { get }
    /// Every profile, in no particular order.
    func allProfiles() -> [UserProfile]
}

/// Profiles in memory, for dry-runs, tests and single-process services.
///
/// An open-addressing table of profiles keyed by their own `userID` (linear probing, at most 7/8 full). A slot is the
/// id's hash and the profile (16 bytes, no dictionary entry repeating the id as its key); a probe compares hashes and
/// reads a profile only when they match, and counts no references, so a full table costs little more to search. The hash is FNV-1a over the id's UTF-8, mixed
/// with a seed drawn per store (ids chosen to collide cannot be prepared in advance).
public final class InMemoryStateStore: StateStore {
    private struct Slot {
        /// 0: empty (a hash of 0 is stored as 1).
        var hash: UInt64
        /// Retained by the store while it is in a slot.
        var profile: Unmanaged<UserProfile>?
    }

    private var slots: UnsafeMutablePointer<Slot>
    private var capacity = 16
    public private(set) var userCount = 0
    private let seed = UInt64.random(in: 0...UInt64.max)

    public init() {
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Slot(hash: 0, profile: nil), count: capacity)
    }

    deinit {
        for i in 0..<capacity { slots[i].profile?.release() }
        slots.deallocate()
    }

    /// The id's hash in this store (never 0).
    @inline(__always) func hash(of id: String) -> UInt64 {
        var h = FNV1a.hash(id, basis: FNV1a.offsetBasis ^ seed)
        // fmix64 (MurmurHash3's finaliser): spreads the low bits the mask keeps.
        h ^= h >> 33
        h = h &* 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h = h &* 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return h == 0 ? 1 : h
    }

    public func profile(for userID: String, create: Bool, make: () -> UserProfile) -> UserProfile? {
        profile(for: userID, hash: hash(of: userID), create: create, make: make)
    }

    /// ``profile(for:create:make:)`` with the id's ``hash(of:)`` computed by the caller.
    @inline(__always) func profile(for userID: String, hash h: UInt64, create: Bool, make: () -> UserProfile) -> UserProfile? {
        let mask = capacity - 1
        var i = Int(truncatingIfNeeded: h) & mask
        while slots[i].hash != 0 {
            if slots[i].hash == h, let p = slots[i].profile,
                p._withUnsafeGuaranteedRef({ Value.sameBytes($0.userID, userID) })
            {
                return p.takeUnretainedValue()
            }
            i = (i + 1) & mask
        }
        guard create else { return nil }
        let p = make()
        slots[i] = Slot(hash: h, profile: .passRetained(p))
        userCount += 1
        if userCount * 8 > capacity * 7 { resize(to: capacity * 2) }
        return p
    }

    public func didUpdate(_ profile: UserProfile) {}

    // Prefetching, in three steps a few events apart (see ``Engine/process(_:into:each:)``): each step reads only
    // memory the step before asked for. Hints only: none changes the table or a profile.

    /// The slot an id's search starts at.
    @inline(__always) private func firstSlot(_ h: UInt64) -> UnsafeMutablePointer<Slot> {
        slots + (Int(truncatingIfNeeded: h) & (capacity - 1))
    }

    /// Step 1: fetch the first slot of the id whose ``hash(of:)`` is `h`.
    @inline(__always) func prefetchSlot(hash h: UInt64) { beckon_prefetch(firstSlot(h)) }

    /// Step 2: fetch the profile in that slot, if its hash is `h`.
    @inline(__always) func prefetchProfile(hash h: UInt64) {
        let slot = firstSlot(h)
        if slot.pointee.hash == h, let p = slot.pointee.profile {
            beckon_prefetch_range(p.toOpaque(), UserProfile.objectBytes, 4)
        }
    }

    /// Step 3: fetch the state that profile keeps beside it (attributes, fire records, history).
    @inline(__always) func prefetchState(hash h: UInt64) {
        let slot = firstSlot(h)
        if slot.pointee.hash == h, let p = slot.pointee.profile { p._withUnsafeGuaranteedRef { $0.prefetchState() } }
    }

    public func allProfiles() -> [UserProfile] { (0..<capacity).compactMap { slots[$0].profile?.takeUnretainedValue() } }

    /// Makes room for `n` users without growing again.
    public func reserveCapacity(_ n: Int) {
        var size = capacity
        while n * 8 > size * 7 { size *= 2 }
        if size > capacity { resize(to: size) }
    }

    private func resize(to size: Int) {
        let old = slots
        let oldCapacity = capacity
        slots = .allocate(capacity: size)
        slots.initialize(repeating: Slot(hash: 0, profile: nil), count: size)
        capacity = size
        let mask = size - 1
        for j in 0..<oldCapacity where old[j].hash != 0 {
            var i = Int(truncatingIfNeeded: old[j].hash) & mask
            while slots[i].hash != 0 { i = (i + 1) & mask }
            slots[i] = old[j]
        }
        old.deallocate()
    }
}

/// 64-bit FNV-1a over UTF-8: a fast, stable hash of short ids (messageIds for de-duplication, user ids for the store).
enum FNV1a {
    static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325

    @inline(__always) static func hash(_ s: String, basis: UInt64 = offsetBasis) -> UInt64 {
        var s = s
        return s.withUTF8 { hash($0, basis: basis) }
    }

    @inline(__always) static func hash(_ bytes: UnsafeBufferPointer<UInt8>, basis: UInt64 = offsetBasis) -> UInt64 {
        var h = basis
        for b in bytes {
            h ^= UInt64(b)
            h = h &* 0x100_0000_01b3
        }
        return h
    }
}
