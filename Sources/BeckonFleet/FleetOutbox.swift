import BeckonCore
import BeckonPostgres
import BeckonServer
import BeckonStore

/// A fleet's outbox for a ``Deliverer``: every process delivers, each attempt on an entry it has taken
/// (``FleetLog/claimDueOutbox(destinations:limit:claimMs:)``), so the entries of one destination are sent by several
/// processes at once and an entry by one at a time. Claims, due times and outcomes are on the database's clock.
struct FleetOutbox: OutboxStore {
    let log: FleetLog
    /// How long a taken entry is another process's to leave alone: longer than an attempt takes (the longest of the
    /// destinations served now, ``Deliverer/longestAttemptMs(_:)``: their timeouts bound an answer's whole body too,
    /// and FCM's token fetches and APNs' resend are counted) plus 5 s to record it; after it, an
    /// attempt cut short by a crash is made again. (A minute, until this was measured: an entry taken when its process
    /// was killed waited that long after the restart, and `operations_test DeliveryCrash` failed when the kill fell
    /// inside a claim. Set once at start, a fleet started without destinations claimed for 5 s those a reload added
    /// with a 10 s timeout, and a receiver slower than 5 s got each action again and again. A process paused longer
    /// than the claim may see its attempt made again by another: receivers have the `Idempotency-Key`.)
    static let recordMs: Int64 = 5_000
    let current: CurrentRules

    init(log: FleetLog, current: CurrentRules) {
        self.log = log
        self.current = current
    }

    static func claimMs(_ destinations: [Destination]) -> Int64 {
        (destinations.map(Deliverer.longestAttemptMs).max() ?? 0) + recordMs
    }

    func due(now: Int64, destinations: [String], limit: Int, excluding busy: Set<Int64>) async throws -> [OutboxRow] {
        let claimMs = Self.claimMs(current.value.ruleSet.settings.destinations)
        return try await log.claimDueOutbox(destinations: destinations, limit: limit, claimMs: claimMs)
            .filter { !busy.contains($0.id) }
            .map {
                OutboxRow(
                    id: $0.id,
                    entry: OutboxEntry(
                        destination: $0.destination, actionID: $0.actionID, userID: $0.userID,
                        body: String(decoding: $0.body, as: UTF8.self), createdAt: $0.createdAt),
                    state: .pending, attempts: $0.attempts, nextAt: $0.claimedUntil)
            }
    }

    func record(_ attempts: [OutboxAttempt], at time: Int64) async throws -> [Bool] {
        // (The next attempt's wait, from this process's clock, is set on the database's; an attempt is recorded under
        // the claim it was made in.)
        let recorded = try await log.recordOutbox(
            attempts.map { ($0.id, $0.state.rawValue, max(0, $0.nextAt - time), $0.error, $0.claim ?? Int64.min) })
        return attempts.map { recorded.contains($0.id) }
    }

    func pendingCounts() async throws -> [String: Int] { try await log.pendingOutboxCounts() }
}

extension OutboxRow {
    /// An entry as a fleet stores it.
    public init(_ r: FleetLog.StoredOutbox) {
        self.init(
            id: r.id,
            entry: OutboxEntry(
                destination: r.destination, actionID: r.actionID, userID: r.userID,
                body: String(decoding: r.body, as: UTF8.self), createdAt: r.createdAt),
            state: State(rawValue: r.state) ?? .dead, attempts: r.attempts, nextAt: r.nextAt, doneAt: r.doneAt,
            lastError: r.lastError)
    }
}

extension FleetLog {
    /// A user's state as their partition's owner last wrote it (`nil`: no such user): what the console and the
    /// deliverer read.
    func state(of user: String) async throws -> UserState? {
        try await states(of: [user])[user].map { try UserState(decoding: $0) }
    }
}

/// Users' devices as their partitions last wrote them; a removal goes into the user's partition's log, as the app's
/// own removal does.
struct FleetDevices: UserDirectory {
    let log: FleetLog
    let appender: Appender

    func state(of user: String) async throws -> UserState? { try await log.state(of: user) }

    func holders(of tokens: [String]) async throws -> [String: DeviceClaim] {
        try await log.deviceOwners(tokens).reduce(into: [:]) { out, h in
            out[h.key] = DeviceClaim(token: h.key, userID: h.value.userID, at: h.value.at)
        }
    }

    func remove(token: String, of user: String, seenBy: Int64?) async {
        try? await removing(token: token, of: user, seenBy: seenBy)
    }

    /// Appends the removal to the user's partition's log (answered once it is there, as an app's registration is).
    func removing(token: String, of user: String, seenBy: Int64? = nil) async throws {
        var record = InputLog()
        record.deviceRemoved(userID: user, token: token, seenBy: seenBy)
        _ = try await appender.submit([(user, record.bytes, Processor.nowMs())])
    }
}
