import BeckonCore
import BeckonStore
import Foundation
import Logging
import Prometheus

/// Writes the processor's group commits in order on a thread of its own, so that the engine works on the next groups
/// while the database writes and syncs the last ones (every group queued goes in one transaction). A request is
/// answered only once its group is written.
///
/// A group is processed on top of the groups before it, so when one fails to be written every group queued after it
/// fails too, and the committer refuses new ones until the processor, having rebuilt its engine from the database,
/// calls ``reset()``.
final class Committer: @unchecked Sendable {
    // @unchecked: every stored property but the constants is read and written only under `lock`.
    struct Group: Sendable {
        var commit: ServiceCommit
        /// Actions fired, with whether each is late: their ids and JSON are made here, off the engine's thread.
        var fired: [(FiredAction, late: Bool)] = []
        /// The rule set's destinations: the fired actions they take go into the outbox with them.
        var destinations: [Destination] = []
        var waiting: [CheckedContinuation<JobResult, any Error>]
        var results: [JobResult]
        /// What to do once the group is written (metrics, waking long polls).
        var written: @Sendable () -> Void
    }

    private let lock = NSCondition()
    private var queue: [Group] = []
    private var busy = false
    private var failure: (any Error)?
    private var stopping = false
    private var stopped = false
    private let backend: SQLiteStateBackend
    private let metrics: ServiceMetrics
    private let logger: Logger
    /// Groups written or being written ahead of the processor at most: a bound on memory and on latency.
    static let depth = 4

    init(backend: SQLiteStateBackend, metrics: ServiceMetrics, logger: Logger) {
        self.backend = backend
        self.metrics = metrics
        self.logger = logger
        let t = Thread { [self] in run() }
        t.name = "beckon-committer"
        t.start()
    }

    /// Queues a group (waiting while ``depth`` are ahead of it).
    func enqueue(_ group: Group) {
        lock.lock()
        while queue.count >= Self.depth && !stopped { lock.wait() }
        if failure != nil || stopped {
            let error = failure ?? Processor.ServiceUnavailable()
            lock.unlock()
            for c in group.waiting { c.resume(throwing: error) }
            return
        }
        queue.append(group)
        lock.broadcast()
        lock.unlock()
    }

    /// Whether a write failed (the processor must rebuild its engine, then call ``reset()``).
    var failed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return failure != nil
    }

    /// Waits until every queued group is written (or failed).
    func waitIdle() {
        lock.lock()
        while !queue.isEmpty || busy { lock.wait() }
        lock.unlock()
    }

    /// Takes groups again after a failure.
    func reset() {
        lock.lock()
        failure = nil
        lock.unlock()
    }

    /// Writes what is queued and ends the thread.
    func stop() {
        lock.lock()
        stopping = true
        lock.broadcast()
        while !stopped { lock.wait() }
        lock.unlock()
    }

    private func run() {
        while true {
            lock.lock()
            while queue.isEmpty && !stopping { lock.wait() }
            if queue.isEmpty {
                stopped = true
                lock.broadcast()
                lock.unlock()
                return
            }
            // Every group queued is written in one transaction: one sync to disk however far behind the writer is.
            let groups = queue
            queue = []
            busy = true
            let earlier = failure
            lock.broadcast()
            lock.unlock()
            var error = earlier
            let commits = groups.map { g in
                var c = g.commit
                let now = Processor.nowMs()
                for (a, late) in g.fired {
                    let logged = LoggedAction(userID: a.userID, actionID: a.id, json: Processor.json(a, late: late))
                    c.actions.append(logged)
                    c.outbox += Delivery.entries(for: a, logged, destinations: g.destinations, at: now)
                }
                return c
            }.filter { !$0.isEmpty }
            if error == nil && !commits.isEmpty {
                let started = ContinuousClock.now
                do {
                    try backend.write(commits)
                    metrics.commitSeconds.record(ContinuousClock.now - started)
                } catch let e {
                    logger.error("commit failed; the engine is rebuilt from the database", metadata: ["error": "\(e)"])
                    error = e
                }
            }
            for group in groups {
                if let error {
                    for c in group.waiting { c.resume(throwing: error) }
                } else {
                    group.written()
                    for (c, r) in zip(group.waiting, group.results) { c.resume(returning: r) }
                }
            }
            lock.lock()
            if let error, failure == nil { failure = error }
            busy = false
            lock.broadcast()
            lock.unlock()
        }
    }
}
