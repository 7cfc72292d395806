import BeckonCore
import Foundation

/// What the HTTP API (``API``) needs of a service, whatever stores it: the single service over SQLite
/// (``SingleBackend``: one process, one engine thread, group commit) and a fleet process over PostgreSQL
/// (``FleetService``: a partitioned log, leases, fenced writes). Each route is written once, against this; a store
/// answers what it can and throws an ``APIError`` for what it cannot (a fleet's reload: 501).
package protocol ServiceBackend: Sendable {
    /// The rule set the requests are decoded under now.
    var rules: ServingRules { get }
    var clock: ClockMode { get }
    var metrics: ServiceMetrics { get }
    /// Where pushes and emails are counted, by rule (`/metrics` and the console).
    var messages: MessageCounts { get }

    /// The decoder of an ingest body under `rules`: the rules' own where the events it makes are the ones run (a
    /// single service), ``SegmentDecoder/logging`` where they are only logged (a fleet). Both take the same lines.
    func ingestDecoder(_ rules: ServingRules) -> SegmentDecoder
    /// Stores a decoded ingest body durably (its events with their arrival); returns once they are committed. Throws
    /// ``APIError`` (503) when they are not: the client sends them again.
    func store(_ body: [UInt8], _ request: SegmentRequest.Decoded, decodedUnder rules: ServingRules, now: Int64) async throws

    /// A user's stored actions after a cursor, oldest first.
    func actions(of user: String, after: Int64, limit: Int) async throws -> [(seq: Int64, json: String)]
    /// A mark that changes when a user's actions may have: read before ``actions(of:after:limit:)``, handed to
    /// ``waitForActions(of:seen:seconds:)``.
    func actionsMark(of user: String) -> UInt64
    /// Waits until the user's actions may have changed since `seen`, `seconds` pass, or the service stops.
    func waitForActions(of user: String, seen: UInt64, seconds: Double) async
    /// Wakes every long poll for good: the service is stopping.
    func stopWaiting()
    /// Whether long polls should answer at once (the service is stopping).
    var stopping: Bool { get }

    /// A user's inbox (`nil`: no such user).
    func inbox(of user: String) async throws -> [InboxItem]?
    /// Marks an inbox item read: `nil` no such user, `false` no such item.
    func markRead(_ user: String, item: String) async throws -> Bool?
    /// Registers a push device for the user (its times are the service's), answered once it is stored.
    func registerDevice(_ user: String, _ device: Device) async throws
    /// Removes a push device's token from the user, answered once that is stored.
    func removeDevice(_ user: String, token: String) async throws

    /// Forgets the user and every id merged into them; whether the service held anything of theirs.
    func forget(_ user: String) async throws -> Bool
    /// Everything stored of the user, as `GET /v1/users/{id}/export` answers it (``Privacy/export``'s document,
    /// which holds the stored states and events as they were stored).
    func export(_ user: String) async throws -> StoredJSON

    /// A page of stored users' states in id order, the first `limit` after `after` (`GET /admin/audience` reads them):
    /// as last written (a single service's checkpoint, a fleet partition's commit).
    func storedStates(after: String?, limit: Int) async throws -> [(userID: String, bytes: [UInt8])]

    /// Loads the rule files again and serves them if they compile.
    func reload(by who: String) async throws -> Reloaded

    /// Why the service is not ready to take requests, `nil` when it is.
    func notReady() -> String?
    /// The metrics in Prometheus' text format.
    func metricsText() -> String
    /// The console's pages, where the store has them.
    var console: WebConsole? { get }
}

/// A reload's answer: whether the rules changed, and what is served now.
package struct Reloaded: Sendable {
    package var changed: Bool
    package var rules: LoadedRules
}
