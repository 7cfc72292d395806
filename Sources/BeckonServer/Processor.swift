import BeckonCore
import BeckonStore
import Foundation
import Logging
import Prometheus

/// Where the service's time comes from.
public enum ClockMode: String, Sendable, CaseIterable {
    /// The machine's clock: delayed actions come due on it with no further events, events stamped ahead of it are
    /// taken as arriving now, and timers missed while the service was down fire on start, marked late.
    case wall
    /// The events' own times only, as `beckon dry-run`: for replaying a recorded stream into a fresh database.
    case events
}

/// What a request hands the processor.
enum Job {
    /// Accepted events, in order, with what the event log keeps of each.
    case events([BoundEvent], [LoggedEvent])
    /// Mark a user's inbox item read.
    case markRead(userID: String, itemID: String)
}

enum JobResult: Sendable {
    case events(accepted: Int, duplicates: Int, refused: Int)
    /// `nil`: no such user; `false`: no such item.
    case markRead(Bool?)
}

/// The one thread that runs the engine: it takes every job queued since its last commit, processes them in order
/// (each user's events in the order they arrived), lets the live clock fire what is due, and writes everything that
/// changed — the events, the users' states, the actions, the stream's state — in one transaction (a group commit)
/// before any request of the group is answered. A fired action is stored before anyone can pull it.
///
/// The engine is not thread-safe and is only touched here. When a commit fails, the requests get an error, and the
/// engine is rebuilt from the database, so that memory never holds what the database does not.
final class Processor: @unchecked Sendable {
    // @unchecked: `queue`, `stopping` and `ready` are read and written only under `lock`; the engine and everything
    // else is touched only by the processing thread.
    private let lock = NSCondition()
    private var queue: [(Job, CheckedContinuation<JobResult, any Error>)] = []
    private var stopping = false
    private var stopped = false
    private var isReady = false

    let ruleSet: CompiledRuleSet
    let backend: SQLiteStateBackend
    let clock: ClockMode
    let metrics: ServiceMetrics
    let feed: ActionFeed
    let logger: Logger
    /// The live clock's tick: how long the thread sleeps when nothing is queued.
    static let tick = 0.1
    /// A timer that fires more than this after its due time is marked late.
    static let lateAfterMs: Int64 = 1000

    private var engine: Engine
    private var store: SavedStateStore
    private var thread: Thread?
    private var actionCounters: [String: Counter] = [:]

    init(
        ruleSet: CompiledRuleSet, backend: SQLiteStateBackend, clock: ClockMode, metrics: ServiceMetrics,
        feed: ActionFeed, logger: Logger
    ) throws {
        self.ruleSet = ruleSet
        self.backend = backend
        self.clock = clock
        self.metrics = metrics
        self.feed = feed
        self.logger = logger
        (engine, store) = try Self.open(ruleSet, backend)
    }

    /// An engine over the database's states, its stream and timers restored.
    static func open(_ ruleSet: CompiledRuleSet, _ backend: SQLiteStateBackend) throws -> (Engine, SavedStateStore) {
        let store = SavedStateStore(backend: backend)
        let engine = Engine(ruleSet: ruleSet, store: store)
        if let s = try backend.readStream() { engine.restore(stream: try StreamState(decoding: s)) }
        engine.rebuildTimers()
        return (engine, store)
    }

    var ready: Bool {
        lock.lock()
        defer { lock.unlock() }
        return isReady && !stopping
    }

    func start() {
        let t = Thread { [self] in run() }
        t.name = "beckon-processor"
        thread = t
        t.start()
    }

    /// Processes what is queued, commits it, and stops the thread.
    func stop() {
        lock.lock()
        stopping = true
        lock.signal()
        while !stopped { lock.wait() }
        lock.unlock()
    }

    func submit(_ job: Job) async throws -> JobResult {
        try await withCheckedThrowingContinuation { c in
            lock.lock()
            if stopped {
                lock.unlock()
                c.resume(throwing: ServiceUnavailable())
                return
            }
            queue.append((job, c))
            lock.signal()
            lock.unlock()
        }
    }

    struct ServiceUnavailable: Error {}

