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
/// An open-addressing table of profiles keyed by their own `userID` (linear probing, at most 3/4 full), so a user
/// costs one 8-byte slot rather than a dictionary entry that repeats the id as its key. The hash is FNV-1a over the
/// id's UTF-8, mixed with a seed drawn per store (ids chosen to collide cannot be prepared in advance).
public final class InMemoryStateStore: StateStore {
    private var slots: ContiguousArray<UserProfile?> = ContiguousArray(repeating: nil, count: 16)
    public private(set) var userCount = 0
    private let seed = UInt64.random(in: 0...UInt64.max)

    public init() {}

    @inline(__always) private func hash(_ id: String) -> Int {
        var h = FNV1a.hash(id, basis: FNV1a.offsetBasis ^ seed)
        // fmix64 (MurmurHash3's finaliser): spreads the low bits the mask keeps.
        h ^= h >> 33
        h = h &* 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h = h &* 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return Int(truncatingIfNeeded: h)
    }

    public func profile(for userID: String, create: Bool, make: () -> UserProfile) -> UserProfile? {
        let mask = slots.count - 1
        var i = hash(userID) & mask
        while let p = slots[i] {
            if p.userID == userID { return p }
            i = (i + 1) & mask
        }
        guard create else { return nil }
        let p = make()
        slots[i] = p
        userCount += 1
        if userCount * 4 > slots.count * 3 { resize(to: slots.count * 2) }
        return p
    }

    public func didUpdate(_ profile: UserProfile) {}

    public func allProfiles() -> [UserProfile] { slots.compactMap { $0 } }

    /// Makes room for `n` users without growing again.
    public func reserveCapacity(_ n: Int) {
        var size = slots.count
        while n * 4 > size * 3 { size *= 2 }
        if size > slots.count { resize(to: size) }
    }

    private func resize(to size: Int) {
        let old = slots
        slots = ContiguousArray(repeating: nil, count: size)
        let mask = size - 1
        for case let p? in old {
            var i = hash(p.userID) & mask
            while slots[i] != nil { i = (i + 1) & mask }
            slots[i] = p
        }
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
