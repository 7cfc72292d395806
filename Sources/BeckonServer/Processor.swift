import BeckonCore
import BeckonStore
import BeckonYAML
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
package enum Job {
    /// Events of one request, decoded under `rules`, in order, with their input log records.
    case events([BoundEvent], InputLog, decodedUnder: ServingRules)
    /// Mark a user's inbox item read.
    case markRead(userID: String, itemID: String)
    /// Register a push device for a user, or remove one (`token` only).
    case device(userID: String, Device)
    case removeDevice(userID: String, token: String, seenBy: Int64? = nil)
    /// A user's inbox as it stands.
    case inbox(userID: String)
    /// A user's state as it stands.
    case state(userID: String)
    /// The state of the person an id names and those of the ids merged into them (``Privacy/person(of:engine:backend:)``).
    case privacy(userID: String)
    /// Swap to another rule set, carrying every user's state (a barrier: see ``Processor/barrier(_:)``).
    case reload(ServingRules)
    /// Forget a user (a barrier).
    case forget(userID: String)
    /// Make these stored users known to the schedules (``Engine/reach(_:)``); the round writes a checkpoint, so the
    /// runs set are durable when it is answered.
    case reach([String])
    /// Let go of these users' profiles if their state is written as it stands (``Engine/evict(_:)``): at the start of
    /// the first round with no checkpoint in flight.
    case evict([String])

    /// Whether the job checkpoints and reopens the engine, between the jobs before it and those after.
    package var isBarrier: Bool {
        switch self {
        case .reload, .forget: true
        case .events, .markRead, .device, .removeDevice, .inbox, .state, .privacy, .reach, .evict: false
        }
    }
}

package enum JobResult: Sendable {
    case events(accepted: Int, duplicates: Int, refused: Int)
    /// `nil`: no such user; `false`: no such item.
    case markRead(Bool?)
    /// Whether the user had the device (a removal).
    case device(Bool)
    /// `nil`: no such user.
    case inbox([InboxItem]?)
    case state(UserState?)
    /// The user the id named (itself, or the one it was merged into), their state, and the ids merged into them.
    case privacy(userID: String, UserState?, merged: [(id: String, state: UserState?)])
    case reloaded
    /// Whether the service held anything of the user, and the ids forgotten (the user's and those merged into them).
    case forgotten(Bool, ids: [String])
    /// The users a reach loaded from the database (the others were held already or are not stored).
    case reached(loaded: [String])
    /// How many users an evict queued to be let go.
    case evicted(Int)
    /// The job could not be done (the database could not be read): the request is answered 503.
    case failed(String)
}

