import BeckonCore
import BeckonPostgres
import BeckonServer
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization

/// A fleet process's metrics besides the service's: per partition, and of leases and the fence.
final class FleetMetrics: Sendable {
    let service: ServiceMetrics
    let commitSeconds: DurationHistogram
    let appendSeconds: DurationHistogram
    /// Writes refused because the lease had moved (the fence at work).
    let fenced: Counter
    let failures: Counter
    /// Entries sent on to another partition (events of ids merged into its users).
    let forwarded: Counter
    let ruleSets: Gauge

    init(_ service: ServiceMetrics) {
        self.service = service
        let r = service.registry
        commitSeconds = r.makeDurationHistogram(
            descriptor: .init(
                metricName: "beckon_fleet_partition_commit", unitName: "seconds",
                helpText: "Time to write one partition batch (states, actions, outbox, position) in PostgreSQL."),
            labels: [], buckets: ServiceMetrics.secondsBuckets)
        appendSeconds = r.makeDurationHistogram(
            descriptor: .init(
                metricName: "beckon_fleet_append", unitName: "seconds",
                helpText: "Time to append one request's events to the log (what an ingest waits for)."),
            labels: [], buckets: ServiceMetrics.secondsBuckets)
        fenced = r.makeCounter(
            descriptor: .init(
                metricName: "beckon_fleet_fenced_writes", unitName: "total",
                helpText: "Partition writes refused because the lease had moved to another process."),
            labels: [])
        failures = r.makeCounter(
            descriptor: .init(
                metricName: "beckon_fleet_partition_failures", unitName: "total",
                helpText: "Partition batches that failed and were retried from the database."),
            labels: [])
        forwarded = r.makeCounter(
            descriptor: .init(
                metricName: "beckon_fleet_forwarded_entries", unitName: "total",
                helpText: "Log entries sent on to another partition: events of ids merged into its users."),
            labels: [])
        ruleSets = r.makeGauge(
            descriptor: .init(
                metricName: "beckon_fleet_rule_sets", unitName: "count",
                helpText: "Different rule sets run by the fleet's live processes (1 when they agree)."),
            labels: [])
        for result in ["acquired", "released", "lost"] { _ = leases(result) }
    }

    /// `/metrics`' text, with the database calls past their deadline and the pools replaced (FleetLog counts them).
    func text(_ log: FleetLog) -> String {
        let r = service.registry
        r.makeGauge(
            descriptor: .init(
                metricName: "beckon_fleet_database_timeouts", unitName: "total",
                helpText: "Database calls that did not answer within their deadline (each failed; the pool was replaced)."),
            labels: []
        ).set(to: Double(log.timeouts.load(ordering: .relaxed)))
        r.makeGauge(
            descriptor: .init(
                metricName: "beckon_fleet_pool_replacements", unitName: "total",
                helpText: "Connection pools replaced after a call past its deadline (the supervisor's restarts)."),
            labels: []
        ).set(to: Double(log.replacements.load(ordering: .relaxed)))
        return service.text()
    }

    func owned(_ p: Int) -> Gauge {
        service.registry.makeGauge(
            descriptor: .init(
                metricName: "beckon_fleet_partition_owned", unitName: "bool",
                helpText: "1 for each partition this process holds the lease of."),
            labels: [("partition", String(p))])
    }

    func lag(_ p: Int) -> Gauge {
        service.registry.makeGauge(
            descriptor: .init(
                metricName: "beckon_fleet_partition_lag", unitName: "events",
                helpText: "Events appended to a partition this process holds and not yet processed."),
            labels: [("partition", String(p))])
    }

    func events(_ p: Int) -> Counter {
        service.registry.makeCounter(
            descriptor: .init(
                metricName: "beckon_fleet_partition_events", unitName: "total",
                helpText: "Log entries processed by this process, by partition."),
            labels: [("partition", String(p))])
    }

    func leases(_ result: String) -> Counter {
        service.registry.makeCounter(
            descriptor: .init(
                metricName: "beckon_fleet_leases", unitName: "total",
                helpText: "Partition leases acquired, released (rebalancing, stopping) and lost (not renewed in time)."),
            labels: [("result", result)])
    }
}