    private func run() {
        lock.lock()
        isReady = true
        lock.unlock()
        // In wall mode the first round fires what came due while the service was down.
        while true {
            lock.lock()
            if queue.isEmpty && !stopping { _ = lock.wait(until: Date(timeIntervalSinceNow: Self.tick)) }
            let jobs = queue
            queue = []
            let last = stopping
            lock.unlock()
            round(jobs)
            if last {
                lock.lock()
                // Whatever arrived during the last round is refused: the service is going away.
                for (_, c) in queue { c.resume(throwing: ServiceUnavailable()) }
                queue = []
                stopped = true
                lock.broadcast()
                lock.unlock()
                return
            }
        }
    }

    static func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    /// One group: the jobs in order, then the clock, then one commit.
    private func round(_ jobs: [(Job, CheckedContinuation<JobResult, any Error>)]) {
        var commit = ServiceCommit()
        var results: [JobResult] = []
        var fired: [(FiredAction, late: Bool)] = []
        var out = EventOutcome()
        var counts = (accepted: 0, duplicates: 0, refused: 0)
        for (job, _) in jobs {
            switch job {
            case .events(let events, let logged):
                var r = (accepted: 0, duplicates: 0, refused: 0)
                for (e, l) in zip(events, logged) {
                    engine.process(e, into: &out)
                    switch out.status {
                    case .processed:
                        r.accepted += 1
                        commit.events.append(l)
                    case .duplicate: r.duplicates += 1
                    case .refused: r.refused += 1
                    }
                    for a in out.actions { fired.append((a, false)) }
                }
                counts.accepted += r.accepted
                counts.duplicates += r.duplicates
                counts.refused += r.refused
                results.append(.events(accepted: r.accepted, duplicates: r.duplicates, refused: r.refused))
            case .markRead(let user, let item):
                results.append(.markRead(engine.markRead(userID: user, itemID: item, at: max(Self.nowMs(), engine.clock))))
            }
        }
        if clock == .wall {
            let now = Self.nowMs()
            let due = engine.advance(to: now)
            for a in due.actions {
                let lag = now - a.time
                metrics.timerLagSeconds.record(.milliseconds(max(0, lag)))
                fired.append((a, lag > Self.lateAfterMs))
            }
        }
        guard !jobs.isEmpty || !fired.isEmpty || store.queuedCount > 0 else { return }
        do {
            store.flush(into: &commit.states)
            commit.stream = engine.streamState.encoded()
            for (a, late) in fired {
                commit.actions.append(LoggedAction(userID: a.userID, actionID: a.id, json: Self.json(a, late: late)))
            }
            let started = ContinuousClock.now
            try backend.write(commit)
            metrics.commitSeconds.record(ContinuousClock.now - started)
            metrics.commitEvents.record(Double(commit.events.count))
        } catch {
            logger.error("commit failed; reloading state from the database", metadata: ["error": "\(error)"])
            for (_, c) in jobs { c.resume(throwing: error) }
            do {
                (engine, store) = try Self.open(ruleSet, backend)
            } catch {
                logger.critical("cannot reopen the database", metadata: ["error": "\(error)"])
            }
            return
        }
        metrics.ingest(.accepted).increment(by: Int64(counts.accepted))
        metrics.ingest(.duplicate).increment(by: Int64(counts.duplicates))
        metrics.ingest(.refused).increment(by: Int64(counts.refused))
        for (a, _) in fired { counter(a).increment() }
        for ((_, c), r) in zip(jobs, results) { c.resume(returning: r) }
        if !fired.isEmpty { feed.notify(Set(fired.map(\.0.userID))) }
    }

    private func counter(_ a: FiredAction) -> Counter {
        let key = a.unit + "/" + a.rule + "/" + a.kind
        if let c = actionCounters[key] { return c }
        let c = metrics.action(ruleset: a.unit, rule: a.rule, kind: a.kind)
        actionCounters[key] = c
        return c
    }

    /// The action's JSON object as `dry-run --format jsonl` prints it; a late one also says when it fired.
    static func json(_ a: FiredAction, late: Bool) -> String {
        let json = a.json
        guard late, json.hasSuffix("}") else { return json }
        return String(json.dropLast()) + ",\"late\":true,\"firedAt\":\"\(Timestamp(milliseconds: nowMs()))\"}"
    }
}
