import BeckonCore
import BeckonMemory
import Prometheus
import Synchronization

/// The service's metrics, in Prometheus text at `/metrics`. Labels name rules, routes and results, never users.
public final class ServiceMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()

    /// Seconds, from 0.5 ms to 10 s: request durations and commit times.
    package static let secondsBuckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5),
        .seconds(5), .seconds(10),
    ]

    package let commitSeconds: DurationHistogram
    package let timerLagSeconds: DurationHistogram
    package let commitEvents: ValueHistogram
    package let checkpoints: Counter
    /// Gives free heap pages back once the process settles after writing (counted in
    /// `beckon_memory_given_back_total`).
    package let memory: MemorySettler
    /// Heap bytes in use, set when the page is read, at most once per `heapReadInterval` (a second).
    private let heap: Gauge
    /// When the heap was last read: glibc's mallinfo2 walks every arena's free lists under its lock, and `/metrics`
    /// needs no key, so a client asking for the page in a loop must not make the engine's allocations wait on it.
    private let heapReadAt = Mutex<ContinuousClock.Instant?>(nil)
    private let heapReadInterval: Duration
    /// The counters of ``action(_:)`` by rule set, rule and kind (a registry lookup per fired action is a lock and
    /// a label array; this is one dictionary read).
    private let actionCounters = Mutex<[String: Counter]>([:])

    /// Push tokens a provider called invalid, removed from their users.
    package let tokensRemoved: Counter
    /// Stored users a schedule's broadcast made known, and users let go from memory once their state was written.
    package let reachedUsers: Counter
    package let evictedUsers: Counter

    package init(version: String, heapReadInterval: Duration = .seconds(1)) {
        self.heapReadInterval = heapReadInterval
        tokensRemoved = registry.makeCounter(
            descriptor: .init(
                metricName: "beckon_push_tokens_removed", unitName: "total",
                helpText: "Push tokens APNs called invalid (Unregistered, BadDeviceToken), removed from their users."),
            labels: [])
        reachedUsers = registry.makeCounter(
            descriptor: .init(
                metricName: "beckon_schedule_reached_users", unitName: "total",
                helpText: "Stored users loaded to have the schedules' runs set (a broadcast reaching who sends nothing)."),
            labels: [])
        evictedUsers = registry.makeCounter(
            descriptor: .init(
                metricName: "beckon_users_evicted", unitName: "total",
                helpText: "Users loaded by a timer or a broadcast, let go from memory once their state was written."),
            labels: [])
        commitSeconds = registry.makeDurationHistogram(
            descriptor: .init(
                metricName: "beckon_database_commit", unitName: "seconds",
                helpText: "Time to write one group commit (events, states, actions) to the database."),
            labels: [], buckets: Self.secondsBuckets)
        timerLagSeconds = registry.makeDurationHistogram(
            descriptor: .init(
                metricName: "beckon_timer_lag", unitName: "seconds",
                helpText: "How long after its due time a delayed action fired on the live clock."),
            labels: [], buckets: Self.secondsBuckets)
        commitEvents = registry.makeValueHistogram(
            descriptor: .init(metricName: "beckon_commit", unitName: "events", helpText: "Events in one group commit."),
            labels: [], buckets: [1, 10, 100, 1000, 10000])
        checkpoints = registry.makeCounter(
            descriptor: .init(
                metricName: "beckon_checkpoints", unitName: "total",
                helpText: "Checkpoints written: users' states with the input log position they include."),
            labels: [])
        memory = MemorySettler(
            givenBack: registry.makeCounter(
                descriptor: .init(
                    metricName: "beckon_memory_given_back", unitName: "total",
                    helpText: "Times the process, settled after writing, gave the heap's free pages back to the system."),
                labels: []))
        heap = registry.makeGauge(
            descriptor: .init(
                metricName: "beckon_heap", unitName: "bytes",
                helpText: "Heap bytes in use (glibc's mallinfo2), read at each scrape: the process's live memory."),
            labels: [])
        registry.makeGauge(
            descriptor: .init(metricName: "beckon_build", unitName: "info", helpText: "The running Beckon's version."),
            labels: [("version", version)]
        ).set(to: 1.0)
        for r in IngestResult.allCases { _ = ingest(r) }
        for r in ["changed", "unchanged", "refused"] { _ = reload(r) }
    }

    /// Results of events posted: `accepted` (processed), `duplicate` (a `messageId` seen), `refused` (past a bound of
    /// docs/reference/limits.md), `rejected` (a request that got 400; nothing of it stored), `undecodable` (accepted
    /// but not decoded again after a reload: never expected, an error is logged).
    package enum IngestResult: String, CaseIterable {
        case accepted, duplicate, refused, rejected, undecodable
        /// Accepted events (counted under `accepted` too) that do not fit the tracking plans.
        case offPlan = "off_plan"
    }

    package func ingest(_ r: IngestResult) -> Counter {
        registry.makeCounter(
            descriptor: .init(
                metricName: "beckon_ingest_events", unitName: "total", helpText: "Events posted, by what became of them."),
            labels: [("result", r.rawValue)])
    }

    /// `beckon_actions_total` of a fired action's rule set, rule and kind.
    package func action(_ a: FiredAction) -> Counter {
        let key = a.unit + "/" + a.rule + "/" + a.kind
        if let c = actionCounters.withLock({ $0[key] }) { return c }
        let c = action(ruleset: a.unit, rule: a.rule, kind: a.kind)
        actionCounters.withLock { $0[key] = c }
        return c
    }

    package func action(ruleset: String, rule: String, kind: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(metricName: "beckon_actions", unitName: "total", helpText: "Actions fired and stored."),
            labels: [("ruleset", ruleset), ("rule", rule), ("kind", kind)])
    }

    /// `beckon_messages_total`: pushes and emails Beckon sends itself, by the rule that fired them and what became of
    /// them (docs/push.md): `sent` (a request to the provider: one per device for a push), `delivered`, `failed`
    /// (dead), `skipped` (no device, unsubscribed), `token_removed`; and the email links used: `unsubscribed`,
    /// `clicked`. `rule` is `unit/rule`.
    package func message(rule: String, channel: String, result: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(
                metricName: "beckon_messages", unitName: "total",
                helpText: "Pushes and emails sent by Beckon itself, by rule, channel and what became of them."),
            labels: [("rule", rule), ("channel", channel), ("result", result)])
    }

    package func request(route: String, method: String, status: Int) -> DurationHistogram {
        registry.makeDurationHistogram(
            descriptor: .init(
                metricName: "beckon_http_request_duration", unitName: "seconds", helpText: "HTTP requests by route."),
            labels: [("route", route), ("method", method), ("status", String(status))], buckets: Self.secondsBuckets)
    }

    /// Delivery attempts to a destination by result: `delivered`, `retried` (to be tried again), `dead`.
    package func delivery(destination: String, result: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(
                metricName: "beckon_deliveries", unitName: "total",
                helpText: "Attempts to deliver actions to destinations, by destination and result."),
            labels: [("destination", destination), ("result", result)])
    }

    /// Actions waiting in the outbox for a destination (updated every 5 s).
    package func outboxPending(destination: String) -> Gauge {
        registry.makeGauge(
            descriptor: .init(
                metricName: "beckon_outbox_pending", unitName: "actions",
                helpText: "Actions waiting in the outbox, by destination (a paused destination's grow)."),
            labels: [("destination", destination)])
    }

    /// Reloads of the rules by result: `changed`, `unchanged`, `refused` (errors; the running rules kept).
    package func reload(_ result: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(metricName: "beckon_reloads", unitName: "total", helpText: "Reloads of the rules, by result."),
            labels: [("result", result)])
    }

    public func text() -> String {
        let due = heapReadAt.withLock { at in
            let now = ContinuousClock.now
            guard at.map({ now - $0 >= heapReadInterval }) ?? true else { return false }
            at = now
            return true
        }
        if due { heap.set(to: Double(beckon_heap_in_use())) }
        return registry.emitToString()
    }
}

