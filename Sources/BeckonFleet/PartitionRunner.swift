import BeckonCore
import BeckonPostgres
import BeckonServer
import BeckonStore
import Foundation
import Logging
import Prometheus
import Synchronization

/// A partition this process holds, as its lease manager and its runner share it.
final class PartitionHandle: Sendable {
    let lease: FleetLog.Lease
    private let state = Mutex((stop: false, lost: false, finished: false, progress: ContinuousClock.now))

    init(lease: FleetLog.Lease) { self.lease = lease }

    /// The runner went round once without failing (it processed what there was, or found nothing to do): the lease is
    /// renewed only while this keeps happening (``FleetWorker``).
    func progressed() { state.withLock { $0.progress = .now } }
    var lastProgress: ContinuousClock.Instant { state.withLock { $0.progress } }

    /// Asked to stop after the batch in hand (a rebalance or the process stopping).
    var stopRequested: Bool { state.withLock { $0.stop } }
    func requestStop() { state.withLock { $0.stop = true } }
    /// The lease could not be renewed: the runner stops once it has nothing in hand (anything it writes meanwhile is
    /// refused by the fence).
    var lost: Bool { state.withLock { $0.lost } }
    func markLost() { state.withLock { $0.lost = true } }
    var finished: Bool { state.withLock { $0.finished } }
    func markFinished() { state.withLock { $0.finished = true } }
}

/// The saved states of a partition's users as its engine asks for them, fetched from PostgreSQL before each batch:
/// the engine is synchronous and PostgreSQL is not, so every user of a batch who is not live in the engine yet is
/// fetched (one query) before the engine runs. A user the engine asks for that was not fetched is a fault
/// (``missed``): the batch is dropped and the partition opened again rather than the user taken as new. Another
/// partition's user has no state here (a merged id's pointer names one, and the engine looks it up to follow the
/// chain): there is none to fetch, and asking is no fault.
final class PartitionStates: StateBackend {
    /// Users fetched whose stored state the engine has not taken yet.
    private var fetched: [String: [UInt8]] = [:]
    /// Every user fetched (with or without a stored state): the engine holds them from their first use on.
    private var known: Set<String> = []
    private let pending: [(userID: String, due: Int64)]
    private(set) var missed: [String] = []

    struct NotFetched: Error {}
    struct ReadOnly: Error {}

    /// The partition whose users these are.
    private let partition: Int

    init(partition: Int, pending: [(userID: String, due: Int64, bytes: [UInt8])]) {
        self.partition = partition
        self.pending = pending.map { ($0.userID, $0.due) }
        for p in pending {
            known.insert(p.userID)
            fetched[p.userID] = p.bytes
        }
    }

    /// Of `users`, those never fetched.
    func unknown(_ users: some Sequence<String>) -> [String] {
        var seen: Set<String> = []
        return users.filter { !known.contains($0) && seen.insert($0).inserted }
    }

    func add(_ states: [String: [UInt8]], for users: [String]) {
        for u in users {
            known.insert(u)
            if let b = states[u] { fetched[u] = b }
        }
    }

    func read(_ userID: String) throws -> [UInt8]? {
        if let b = fetched.removeValue(forKey: userID) { return b }
        if known.contains(userID) || FleetLog.partition(of: userID) != partition { return nil }
        missed.append(userID)
        throw NotFetched()
    }

    func write(_ batch: [SavedState]) throws { throw ReadOnly() }
    func usersWithPendingActions() throws -> [(userID: String, due: Int64)] { pending }
}

