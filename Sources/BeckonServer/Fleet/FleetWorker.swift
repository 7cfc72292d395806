import BeckonCore
import BeckonPostgres
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
        ruleSets = r.makeGauge(
            descriptor: .init(
                metricName: "beckon_fleet_rule_sets", unitName: "count",
                helpText: "Different rule sets run by the fleet's live processes (1 when they agree)."),
            labels: [])
        for result in ["acquired", "released", "lost"] { _ = leases(result) }
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
    let rules: ServingRules
    let clock: ClockMode
    let owner: String
    let ttl: Duration
    let metrics: FleetMetrics
    let poller = Poller()
    let committer: BatchCommitter
    let logger: Logger
    private let readyState = Mutex(false)

    init(
        log: FleetLog, rules: ServingRules, clock: ClockMode, owner: String, ttl: Duration, metrics: FleetMetrics,
        logger: Logger
    ) {
        self.log = log
        self.rules = rules
        self.clock = clock
        self.owner = owner
        self.ttl = ttl
        self.metrics = metrics
        self.logger = logger
        committer = BatchCommitter(log: log)
    }

    /// Whether the schema is in place and the process is taking part.
    var ready: Bool { readyState.withLock { $0 } }

    /// How often leases are renewed and shares looked at: a quarter of the lease time.
    var interval: Duration { ttl / 4 }

    func run() async throws {
        // (The pool's service starts beside this one: a moment for its run loop to begin before the first query.)
        try await Task.sleep(for: .milliseconds(50))
        try await migrate()
        readyState.withLock { $0 = true }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.poll() }
            var held: [Int: PartitionHandle] = [:]
            while !Task.isShuttingDownGracefully && !Task.isCancelled {
                await manage(&held, group: &group)
                await reap(&held)
                // (Slept in steps, so that a stop is seen at once.)
                let until = ContinuousClock.now + interval
                while ContinuousClock.now < until && !Task.isShuttingDownGracefully && !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            // Stopping: each runner finishes the batch in hand, then its lease is released for the others to take.
            for h in held.values {
                h.requestStop()
                poller.wake(h.lease.partition)
            }
            while !held.isEmpty {
                await reap(&held)
                try? await Task.sleep(for: .milliseconds(20))
            }
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
                return
            } catch let e as FleetLog.PartitionCountChanged {
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
            let (members, digests) = try await log.heartbeat(owner: owner, rulesDigest: rules.digest, ttl: ttl)
            metrics.ruleSets.set(to: Double(digests.count))
            if digests.count > 1 {
                logger.warning(
                    "the fleet's processes run different rule sets; partitions are processed under whichever holds them",
                    metadata: ["rule sets": "\(digests.count)"])
            }
            for (p, h) in held where !h.lost && !h.stopRequested {
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
                        committer: committer, logger: logger)
                    group.addTask { await runner.run() }
                }
            }
        } catch {
            logger.error("the fleet's leases could not be looked after", metadata: ["error": "\(String(reflecting: error))"])
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

    /// Reads every partition's appended position for the runners (which wake when theirs grows).
    private func poll() async {
        while !Task.isCancelled {
            poller.tick(try? await log.appended())
            try? await Task.sleep(for: Poller.interval)
        }
    }
}
