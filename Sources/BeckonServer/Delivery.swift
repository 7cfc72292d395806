import AsyncHTTPClient
import BeckonCore
import BeckonStore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Prometheus
import ServiceLifecycle
import Synchronization

/// Delivery of fired actions to the rule set's destinations (docs/operations.md, "Destinations").
///
/// A fired action that a destination takes is written to the outbox in the same transaction as the fire, so a crash
/// between the fire and the delivery delivers it after the restart: at least once, never lost. Every attempt carries
/// the action's id as `Idempotency-Key` (and an emit's payload keeps its own `event_id`), so the receiver can drop
/// the repeats that at-least-once allows.
enum Delivery {
    /// The outbox entries of a fired action: one per destination that takes it.
    static func entries(
        for action: FiredAction, _ logged: LoggedAction, destinations: [Destination], at time: Int64
    ) -> [OutboxEntry] {
        guard !destinations.isEmpty else { return [] }
        let fields = action.fields
        var event: String?
        if case .string(let e)? = fields.first(where: { $0.key == "event" })?.value { event = e }
        var out: [OutboxEntry] = []
        for d in destinations where d.takes(kind: action.kind, event: event) {
            var body = logged.json
            if d.body == .payload, let payload = fields.first(where: { $0.key == "payload" })?.value {
                body = JSONWriter.encode(payload)
            }
            if let envelope = d.envelope {
                var w = JSONWriter()
                w.beginObject()
                w.key(envelope)
                w.beginArray()
                w.raw(body)
                w.endArray()
                w.endObject()
                body = w.output
            }
            out.append(
                OutboxEntry(destination: d.name, actionID: logged.actionID, userID: logged.userID, body: body, createdAt: time))
        }
        return out
    }

    /// What became of an attempt.
    enum Outcome: Equatable {
        case delivered
        /// Tried again no sooner than `after` ms (a `Retry-After`), else after the backoff.
        case retry(error: String, after: Int64?)
        /// Not tried again: the receiver refused it for good.
        case dead(String)
    }

    /// The outcome of an HTTP status: 2xx delivered; 408, 429 and 5xx retried; any other answer dead at once.
    static func outcome(status: Int, retryAfter: String?, now: Date) -> Outcome {
        switch status {
        case 200..<300: return .delivered
        case 408, 429, 500..<600:
            return .retry(error: "HTTP \(status)", after: retryAfter.flatMap { Self.retryAfterMs($0, now: now) })
        default: return .dead("HTTP \(status)")
        }
    }

    /// The longest `Retry-After` honoured: a day.
    static let maxRetryAfterMs: Int64 = 86_400_000

    /// A `Retry-After` value in ms from `now`: seconds, or an HTTP date (RFC 9110); `nil` when it is neither.
    static func retryAfterMs(_ value: String, now: Date) -> Int64? {
        let v = value.trimmingCharacters(in: .whitespaces)
        if let s = Int64(v), s >= 0 {
            return min(s.multipliedReportingOverflow(by: 1000).overflow ? maxRetryAfterMs : s * 1000, maxRetryAfterMs)
        }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = f.date(from: v) else { return nil }
        return min(max(0, Int64(date.timeIntervalSince(now) * 1000)), maxRetryAfterMs)
    }

    /// The delay before attempt `attempts + 1` after `attempts` failed ones: the destination's backoff doubled per
    /// failure up to its maximum, times a jitter in [0.5, 1] (so that a recovering receiver is not hit by every
    /// sender at once), and never sooner than a `Retry-After`.
    static func delayMs(_ d: Destination, attempts: Int, retryAfter: Int64?, jitter: Double) -> Int64 {
        let doublings = max(0, min(attempts - 1, 40))
        let (scaled, overflow) = d.backoffMs.multipliedReportingOverflow(by: Int64(1) << doublings)
        let capped = overflow ? d.maxBackoffMs : min(scaled, d.maxBackoffMs)
        let jittered = Int64(Double(capped) * (0.5 + 0.5 * min(max(jitter, 0), 1)))
        return max(jittered, retryAfter ?? 0)
    }
}

/// Sends what the outbox holds as it comes due, at most ``maxInFlight`` at once, each attempt on its own (a slow
/// destination does not hold up another), and records each outcome. Runs in the service group; on a graceful stop
/// it stops taking entries and lets the attempts in flight finish (an attempt cut short is pending and is sent
/// again at the next start).
final class Deliverer: Service, Sendable {
    let backend: SQLiteStateBackend
    let current: CurrentRules
    let metrics: ServiceMetrics
    let logger: Logger
    private let busy = Mutex<Set<Int64>>([])
    /// How often the outbox is looked at for entries that came due.
    static let poll: Duration = .milliseconds(100)
    static let maxInFlight = 32

    init(backend: SQLiteStateBackend, current: CurrentRules, metrics: ServiceMetrics, logger: Logger) {
        self.backend = backend
        self.current = current
        self.metrics = metrics
        self.logger = logger
    }