/// Processes one partition for as long as this process holds its lease: reads the log after the partition's stored
/// position, runs the engine, and writes users' states, the stream state, fired actions, their outbox entries and the
/// new position in one fenced statement (``FleetLog/commit(_:)``, with the batches of the process's other partitions
/// that are ready at the same time: ``BatchCommitter``). Nothing is written when the lease has
/// moved; whatever fails, the engine is opened again from what PostgreSQL holds, so that memory never runs ahead of
/// the database.
///
/// Only its own task touches it (the engine is not thread-safe).
final class PartitionRunner {
    let handle: PartitionHandle
    let log: FleetLog
    /// The fleet's rule sets; `serving` is the one this partition runs as of its position.
    let fleetRules: FleetRules
    private var serving: ServingRules?
    /// The process's live counts, and this runner's engine's counters as last added to them.
    let activity: RuleActivity
    private let tracker = RuleActivity()
    private var ruleNames: [String] = []
    let clock: ClockMode
    let metrics: FleetMetrics
    let appended: Poller
    let committer: BatchCommitter
    let feed: ActionFeed
    let notices: ActionNoticer
    let logger: Logger
    let faults: FaultLog
    private var engine: Engine?
    private var states = PartitionStates(partition: 0, pending: [])
    /// The batch's head is a sign-in whose hand-over another partition has not written yet.
    private var blocked = false
    private(set) var processed: Int64 = 0
    private let lag: Gauge
    private let owned: Gauge
    private let processedEvents: Counter
    /// Entries read in one batch at most (one transaction).
    static let batchLimit = 2000
    /// How far the schedules have reached the partition's stored users since the engine was opened.
    private var reached: (after: String?, done: Bool, last: ContinuousClock.Instant) = (nil, false, .now)
    /// At most this long between two pages of reaching while entries keep coming.
    static let reachEvery: Duration = .milliseconds(100)
    /// Stored users made known to the schedules in one batch.
    static let reachPage = 500

    var partition: Int { handle.lease.partition }

    init(
        handle: PartitionHandle, log: FleetLog, rules: FleetRules, clock: ClockMode, metrics: FleetMetrics,
        appended: Poller, committer: BatchCommitter, feed: ActionFeed, notices: ActionNoticer, activity: RuleActivity,
        faults: FaultLog, logger: Logger
    ) {
        self.feed = feed
        self.notices = notices
        self.activity = activity
        self.faults = faults
        self.handle = handle
        self.log = log
        fleetRules = rules
        self.clock = clock
        self.metrics = metrics
        self.appended = appended
        self.committer = committer
        self.logger = logger
        lag = metrics.lag(handle.lease.partition)
        owned = metrics.owned(handle.lease.partition)
        processedEvents = metrics.events(handle.lease.partition)
    }

