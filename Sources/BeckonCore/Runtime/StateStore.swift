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

/// Profiles in a dictionary, for dry-runs, tests and single-process services.
public final class InMemoryStateStore: StateStore {
    private var profiles: [String: UserProfile] = [:]

    public init() {}

    public func profile(for userID: String, create: Bool, make: () -> UserProfile) -> UserProfile? {
        if let p = profiles[userID] { return p }
        guard create else { return nil }
        let p = make()
        profiles[userID] = p
        return p
    }

    public func didUpdate(_ profile: UserProfile) {}

    public var userCount: Int { profiles.count }

    public func allProfiles() -> [UserProfile] { Array(profiles.values) }

    public func reserveCapacity(_ n: Int) { profiles.reserveCapacity(n) }
}