    func run() async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        var lastGauge = ContinuousClock.now - .seconds(5)
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                let inFlight = busy.withLock { $0 }
                // (A paused destination's actions wait in the outbox, untried, until its secrets are set.)
                let active = current.value.destinations.values.filter(\.missing.isEmpty).map(\.spec.name)
                if inFlight.count < Self.maxInFlight, !active.isEmpty {
                    do {
                        let due = try backend.dueOutbox(
                            now: Processor.nowMs(), destinations: active, limit: Self.maxInFlight - inFlight.count,
                            excluding: inFlight)
                        for row in due {
                            busy.withLock { _ = $0.insert(row.id) }
                            group.addTask {
                                await self.attempt(row, client)
                                _ = self.busy.withLock { $0.remove(row.id) }
                            }
                        }
                    } catch {
                        logger.error("cannot read the outbox", metadata: ["error": "\(error)"])
                    }
                }
                if ContinuousClock.now - lastGauge >= .seconds(5) {
                    lastGauge = .now
                    updatePendingGauges()
                }
                try? await Task.sleep(for: Self.poll)
            }
            // A stop does not wait for slow receivers: attempts in flight are cut short and stay pending.
            group.cancelAll()
        }
        try? await client.shutdown()
    }

    private func attempt(_ row: OutboxRow, _ client: HTTPClient) async {
        let name = row.entry.destination
        guard let d = current.value.destinations[name] else {
            await record(row, .dead("destination '\(name)' is no longer in the rules"), nil)
            return
        }
        guard d.missing.isEmpty else { return }  // (paused by a reload since it was taken: tried once it is set)
        var request = HTTPClientRequest(url: d.spec.url)
        request.method = HTTPMethod(rawValue: d.spec.method)
        request.headers.add(name: "Content-Type", value: "application/json")
        for (n, v) in d.headers { request.headers.replaceOrAdd(name: n, value: v) }
        request.headers.replaceOrAdd(name: "Idempotency-Key", value: row.entry.actionID)
        request.headers.replaceOrAdd(name: "Beckon-Attempt", value: String(row.attempts + 1))
        request.body = .bytes(ByteBuffer(string: row.entry.body))
        let outcome: Delivery.Outcome
        do {
            let response = try await client.execute(request, timeout: .milliseconds(d.spec.timeoutMs), logger: logger)
            // (The body is read so that the connection can be used again; what it says is not kept.)
            _ = try? await response.body.collect(upTo: 64 * 1024)
            outcome = Delivery.outcome(
                status: Int(response.status.code), retryAfter: response.headers.first(name: "Retry-After"), now: Date())
        } catch {
            // (Cut short by a stop: not an attempt; the entry is pending and is sent at the next start.)
            if Task.isCancelled { return }
            outcome = .retry(error: Self.describe(error), after: nil)
        }
        await record(row, outcome, d.spec)
    }

    private func record(_ row: OutboxRow, _ outcome: Delivery.Outcome, _ d: Destination?) async {
        let now = Processor.nowMs()
        let attempts = row.attempts + 1
        var state = OutboxRow.State.pending
        var next = now
        var error: String?
        var result = "retried"
        switch outcome {
        case .delivered:
            state = .delivered
            result = "delivered"
        case .dead(let e):
            state = .dead
            error = e
            result = "dead"
        case .retry(let e, let after):
            error = e
            if let d, attempts < d.maxAttempts {
                next = now + Delivery.delayMs(d, attempts: attempts, retryAfter: after, jitter: Double.random(in: 0...1))
            } else {
                state = .dead
                error = e + " (after \(attempts) attempts)"
                result = "dead"
            }
        }
        do {
            let applied = try await backend.recordAttempt(id: row.id, state: state, nextAt: next, at: now, error: error)
            guard applied else { return }
            metrics.delivery(destination: row.entry.destination, result: result).increment()
            if state == .dead {
                // (No user id or body in the log: the action id finds it in `beckon outbox`.)
                logger.warning(
                    "an action is dead-lettered",
                    metadata: [
                        "destination": "\(row.entry.destination)", "action": "\(row.entry.actionID)", "error": "\(error ?? "")",
                    ])
            }
        } catch {
            logger.error("cannot record a delivery attempt", metadata: ["error": "\(error)"])
        }
    }

    /// `beckon_outbox_pending{destination}`: what waits, per destination (a paused one's grows).
    private func updatePendingGauges() {
        guard let counts = try? backend.pendingOutboxCounts() else { return }
        for name in Set(current.value.destinations.keys).union(counts.keys) {
            metrics.outboxPending(destination: name).set(to: Double(counts[name] ?? 0))
        }
    }

    static func describe(_ error: any Error) -> String {
        if let e = error as? HTTPClientError {
            if e == .deadlineExceeded || e == .readTimeout || e == .connectTimeout { return "timed out" }
            return "\(e)"
        }
        return String(describing: error)
    }
}