    /// Runs until asked to stop or the lease is lost; marks the handle finished.
    func run() async {
        defer { handle.markFinished() }
        owned.set(to: 1)
        defer {
            owned.set(to: 0)
            lag.set(to: 0)
        }
        while !handle.stopRequested && !Task.isCancelled {
            do {
                if engine == nil { try await open() }
                let worked = try await step()
                handle.progressed()
                faults.ok("processing")
                lag.set(to: Double(max(0, appended.value(of: partition) - processed)))
                if worked {
                    metrics.service.memory.noteWork()
                    continue
                }
                if handle.lost { return }
                // (A sign-in waits for its earlier id's partition, which may be another process's: looked at again
                // at the positions' next read.)
                if blocked {
                    try await Task.sleep(for: Poller.interval)
                    continue
                }
                await appended.wait(partition, after: processed, timeout: idleWait(engine))
            } catch is FleetLog.Fenced {
                metrics.fenced.increment()
                logger.warning(
                    "a write was refused: the partition's lease moved to another process", metadata: ["partition": "\(partition)"]
                )
                handle.markLost()
                return
            } catch is CancellationError {
                return
            } catch {
                if handle.lost { return }
                metrics.failures.increment()
                faults.failed("processing", error)
                engine = nil
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// How long to wait for new entries: a second (stop and lease flags are looked at between waits), or on the wall
    /// clock until the soonest delayed action is due.
    private func idleWait(_ engine: Engine?) -> Duration {
        var ms: Int64 = 1000
        if clock == .wall, let due = engine?.nextTimerDue { ms = min(ms, max(0, due - Processor.nowMs())) }
        return .milliseconds(ms)
    }

    /// An engine over the partition's stored states under the rule set it runs as of its position: its stream state,
    /// the users with delayed actions (their timers set), and the position it has processed up to.
    private func open() async throws {
        processed = try await log.processed(partition: partition)
        let rules = try await fleetRules.serving(try await log.rulesVersion(partition: partition))
        serving = rules
        let pending = try await log.pendingStates(partition: partition)
        states = PartitionStates(partition: partition, pending: pending)
        reached = (nil, false, .now)
        // A partition holds only its own users, and a sign-in's earlier id may be another partition's: merges are the
        // runner's, through the log (``takeOver(_:)``, docs/fleet.md "Identity merge"), not the engine's own.
        let engine = Engine(
            ruleSet: rules.ruleSet, store: SavedStateStore(backend: states), options: .init(mergesIdentities: false))
        engine.collectsDeviceClaims = true
        // (Each partition paces its share of a schedule's `rate:`.)
        engine.rateShares = FleetLog.partitionCount
        if let s = try await log.streamState(partition: partition) { engine.restore(stream: try StreamState(decoding: s)) }
        engine.rebuildTimers()
        tracker.restart(from: engine.stats)
        ruleNames = rules.ruleSet.rules.map(\.qualifiedID)
        self.engine = engine
    }

    /// One batch: the entries after the stored position (and on the wall clock, the delayed actions due), processed
    /// and written. Returns whether there was anything to do.
    private func step() async throws -> Bool {
        guard let engine, let rules = serving else { return false }
        // A busy partition still reaches its stored users: a page at least every ``reachEvery`` between batches.
        if rules.ruleSet.hasSchedules && !reached.done && ContinuousClock.now - reached.last >= Self.reachEvery {
            if try await reach(engine, rules) { return true }
        }
        var entries: [FleetLog.Entry] = []
        if appended.value(of: partition) > processed {
            entries = try await log.read(partition: partition, after: processed, limit: Self.batchLimit)
        }
        // A forget or a new rule set ends the batch before it; at the head of a batch it is done on its own.
        if let i = entries.firstIndex(where: { Self.forgotten(in: $0) != nil || Self.rulesVersion(in: $0) != nil }) {
            if i == 0 {
                if let v = Self.rulesVersion(in: entries[0]) { return try await switchRules(to: v, at: entries[0], engine) }
                return try await forget(entries[0])
            }
            entries = Array(entries[..<i])
        }
        // A hand-over ends the batch after it: the entries after it of the id it hands over are sent on.
        if let i = entries.firstIndex(where: { $0.body.first == UInt8(ascii: "H") }) { entries = Array(entries[...i]) }
        blocked = false
        let now = Processor.nowMs()
        let timersDue = clock == .wall && (engine.nextTimerDue.map { $0 <= now } ?? false)
        guard !entries.isEmpty || timersDue else { return try await reach(engine, rules) }
        // (With the earlier ids of this partition's sign-ins: their merge is done here, without a hand-over.)
        let takeOvers = Self.takeOvers(in: entries)
        let users = states.unknown(entries.map(\.userID) + takeOvers.map(\.from).filter(isOwn))
        if !users.isEmpty { states.add(try await log.states(of: users), for: users) }
        // The ids those users were merged into, when this partition's, are fetched too (a chain is followed through
        // them to its end: where an entry goes).
        var ids = Set(entries.map(\.userID))
        for _ in 0..<Engine.maxMergeHops {
            let next = Set(ids.compactMap { engine.profile(of: $0)?.mergedInto }).filter(isOwn)
            let unknown = states.unknown(next)
            guard !unknown.isEmpty else { break }
            states.add(try await log.states(of: unknown), for: unknown)
            ids = next
        }
        // Entries of ids merged into another partition's user are sent on to it: at the head of a batch, as many as
        // there are in a row; else the batch ends before the first.
        if let i = entries.firstIndex(where: { sentOn(of: $0, engine) != nil }) {
            if i == 0 { return try await sendOn(entries, engine) }
            entries = Array(entries[..<i])
        }
        // Sign-ins take over what their earlier id's partition handed over; the batch ends before one whose hand-over
        // is not written yet (its partition has not reached it).
        var handOvers = try await handOvers(for: takeOvers.filter { $0.index < entries.count })
        if let i = handOvers.missing {
            guard i > 0 else {
                blocked = true
                return false
            }
            entries = Array(entries[..<i])
        }

        var step = Processing()
        var commit = FleetLog.PartitionCommit(processed: entries.last?.seq ?? processed, rulesVersion: rules.version)
        for entry in entries {
            // (A forget and a new rule set end a batch, see above; in it they do nothing.)
            try InputLog.read(entry.body) { input in
                switch input {
                case .handOver(let from, let to):
                    // (Not into a user who was merged into `from`: that would make a cycle, whose events would go
                    // round the partitions for ever. The sign-in then merges nothing, as in one engine.)
                    let brought = engine.mergedTarget(of: to) == from ? nil : engine.handOver(from, to: to)?.encoded()
                    commit.handOvers.append((from, to, brought))
                case .takeOver(let from, let to) where isOwn(from):
                    // Both ids are this partition's: no hand-over went through the log, the two halves are done here.
                    let target = engine.mergedTarget(of: to) ?? to
                    guard from != to, target != from else { break }
                    engine.takeOver(from, state: engine.handOver(from, to: target), into: to)
                case .takeOver(let from, let to):
                    guard let row = handOvers.take(from, to) else { throw HandOvers.NotRead(from: from, to: to) }
                    commit.takenOver.append(row.id)
                    engine.takeOver(from, state: row.bytes.flatMap { try? UserState(decoding: $0) }, into: to)
                case .merged(let id, let into):
                    engine.point(id, to: into)
                default:
                    step.apply(input, to: engine, decoder: rules.decoder)
                }
            }
        }
        if clock == .wall { step.advance(engine, to: now) }
        let fired = step.fired
        guard states.missed.isEmpty else {
            throw Missed(users: states.missed.count)
        }
        commit.states = changedStates(engine)
        commit.deviceClaims = engine.takeDeviceClaims().map { ($0.token, $0.userID, $0.at) }
        commit.stream = engine.streamState.encoded()
        let destinations = rules.ruleSet.settings.destinations
        commit.actions = fired.map { a, late in
            let logged = LoggedAction(userID: a.userID, actionID: a.id, json: Processor.json(a, late: late))
            let outbox = Delivery.entries(for: a, logged, destinations: destinations, at: now).map {
                (destination: $0.destination, body: Array($0.body.utf8), nextAt: $0.createdAt, createdAt: $0.createdAt)
            }
            return FleetLog.FiredRow(actionID: a.id, userID: a.userID, json: logged.json, outbox: outbox)
        }
        let started = ContinuousClock.now
        guard try await committer.submit((handle.lease, commit)) != nil else { throw FleetLog.Fenced(partition: partition) }
        metrics.commitSeconds.record(ContinuousClock.now - started)
        activity.add(tracker.take(engine.stats, names: ruleNames), at: now)
        processed = commit.processed
        appended.processed(partition, processed)
        if !fired.isEmpty {
            let users = Set(fired.map(\.0.userID))
            feed.notify(users)
            // (Other processes' polls are told through PostgreSQL.)
            notices.add(users)
        }
        processedEvents.increment(by: Int64(entries.count))
        step.count(in: metrics.service)
        return true
    }

    /// With nothing else to do, one page of the partition's stored users made known to the rule set's schedules
    /// (``Engine/reach(_:)``: a broadcast reaches who sends nothing), written like a batch. It starts again from the
    /// first user whenever the engine is opened (a start, a failover, a new rule set); reaching a user twice sets
    /// nothing twice. Returns whether there was a page.
    private func reach(_ engine: Engine, _ rules: ServingRules) async throws -> Bool {
        guard rules.ruleSet.hasSchedules, !reached.done else { return false }
        reached.last = .now
        let page = try await log.states(after: reached.after, limit: Self.reachPage, partition: partition)
        guard let last = page.last?.userID else {
            reached.done = true
            return false
        }
        let ids = page.map(\.userID)
        let unknown = Set(states.unknown(ids))
        states.add(Dictionary(page.filter { unknown.contains($0.userID) }, uniquingKeysWith: { a, _ in a }), for: Array(unknown))
        let loaded = engine.reach(ids)
        guard states.missed.isEmpty else { throw Missed(users: states.missed.count) }
        var commit = FleetLog.PartitionCommit(processed: processed, rulesVersion: rules.version)
        commit.states = changedStates(engine)
        commit.stream = engine.streamState.encoded()
        guard try await committer.submit((handle.lease, commit)) != nil else { throw FleetLog.Fenced(partition: partition) }
        metrics.service.reachedUsers.increment(by: Int64(loaded.count))
        reached.after = last
        return true
    }

    /// The rule set version a log entry switches to, if it is a reload's.
    static func rulesVersion(in entry: FleetLog.Entry) -> Int64? {
        guard entry.body.first == UInt8(ascii: "V") else { return nil }
        var version: Int64?
        try? InputLog.read(entry.body) { if case .rules(let v) = $0 { version = v } }
        return version
    }

    /// Switches the partition to a new rule set at a reload's entry (every entry before it processed and written):
    /// the position and the version are written together, fenced, and the engine is opened again under the new rules
    /// from what the database holds (users' states carry over by their rules' names, as in a single service).
    private func switchRules(to version: Int64, at entry: FleetLog.Entry, _ engine: Engine) async throws -> Bool {
        let next = try await fleetRules.serving(version)
        var commit = FleetLog.PartitionCommit(processed: entry.seq, rulesVersion: next.version)
        commit.states = changedStates(engine)
        commit.deviceClaims = engine.takeDeviceClaims().map { ($0.token, $0.userID, $0.at) }
        commit.stream = engine.streamState.encoded()
        guard try await committer.submit((handle.lease, commit)) != nil else { throw FleetLog.Fenced(partition: partition) }
        processed = entry.seq
        self.engine = nil
        logger.info("partition switched rule sets", metadata: ["partition": "\(partition)", "version": "\(version)"])
        return true
    }

    /// The states the engine changed, of this partition's users only (another partition's id the engine points to
    /// the merged user it took over is that partition's to store).
    private func changedStates(_ engine: Engine) -> [(userID: String, bytes: [UInt8], nextDue: Int64?, mergedInto: String?)] {
        engine.takeChangedStates().compactMap { s in
            FleetLog.partition(of: s.userID) == partition ? (s.userID, s.bytes, s.nextDue, s.mergedInto) : nil
        }
    }

    // MARK: Identity merge across partitions

    /// The user an entry is sent on to: its id was merged into another partition's user. (A hand-over is its id's
    /// partition's to do, whatever the id points to.)
    private func sentOn(of entry: FleetLog.Entry, _ engine: Engine) -> String? {
        guard entry.body.first != UInt8(ascii: "H"), let to = engine.mergedTarget(of: entry.userID),
            FleetLog.partition(of: to) != partition
        else { return nil }
        // An entry sent on as many times as a chain of merges may be long is processed where it is: pointers that
        // make a cycle would send it round the partitions for ever.
        if entry.body.first == UInt8(ascii: "M") {
            var hops = 0
            try? InputLog.read(entry.body) { if case .merged = $0 { hops += 1 } }
            if hops >= Engine.maxMergeHops { return nil }
        }
        return to
    }

    /// Moves the entries at the head of `entries` whose ids were merged into another partition's user on to its
    /// partition, each marked with the merge it follows (``InputLog/merged(id:into:)``), and the position past them,
    /// in one fenced transaction.
    private func sendOn(_ entries: [FleetLog.Entry], _ engine: Engine) async throws -> Bool {
        var out: [(userID: String, body: [UInt8], receivedAt: Int64)] = []
        var last = processed
        for entry in entries {
            guard let to = sentOn(of: entry, engine) else { break }
            var record = InputLog()
            record.merged(id: entry.userID, into: to)
            out.append((to, record.bytes + entry.body, entry.receivedAt))
            last = entry.seq
        }
        try await log.forward(out, from: entries.prefix(out.count).map(\.seq), lease: handle.lease, through: last)
        processed = last
        metrics.forwarded.increment(by: Int64(out.count))
        return true
    }

    /// The hand-overs a batch's sign-ins take over, by pair, oldest first; `missing`: the first entry whose hand-over
    /// is not written yet.
    struct HandOvers {
        var rows: [String: [(id: Int64, bytes: [UInt8]?)]] = [:]
        var missing: Int?
        static func key(_ from: String, _ to: String) -> String { "\(from.utf8.count) \(from)\(to)" }
        /// The next row of the pair, `nil` when none was read (a fault: the batch is dropped and read again).
        mutating func take(_ from: String, _ to: String) -> (id: Int64, bytes: [UInt8]?)? {
            let key = Self.key(from, to)
            guard rows[key]?.isEmpty == false else { return nil }
            return rows[key]!.removeFirst()
        }
        struct NotRead: Error, CustomStringConvertible {
            var from: String
            var to: String
            var description: String { "the hand-over of \(from) to \(to) was not read with its batch" }
        }
    }

    /// Whether `id` is one of this partition's users.
    private func isOwn(_ id: String) -> Bool { FleetLog.partition(of: id) == partition }

    /// The sign-ins' take-overs in `entries` (an entry sent on from another partition holds its own), by entry index.
    static func takeOvers(in entries: [FleetLog.Entry]) -> [(index: Int, from: String, to: String)] {
        var out: [(index: Int, from: String, to: String)] = []
        for (i, entry) in entries.enumerated() {
            // (A take-over is a sign-in's first record, or follows the records of merges it was sent on after.)
            guard entry.body.first == UInt8(ascii: "W") || entry.body.first == UInt8(ascii: "M") else { continue }
            try? InputLog.read(entry.body) { if case .takeOver(let f, let t) = $0 { out.append((i, f, t)) } }
        }
        return out
    }

    /// The rows of the hand-overs `takeOvers` (``takeOvers(in:)`` of the batch's entries) wait for.
    private func handOvers(for takeOvers: [(index: Int, from: String, to: String)]) async throws -> HandOvers {
        // (A sign-in whose earlier id is this partition's has no hand-over to wait for: it is merged here.)
        let wanted = takeOvers.filter { !isOwn($0.from) }
        var out = HandOvers()
        guard !wanted.isEmpty else { return out }
        var available: [String: [(id: Int64, bytes: [UInt8]?)]] = [:]
        for row in try await log.handOvers(wanted.map { ($0.from, $0.to) }) {
            available[HandOvers.key(row.from, row.to), default: []].append((row.id, row.bytes))
        }
        // (A pair asked for twice is answered twice: each row is taken once, in order.)
        var used: Set<Int64> = []
        for w in wanted {
            let key = HandOvers.key(w.from, w.to)
            guard let row = available[key]?.first(where: { !used.contains($0.id) }) else {
                out.missing = w.index
                break
            }
            used.insert(row.id)
            out.rows[key, default: []].append(row)
        }
        return out
    }

    /// The user a log entry asks to forget, if it is a forget.
    static func forgotten(in entry: FleetLog.Entry) -> String? {
        guard entry.body.first == UInt8(ascii: "F") else { return nil }
        var user: String?
        try? InputLog.read(entry.body) { if case .forget(let u) = $0 { user = u } }
        return user
    }

    /// Forgets a user (every entry before it processed and written): their state, actions, outbox entries and
    /// events are deleted with the forget's own entry in one fenced statement, and the engine is opened again from the
    /// database (it held the user in memory).
    private func forget(_ entry: FleetLog.Entry) async throws -> Bool {
        guard let user = Self.forgotten(in: entry) else { return false }
        try await log.forget(user, lease: handle.lease, through: entry.seq)
        processed = entry.seq
        engine = nil
        return true
    }

    /// The engine asked for a user the batch did not fetch (a fault; the batch is dropped, nothing written).
    struct Missed: Error, CustomStringConvertible {
        var users: Int
        var description: String { "the engine asked for \(users) user(s) whose states were not fetched" }
    }
}

/// Each partition's last appended and processed sequence numbers, read every ``interval`` by one query for the whole
/// process: a runner with nothing to do waits here to be woken when its partition grows (rather than each asking the
/// database), and a request waits here for an entry it appended to be processed.
final class Poller: Sendable {
    private struct State {
        var appended = [Int64](repeating: 0, count: FleetLog.partitionCount)
        var processed = [Int64](repeating: 0, count: FleetLog.partitionCount)
        /// Since when each partition has had entries appended after its processed position without that position
        /// moving (`nil`: it moved at the last read, or there is nothing to process).
        var stalledSince = [ContinuousClock.Instant?](repeating: nil, count: FleetLog.partitionCount)
        /// A waiting runner's partition, the position it has processed, when its wait ends, and how to wake it.
        var waiting: [Int: (after: Int64, deadline: ContinuousClock.Instant, continuation: CheckedContinuation<Void, Never>)] =
            [:]
    }
    private let state = Mutex(State())
    /// Wakes the requests waiting for a partition (its key: its number) to process further.
    private let progress = ActionFeed()
    static let interval = Duration.milliseconds(20)

    func value(of partition: Int) -> Int64 { state.withLock { $0.appended[partition] } }

    /// Stores the positions read (`nil`: the read failed) and wakes the runners whose partition grew or whose wait is
    /// over, and the requests waiting for a partition that processed further.
    func tick(_ v: (appended: [Int64], processed: [Int64])?, now: ContinuousClock.Instant = .now) {
        let (woken, moved) = state.withLock { s in
            var moved: Set<String> = []
            if let v {
                s.appended = v.appended
                for (p, d) in v.processed.enumerated() {
                    let moves = d > s.processed[p]
                    if moves {
                        s.processed[p] = d
                        moved.insert(String(p))
                    }
                    if moves || s.appended[p] <= s.processed[p] {
                        s.stalledSince[p] = nil
                    } else if s.stalledSince[p] == nil {
                        s.stalledSince[p] = now
                    }
                }
            }
            let appended = s.appended
            let ready = s.waiting.filter { p, w in w.deadline <= now || appended[p] > w.after }
            return (
                ready.map { p, w in
                    s.waiting[p] = nil
                    return w.continuation
                }, moved
            )
        }
        for c in woken { c.resume() }
        if !moved.isEmpty { progress.notify(moved) }
    }

    /// This process's runner of `partition` has processed up to `seq` (requests waiting for it go on at once).
    func processed(_ partition: Int, _ seq: Int64) {
        let moved = state.withLock { s in
            guard seq > s.processed[partition] else { return false }
            s.processed[partition] = seq
            s.stalledSince[partition] = nil
            return true
        }
        if moved { progress.notify([String(partition)]) }
    }

    /// Whether `partition` has had entries to process for longer than `limit` without its position moving (as of the
    /// positions read and this process's runner), whatever its runner is doing: failing, or waiting for a hand-over.
    func stalled(_ partition: Int, longerThan limit: Duration, now: ContinuousClock.Instant = .now) -> Bool {
        state.withLock { s in s.stalledSince[partition].map { now - $0 > limit } ?? false }
    }

    /// Returns whether `partition` has processed up to `seq` within `timeout`: woken by the positions read and by
    /// this process's runner, never asking the database itself.
    func waitProcessed(_ partition: Int, _ seq: Int64, timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        let key = String(partition)
        while true {
            let seen = progress.version(of: key)
            if state.withLock({ $0.processed[partition] }) >= seq { return true }
            let left = deadline - ContinuousClock.now
            if left <= .zero || Task.isCancelled { return false }
            await progress.wait(for: key, seen: seen, seconds: left.inSeconds)
        }
    }

    /// Wakes `partition`'s runner if it waits (it is asked to stop).
    func wake(_ partition: Int) {
        state.withLock { $0.waiting.removeValue(forKey: partition) }?.continuation.resume()
    }

    /// Returns once `partition` has entries after `seq`, or at the first tick after `timeout`, or when woken.
    func wait(_ partition: Int, after seq: Int64, timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s in
                if s.appended[partition] > seq { return true }
                s.waiting[partition]?.continuation.resume()
                s.waiting[partition] = (seq, deadline, c)
                return false
            }
            if now { c.resume() }
        }
    }
}
