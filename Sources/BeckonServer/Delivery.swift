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
package enum Delivery {
    /// What a receiver said, as a failed attempt keeps it (`last_error`, the log line of an action gone dead): its
    /// status and its words, cut at 200 characters and shown safe. (They are the receiver's: APNs's `reason` and FCM's
    /// `message`, up to 64 KB each with line breaks, went into every row and log line whole.)
    package static func said(_ status: Int, _ words: String) -> String {
        "\(status) " + Terminal.safe(words.clipped(to: 200))
    }

    /// The outbox entries of a fired action: one per destination that takes it.
    package static func entries(
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
    package enum Outcome: Equatable {
        case delivered
        /// Delivered, with what became of the rest (a push some of the user's devices did not take).
        case partlyDelivered(String)
        /// Tried again no sooner than `after` ms (a `Retry-After`), else after the backoff.
        case retry(error: String, after: Int64?)
        /// Not tried again: the receiver refused it for good.
        case dead(String)
    }

    /// The outcome of an HTTP status: 2xx delivered; 408, 429 and 5xx retried; any other answer dead at once, a
    /// redirect (3xx) included: it is not followed (the body and the secret headers stay with the URL the rule set
    /// names), so the action is dead after one attempt, its error naming the status.
    package static func outcome(status: Int, retryAfter: String?, now: Date) -> Outcome {
        switch status {
        case 200..<300: return .delivered
        case 408, 429, 500..<600:
            return .retry(error: "HTTP \(status)", after: retryAfter.flatMap { Self.retryAfterMs($0, now: now) })
        default: return .dead("HTTP \(status)")
        }
    }

    /// What an attempt's outcome makes of its entry (delivered, dead, or pending again after the backoff) and the
    /// metric's result (`delivered`, `retried`, `dead`).
    package static func record(
        _ row: OutboxRow, _ outcome: Outcome, _ d: Destination, now: Int64, jitter: Double
    ) -> (OutboxAttempt, String) {
        let attempts = row.attempts + 1
        // (Recorded under the claim the entry was taken with: its due time then.)
        func attempt(_ state: OutboxRow.State, _ nextAt: Int64, _ error: String?) -> OutboxAttempt {
            OutboxAttempt(id: row.id, state: state, nextAt: nextAt, error: error, claim: row.nextAt)
        }
        switch outcome {
        case .delivered: return (attempt(.delivered, now, nil), "delivered")
        case .partlyDelivered(let note): return (attempt(.delivered, now, note), "delivered")
        case .dead(let e): return (attempt(.dead, now, e), "dead")
        case .retry(let e, let after):
            guard attempts < d.maxAttempts else { return (attempt(.dead, now, e + " (after \(attempts) attempts)"), "dead") }
            let next = now + delayMs(d, attempts: attempts, retryAfter: after, jitter: jitter)
            return (attempt(.pending, next, e), "retried")
        }
    }

    /// The longest `Retry-After` honoured: a day.
    package static let maxRetryAfterMs: Int64 = Milliseconds.day

    /// A `Retry-After` value in ms from `now`: seconds, or an HTTP date (RFC 9110); `nil` when it is neither.
    package static func retryAfterMs(_ value: String, now: Date) -> Int64? {
        let v = value.trimmingCharacters(in: .whitespaces)
        if let s = Int64(v), s >= 0 {
            return min(s.multipliedReportingOverflow(by: 1000).overflow ? maxRetryAfterMs : s * 1000, maxRetryAfterMs)
        }
        // Seconds too many for 64 bits: the longest wait, not none.
        if !v.isEmpty && v.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) { return maxRetryAfterMs }
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
    package static func delayMs(_ d: Destination, attempts: Int, retryAfter: Int64?, jitter: Double) -> Int64 {
        let doublings = max(0, min(attempts - 1, 40))
        let (scaled, overflow) = d.backoffMs.multipliedReportingOverflow(by: Int64(1) << doublings)
        let capped = overflow ? d.maxBackoffMs : min(scaled, d.maxBackoffMs)
        let jittered = Int64(Double(capped) * (0.5 + 0.5 * min(max(jitter, 0), 1)))
        return max(jittered, retryAfter ?? 0)
    }
}

/// Where a ``Deliverer`` finds due outbox entries and records its attempts: the single service's SQLite database, or a
/// fleet's PostgreSQL (where every process delivers, each taking different entries).
package protocol OutboxStore: Sendable {
    /// Pending entries of `destinations` due by `now`, soonest first, at most `limit`, but the `busy` ids.
    func due(now: Int64, destinations: [String], limit: Int, excluding busy: Set<Int64>) async throws -> [OutboxRow]
    /// Records attempts' outcomes; returns, for each, whether it was recorded (an entry no longer pending is not).
    func record(_ attempts: [OutboxAttempt], at time: Int64) async throws -> [Bool]
    /// Pending entries per destination.
    func pendingCounts() async throws -> [String: Int]
}

extension SQLiteStateBackend: OutboxStore {
    package func due(now: Int64, destinations: [String], limit: Int, excluding busy: Set<Int64>) async throws -> [OutboxRow] {
        try dueOutbox(now: now, destinations: destinations, limit: limit, excluding: busy)
    }
    package func record(_ attempts: [OutboxAttempt], at time: Int64) async throws -> [Bool] {
        try await recordAttempts(attempts, at: time)
    }
    package func pendingCounts() async throws -> [String: Int] { try pendingOutboxCounts() }
}

/// What a deliverer reads of users: their push devices, who reported each token last, and whether they unsubscribed
/// from email; and the removal of a token a provider called invalid or another user reported since (it goes through
/// the user's processing, as a registration does).
package protocol UserDirectory: Sendable {
    /// The user's state as the store holds it now (`nil`: no such user).
    func state(of user: String) async throws -> UserState?
    /// The latest claim of each of `tokens` that the store holds (``DeviceClaim``): a token is its latest reporter's.
    func holders(of tokens: [String]) async throws -> [String: DeviceClaim]
    /// Removes the token from the user's devices (with `seenBy`: only if they reported it no later than then).
    func remove(token: String, of user: String, seenBy: Int64?) async
}

extension UserDirectory {
    func devices(of user: String) async throws -> [Device] { try await state(of: user)?.devices ?? [] }
    /// Whether the user unsubscribed from email (their `email_unsubscribed` attribute is true).
    func unsubscribed(_ user: String) async throws -> Bool { try await state(of: user)?.unsubscribed ?? false }
}

extension UserState {
    /// The attribute an unsubscribe link sets (docs/push.md, "Email"): emails to the user are skipped from then on.
    package static let unsubscribedAttribute = "email_unsubscribed"

    package var unsubscribed: Bool {
        attributes.contains { a in
            guard a.name == Self.unsubscribedAttribute, case .bool(true) = a.value else { return false }
            return true
        }
    }
}

/// Sends what the outbox holds as it comes due, at most ``maxInFlight`` at once and a fair share of them to one
/// destination (``share(of:)``: a hanging receiver holds its share, never another's), each attempt on its own, and
/// records the outcomes of the attempts that ended since the last turn in one transaction. Runs in the service group;
/// a stop cuts attempts in flight short (they stay pending and are sent at the next start).
///
/// When outcomes cannot be written (a full disk, a read-only database), their entries are held back in memory until
/// the time their outcome set (the backoff, at least ``unrecordedBackoff``, doubling while writes keep failing), so
/// that no receiver is sent more than the schedule says.
package final class Deliverer: Service, Sendable {
    package let backend: any OutboxStore
    /// Users' push devices and email subscription, for the destinations that send to them.
    package let devices: (any UserDirectory)?
    package let current: CurrentRules
    package let metrics: ServiceMetrics
    /// Pushes and emails, counted by rule.
    let messages: MessageCounts
    package let logger: Logger
    /// Entries taken and not yet recorded, by id, with their destination and user.
    private let busy = Mutex<[Int64: (destination: String, user: String)]>([:])
    /// Outcomes of attempts that ended, to record.
    private let ended = Mutex<[(OutboxRow, Delivery.Outcome, Destination)]>([])
    /// Entries whose last outcome could not be written, with the time before which they are not taken again.
    private let heldBack = Mutex<[Int64: Int64]>([:])
    /// Database faults, said once when they start and once when they end (``FaultLog``).
    package let faults: FaultLog
    /// Consecutive failed writes of outcomes (the hold doubles with each).
    private let writeFailures = Mutex(0)
    /// The least time an entry whose outcome was not written waits, and the most it waits however often writes fail.
    package static let unrecordedBackoff = ServiceLimits.unrecordedDeliveryHoldMs
    package static let maxUnrecordedBackoff = ServiceLimits.maxUnrecordedDeliveryHoldMs
    /// How often the outbox is looked at when nothing is in flight.
    package static let idlePoll: Duration = .milliseconds(100)
    package static let maxInFlight = ServiceLimits.maxDeliveriesInFlight
    package static let maxPerDestination = ServiceLimits.maxDeliveriesPerDestination

    /// The most attempts one of `active` destinations with work may have in flight: an equal share of ``maxInFlight``
    /// (at least one, at most ``maxPerDestination``), so that destinations that hang cannot take the slots of one that
    /// answers.
    package static func share(of active: Int) -> Int {
        max(1, min(maxPerDestination, maxInFlight / max(1, active)))
    }

    package init(
        backend: any OutboxStore, devices: (any UserDirectory)? = nil, current: CurrentRules, metrics: ServiceMetrics,
        activity: RuleActivity, logger: Logger
    ) {
        self.backend = backend
        self.devices = devices
        self.current = current
        self.metrics = metrics
        messages = MessageCounts(metrics: metrics, activity: activity)
        self.logger = logger
        faults = FaultLog(logger: logger)
    }

    package func run() async throws {
        var configuration = HTTPClient.Configuration()
        // A redirect is an answer, not an instruction: the body and the secret headers never go to another URL.
        configuration.redirectConfiguration = .disallow
        // (As many connections to a receiver as attempts may be in flight to it: the default would queue them at 8.)
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = Self.maxPerDestination
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        var lastGauge = ContinuousClock.now - .seconds(5)
        await withDiscardingTaskGroup { group in
            // The outbox is read when attempts ended (slots are free) and otherwise every `idlePoll`, for what came due.
            var lastRead = ContinuousClock.now - Self.idlePoll
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                let recorded = await recordEnded()
                var mayHaveMore = false
                if recorded > 0 || ContinuousClock.now - lastRead >= Self.idlePoll {
                    lastRead = .now
                    mayHaveMore = await take { row, destination in
                        group.addTask { await self.attempt(row, destination, client) }
                    }
                }
                if ContinuousClock.now - lastGauge >= .seconds(5) {
                    lastGauge = .now
                    await updatePendingGauges()
                }
                if mayHaveMore {
                    await Task.yield()
                } else {
                    // Until an attempt ends or the next look at the outbox is due. (The version is read before the
                    // outcomes are looked at, so an attempt that ends in between wakes the wait at once.)
                    let seen = wake.version(of: Self.endedKey)
                    let next = Self.idlePoll - (ContinuousClock.now - lastRead)
                    if ended.withLock({ $0.isEmpty }) && next > .zero {
                        await wake.wait(for: Self.endedKey, seen: seen, seconds: next.inSeconds)
                    }
                }
            }
            // A stop does not wait for slow receivers: attempts in flight are cut short and stay pending.
            group.cancelAll()
        }
        _ = await recordEnded()
        // (A connection still being made, a TLS handshake a receiver never answers, would hold the client's shutdown
        // until the attempt's deadline: the stop waits a second for it, then goes on without it.)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumed = Mutex(false)
            let once: @Sendable () -> Void = {
                let first = resumed.withLock { r in
                    defer { r = true }
                    return !r
                }
                if first { c.resume() }
            }
            Task {
                try? await client.shutdown()
                once()
            }
            Task {
                try? await Task.sleep(for: .seconds(1))
                once()
            }
        }
    }

    /// The send rates of the destinations that have one (`rate:`), by name; made anew when a reload changes it.
    private let rates = Mutex<[String: SendRate]>([:])

    /// The longest one attempt on an entry of `d` can take: each request it makes within the destination's timeout
    /// (head and body), one after another, and the wait for its turn under a send rate (``paceHorizon``). FCM makes up
    /// to four (an access token, the send, and after a 401 both again), APNs two (the send again after a 403
    /// `ExpiredProviderToken`), others one; a push's devices are sent to at once. A fleet's claim on an entry lasts
    /// this long and the time to record the outcome, so that no other process takes an entry still being tried.
    package static func longestAttemptMs(_ d: Destination) -> Int64 {
        let requests: Int64 = d.fcm != nil ? 4 : d.apns != nil ? 2 : 1
        return requests * d.timeoutMs + (d.ratePerSecond != nil ? paceHorizon.components.seconds * 1000 : 0)
    }

    /// The destination's send rate (`nil` when it has none).
    private func rate(of d: Destination) -> SendRate? {
        guard let perSecond = d.ratePerSecond else { return nil }
        return rates.withLock { r in
            if let existing = r[d.name], existing.perSecond == perSecond { return existing }
            let made = SendRate(perSecond: perSecond)
            r[d.name] = made
            return made
        }
    }

    /// Waits for the destination's send rate to allow one more request (at once when it has none).
    private func paced(_ d: Destination) async { await rate(of: d)?.acquire() }

    /// The most entries a turn takes of a destination with a send rate: what the rate lets start within a second. An
    /// entry taken waits for its turn inside its claim (in a fleet, other processes leave it alone for its timeout and
    /// 5 s); 64 entries taken at once at `30/m` waited up to two minutes for theirs, their claims lapsed, and other
    /// processes sent them again. The rest wait, untaken, for a later turn.
    static let paceHorizon: Duration = .seconds(1)

    /// Which destination ``take(_:)`` serves first (only the delivery loop touches it).
    private let turn = Mutex(0)
    /// The destinations that had entries due at the last turn (they take a share of the slots at this one).
    private let hadWork = Mutex<Set<String>>([])

    /// Waits until no attempt for `userID` is in flight or unrecorded (a forget answers after this, so that nothing of
    /// the user's is sent after its answer).
    package func drain(userID: String) async {
        while busy.withLock({ $0.values.contains { $0.user == userID } }) {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Takes due entries of the active destinations up to the limits and starts an attempt for each. Returns whether
    /// more may be due than it took.
    ///
    /// Each destination is asked for no more than it has room for: an entry taken is an attempt started (in a fleet,
    /// taking an entry keeps the other processes off it for a while).
    private func take(_ start: (OutboxRow, ServingRules.ResolvedDestination) -> Void) async -> Bool {
        let destinations = current.value.destinations
        // (A paused destination's actions wait in the outbox, untried, until its secrets are set; so do those of a
        // destination a reload removed, until it is back or they are dropped.)
        var active = destinations.values.filter(\.missing.isEmpty).sorted { $0.spec.name < $1.spec.name }
        // (Each turn starts at the next destination, so that none is always served first.)
        if !active.isEmpty {
            let first = turn.withLock { t in
                defer { t &+= 1 }
                return t % active.count
            }
            active = Array(active[first...] + active[..<first])
        }
        let inFlight = busy.withLock { $0 }
        var perDestination: [String: Int] = [:]
        for v in inFlight.values { perDestination[v.destination, default: 0] += 1 }
        var free = Self.maxInFlight - inFlight.count
        var more = false
        // The slots are shared among the destinations with work: attempts in flight, or entries due at the last turn
        // (a destination with nothing to send takes no share).
        let contenders = Set(perDestination.keys).union(hadWork.withLock { $0 })
        var withWork: Set<String> = []
        let now = Processor.nowMs()
        let held = heldBack.withLock { h in
            h = h.filter { $0.value > now }
            return Set(h.keys)
        }
        for d in active where free > 0 {
            let name = d.spec.name
            let share = Self.share(of: contenders.union([name]).count)
            let paceRoom = rate(of: d.spec)?.room(within: Self.paceHorizon) ?? Int.max
            let room = min(free, share - perDestination[name, default: 0], paceRoom)
            guard room > 0 else { continue }
            let due: [OutboxRow]
            do {
                due = try await backend.due(
                    now: now, destinations: [name], limit: room, excluding: Set(inFlight.keys).union(held))
            } catch {
                faults.failed("reading the outbox", error)
                return false
            }
            for row in due {
                busy.withLock { $0[row.id] = (name, row.entry.userID) }
                start(row, d)
            }
            faults.ok("reading the outbox")
            if !due.isEmpty { withWork.insert(name) }
            free -= due.count
            // (Held back by its rate, a destination is looked at again at the next poll, not at once.)
            more = more || (due.count == room && room < paceRoom)
        }
        hadWork.withLock { $0 = withWork }
        return more
    }

    private func attempt(_ row: OutboxRow, _ d: ServingRules.ResolvedDestination, _ client: HTTPClient) async {
        guard let outcome = await outcome(of: row, d, client) else {
            // (Cut short by a stop: not an attempt; the entry is pending and is sent at the next start.)
            _ = busy.withLock { $0.removeValue(forKey: row.id) }
            return
        }
        ended.withLock { $0.append((row, outcome, d.spec)) }
        wake.notify([Self.endedKey])
    }

    /// Wakes the delivery loop when an attempt ends (key ``endedKey``).
    private let wake = ActionFeed()
    private static let endedKey = "ended"

    /// What sending the entry came to: through the destination's email sender, push provider, or as the action's
    /// JSON to its URL; `nil` when a stop cut the attempt short.
    private func outcome(
        of row: OutboxRow, _ d: ServingRules.ResolvedDestination, _ client: HTTPClient
    ) async -> Delivery.Outcome? {
        if let sender = d.email {
            let outcome = await email(row, d, sender, client)
            return Task.isCancelled ? nil : outcome
        }
        if let provider = d.push {
            let outcome = await push(row, d, provider, client)
            return Task.isCancelled ? nil : outcome
        }
        await paced(d.spec)
        var request = HTTPClientRequest(url: d.spec.url)
        request.method = HTTPMethod(rawValue: d.spec.method)
        request.headers.add(name: "Content-Type", value: "application/json")
        for (n, v) in d.headers { request.headers.replaceOrAdd(name: n, value: v) }
        request.headers.replaceOrAdd(name: "Idempotency-Key", value: row.entry.actionID)
        request.headers.replaceOrAdd(name: "Beckon-Attempt", value: String(row.attempts + 1))
        request.body = .bytes(ByteBuffer(string: row.entry.body))
        do {
            // (The body is read so that the connection can be used again; what it says is not kept.)
            let answer = try await client.exchange(
                request, timeout: .milliseconds(d.spec.timeoutMs), bodyUpTo: 64 * 1024, logger: logger)
            return Delivery.outcome(
                status: Int(answer.status.code), retryAfter: answer.headers.first(name: "Retry-After"), now: Date())
        } catch {
            return Task.isCancelled ? nil : .retry(error: Self.describe(error), after: nil)
        }
    }

    /// An email through the destination's sender (``EmailSender``): `skipped` when the user unsubscribed.
    private func email(
        _ row: OutboxRow, _ d: ServingRules.ResolvedDestination, _ sender: EmailSender, _ client: HTTPClient
    ) async -> Delivery.Outcome {
        guard let action = EmailSender.Action(json: row.entry.body) else {
            return .dead("skipped: not an email with an address")
        }
        let rule = action.qualifiedRule
        // (Whether the user unsubscribed must be known: a read that fails is tried again, never taken for "no".)
        do {
            if try await devices?.unsubscribed(row.entry.userID) == true {
                messages.count(rule: rule, channel: "email", "skipped")
                return .dead("skipped: the user unsubscribed from email")
            }
        } catch {
            let why = Self.describe(error).clipped(to: 200)
            return .retry(error: "whether the user unsubscribed could not be read: \(why)", after: nil)
        }
        await paced(d.spec)
        let outcome = await sender.send(action, row: row, destination: d.spec, client: client)
        messages.count(rule: rule, channel: "email", "sent")
        switch outcome {
        case .delivered, .partlyDelivered: messages.count(rule: rule, channel: "email", "delivered")
        case .dead: messages.count(rule: rule, channel: "email", "failed")
        case .retry: break
        }
        return outcome
    }

    /// A push through a provider (``PushProvider``): to the device the action names, else to every device of the
    /// user on the provider's platform that allows push, at once. Delivered when a device accepted it; a token the
    /// provider calls invalid is removed from the user; tried again when none accepted and one may yet (429, 5xx, a
    /// connection error); dead otherwise, `skipped` when the user has no such device.
    private func push(
        _ row: OutboxRow, _ d: ServingRules.ResolvedDestination, _ provider: any PushProvider, _ client: HTTPClient
    ) async -> Delivery.Outcome {
        guard let message = PushMessage(actionJSON: row.entry.body) else {
            return .dead("not a push action: \(provider.name) sends pushes only")
        }
        var moved: [(token: String, at: Int64)] = []
        let user = row.entry.userID
        var tokens: [String] = []
        // The tokens sent to that are the user's devices (a token the provider calls invalid is removed from the user
        // only then), and why nothing is sent when nothing is.
        var owned: Set<String> = []
        var skipped = "the user has no \(provider.platform.rawValue) device that allows push"
        if let to = message.push.to, !to.isEmpty {
            // `to:` names one device. One of the user's goes only through its own platform's provider, only with
            // push on, and not once another user took it over; a token nobody holds (an attribute's) is sent as
            // given, and nobody's device is removed for it.
            tokens = [to]
            if let devices {
                do {
                    let mine = try await devices.devices(of: user).first { $0.token == to }
                    let holder = try await devices.holders(of: [to])[to]
                    if let mine, mine.platform != provider.platform {
                        tokens = []
                        skipped = "the device `to:` names is \(mine.platform.rawValue), not \(provider.platform.rawValue)"
                    } else if let mine, !mine.pushEnabled {
                        tokens = []
                        skipped = "the device `to:` names has push off"
                    } else if let holder, holder.userID != user {
                        tokens = []
                        skipped = "another user reported the device `to:` names since"
                        if mine != nil { moved.append((to, holder.at)) }
                    } else if mine != nil {
                        owned = [to]
                    }
                } catch {
                    return .retry(error: "the user's devices cannot be read: \(Self.describe(error))", after: nil)
                }
                for (token, at) in moved { await devices.remove(token: token, of: user, seenBy: at) }
            }
        } else if let devices {
            do {
                tokens = try await devices.devices(of: user).filter { $0.platform == provider.platform && $0.pushEnabled }
                    .map(\.token)
                // A token another user reported since is theirs (a phone passed on, a second account signed in on it):
                // left out, and removed from this user unless they report it again.
                let holders = try await devices.holders(of: tokens)
                tokens = tokens.filter { token in
                    guard let h = holders[token], h.userID != user else { return true }
                    moved.append((token, h.at))
                    return false
                }
            } catch {
                return .retry(error: "the user's devices cannot be read: \(Self.describe(error))", after: nil)
            }
            for (token, at) in moved { await devices.remove(token: token, of: user, seenBy: at) }
            owned = Set(tokens)
        }
        func count(_ result: String, _ n: Int = 1) {
            messages.count(rule: message.qualifiedRule, channel: "push", result, n)
        }
        guard !tokens.isEmpty else {
            count("skipped")
            return .dead("skipped: \(skipped)")
        }
        count("sent", tokens.count)
        let outcomes = await withTaskGroup(of: (String, PushOutcome).self) { group in
            for token in tokens {
                group.addTask {
                    await self.paced(d.spec)
                    return (token, await provider.send(message, to: token, destination: d.spec, client: client))
                }
            }
            var out: [(String, PushOutcome)] = []
            for await o in group { out.append(o) }
            return out
        }
        // Each device's outcome, in the order of the user's devices: what the entry records beside its state.
        let order = Dictionary(tokens.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        var accepted = 0
        var retry: (devices: Int, after: Int64?) = (0, nil)
        var notes: [String] = []
        for (token, outcome) in outcomes.sorted(by: { order[$0.0, default: 0] < order[$1.0, default: 0] }) {
            let device = Self.shortToken(token)
            switch outcome {
            case .accepted: accepted += 1
            case .invalidToken(let why) where owned.contains(token):
                notes.append("\(device): \(why) (token removed)")
                metrics.tokensRemoved.increment()
                count("token_removed")
                await devices?.remove(token: token, of: user, seenBy: nil)
            case .invalidToken(let why): notes.append("\(device): \(why)")
            case .retry(let why, let after):
                notes.append("\(device): \(why)")
                retry.devices += 1
                if let after { retry.after = max(retry.after ?? 0, after) }
            case .refused(let why): notes.append("\(device): \(why)")
            }
        }
        notes += moved.map { "\(Self.shortToken($0.token)): another user reported it since (left out)" }
        if accepted > 0 {
            count("delivered")
            guard !notes.isEmpty else { return .delivered }
            return .partlyDelivered("\(accepted) of \(tokens.count) devices accepted; " + notes.joined(separator: "; "))
        }
        if retry.devices > 0 { return .retry(error: notes.joined(separator: "; "), after: retry.after) }
        count("failed")
        return .dead(notes.joined(separator: "; "))
    }

    /// A device token as an outcome names it: its first 8 characters (the rest are in the user's export).
    static func shortToken(_ token: String) -> String { token.count > 8 ? token.prefix(8) + "…" : token }

    /// Writes the outcomes of the attempts that ended, in one transaction, then lets their entries be taken again.
    /// Returns how many.
    private func recordEnded() async -> Int {
        let batch = ended.withLock { e in
            defer { e = [] }
            return e
        }
        guard !batch.isEmpty else { return 0 }
        let now = Processor.nowMs()
        var attempts: [OutboxAttempt] = []
        var results: [String] = []
        for (row, outcome, d) in batch {
            let (attempt, result) = Delivery.record(row, outcome, d, now: now, jitter: Double.random(in: 0...1))
            attempts.append(attempt)
            results.append(result)
        }
        do {
            let applied = try await backend.record(attempts, at: now)
            writeFailures.withLock { $0 = 0 }
            faults.ok("recording delivery attempts")
            heldBack.withLock { h in for (row, _, _) in batch { h.removeValue(forKey: row.id) } }
            for (i, (row, _, _)) in batch.enumerated() where applied[i] {
                metrics.delivery(destination: row.entry.destination, result: results[i]).increment()
                if attempts[i].state == .dead {
                    // (No user id or body in the log: the action id finds it in `beckon outbox`.)
                    logger.warning(
                        "an action is dead-lettered",
                        metadata: [
                            "destination": "\(row.entry.destination)", "action": "\(row.entry.actionID)",
                            "error": "\(attempts[i].error ?? "")",
                        ])
                }
            }
        } catch {
            // Not recorded: the entries stay pending as they were and are tried again (at least once, as promised),
            // but not before their outcome said, nor before the hold: a database that cannot be written does not turn
            // the schedule into a loop.
            let failures = writeFailures.withLock { f in
                f += 1
                return f
            }
            let hold = min(Self.unrecordedBackoff << min(failures - 1, 16), Self.maxUnrecordedBackoff)
            heldBack.withLock { h in
                for a in attempts { h[a.id] = max(a.nextAt, now + hold) }
            }
            faults.failed("recording delivery attempts", error)
        }
        busy.withLock { b in for (row, _, _) in batch { b.removeValue(forKey: row.id) } }
        return batch.count
    }

    /// `beckon_outbox_pending_actions{destination}`: what waits, per destination (a paused one's grows).
    private func updatePendingGauges() async {
        guard let counts = try? await backend.pendingCounts() else { return }
        for name in Set(current.value.destinations.keys).union(counts.keys) {
            metrics.outboxPending(destination: name).set(to: Double(counts[name] ?? 0))
        }
    }

    package static func describe(_ error: any Error) -> String {
        if let e = error as? HTTPClientError {
            if e == .deadlineExceeded || e == .readTimeout || e == .connectTimeout { return "timed out" }
            return "\(e)"
        }
        return String(describing: error)
    }
}
