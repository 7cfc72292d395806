import BeckonCore
import BeckonStore
import Foundation
import HTTPTypes

/// The single service's store (``ServiceBackend``): one process, one engine thread (``Processor``) with group commit
/// into SQLite, the action feed that wakes long polls, reloads, and the console.
struct SingleBackend: ServiceBackend {
    let processor: Processor
    let database: SQLiteStateBackend
    let current: CurrentRules
    let reloader: Reloader
    let deliverer: Deliverer
    let feed: ActionFeed
    let clock: ClockMode
    let metrics: ServiceMetrics
    let console: WebConsole?

    var rules: ServingRules { current.value }
    var messages: MessageCounts { MessageCounts(metrics: metrics, activity: processor.activity) }

    func ingestDecoder(_ rules: ServingRules) -> SegmentDecoder { rules.decoder }

    func store(_ body: [UInt8], _ request: SegmentRequest.Decoded, decodedUnder rules: ServingRules, now: Int64) async throws {
        do {
            _ = try await processor.submit(.events(request.events, Ingest.record(body, request), decodedUnder: rules))
        } catch {
            throw APIError.unavailable("the events could not be stored; send them again")
        }
    }

    func actions(of user: String, after: Int64, limit: Int) async throws -> [(seq: Int64, json: String)] {
        try await database.actions(of: user, after: after, limit: limit)
    }

    func actionsMark(of user: String) -> UInt64 { feed.version(of: user) }

    func waitForActions(of user: String, seen: UInt64, seconds: Double) async {
        await feed.wait(for: user, seen: seen, seconds: seconds)
    }

    func stopWaiting() { feed.close() }
    var stopping: Bool { feed.isClosed }

    func inbox(of user: String) async throws -> [InboxItem]? {
        guard case .inbox(let found) = try await submit(.inbox(userID: user), "the service is stopping; ask again")
        else { throw APIError.unexpected }
        return found
    }

    func markRead(_ user: String, item: String) async throws -> Bool? {
        let result = try await submit(
            .markRead(userID: user, itemID: item), "the change could not be stored; send it again")
        guard case .markRead(let found) = result else { throw APIError.unexpected }
        return found
    }

    func registerDevice(_ user: String, _ device: Device) async throws {
        _ = try await submit(.device(userID: user, device), "the device could not be stored; send it again")
    }

    func removeDevice(_ user: String, token: String) async throws {
        _ = try await submit(.removeDevice(userID: user, token: token), "the change could not be stored; send it again")
    }

    /// Users' devices as the processing thread holds them, and removals through it; the tokens' holders as the
    /// database has them.
    struct Devices: UserDirectory {
        let processor: Processor
        let database: SQLiteStateBackend
        func state(of user: String) async throws -> UserState? { try await processor.state(of: user) }
        func holders(of tokens: [String]) async throws -> [String: DeviceClaim] {
            tokens.isEmpty ? [:] : try database.deviceOwners(tokens)
        }
        func remove(token: String, of user: String, seenBy: Int64?) async {
            _ = try? await processor.submit(.removeDevice(userID: user, token: token, seenBy: seenBy))
        }
    }

    private func submit(_ job: Job, _ failure: String) async throws -> JobResult {
        do {
            return try await processor.submit(job)
        } catch {
            throw APIError.unavailable(failure)
        }
    }

    /// Answered once nothing of the user's is in flight to a destination and their events are gone from the input
    /// log (the scrub reads the whole log: on the blocking pool, not the request handlers' threads).
    func forget(_ user: String) async throws -> Bool {
        guard let console, console.runs.take() else { throw APIError.busy }
        defer { console.runs.give() }
        let failed = APIError.unavailable("the user could not be forgotten; ask again")
        guard case .forgotten(let known, let ids) = try await submit(.forget(userID: user), failed.body.error) else {
            throw APIError.unexpected
        }
        for id in ids { await deliverer.drain(userID: id) }
        let database = database
        do {
            _ = try await Blocking.run { try Privacy.scrub(ids, backend: database) }
        } catch {
            throw failed
        }
        return known
    }

    func export(_ user: String) async throws -> StoredJSON {
        guard let console, console.runs.take() else { throw APIError.busy }
        defer { console.runs.give() }
        let failed = "the user could not be exported; ask again"
        let result = try await submit(.privacy(userID: user), failed)
        if case .failed = result { throw APIError.unavailable(failed) }
        // (An id merged into another user stands for that user: the export is theirs, under their id.)
        guard case .privacy(let person, let state, let merged) = result else { throw APIError.unexpected }
        let database = database
        do {
            return StoredJSON(
                text: try await Blocking.run {
                    try Privacy.export(person, state: state, merged: merged, backend: database, at: Processor.nowMs())
                })
        } catch {
            throw APIError.unavailable(failed)
        }
    }

    func storedStates(after: String?, limit: Int) async throws -> [(userID: String, bytes: [UInt8])] {
        try database.states(after: after, limit: limit)
    }

    func reload(by who: String) async throws -> Reloaded { try Reloader.answer(await reloader.reload(by: who)) }

    func notReady() -> String? { processor.ready ? nil : "the database cannot be written" }

    func metricsText() -> String { metrics.text() }
}
