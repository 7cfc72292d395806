/// Durable storage of users' encoded states: a table of bytes by user id, with each user's soonest delayed action.
///
/// The contract a database implements for ``SavedStateStore``: ``write(_:)`` stores a batch all or nothing, and
/// ``read(_:)`` returns what the last successful write of that user stored.
public protocol StateBackend: AnyObject {
    /// The bytes last written for `userID` (``UserState/encoded()``), if any.
    func read(_ userID: String) throws -> [UInt8]?
    /// Stores these users' states, all or none.
    func write(_ batch: [SavedState]) throws
    /// Users whose state holds delayed actions, with the soonest due time.
    func usersWithPendingActions() throws -> [(userID: String, due: Int64)]
}

/// One user's state as a backend stores it.
public struct SavedState: Sendable, Hashable {
    public var userID: String
    public var bytes: [UInt8]
    /// The soonest delayed action's due time (`nil`: none), so that a backend can index the users with timers.
    public var nextDue: Int64?
    /// The id this one was merged into, if it was (``UserState/mergedInto``), so that a backend can find every id
    /// merged into a user (a forget deletes them all) without reading every state.
    public var mergedInto: String?

    public init(userID: String, bytes: [UInt8], nextDue: Int64?, mergedInto: String? = nil) {
        self.userID = userID
        self.bytes = bytes
        self.nextDue = nextDue
        self.mergedInto = mergedInto
    }
}

/// A ``StateStore`` over a ``StateBackend``: the users an engine works on are live profiles in memory; a user it has
/// not loaded is restored from the backend on their first event or timer; the users an event or timer changed are
/// noted, and ``Engine/saveStates()`` encodes each once and writes them in one batch (a service saves before it
/// acknowledges what it accepted, or at checkpoints of its own log: docs/service.md).
///
/// Bytes a backend returns that do not decode are reported by ``decodingFailures`` and the user starts empty, so one
/// damaged row never stops the stream.
public final class SavedStateStore: StateStore {
    public let backend: any StateBackend
    private let live = InMemoryStateStore()
    /// Users changed since their state was last taken (by object: hashing a pointer, not the id, per event).
    private var changed: [ObjectIdentifier: UserProfile] = [:]
    /// Users whose saved bytes did not decode, and why.
    public private(set) var decodingFailures: [(userID: String, error: any Error)] = []

    public init(backend: any StateBackend) { self.backend = backend }

    public func profile(for userID: String, create: Bool, make: () -> UserProfile) -> UserProfile? {
        live.profile(for: userID, create: create, make: make)
    }

    public func didUpdate(_ profile: UserProfile) { changed[ObjectIdentifier(profile)] = profile }
    public var userCount: Int { live.userCount }
    public func allProfiles() -> [UserProfile] { live.allProfiles() }

    public func savedState(of userID: String) -> UserState? {
        do {
            guard let bytes = try backend.read(userID) else { return nil }
            return try UserState(decoding: bytes)
        } catch {
            decodingFailures.append((userID, error))
            return nil
        }
    }

    public func usersWithPendingActions() -> [(userID: String, due: Int64)] {
        (try? backend.usersWithPendingActions()) ?? []
    }

    /// Users changed since their state was last taken.
    public var changedCount: Int { changed.count }

    /// Lets go of the live profiles of `userIDs` whose state is saved as it stands (not changed since it was last
    /// taken): they are read from the backend again when they are next needed. The caller must know that what was
    /// taken has been written (a service evicts only after the commit that holds them). Returns how many went.
    @discardableResult
    public func evict(_ userIDs: some Sequence<String>) -> Int {
        var n = 0
        for id in userIDs {
            let held = live.profile(for: id, create: false) { UserProfile(userID: id, attributeCount: 0, contextCount: 0) }
            guard let p = held, changed[ObjectIdentifier(p)] == nil
            else { continue }
            if live.remove(id) { n += 1 }
        }
        return n
    }

    /// The users changed since the last call, by id, forgotten as changed (``Engine/takeChangedStates()``).
    func takeChanged() -> [UserProfile] {
        defer { changed = [:] }
        return changed.values.sorted { $0.userID < $1.userID }
    }
}

/// A ``StateBackend`` in memory (tests, and a model of what a database keeps).
public final class MemoryStateBackend: StateBackend {
    public private(set) var rows: [String: SavedState] = [:]
    /// Batches written.
    public private(set) var writes = 0

    public init() {}

    public func read(_ userID: String) throws -> [UInt8]? { rows[userID]?.bytes }

    public func write(_ batch: [SavedState]) throws {
        for s in batch { rows[s.userID] = s }
        writes += 1
    }

    public func usersWithPendingActions() throws -> [(userID: String, due: Int64)] {
        rows.values.compactMap { s in s.nextDue.map { (s.userID, $0) } }.sorted { $0.userID < $1.userID }
    }

    /// Replaces a row's bytes (for tests of damaged rows).
    public func overwrite(_ userID: String, bytes: [UInt8]) {
        rows[userID, default: SavedState(userID: userID, bytes: [], nextDue: nil)].bytes = bytes
    }
}
