import CBeckon

/// Where user profiles live. The engine asks for a profile, changes it in place, then tells the store.
///
/// ``InMemoryStateStore`` keeps profiles in memory only. A store backed by a database (``SavedStateStore`` over a
/// ``StateBackend``) keeps the live profiles it has loaded, and besides:
/// - hands the engine the saved state of a user it has no profile for (``savedState(of:)``): the engine restores it
///   with ``Engine/restore(_:)``, delayed actions and timers included, before the user's event;
/// - receives every changed user's whole state after an event or a timer (``save(_:)``, when ``savesStates``);
/// - names the users with delayed actions (``usersWithPendingActions()``), whose timers ``Engine/rebuildTimers()``
///   sets so that they come due by the stream's clock even if the user sends nothing.
public protocol StateStore: AnyObject {
    /// The profile of `userID`; a new empty one when `create` is true and there is none.
    func profile(for userID: String, create: Bool, make: () -> UserProfile) -> UserProfile?
    /// Called after the engine has changed `profile`.
    func didUpdate(_ profile: UserProfile)
    var userCount: Int { get }
    /// Every profile, in no particular order.
    func allProfiles() -> [UserProfile]
    /// The saved state of `userID`, for a user the store has no profile for (`nil`: a new user).
    func savedState(of userID: String) -> UserState?
    /// Whether the engine hands every changed user's state to ``save(_:)``.
    var savesStates: Bool { get }
    /// A changed user's whole state, after the event or timer that changed it.
    func save(_ state: UserState)
    /// Users whose saved states hold delayed actions, and when their soonest is due.
    func usersWithPendingActions() -> [(userID: String, due: Int64)]
}

extension StateStore {
    /// Saves nothing, and has nothing saved: every profile is in memory.
    public func savedState(of userID: String) -> UserState? { nil }
    public var savesStates: Bool { false }
    public func save(_ state: UserState) {}
    public func usersWithPendingActions() -> [(userID: String, due: Int64)] { [] }
}

