import BeckonCore
import BeckonStore
import Logging
import Prometheus

/// A processing round's writes: its commit, and the actions it fired (their ids and JSON are made by the committer,
/// off the engine's thread).
struct RoundCommit: Sendable {
    var commit: ServiceCommit
    /// Actions fired, with whether each is late.
    var fired: [(FiredAction, late: Bool)] = []
    /// The rule set's destinations: the fired actions they take go into the outbox with them.
    var destinations: [Destination] = []

    /// The commit with the fired actions and their outbox entries added.
    func withActions() -> ServiceCommit {
        var c = commit
        let now = Processor.nowMs()
        for (a, late) in fired {
            let logged = LoggedAction(userID: a.userID, actionID: a.id, json: Processor.json(a, late: late))
            c.actions.append(logged)
            c.outbox += Delivery.entries(for: a, logged, destinations: destinations, at: now)
        }
        return c
    }
}

/// The single service's committer: its rounds written in order on a thread of its own, so that the engine works on the
/// next rounds while the database writes and syncs the last ones. A round is processed on
/// top of the rounds before it, so the committer is chained: after a failed write it refuses rounds until the
/// processor, having rebuilt its engine from the database, calls ``GroupCommit/reset()``.
typealias Committer = GroupCommit<RoundCommit, Void>

extension GroupCommit where Item == RoundCommit, Output == Void {
    /// Rounds written or being written ahead of the processor at most: a bound on memory and on latency.
    static var depth: Int { 4 }

    convenience init(backend: SQLiteStateBackend, metrics: ServiceMetrics, logger: Logger) {
        self.init(thread: "beckon-commit", chained: true, depth: Self.depth, stoppedError: { Processor.ServiceUnavailable() }) {
            rounds in
            let commits = rounds.map { $0.withActions() }.filter { !$0.isEmpty }
            if !commits.isEmpty {
                let started = ContinuousClock.now
                do {
                    try backend.write(commits)
                    metrics.commitSeconds.record(ContinuousClock.now - started)
                } catch {
                    logger.error("commit failed; the engine is rebuilt from the database", metadata: ["error": "\(error)"])
                    throw error
                }
            }
            return rounds.map { _ in () }
        }
    }
}