/// A process's part of the fleet (docs/fleet.md): it says it is alive, takes its share of the partitions
/// (⌈partitions ÷ live processes⌉), renews the leases it holds, gives extra ones up when processes join, takes
/// free or expired ones when processes leave or die, and runs a ``PartitionRunner`` for each partition it holds.
/// When stopping, it lets each runner finish its batch, then releases its leases so that the others take them at once.
final class FleetWorker: Service, Sendable {
    let log: FleetLog
    let rules: FleetRules
    let clock: ClockMode
    let owner: String
    let ttl: Duration
    let metrics: FleetMetrics
    let poller = Poller()
    /// The process's live counts, to which each runner adds its engine's.
    let activity: RuleActivity
    let committer: BatchCommitter
    /// Wakes the long polls of users whose actions this process's runners stored.
    let feed = ActionFeed()
    /// The notices of this process's new actions to the others (run as a service of the fleet's own).
    let notices: ActionNoticer
    let logger: Logger
    let faults: FaultLog
    private let readyState = Mutex(false)
    /// When the positions were last read and the leases last looked after, the partitions held, and when each
    /// partition let go for making no progress was let go (for readiness).
    private let health = Mutex(
        (
            polled: ContinuousClock.now, managed: ContinuousClock.now, held: [PartitionHandle](),
            letGo: [Int: ContinuousClock.Instant]()
        ))

    init(
        log: FleetLog, rules: FleetRules, clock: ClockMode, owner: String, ttl: Duration, metrics: FleetMetrics,
        activity: RuleActivity, logger: Logger
    ) {
        self.activity = activity
        self.log = log
        self.rules = rules
        self.clock = clock
        self.owner = owner
        self.ttl = ttl
        self.metrics = metrics
        self.logger = logger
        faults = FaultLog(logger: logger)
        committer = BatchCommitter(log: log)
        notices = ActionNoticer(log: log, logger: logger)
    }

    /// Whether this process holds `partition` now.
    func holds(_ partition: Int) -> Bool {
        health.withLock { h in h.held.contains { $0.lease.partition == partition && !$0.lost && !$0.stopRequested } }
    }

    /// Whether the schema is in place and the process is taking part.
    var ready: Bool { readyState.withLock { $0 } }

    /// Wakes ``untilReady()`` (key `ready`).
    private let readiness = ActionFeed()

    /// Returns once the process is ready, or when its task is cancelled.
    func untilReady() async {
        while !Task.isCancelled {
            let seen = readiness.version(of: "ready")
            if ready { return }
            await readiness.wait(for: "ready", seen: seen, seconds: 3600)
        }
    }

    /// Why the process is not ready to serve, `nil` when it is (docs/fleet.md, "Failure modes"): not set up or
    /// stopping; the positions not read for ``staleAfter`` (the database cannot be reached); the leases not looked
    /// after for two rounds and a second; or a partition stuck: held, or let go for making no progress within two
    /// leases (until another process or this one takes it again), and its runner failing for half a lease or its
    /// position not moving for half a lease while it has entries to process.
    func notReady(now: ContinuousClock.Instant = .now) -> String? {
        guard ready else { return "not taking part (starting or stopping)" }
        let h = health.withLock { $0 }
        if now - h.polled > Self.staleAfter { return "the database has not answered for \(now - h.polled)" }
        if now - h.managed > interval * 2 + .seconds(1) { return "the leases could not be renewed" }
        if let failing = h.held.first(where: { !$0.lost && !$0.stopRequested && now - $0.lastProgress > ttl / 2 }) {
            return "partition \(failing.lease.partition) makes no progress"
        }
        let mine =
            h.held.filter { !$0.lost && !$0.stopRequested }.map(\.lease.partition)
            + h.letGo.filter { now - $0.value <= ttl * 2 }.keys
        if let stuck = mine.sorted().first(where: { poller.stalled($0, longerThan: ttl / 2, now: now) }) {
            return "partition \(stuck) has entries to process and has not moved for half a lease"
        }
        return nil
    }

    /// How long without a read of the positions before the process says it is not ready.
    static let staleAfter = Duration.seconds(2)

    /// Whether the positions have not been read for ``staleAfter`` (the database does not answer).
    var databaseStale: Bool { ready && ContinuousClock.now - health.withLock { $0.polled } > Self.staleAfter }

    /// How often leases are renewed and shares looked at: a quarter of the lease time.
    var interval: Duration { ttl / 4 }