/// The one thread that runs the engine: it takes every job queued since its last commit, processes them in order
/// (each user's events in the order they arrived), lets the live clock fire what is due, and writes the group's
/// inputs and the actions they fired in one transaction (a group commit) before any request of the group is answered.
/// A fired action is stored before anyone can pull it.
///
/// Users' states are written at checkpoints (every ``checkpointSeconds``, and when stopping), with the input log's
/// position they include; a start loads them and replays the inputs logged after it (``open(_:_:logger:)``), which
/// gives the same states and fires the same actions, already stored.
///
/// The engine is not thread-safe and is only touched here. When a commit fails, the requests get an error and the
/// engine is rebuilt from the database, so that memory never holds what the database does not.
package final class Processor: @unchecked Sendable {
    // @unchecked: `queue`, `stopping`, `stopped` and `isReady` are read and written only under `lock`; the engine and
    // everything else is touched only by the processing thread (and by `init` before it starts).
    private let lock = NSCondition()
    private var queue: [(Job, CheckedContinuation<JobResult, any Error>)] = []
    private var stopping = false
    private var stopped = false
    private var isReady = false
    /// Whether the last write to the database succeeded: after a failed commit the service is not ready (`/readyz`
    /// answers 503) until a write succeeds again, a commit or the processing thread's probe (``probeSeconds``).
    private var writable = true
    private var lastProbe = ContinuousClock.now
    /// How often a database that failed a write is tried with a small write while no commit succeeds.
    package static let probeSeconds = ServiceLimits.writeProbeSeconds

    /// The rule set the engine runs (the request handlers decode under ``current``, which a reload sets after this).
    private var rules: ServingRules
    package let current: CurrentRules
    package let backend: SQLiteStateBackend
    package let clock: ClockMode
    package let metrics: ServiceMetrics
    package let feed: ActionFeed
    package let logger: Logger
    /// Per rule, what became of its matches lately (the console's live counts).
    package let activity = RuleActivity()
    /// The rules' qualified ids by index, for ``activity``.
    private var ruleNames: [String] = []
    /// The live clock's tick: how long the thread sleeps when nothing is queued.
    package static let tick = 0.1
    /// A timer that fires more than this after its due time is marked late.
    package static let lateAfterMs: Int64 = 1000
    /// How often users' states are written.
    package static let checkpointSeconds = 5.0
    /// How many users timers may load from the database between checkpoints (``Engine/maxColdLoads``,
    /// ``ServiceLimits/coldLoadsPerRound`` unless a test sets a smaller bound): when more are due at once, a round
    /// fires what this allows, writes a checkpoint, and the next round lets those users go and goes on, so memory does
    /// not grow with the users a run reaches.
    private let coldLoads: Int

    private var engine: Engine
    private let committer: Committer
    private var lastCheckpoint = ContinuousClock.now
    /// The stream's clock as the input log has it (after replaying every record): a round whose clock moved since,
    /// on ticks that logged nothing, logs its clock first, so that a replay takes its inputs at the same time.
    private var loggedClock: Int64
    /// The engine must be opened again from the database before more jobs run (a reopen failed).
    private var needsReopen = false
    /// Users to let go (loaded by a timer or a broadcast) once their state is written: a round lets them go only
    /// while every checkpoint taken is written, so no newer state of theirs is in flight (under `lock`).
    private var evictable: [String] = []
    /// Checkpoints handed to the committer (the processing thread's), and those written (under `lock`).
    private var checkpointsTaken = 0
    private var checkpointsWritten = 0
    /// The last round stopped at ``coldLoads`` with more due: the next goes on at once, once that round is
    /// written (so the users it loaded can go first).
    private var overdue = false

    package init(
        current: CurrentRules, backend: SQLiteStateBackend, clock: ClockMode, metrics: ServiceMetrics,
        feed: ActionFeed, logger: Logger, coldLoadsPerRound: Int = ServiceLimits.coldLoadsPerRound
    ) throws {
        self.current = current
        coldLoads = coldLoadsPerRound
        rules = current.value
        self.backend = backend
        self.clock = clock
        self.metrics = metrics
        self.feed = feed
        self.logger = logger
        let replayed: Int
        (engine, replayed) = try Self.open(rules, backend, logger: logger)
        // (A replay fires all that its ticks had due, as they fired live: the bound holds from here on. On the events'
        // clock no tick goes on with what a bound left due: there is none.)
        engine.maxColdLoads = clock == .wall ? coldLoads : .max
        ruleNames = rules.ruleSet.rules.map(\.qualifiedID)
        activity.restart(from: engine.stats)
        // A checkpoint at start: what the replay rebuilt is not replayed again, and the rule set the inputs logged from
        // now on are processed under is recorded (a first start has no checkpoint yet).
        try backend.write(engine.checkpoint(under: rules.version))
        committer = Committer(backend: backend, metrics: metrics, logger: logger)
        loggedClock = engine.clock
        if replayed > 0 { logger.info("replayed the input log after the last checkpoint", metadata: ["records": "\(replayed)"]) }
    }

    /// An engine for `rules` over the database's states at the last checkpoint, its stream and timers restored, and
    /// the inputs logged since replayed into it (their actions are stored already). Returns how many records were
    /// replayed.
    ///
    /// The inputs are replayed under the rule set they were first processed under, the checkpoint's: when that is not
    /// `rules` (the files changed while the service was down), they are replayed under the stored files of the
    /// checkpoint's version, a checkpoint is written, and only then are the states carried to `rules`.
    package static func open(_ rules: ServingRules, _ backend: SQLiteStateBackend, logger: Logger) throws -> (Engine, Int) {
        let checkpoint = try backend.checkpoint()
        if let v = checkpoint.rulesVersion, v != rules.version, try backend.hasInputs(after: checkpoint.seq) {
            let old = RuleLoader.load(texts: try backend.ruleFiles(version: v))
            if let ruleSet = old.ruleSet {
                let (engine, n) = try replay(ruleSet, SegmentDecoder(ruleSet: ruleSet), backend, logger: logger)
                try backend.write(engine.checkpoint(under: rules.version))
                logger.notice(
                    "replayed the input log under the rule set it was logged under, then changed rule sets",
                    metadata: ["records": "\(n)", "from": "\(v)", "to": "\(rules.version)"])
            } else {
                logger.error(
                    "the stored rule set of the last checkpoint no longer compiles; replaying under the current one",
                    metadata: ["version": "\(v)"])
            }
        }
        return try replay(rules.ruleSet, rules.decoder, backend, logger: logger)
    }

    private static func replay(
        _ ruleSet: CompiledRuleSet, _ decoder: SegmentDecoder, _ backend: SQLiteStateBackend, logger: Logger
    ) throws -> (Engine, Int) {
        let engine = Engine(ruleSet: ruleSet, store: SavedStateStore(backend: backend))
        engine.collectsDeviceClaims = true
        engine.notesColdLoads = true
        if let s = try backend.readStream() { engine.restore(stream: try StreamState(decoding: s)) }
        engine.rebuildTimers()
        var records = 0
        var step = Processing()
        defer {
            if step.undecodable > 0 {
                logger.error(
                    "logged events that do not decode were not replayed", metadata: ["events": "\(step.undecodable)"])
            }
        }
        try backend.eachInput(after: backend.checkpointSeq()) { _, _, bytes in
            try InputLog.read(bytes) { input in step.apply(input, to: engine, decoder: decoder) }
            step.dropFired()
            records += 1
        }
        return (engine, records)
    }

    package var ready: Bool {
        lock.lock()
        defer { lock.unlock() }
        return isReady && writable && !stopping
    }

    /// Notes the outcome of a write (a commit or a probe).
    private func setWritable(_ ok: Bool) {
        lock.lock()
        writable = ok
        lock.unlock()
    }

    /// A write failed: not ready until one succeeds, the first probe a ``probeSeconds`` from now.
    private func markUnwritable() {
        setWritable(false)
        lastProbe = .now
    }

    /// While the database cannot be written, a small write each ``probeSeconds`` finds out when it can again.
    private func probeIfUnwritable() {
        lock.lock()
        let unwritable = !writable
        lock.unlock()
        guard unwritable, ContinuousClock.now - lastProbe >= .seconds(Self.probeSeconds) else { return }
        lastProbe = .now
        do {
            try backend.probeWrite()
            setWritable(true)
            logger.notice("the database can be written again")
        } catch {
            logger.debug("the database still cannot be written", metadata: ["error": "\(error)"])
        }
    }

    package func start() {
        startThread(named: "beckon-engine") { [self] in run() }
    }

    /// Processes what is queued, commits it with a checkpoint, and stops the thread.
    package func stop() {
        lock.lock()
        stopping = true
        lock.signal()
        while !stopped { lock.wait() }
        lock.unlock()
    }

    package func submit(_ job: Job) async throws -> JobResult {
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

    /// A user's state as the processing thread holds it now (`nil`: no such user): what the console and the
    /// deliverer read.
    package func state(of user: String) async throws -> UserState? {
        guard case .state(let s) = try await submit(.state(userID: user)) else { return nil }
        return s
    }

    package struct ServiceUnavailable: Error {}

    private func setReady(_ ready: Bool) {
        lock.lock()
        isReady = ready
        lock.unlock()
    }

    private func run() {
        setReady(true)
        // In wall mode the first round fires what came due while the service was down.
        while true {
            lock.lock()
            if queue.isEmpty && !stopping && !overdue { _ = lock.wait(until: Date(timeIntervalSinceNow: Self.tick)) }
            var jobs = queue
            queue = []
            let last = stopping
            lock.unlock()
            if overdue { committer.waitIdle() }
            if jobs.contains(where: { if case .forget = $0.0 { true } else { false } }) {
                jobs = zip(droppingForgotten(jobs.map(\.0)), jobs.map(\.1)).map { ($0, $1) }
            }
            probeIfUnwritable()
            if committer.failed || needsReopen {
                if committer.failed { markUnwritable() }
                // A group was not written: what the engine holds beyond the database is dropped.
                committer.waitIdle()
                reopen()
                if !needsReopen {
                    committer.reset()
                    setReady(true)
                } else {
                    // Not ready until the database opens again; requests meanwhile get 503. Tried again in a second.
                    setReady(false)
                    for (_, c) in jobs { c.resume(throwing: ServiceUnavailable()) }
                    if last { return finish() }
                    Thread.sleep(forTimeInterval: 1)
                    continue
                }
            }
            // A reload or a forget splits the jobs: those before it are a round of their own.
            var start = 0
            for (i, (job, c)) in jobs.enumerated() where job.isBarrier && !needsReopen {
                round(Array(jobs[start..<i]), checkpoint: false)
                barrier(job, c)
                start = i + 1
            }
            if needsReopen {
                // (A barrier could not reopen the engine: what follows it waits for one that holds the database.)
                for (_, c) in jobs[start...] { c.resume(throwing: ServiceUnavailable()) }
                if last { return finish() }
                continue
            }
            round(Array(jobs[start...]), checkpoint: last)
            if last { return finish() }
        }
    }

    /// The jobs without the events of a user whose forget is queued behind them, or of an id merged into them (the
    /// events that name one of the ids, as the forget's scrub matches them): the forget would erase what they did, but
    /// an action they fired could reach a destination first. (Their requests are answered as accepted: they were, and
    /// then forgotten.)
    private func droppingForgotten(_ jobs: [Job]) -> [Job] {
        Self.droppingForgotten(
            jobs,
            ids: { id in
                do {
                    let (user, merged) = try Privacy.person(of: id, engine: engine, backend: backend)
                    return Set([user] + merged)
                } catch {
                    logger.error("cannot read the ids merged into a forgotten user", metadata: ["error": "\(error)"])
                    return Set([engine.mergedTarget(of: id) ?? id, id])
                }
            }, undecodable: undecodable)
    }

    /// ``droppingForgotten(_:)`` with `ids` giving the ids a user's forget takes (the user's and those merged in).
    package static func droppingForgotten(
        _ jobs: [Job], ids idsOf: (String) -> Set<String>, undecodable: (any Error) -> Void
    ) -> [Job] {
        var jobs = jobs
        for (i, job) in jobs.enumerated() {
            guard case .forget(let user) = job else { continue }
            let ids = idsOf(user)
            for j in 0..<i {
                guard case .events(let events, let log, let under) = jobs[j],
                    let kept = try? InputLog.without(userIDs: ids, in: log.bytes)
                else { continue }
                // The events kept, decoded again from the record kept (the same bytes, the same rules).
                var keptEvents: [BoundEvent] = []
                do {
                    try InputLog.read(kept.bytes) { input in
                        if case .event(let json, let arrival) = input {
                            keptEvents.append(try under.decoder.decode(json, arrival: arrival))
                        }
                    }
                } catch {
                    undecodable(error)
                    keptEvents = events.filter { !ids.contains($0.userID) }
                }
                jobs[j] = .events(keptEvents, kept, decodedUnder: under)
            }
        }
        return jobs
    }

    private func finish() {
        committer.stop()
        // A clean stop leaves no write-ahead log behind (everything is in the database file).
        do { try backend.truncateLog() } catch {
            logger.warning("the write-ahead log could not be truncated", metadata: ["error": "\(error)"])
        }
        lock.lock()
        // Whatever arrived during the last round is refused: the service is going away.
        for (_, c) in queue { c.resume(throwing: ServiceUnavailable()) }
        queue = []
        stopped = true
        lock.broadcast()
        lock.unlock()
    }

    /// A reload or a forget: with every round before it written, a checkpoint of every user's state (so that nothing
    /// before it is ever replayed), the change itself in the same transaction, then an engine opened afresh over the
    /// database (users are loaded from their checkpointed states as they come back: under the new rule set, by
    /// their rules' names, for a reload; without the forgotten user, their timers and inbox, for a forget).
    private func barrier(_ job: Job, _ c: CheckedContinuation<JobResult, any Error>) {
        committer.waitIdle()
        guard !committer.failed else {
            // (The next turn of the loop rebuilds the engine from the database.)
            c.resume(throwing: ServiceUnavailable())
            return
        }
        let result: JobResult
        do {
            switch job {
            case .reload(let new):
                try backend.write(engine.checkpoint(under: new.version))
                rules = new
                current.set(new)
                result = .reloaded
                do { try backend.pruneRuleVersions() } catch {
                    logger.warning("old rule set versions could not be deleted", metadata: ["error": "\(error)"])
                }
            case .forget(let user):
                let (known, ids) = try Privacy.forget(user, in: engine, under: rules.version, backend: backend)
                result = .forgotten(known, ids: ids)
            default:
                preconditionFailure("not a barrier")
            }
        } catch {
            logger.error("a checkpoint failed; the engine is rebuilt from the database", metadata: ["error": "\(error)"])
            markUnwritable()
            c.resume(throwing: error)
            reopen()
            return
        }
        reopen()
        lastCheckpoint = ContinuousClock.now
        metrics.checkpoints.increment()
        c.resume(returning: result)
    }

    /// The engine opened again over the database (nothing to replay after a checkpoint); on failure the loop tries
    /// again before it takes more jobs.
    private func reopen() {
        // (Nothing is in flight: the committer is idle. What was to be let go was the old engine's.)
        lock.lock()
        checkpointsTaken = checkpointsWritten
        evictable = []
        lock.unlock()
        do {
            (engine, _) = try Self.open(rules, backend, logger: logger)
            engine.maxColdLoads = clock == .wall ? coldLoads : .max
            ruleNames = rules.ruleSet.rules.map(\.qualifiedID)
            activity.restart(from: engine.stats)
            loggedClock = engine.clock
            needsReopen = false
        } catch {
            logger.critical("cannot reopen the database", metadata: ["error": "\(error)"])
            needsReopen = true
        }
    }

    /// The service's wall clock, in milliseconds since 1970: the one reading of it.
    package static func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    /// One group: the jobs in order, then the clock, then one commit.
    private func round(_ jobs: [(Job, CheckedContinuation<JobResult, any Error>)], checkpoint force: Bool) {
        lock.lock()
        var evicting: [String] = []
        if checkpointsWritten == checkpointsTaken { swap(&evicting, &evictable) }
        lock.unlock()
        if !evicting.isEmpty { metrics.evictedUsers.increment(by: Int64(engine.evict(evicting))) }
        var input = InputLog()
        let logsInput = jobs.contains { job, _ in
            switch job {
            case .events, .markRead, .device, .removeDevice: true
            case .inbox, .state, .privacy, .reload, .forget, .reach, .evict: false
            }
        }
        var reached = false
        if logsInput && engine.clock != loggedClock { input.tick(engine.clock) }
        var results: [JobResult] = []
        var step = Processing()
        for (job, _) in jobs {
            switch job {
            case .events(let decoded, let log, let under):
                let before = step.tally
                // Events decoded under a rule set that a reload replaced since are decoded again from what arrived.
                // (Whether a line decodes does not depend on the rule set: what was accepted under one decodes under
                // any. Should one not, it is said, not skipped in silence.)
                var events = decoded
                if under !== rules {
                    events = []
                    do {
                        try InputLog.read(log.bytes) { input in
                            guard case .event(let json, let arrival) = input else { return }
                            do { events.append(try rules.decoder.decode(json, arrival: arrival)) } catch {
                                undecodable(error)
                            }
                        }
                    } catch {
                        undecodable(error)
                    }
                }
                for e in events { step.process(e, on: engine) }
                input.append(log)
                results.append(
                    .events(
                        accepted: step.tally.accepted - before.accepted,
                        duplicates: step.tally.duplicates - before.duplicates, refused: step.tally.refused - before.refused))
            case .markRead(let user, let item):
                let time = clock == .wall ? max(Self.nowMs(), engine.clock) : max(engine.clock, 0)
                let found = engine.markRead(userID: user, itemID: item, at: time)
                if found == true { input.markRead(userID: user, itemID: item, time: time) }
                results.append(.markRead(found))
            case .device(let user, var d):
                d.lastSeen = clock == .wall ? max(Self.nowMs(), engine.clock) : max(engine.clock, 0)
                d.firstSeen = d.lastSeen
                engine.report(d, for: user)
                input.device(userID: user, d)
                results.append(.device(true))
            case .removeDevice(let user, let token, let seenBy):
                let had = engine.removeDevice(token: token, of: user, seenBy: seenBy)
                if had { input.deviceRemoved(userID: user, token: token, seenBy: seenBy) }
                results.append(.device(had))
            case .inbox(let user):
                results.append(.inbox(engine.profile(of: user)?.inbox))
            case .state(let user):
                results.append(.state(engine.state(of: user)))
            case .privacy(let id):
                do {
                    let (user, merged) = try Privacy.person(of: id, engine: engine, backend: backend)
                    results.append(
                        .privacy(
                            userID: user, engine.state(of: user), merged: merged.map { (id: $0, state: engine.state(of: $0)) }))
                } catch {
                    results.append(.failed("\(error)"))
                }
            case .reach(let users):
                // (A schedule's next run is set from the clock: an engine that has seen no time yet takes the wall's,
                // which has nothing due before it.)
                if clock == .wall && engine.clock <= 0 { step.advance(engine, to: Self.nowMs()) }
                results.append(.reached(loaded: engine.reach(users)))
                reached = true
            case .evict(let users):
                evictLater(users)
                results.append(.evicted(users.count))
            case .reload, .forget:
                preconditionFailure("a barrier is not part of a round")
            }
        }
        if clock == .wall {
            let now = Self.nowMs()
            let due = step.advance(engine, to: now)
            // The tick is logged with the group's inputs, and whenever a delayed action came due (fired, held or
            // dropped): a replay moves the clock and the timers as they moved here.
            if !input.isEmpty || !step.fired.isEmpty || !due.dueTimes.isEmpty { input.tick(now) }
        }
        let fired = step.fired
        if !input.isEmpty { loggedClock = engine.clock }
        let gained = !input.isEmpty || !step.dues.isEmpty ? activity.take(engine.stats, names: ruleNames) : [:]
        // A round that stopped at the bound on users loaded writes a checkpoint with its tick: the tick is never
        // replayed (a replay would fire all that was due at it, and drop as stored the actions not yet fired).
        overdue = engine.hasOverdue
        let checkpoint =
            force || reached || overdue || ContinuousClock.now - lastCheckpoint >= .seconds(Self.checkpointSeconds)
        var commit = ServiceCommit()
        if !input.isEmpty { commit.input = (input.bytes, Self.nowMs(), input.events) }
        commit.deviceClaims = engine.takeDeviceClaims()
        let states = checkpoint ? engine.takeChangedStates() : []
        // Users a timer loaded are let go once the checkpoint that holds them is written (the next round evicts them).
        let cold = checkpoint ? engine.takeColdLoads() : []
        if checkpoint && (!states.isEmpty || commit.input != nil) {
            commit.checkpoint = (states, engine.streamState.encoded(), rules.version)
        }
        if checkpoint { lastCheckpoint = ContinuousClock.now }
        // (Users loaded whose state did not change are saved as they stand: they can go without a checkpoint.)
        if checkpoint && commit.checkpoint == nil && !cold.isEmpty { evictLater(cold) }
        // (A group with nothing to write still goes through the committer: its answers wait for the groups before it.)
        guard !commit.isEmpty || !fired.isEmpty || !jobs.isEmpty else { return }
        let counters = fired.map { self.metrics.action($0.0) }
        let destinations = rules.ruleSet.settings.destinations
        let users = Set(fired.map(\.0.userID))
        let (metrics, feed, events, live, tally, dueTimes) = (
            metrics, feed, input.events, clock == .wall,
            step.tally, step.dues
        )
        let activity = activity
        let checkpointed = commit.checkpoint != nil
        if checkpointed { checkpointsTaken += 1 }
        let wrote = !commit.isEmpty || !fired.isEmpty
        let (waiting, answers) = (jobs.map(\.1), results)
        let written: @Sendable () -> Void = { [weak self] in
            if wrote { self?.setWritable(true) }
            if checkpointed { self?.checkpointWritten(cold) }
            metrics.commitEvents.record(Double(events))
            if checkpointed { metrics.checkpoints.increment() }
            tally.count(in: metrics)
            for c in counters { c.increment() }
            activity.add(gained, at: Self.nowMs())
            if live {
                let now = Self.nowMs()
                for d in dueTimes { metrics.timerLagSeconds.record(.milliseconds(max(0, now - d))) }
            }
            if !users.isEmpty { feed.notify(users) }
            metrics.memory.noteWork()
        }
        committer.enqueue(RoundCommit(commit: commit, fired: fired, destinations: destinations)) { outcome in
            switch outcome {
            case .success:
                written()
                for (c, r) in zip(waiting, answers) { c.resume(returning: r) }
            case .failure(let error):
                for c in waiting { c.resume(throwing: error) }
            }
        }
    }

    /// Notes users to let go once every checkpoint taken is written.
    private func evictLater(_ users: [String]) {
        lock.lock()
        evictable += users
        lock.unlock()
    }

    /// A checkpoint is written, holding the states of `cold` (users a timer loaded): the committer's thread.
    private func checkpointWritten(_ cold: [String]) {
        lock.lock()
        checkpointsWritten += 1
        evictable += cold
        lock.unlock()
    }

    /// An accepted event that the rules now served cannot decode: never expected (a line's validity does not depend
    /// on the rules), so it is an error in the log and in `beckon_ingest_events_total{result="undecodable"}`.
    private func undecodable(_ error: any Error) {
        metrics.ingest(.undecodable).increment()
        logger.error("an accepted event no longer decodes", metadata: ["error": "\(error)"])
    }

    /// The action's JSON object as `dry-run --format jsonl` prints it; a late one also says when it fired.
    package static func json(_ a: FiredAction, late: Bool) -> String { late ? a.json(firedLateAt: nowMs()) : a.json }
}

extension Engine {
    /// A checkpoint of everyone changed since the last one (but `user`, who is being forgotten), under rule set
    /// `version`: what a start, a reload and a forget write on their own.
    package func checkpoint(under version: Int64, without users: Set<String> = []) -> ServiceCommit {
        var commit = ServiceCommit()
        commit.checkpoint = (takeChangedStates().filter { !users.contains($0.userID) }, streamState.encoded(), version)
        return commit
    }
}
