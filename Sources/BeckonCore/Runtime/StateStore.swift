/// Where user profiles live. The engine asks for a profile, changes it in place, then tells the store.
///
/// ``InMemoryStateStore`` keeps profiles in memory only. A store backed by a database (``SavedStateStore`` over a
/// ``StateBackend``) keeps the live profiles it has loaded, and besides:
/// - hands the engine the saved state of a user it has no profile for (``savedState(of:)``): the engine restores it
///   with ``Engine/restore(_:)``, delayed actions and timers included, before the user's event;
/// - is told of every user an event or a timer changed (``didUpdate(_:)``), whose state ``Engine/saveStates()`` writes;
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
    /// Users whose saved states hold delayed actions, and when their soonest is due.
    func usersWithPendingActions() -> [(userID: String, due: Int64)]
}

extension StateStore {
    /// Saves nothing, and has nothing saved: every profile is in memory.
    public func savedState(of userID: String) -> UserState? { nil }
    public func usersWithPendingActions() -> [(userID: String, due: Int64)] { [] }
}

/// Profiles in memory, for dry-runs, tests and single-process services: a ``ProfileTable`` (open addressing keyed by
/// each profile's own `userID`), which the engine reads directly, lending profiles for an event without counting
/// references.
public final class InMemoryStateStore: StateStore {
    /// The table the engine reads (its storage layer).
    let table = ProfileTable()

    public init() {}

    public var userCount: Int { table.count }

    public func profile(for userID: String, create: Bool, make: () -> UserProfile) -> UserProfile? {
        table.profile(for: userID, hash: table.hash(of: userID), create: create) { _ in make() }?.object
    }

    public func didUpdate(_ profile: UserProfile) {}

    public func allProfiles() -> [UserProfile] { table.profiles }

    /// Makes room for `n` users without growing again.
    public func reserveCapacity(_ n: Int) { table.reserveCapacity(n) }

    /// Lets `userID`'s profile go; whether it was held.
    @discardableResult
    public func remove(_ userID: String) -> Bool { table.remove(userID) }
}