/// Profiles in memory, for dry-runs, tests and single-process services.
///
/// An open-addressing table of profiles keyed by their own `userID` (linear probing, at most 7/8 full). A slot is the
/// id's hash and the profile (16 bytes, no dictionary entry repeating the id as its key); a probe compares hashes and
/// reads a profile only when they match, and counts no references, so a full table costs little more to search. The
/// hash is ``ByteHash`` over the id's UTF-8 with a seed drawn per store (which makes ids prepared to collide harder to
/// find; it is not a cryptographic defence).
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
        let h = ByteHash.hash(id, seed: seed)
        return h == 0 ? 1 : h
    }

    public func profile(for userID: String, create: Bool, make: () -> UserProfile) -> UserProfile? {
        profileReference(for: userID, hash: hash(of: userID), create: create, make: make)?.takeUnretainedValue()
    }

    /// ``profile(for:create:make:)`` with the id's ``hash(of:)`` computed by the caller, as the reference the store
    /// holds (valid while the profile is in the store: taking it counts no reference).
    @inline(__always) func profileReference(
        for userID: String, hash h: UInt64, create: Bool, make: () -> UserProfile
    ) -> Unmanaged<UserProfile>? {
        let mask = capacity - 1
        var i = home(h)
        while slots[i].hash != 0 {
            if slots[i].hash == h, let p = slots[i].profile,
                p._withUnsafeGuaranteedRef({ Value.sameBytes($0.userID, userID) })
            {
                return p
            }
            i = (i + 1) & mask
        }
        guard create else { return nil }
        let p = Unmanaged.passRetained(make())
        slots[i] = Slot(hash: h, profile: p)
        userCount += 1
        if userCount * 8 > capacity * 7 { resize(to: capacity * 2) }
        return p
    }

    public func didUpdate(_ profile: UserProfile) {}

    // Prefetching, in three steps a few events apart (see ``Engine/process(_:into:each:)``): each step reads only
    // memory the step before asked for. Hints only: none changes the table or a profile.

    /// The index of the slot where the search for the id whose hash is `h` starts.
    @inline(__always) private func home(_ h: UInt64) -> Int { Int(truncatingIfNeeded: h) & (capacity - 1) }

    /// How many slots from an id's first the prefetch steps look at: two cache lines of slots. Under linear probing
    /// 95% of ids are within 8 slots of their first at 3/4 full and 90% at 7/8 (only 62% and 56% are in it).
    static let prefetchProbes = 8

    /// Step 1: fetch the slots where the search for the id whose ``hash(of:)`` is `h` starts.
    @inline(__always) func prefetchSlot(hash h: UInt64) {
        beckon_prefetch_range(slots + home(h), Self.prefetchProbes * MemoryLayout<Slot>.stride, 3)
    }

    /// The profile of the id whose hash is `h`, if it is within the first ``prefetchProbes`` slots (and so in memory
    /// step 1 fetched); a hint, not a look-up: another id of the same hash would do as well.
    @inline(__always) private func nearProfile(hash h: UInt64) -> Unmanaged<UserProfile>? {
        let mask = capacity - 1
        var i = home(h)
        for _ in 0..<Self.prefetchProbes {
            let slot = slots[i]
            if slot.hash == h { return slot.profile }
            if slot.hash == 0 { return nil }
            i = (i + 1) & mask
        }
        return nil
    }

    /// Step 2: fetch that profile.
    @inline(__always) func prefetchProfile(hash h: UInt64) {
        if let p = nearProfile(hash: h) { beckon_prefetch_range(p.toOpaque(), UserProfile.objectBytes, 4) }
    }

    /// Step 3: fetch the state that profile keeps beside it (attributes, fire records, history).
    @inline(__always) func prefetchState(hash h: UInt64) {
        if let p = nearProfile(hash: h) { p._withUnsafeGuaranteedRef { $0.prefetchState() } }
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

/// A fast, deterministic 64-bit hash of short byte strings (object keys, user ids, messageIds; never stored, so one
/// byte order is enough), eight bytes at a time: each word (the last one overlapping the one before, or small loads for
/// a short string) is mixed in with a multiply and a shift, and the result finished with MurmurHash3's fmix64. The
/// length is mixed in first, so an overlapping load cannot make two strings of different lengths look alike. Not for
/// adversarial input: the store seeds it.
enum ByteHash {
    @inline(__always) static func hash(_ s: String, seed: UInt64 = 0) -> UInt64 {
        // Read where the string is (no copy of it, which would count a reference); a bridged string is copied.
        if let h = s.utf8.withContiguousStorageIfAvailable({ hash($0, seed: seed) }) { return h }
        var s = s
        return s.withUTF8 { hash($0, seed: seed) }
    }

    @inline(__always) static func hash(_ bytes: UnsafeBufferPointer<UInt8>, seed: UInt64 = 0) -> UInt64 {
        let n = bytes.count
        var h = seed ^ (UInt64(truncatingIfNeeded: n) &* 0x9e37_79b9_7f4a_7c15)
        @inline(__always) func mix(_ w: UInt64) {
            h = (h ^ w) &* 0xff51_afd7_ed55_8ccd
            h ^= h >> 32
        }
        if n > 0, let p = UnsafeRawPointer(bytes.baseAddress) {
            if n >= 8 {
                var i = 0
                while i + 8 <= n {
                    mix(p.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                    i += 8
                }
                if i < n { mix(p.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)) }
            } else if n >= 4 {
                mix(
                    UInt64(p.loadUnaligned(as: UInt32.self))
                        | UInt64(p.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)) << 32)
            } else {
                let b = bytes
                mix(UInt64(b[0]) | UInt64(b[n / 2]) << 8 | UInt64(b[n - 1]) << 16)
            }
        }
        // fmix64: every input bit reaches the low bits that tables keep.
        h ^= h >> 33
        h = h &* 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h = h &* 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return h
    }
}
