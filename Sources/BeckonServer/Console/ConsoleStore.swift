import BeckonCore
import BeckonStore
import Dispatch
import Synchronization

/// What the console (``WebConsole``, docs/console.md) reads from a store, so that its pages are the same over a single
/// service's SQLite (``SingleConsoleStore``) and a fleet's PostgreSQL (BeckonFleet's): the stored inputs, a user's
/// state, and each rule's live counts.
package protocol ConsoleStore: Sendable {
    /// Calls `body` with each stored input record in the order they arrived (a single service's input log; a fleet's
    /// log entries, its partitions merged by arrival). With `user`, a store may pass only the records that can name
    /// them (a fleet: their partition's); the console picks their events out itself. Runs on the blocking pool.
    func eachRecord(naming user: String?, _ body: ([UInt8]) throws -> Void) throws
    /// A user's state as the store holds it now.
    func state(of user: String) async throws -> UserState?
    /// Each rule's counts of the last day by 5-minute bucket (``RuleActivity``), of every process.
    func activity(at now: Int64) async -> [String: [Int64: RuleActivity.Counts]]
    /// Saved states by user id after `after`, at most `limit` (an audience's size, ``AudienceCount``).
    func storedStates(after: String?, limit: Int) async throws -> [(userID: String, bytes: [UInt8])]
    /// Whether the records hold the clock's ticks (a single service's input log); else a timeline takes each event's
    /// arrival as the clock it was processed at (a fleet's log: docs/events.md#events-out-of-time-order).
    var logsTicks: Bool { get }
}

/// The single service's: its SQLite input log, the processing thread's states and counts.
struct SingleConsoleStore: ConsoleStore {
    let processor: Processor
    let backend: SQLiteStateBackend

    func eachRecord(naming user: String?, _ body: ([UInt8]) throws -> Void) throws {
        try backend.eachInput { _, _, bytes in try body(bytes) }
    }

    func state(of user: String) async throws -> UserState? { try await processor.state(of: user) }

    func activity(at now: Int64) async -> [String: [Int64: RuleActivity.Counts]] { processor.activity.buckets() }

    func storedStates(after: String?, limit: Int) async throws -> [(userID: String, bytes: [UInt8])] {
        try backend.states(after: after, limit: limit)
    }

    var logsTicks: Bool { true }
}

extension Blocking {
    /// Waits on the calling thread (one of the blocking pool's, never the cooperative pool's) for async work: how a
    /// store whose reads are async (PostgreSQL) serves a reader that is not (``ConsoleStore/eachRecord(naming:_:)``).
    package static func wait<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                let value = try await work()
                result.withLock { $0 = .success(value) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }
}
