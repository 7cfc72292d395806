import BeckonCore
import NIOPosix

/// The one owner of the service's blocking work, but for commits (``GroupCommit`` writes on a thread of its own):
/// reads of the whole input log for exports, forgets, the console's timelines and reports, playground runs,
/// maintenance, on a bounded pool of threads, so that such work never takes the threads that answer requests and never
/// starts a thread per request. Callers bound how much of it they start at once (the heavy-work slots,
/// docs/reference/limits.md); what waits for a thread waits in the pool's queue.
package enum Blocking {
    /// As many threads as heavy-work slots, and one for maintenance.
    package static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: ServiceLimits.heavyWorkSlots + 1)
        pool.start()
        return pool
    }()

    /// Runs `body` on the pool and returns its result.
    package static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive(body)
    }
}