    func run() async throws {
        // (The pool's service starts beside this one: a moment for its run loop to begin before the first query.)
        try await Task.sleep(for: .milliseconds(50))
        try await migrate()
        readyState.withLock { $0 = true }
        readiness.notify(["ready"])
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.poll() }
            var held: [Int: PartitionHandle] = [:]
            while !Task.isShuttingDownGracefully && !Task.isCancelled {
                await manage(&held, group: &group)
                await reap(&held)
                // (A stop ends the sleep at once.)
                let interval = interval
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            }
            // Stopping: each runner finishes the batch in hand, then its lease is released for the others to take.
            // (Within half a lease: a runner stuck on the database is left behind, its lease released all the same;
            // the fence refuses anything it writes later.)
            for h in held.values {
                h.requestStop()
                poller.wake(h.lease.partition)
            }
            let stopBy = ContinuousClock.now + ttl / 2
            while !held.isEmpty && ContinuousClock.now < stopBy {
                await reap(&held)
                try? await Task.sleep(for: .milliseconds(20))
            }
            for h in held.values where !h.lost { try? await log.release(h.lease) }
            held = [:]
            try? await log.leave(owner: owner)
            readyState.withLock { $0 = false }
            group.cancelAll()
        }
    }

    /// Migrations, tried again while the database cannot be reached (a fleet starting before its database).
    private func migrate() async throws {
        var attempt = 0
        while true {
            do {
                try await log.migrate()
                try await rules.start()
                return
            } catch let e as any FleetLog.WrongDatabase {
                throw e
            } catch {
                attempt += 1
                if attempt >= 30 || Task.isCancelled { throw error }
                logger.warning("the fleet's database cannot be set up yet; trying again", metadata: ["error": "\(error)"])
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// One round: say we live, renew what we hold, hand over extras, take our share of what nobody holds.
    private func manage(_ held: inout [Int: PartitionHandle], group: inout TaskGroup<Void>) async {
        do {
            try await rules.refresh()
            let (members, digests) = try await log.heartbeat(owner: owner, rulesDigest: rules.current.value.digest, ttl: ttl)
            metrics.ruleSets.set(to: Double(digests.count))
            if digests.count > 1 {
                logger.warning(
                    "the fleet's processes run different rule sets; partitions are processed under whichever holds them",
                    metadata: ["rule sets": "\(digests.count)"])
            }
            for (p, h) in held where !h.lost && !h.stopRequested {
                // A partition whose runner has made no progress for a lease is let go, not renewed: another process
                // takes it once the lease expires (the fence refuses anything this one writes after).
                if ContinuousClock.now - h.lastProgress > ttl {
                    metrics.leases("lost").increment()
                    logger.error(
                        "a partition made no progress for a lease; it is let go for another process",
                        metadata: ["partition": "\(p)"])
                    h.markLost()
                    h.requestStop()
                    poller.wake(p)
                    health.withLock { $0.letGo[p] = .now }
                    continue
                }
                if try await !log.renew(h.lease, ttl: ttl) {
                    metrics.leases("lost").increment()
                    logger.warning("a partition's lease could not be renewed in time", metadata: ["partition": "\(p)"])
                    h.markLost()
                }
            }
            let target = (FleetLog.partitionCount + members - 1) / members
            let active = held.values.filter { !$0.lost && !$0.stopRequested }
            if active.count > target {
                // Another process joined: hand the highest partitions over (released once their batch is written).
                for h in active.sorted(by: { $0.lease.partition > $1.lease.partition }).prefix(active.count - target) {
                    h.requestStop()
                    poller.wake(h.lease.partition)
                }
            } else if active.count < target {
                for p in try await log.unheldPartitions().prefix(target - active.count) where held[p] == nil {
                    guard let lease = try await log.acquire(partition: p, owner: owner, ttl: ttl) else { continue }
                    metrics.leases("acquired").increment()
                    let handle = PartitionHandle(lease: lease)
                    held[p] = handle
                    let runner = PartitionRunner(
                        handle: handle, log: log, rules: rules, clock: clock, metrics: metrics, appended: poller,
                        committer: committer, feed: feed, notices: notices, activity: activity, faults: faults,
                        logger: logger)
                    group.addTask { await runner.run() }
                }
            }
            health.withLock { h in
                h.managed = .now
                h.held = Array(held.values)
            }
            faults.ok("leases")
        } catch {
            faults.failed("leases", error)
        }
    }

    /// Forgets the partitions whose runners finished, releasing the leases of those that stopped on request (a lost
    /// one is another's already).
    private func reap(_ held: inout [Int: PartitionHandle]) async {
        for (p, h) in held where h.finished {
            if !h.lost {
                try? await log.release(h.lease)
                metrics.leases("released").increment()
            }
            held[p] = nil
        }
    }

    /// Reads every partition's appended and processed positions for the runners (which wake when theirs grows) and
    /// the requests waiting for an entry to be processed.
    private func poll() async {
        var backoff = Poller.interval
        while !Task.isCancelled {
            do {
                poller.tick(try await log.positions())
                health.withLock { $0.polled = .now }
                faults.ok("reading positions")
                backoff = Poller.interval
            } catch {
                poller.tick(nil)
                faults.failed("reading positions", error)
                backoff = min(backoff * 2, .seconds(1))
            }
            try? await Task.sleep(for: backoff)
        }
    }
}