/// The one place a push or email Beckon sends itself is counted (docs/push.md, "Counting"): in
/// `beckon_messages_total{rule,channel,result}` and in the rule's live counts for the console (``RuleActivity``,
/// which a fleet process shares with the others through the database).
package struct MessageCounts: Sendable {
    package let metrics: ServiceMetrics
    package let activity: RuleActivity

    package init(metrics: ServiceMetrics, activity: RuleActivity) {
        self.metrics = metrics
        self.activity = activity
    }

    /// The results, in the order the console shows them.
    package static let results = ["sent", "delivered", "failed", "skipped", "token_removed", "unsubscribed", "clicked"]

    /// Counts `n` messages of `rule` (`unit/rule`) on `channel` (`push`, `email`) with `result` (one of ``results``).
    package func count(rule: String, channel: String, _ result: String, _ n: Int = 1) {
        guard n > 0 else { return }
        metrics.message(rule: rule, channel: channel, result: result).increment(by: Int64(n))
        activity.add([rule: RuleActivity.Counts(messages: [result: n])], at: Processor.nowMs())
    }

    /// A rule's message counts as the console's cell says them: "sent 3, delivered 2, …" (`-` for none).
    package static func describe(_ counts: [String: Int]) -> String {
        let order = results + counts.keys.filter { !results.contains($0) }.sorted()
        let said = order.compactMap { r -> String? in
            guard let n = counts[r], n > 0 else { return nil }
            return "\(r.split(separator: "_").joined(separator: " ")) \(n)"
        }
        return said.isEmpty ? "-" : said.joined(separator: ", ")
    }
}
