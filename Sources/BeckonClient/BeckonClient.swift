import Foundation
import Logging

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What an app links to talk to `beckon serve` (docs/client.md): Segment-shaped events written to a queue on disk
/// before `track` returns and sent in gzipped batches with retries; the user's actions as an `AsyncSequence` from a
/// long-poll loop whose cursor is on disk; the inbox; push token registration. One client per app, made at launch:
///
/// ```swift
/// let beckon = try BeckonClient(.init(server: url, writeKey: "…", directory: folder) { userId in
///     try await backend.beckonToken(for: userId)
/// })
/// beckon.track("Signed In")
/// for try await action in beckon.actions() { … }
/// ```
public final class BeckonClient: Sendable {
    public let configuration: Configuration
    let transport: Transport
    let queue: EventQueue
    let store: ActionStore
    private let logger: Logger
    private let identityURL: URL
    private let state: Locked<State>
    /// Wakes the uploader: a batch is full, a flush was asked for.
    private let uploadSignal = Signal()
    /// Wakes the action stream's reader: actions arrived, or the stream failed.
    let actionSignal = Signal()
    /// Wakes the pull loop when the app took actions (it waits while `maxPendingActions` are pending).
    private let pullSignal = Signal()
    private let device: DeviceInfo

    fileprivate struct State {
        var identity: Identity
        var foreground = true
        var closed = false
        var uploader: Task<Void, Never>?
        var puller: Task<Void, Never>?
        var registrar: Task<Void, Never>?
        var streamError: BeckonClientError?
        var flushRequested = 0
        var flushCompleted = 0
        var flushWaiters: [(generation: Int, continuation: CheckedContinuation<Bool, Never>)] = []
        var inboxObservers: [UUID: AsyncStream<Inbox>.Continuation] = [:]
    }

    /// Who the events are about, the device, and its push token: `identity.json`.
    struct Identity: Codable {
        var anonymousId: String
        var userId: String?
        var deviceId: String
        var pushToken: String?
        var pushEnabled: Bool?
        /// `user`, `token` and `enabled` of the last registration the service stored.
        var registered: [String]?

        /// The id the user endpoints are asked for: the known user's, else the anonymous one.
        var current: String { userId ?? anonymousId }
    }

    /// Opens (or creates) the client's folder, reads what a previous run left, and starts sending and pulling.
    public init(_ configuration: Configuration) throws {
        self.configuration = configuration
        logger = configuration.logger
        try Disk.makeDirectory(configuration.directory)
        identityURL = configuration.directory.appendingPathComponent("identity.json")
        let identity =
            Disk.readJSON(Identity.self, from: identityURL, logger: logger)
            ?? Identity(anonymousId: Self.newID(), deviceId: Self.newID())
        try Disk.writeJSON(identity, to: identityURL)
        queue = try EventQueue(
            folder: configuration.directory.appendingPathComponent("queue"),
            maxEvents: configuration.maxQueuedEvents, batchEvents: configuration.flushAt, logger: logger)
        store = try ActionStore(folder: configuration.directory.appendingPathComponent("actions"), logger: logger)
        transport = Transport(configuration: configuration)
        device = DeviceInfo.current
        state = Locked(State(identity: identity))
        state.withLock { s in
            s.uploader = Task { [parts] in await parts.uploadLoop() }
        }
        startPulling()
        registerDevice()
    }

    deinit {
        close()
    }

    /// The parts the loops run on (see ``ClientParts``).
    var parts: ClientParts {
        ClientParts(
            configuration: configuration, transport: transport, queue: queue, store: store, logger: logger,
            identityURL: identityURL, state: state, uploadSignal: uploadSignal, actionSignal: actionSignal,
            pullSignal: pullSignal, droppedBad: droppedBad, refreshInbox: { [weak self] in self?.refreshInbox() })
    }

    /// Stops the client's loops (what is queued stays on disk for the next client on this folder).
    public func close() {
        // (Finishing a stream runs its termination handler, which takes the lock: outside it.)
        let (tasks, waiters, observers) = state.withLock { s in
            s.closed = true
            defer {
                s.flushWaiters = []
                s.inboxObservers = [:]
            }
            return ([s.uploader, s.puller, s.registrar], s.flushWaiters, Array(s.inboxObservers.values))
        }
        for w in waiters { w.continuation.resume(returning: false) }
        for o in observers { o.finish() }
        for t in tasks { t?.cancel() }
        actionSignal.notify()
    }

    static func newID() -> String { UUID().uuidString.lowercased() }

    // MARK: - Identity

    /// The anonymous id: made once, kept across launches until `reset()`.
    public var anonymousId: String { state.withLock { $0.identity.anonymousId } }
    /// The signed-in user's id, nil before `identify(userId:)` and after `reset()`.
    public var userId: String? { state.withLock { $0.identity.userId } }

    // MARK: - Events

    /// A Segment `track`. Returns its `messageId` once it is on disk, nil when it could not be queued (logged).
    @discardableResult
    public func track(_ event: String, properties: [String: JSONValue] = [:]) -> String? {
        enqueue("track", ["event": .string(event), "properties": .object(properties)])
    }

    /// A Segment `screen`.
    @discardableResult
    public func screen(_ name: String, properties: [String: JSONValue] = [:]) -> String? {
        enqueue("screen", ["name": .string(name), "properties": .object(properties)])
    }

    /// A Segment `identify`. With a `userId` (a sign-in), the client keeps it and sends the anonymous id with it, so
    /// the service merges what the anonymous visitor did into the user; pulls and the inbox then ask for the user.
    @discardableResult
    public func identify(userId: String? = nil, traits: [String: JSONValue] = [:]) -> String? {
        if let userId, !userId.isEmpty {
            let (before, _) = parts.changeIdentity { $0.userId = userId }
            if before.userId != userId { identityChanged() }
        }
        return enqueue("identify", ["traits": .object(traits)])
    }

    /// A Segment `alias`: `newId` becomes the user's id, with the current one as `previousId`.
    @discardableResult
    public func alias(_ newId: String) -> String? {
        let previous = state.withLock { $0.identity.current }
        let id = enqueue("alias", ["previousId": .string(previous)], userId: newId)
        let (before, _) = parts.changeIdentity { $0.userId = newId }
        if before.userId != newId { identityChanged() }
        return id
    }

    /// A Segment `group`.
    @discardableResult
    public func group(_ groupId: String, traits: [String: JSONValue] = [:]) -> String? {
        enqueue("group", ["groupId": .string(groupId), "traits": .object(traits)])
    }

    /// Sign-out: a new anonymous id, no user. Pulled actions of the last user that the app did not take are dropped,
    /// and the device is removed from the last user (best effort), then registered for the new anonymous id.
    public func reset() {
        let (before, after) = parts.changeIdentity { identity in
            identity.anonymousId = Self.newID()
            identity.userId = nil
            identity.registered = nil
        }
        // (The pull loop of the last user stops first: a page it was saving could land after the discard.)
        stopPulling()
        store.discardPending(except: after.current)
        if let r = before.registered, r.count == 3 {
            let transport = transport
            Task { _ = try? await transport.user(r[0], "DELETE", "/devices/" + Transport.pathSegment(r[1])) }
        }
        identityChanged()
    }

    private func identityChanged() {
        // Another user, another token: a stream stopped by the last one's refusal starts again.
        state.withLock { $0.streamError = nil }
        restartPulling()
        registerDevice()
        refreshInbox()
    }

    /// Builds the event (`messageId`, `timestamp`, ids, `context`) and writes it to the queue.
    private func enqueue(_ type: String, _ fields: [String: JSONValue], userId: String? = nil) -> String? {
        let identity = state.withLock { $0.identity }
        let messageId = Self.newID()
        var event = fields
        event["type"] = .string(type)
        event["messageId"] = .string(messageId)
        event["timestamp"] = .string(ISOTime.string(Date()))
        event["anonymousId"] = .string(identity.anonymousId)
        if let id = userId ?? identity.userId { event["userId"] = .string(id) }
        event["context"] = device.context(app: configuration.app, identity: identity)
        do {
            let line = try JSONEncoder.compact.encode(JSONValue.object(event))
            switch try queue.append(line) {
            case .tooLarge:
                logger.error("beckon: \(type) '\(fields["event"]?.stringValue ?? "")' not queued: over 32 KB")
                return nil
            case .queued(let wake):
                if wake { uploadSignal.notify() }
                return messageId
            }
        } catch {
            logger.error("beckon: \(type) not queued: \(error)")
            return nil
        }
    }

    /// Events on disk not yet taken by the service.
    public var queuedEvents: Int { queue.count }
    /// Events dropped unsent since launch: the queue was full, or the service named them bad (400).
    public var droppedEvents: Int { queue.dropped + droppedBad.withLock { $0 } }
    private let droppedBad = Locked(0)

    /// Sends what is queued now, and returns whether everything queued before the call was taken by the service.
    @discardableResult
    public func flush() async -> Bool {
        await withCheckedContinuation { continuation in
            let closed = state.withLock { s -> Bool in
                guard !s.closed else { return true }
                s.flushRequested += 1
                s.flushWaiters.append((s.flushRequested, continuation))
                return false
            }
            if closed { continuation.resume(returning: false) } else { uploadSignal.notify() }
        }
    }

    // MARK: - Foreground and background

    /// The app went to the background: the pull loop stops (its open request is cancelled), and what is queued is
    /// sent once more.
    public func enterBackground() {
        state.withLock { $0.foreground = false }
        stopPulling()
        state.withLock { $0.flushRequested += 1 }
        uploadSignal.notify()
    }

    /// The app is in the foreground again: pulling resumes at its cursor. After the stream failed (a refused token),
    /// this starts it again.
    public func enterForeground() {
        state.withLock { s in
            s.foreground = true
            s.streamError = nil
        }
        startPulling()
        refreshInbox()
    }

    // MARK: - The pull loop

    private func startPulling() {
        state.withLock { s in
            guard !s.closed, s.foreground, s.puller == nil, s.streamError == nil else { return }
            let user = s.identity.current
            s.puller = Task { [parts] in await parts.pullLoop(for: user) }
        }
    }

    /// Cancels the pull loop (its open request with it).
    private func stopPulling() {
        let old = state.withLock { s -> Task<Void, Never>? in
            defer { s.puller = nil }
            return s.puller
        }
        old?.cancel()
    }

    private func restartPulling() {
        stopPulling()
        startPulling()
    }

    /// The user's actions, oldest first, each handed over once: an action counts as taken when `next()` returns it
    /// (saved on disk before), so after a restart the stream goes on with the next one. Several iterators may run at
    /// once (each action goes to one of them); only actions pulled for the current user, or the anonymous id they
    /// signed in from, are handed over. It throws when pulling stopped for good (a refused token,
    /// `BeckonClientError`), and ends when the client
    /// is closed or the iterating task cancelled. Pulling runs while the app is in the foreground.
    public func actions() -> Actions { Actions(client: self) }

    public struct Actions: AsyncSequence, Sendable {
        public typealias Element = BeckonAction
        let client: BeckonClient

        public func makeAsyncIterator() -> Iterator { Iterator(client: client) }

        public struct Iterator: AsyncIteratorProtocol {
            let client: BeckonClient

            public mutating func next() async throws -> BeckonAction? {
                while !Task.isCancelled {
                    let users = client.state.withLock { s in [s.identity.current, s.identity.anonymousId] }
                    if let json = client.store.take(for: Set(users)) {
                        client.pullSignal.notify()
                        if let action = BeckonAction(json: json) { return action }
                        continue
                    }
                    let (error, closed) = client.state.withLock { ($0.streamError, $0.closed) }
                    if closed { return nil }
                    if let error { throw error }
                    await client.actionSignal.wait(timeout: .seconds(10))
                }
                return nil
            }
        }
    }

    /// Why the action stream stopped, if it did.
    public var streamError: BeckonClientError? { state.withLock { $0.streamError } }

    // MARK: - Inbox

    /// The user's inbox as the service has it now.
    public func inbox() async throws(BeckonClientError) -> Inbox {
        let user = state.withLock { $0.identity.current }
        let answer = try await transport.user(user, "GET", "/inbox")
        return try Self.inbox(answer, user: user)
    }

    /// Marks an item read; returns the inbox after it (observers get it too).
    @discardableResult
    public func markRead(_ itemId: String) async throws(BeckonClientError) -> Inbox {
        let user = state.withLock { $0.identity.current }
        let answer = try await transport.user(user, "POST", "/inbox/" + Transport.pathSegment(itemId) + "/read")
        let inbox = try Self.inbox(answer, user: user)
        publish(inbox)
        return inbox
    }

    private static func inbox(_ answer: Transport.Answer, user: String) throws(BeckonClientError) -> Inbox {
        guard answer.status == 200, let json = answer.json else {
            throw .server(status: answer.status, message: answer.message)
        }
        return Inbox(json: json, userId: user)
    }

    /// The inbox now, and again whenever it changes: a `notify` or `mark_read` action pulled, `markRead`, a sign-in.
    public func inboxUpdates() -> AsyncStream<Inbox> {
        let (stream, continuation) = AsyncStream.makeStream(of: Inbox.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let added = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            s.inboxObservers[id] = continuation
            return true
        }
        guard added else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.inboxObservers.removeValue(forKey: id) }
        }
        refreshInbox()
        return stream
    }

    private func refreshInbox() {
        guard state.withLock({ !$0.inboxObservers.isEmpty }) else { return }
        Task { [weak self] in
            guard let self else { return }
            do {
                publish(try await inbox())
            } catch {
                logger.info("beckon: the inbox could not be read: \(error)")
            }
        }
    }

    private func publish(_ inbox: Inbox) {
        let observers = state.withLock { s in s.identity.current == inbox.userId ? Array(s.inboxObservers.values) : [] }
        for o in observers { o.yield(inbox) }
    }

    // MARK: - Push

    /// The device's push token (APNs' or FCM's), with whether the user allows notifications. It goes in
    /// `context.device` of every event, and the device is registered for the current user
    /// (`POST /v1/users/{id}/devices`), again after a sign-in or a change, retried until the service stores it.
    public func setPushToken(_ token: String, enabled: Bool = true) {
        _ = parts.changeIdentity { identity in
            identity.pushToken = token
            identity.pushEnabled = enabled
        }
        registerDevice()
    }

    /// APNs' token as the app gets it (`didRegisterForRemoteNotificationsWithDeviceToken`): sent as hex.
    public func setPushToken(_ token: Data, enabled: Bool = true) {
        setPushToken(token.map { String(format: "%02x", $0) }.joined(), enabled: enabled)
    }

    /// Whether the service has the device for the current user.
    public var deviceRegistered: Bool {
        state.withLock { s in
            guard let token = s.identity.pushToken else { return false }
            return s.identity.registered == [s.identity.current, token, String(s.identity.pushEnabled ?? true)]
        }
    }

    private func registerDevice() {
        guard let platform = configuration.pushPlatform else { return }
        state.withLock { s in
            guard !s.closed, s.identity.pushToken != nil else { return }
            s.registrar?.cancel()
            s.registrar = Task { [parts] in await parts.registerLoop(platform: platform) }
        }
    }

}

/// What the client's loops use: the client's parts, without the client itself, so that a client the app lets go
/// without `close()` is freed (its `deinit` closes it, ending the loops) rather than kept alive by its own loops.
struct ClientParts: Sendable {
    let configuration: BeckonClient.Configuration
    let transport: Transport
    let queue: EventQueue
    let store: ActionStore
    let logger: Logger
    let identityURL: URL
    fileprivate let state: Locked<BeckonClient.State>
    let uploadSignal: Signal
    let actionSignal: Signal
    let pullSignal: Signal
    let droppedBad: Locked<Int>
    /// Reads the inbox for its observers, if the client is still there.
    let refreshInbox: @Sendable () -> Void
    typealias Identity = BeckonClient.Identity
}

extension ClientParts {
    func changeIdentity(_ change: (inout Identity) -> Void) -> (before: Identity, after: Identity) {
        let (before, after, failure) = state.withLock { s -> (Identity, Identity, (any Error)?) in
            let before = s.identity
            change(&s.identity)
            do {
                try Disk.writeJSON(s.identity, to: identityURL)
                return (before, s.identity, nil)
            } catch {
                return (before, s.identity, error)
            }
        }
        // (Logged after the lock is let go: a log handler may call back into the client.)
        if let failure { logger.error("beckon: the identity could not be saved: \(failure)") }
        return (before, after)
    }

    // MARK: - The uploader

    enum Drained {
        case empty
        case failed(retryAfter: Duration?)
    }

    func uploadLoop() async {
        var failures = 0
        var retryAt: ContinuousClock.Instant?
        while !Task.isCancelled {
            let now = ContinuousClock.now
            let wake: Duration
            if let retryAt {
                wake = retryAt - now
            } else if queue.oldest() != nil {
                wake = .zero
            } else if let since = queue.openSince {
                wake = since + configuration.flushInterval - now
            } else {
                wake = .seconds(3600)
            }
            if wake > .zero { await uploadSignal.wait(timeout: wake) }
            if Task.isCancelled { break }
            let (target, forced) = state.withLock { ($0.flushRequested, $0.flushRequested > $0.flushCompleted) }
            if !forced, let r = retryAt, ContinuousClock.now < r { continue }
            if forced { queue.sealOpen() }
            if let since = queue.openSince, ContinuousClock.now - since >= configuration.flushInterval { queue.sealOpen() }
            let outcome = await drain()
            switch outcome {
            case .empty:
                failures = 0
                retryAt = nil
            case .failed(let after):
                failures += 1
                retryAt = .now + configuration.retry.wait(after: failures, retryAfter: after)
            }
            let done = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
                s.flushCompleted = max(s.flushCompleted, target)
                let done = s.flushWaiters.filter { $0.generation <= target }.map(\.continuation)
                s.flushWaiters.removeAll { $0.generation <= target }
                return done
            }
            let emptied: Bool
            if case .empty = outcome { emptied = true } else { emptied = false }
            for c in done { c.resume(returning: emptied) }
        }
    }

    /// Sends sealed segments oldest first until none is left or one cannot be sent now.
    func drain() async -> Drained {
        var limit: Int?
        while !Task.isCancelled, let segment = queue.oldest() {
            let lines: [Data]
            do {
                lines = try queue.lines(of: segment)
            } catch {
                logger.warning("beckon: a batch on disk cannot be read now (\(error)); kept, retrying")
                return .failed(retryAfter: nil)
            }
            if lines.isEmpty {
                queue.remove(segment)
                continue
            }
            let count = min(limit ?? lines.count, lines.count)
            var body = Data(#"{"batch":["#.utf8)
            for (i, line) in lines.prefix(count).enumerated() {
                if i > 0 { body.append(0x2C) }
                body.append(line)
            }
            body.append(Data(#"],"sentAt":"\#(ISOTime.string(Date()))"}"#.utf8))
            let answer: Transport.Answer
            do {
                answer = try await transport.ingest(body)
            } catch {
                logger.info("beckon: \(count) events not sent, will retry: \(error)")
                return .failed(retryAfter: nil)
            }
            // What the answer takes out of the segment (sent, or refused for good), and why refused.
            var refused: [Data] = []
            var reason = answer.message
            var rest = Array(lines.dropFirst(count))
            switch answer.status {
            case 200:
                // (Only 200 says stored: a proxy's 202 or 204 is no answer of the service's, and its events stay.)
                limit = nil
            case 400:
                // All or nothing: the service names the first bad event and stored none of the request.
                if let index = answer.json?["event"]?.intValue.flatMap({ Int(exactly: $0) }), index >= 0, index < count {
                    refused = [lines[index]]
                    rest = lines
                    rest.remove(at: index)
                } else {
                    // Not the service naming an event: a line that is not a JSON object (a damaged queue file) breaks
                    // the whole batch, and only such lines are dropped; when every line is one, the events are not at
                    // fault (a proxy's 400, a plain-HTTP request to an HTTPS port): they stay, as for a 401.
                    let broken = Set(lines.prefix(count).indices.filter { !Self.isJSONObject(lines[$0]) })
                    guard !broken.isEmpty else {
                        logger.error(
                            "beckon: the service refused a batch (400: \(answer.message)) without naming an event; kept, retrying"
                        )
                        return .failed(retryAfter: answer.retryAfter)
                    }
                    refused = broken.sorted().map { lines[$0] }
                    rest = lines.indices.filter { !broken.contains($0) }.map { lines[$0] }
                    reason = "it is not JSON (the queue's file was damaged)"
                }
            case 413 where count > 1:
                limit = count / 2
                continue
            case 413:
                // (The service answers a large event 400, naming it: a 413 for one event is a proxy's bound, not the
                // event's fault. Dropping it emptied the queue an event a request.)
                logger.error("beckon: something before the service refused one event as too large (413); kept, retrying")
                return .failed(retryAfter: answer.retryAfter)
            case let status where Transport.isTransient(status):
                logger.info("beckon: the service answered \(status); \(count) events will be sent again")
                return .failed(retryAfter: answer.retryAfter)
            default:
                // 401 (a wrong write key), 404 (a wrong address), 415: the events are not at fault. They stay.
                logger.error("beckon: the service refused a batch (\(answer.status): \(answer.message)); kept, retrying")
                return .failed(retryAfter: answer.retryAfter)
            }
            if !refused.isEmpty { drop(refused, because: reason) }
            do {
                try queue.replace(segment, with: rest)
            } catch {
                logger.error("beckon: the queue could not be rewritten after an answer: \(error)")
                return .failed(retryAfter: nil)
            }
        }
        return .empty
    }

    static func isJSONObject(_ line: Data) -> Bool {
        if case .object? = try? JSONDecoder().decode(JSONValue.self, from: line) { return true }
        return false
    }

    func drop(_ lines: [Data], because reason: String) {
        droppedBad.withLock { $0 += lines.count }
        for line in lines {
            let event = try? JSONDecoder().decode(JSONValue.self, from: line)
            let name = event?["event"]?.stringValue ?? event?["name"]?.stringValue ?? event?["type"]?.stringValue ?? "?"
            logger.warning(
                "beckon: event '\(name)' (messageId \(event?["messageId"]?.stringValue ?? "?")) dropped: the service says \(reason)"
            )
        }
    }

    /// Pulls `user`'s actions until cancelled, or until another id is signed in (its own loop pulls for it: this one,
    /// between the change and its cancellation, asks nothing for the new id).
    func pullLoop(for user: String) async {
        var failures = 0
        while !Task.isCancelled {
            if store.pendingCount >= configuration.maxPendingActions {
                await pullSignal.wait(timeout: .seconds(5))
                continue
            }
            guard state.withLock({ $0.identity.current }) == user else { return }
            let cursor = store.cursor(for: user)
            let wait = Double(configuration.pollWait.components.seconds)
            let answer: Transport.Answer
            let asked = ContinuousClock.now
            do {
                answer = try await transport.user(
                    user, "GET", "/actions",
                    query: [URLQueryItem(name: "after", value: cursor), URLQueryItem(name: "wait", value: String(Int(wait)))],
                    timeout: wait + 20)
            } catch {
                if Task.isCancelled { return }
                // No answer, or a token provider that threw (the app's backend offline at launch, say): tried again.
                if error.isTransient {
                    failures += 1
                    if case .tokenProvider = error { logger.info("beckon: pulling actions: \(error); retrying") }
                    try? await Task.sleep(for: configuration.retry.delay(after: failures))
                    continue
                }
                // A token refused twice, or one for another user: the stream reports it and stops until
                // `enterForeground()` or a sign-in.
                logger.error("beckon: pulling actions stopped: \(error)")
                state.withLock { s in
                    // (Not a later id's stream: its own loop runs.)
                    guard s.identity.current == user else { return }
                    s.streamError = error
                    s.puller = nil
                }
                actionSignal.notify()
                return
            }
            if Task.isCancelled { return }
            // (A cursor is a number, as the contract has it: anything else is a bad answer, not one to store.)
            guard answer.status == 200, let json = answer.json, case .array(let actions)? = json["actions"],
                let next = json["cursor"]?.stringValue, !next.isEmpty, next.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 })
            else {
                failures += 1
                logger.info("beckon: pulling actions: the service answered \(answer.status); retrying")
                try? await Task.sleep(for: configuration.retry.wait(after: failures, retryAfter: answer.retryAfter))
                continue
            }
            if actions.isEmpty && ContinuousClock.now - asked < .seconds(1) {
                // An empty page at once (something between the app and the service that does not hold a long
                // poll): no tighter loop than one pull a second.
                try? await Task.sleep(for: .seconds(1))
            }
            if actions.isEmpty && next == cursor {
                failures = 0
                continue
            }
            do {
                let kept = try store.add(actions, cursor: next, for: user)
                if !kept.isEmpty { actionSignal.notify() }
                if kept.contains(where: { BeckonAction.Kind($0).touchesInbox }) { refreshInbox() }
                if kept.isEmpty && next == cursor {
                    // A page of actions already pulled, the cursor where it was: a service repeating itself is asked
                    // again after the backoff, not at once.
                    failures += 1
                    try? await Task.sleep(for: configuration.retry.delay(after: failures))
                } else {
                    failures = 0
                }
            } catch {
                logger.error("beckon: pulled actions could not be saved (\(error)); pulling them again")
                try? await Task.sleep(for: configuration.retry.delay(after: 1))
            }
        }
    }

    func registerLoop(platform: String) async {
        var failures = 0
        while !Task.isCancelled {
            let identity = state.withLock { $0.identity }
            guard let token = identity.pushToken else { return }
            let want = [identity.current, token, String(identity.pushEnabled ?? true)]
            if identity.registered == want { return }
            var body: [String: JSONValue] = [
                "token": .string(token), "platform": .string(platform), "pushEnabled": .bool(identity.pushEnabled ?? true),
            ]
            if let app = configuration.app.namespace { body["app"] = .string(app) }
            let encoded = (try? JSONEncoder.compact.encode(JSONValue.object(body))) ?? Data()
            do {
                let answer = try await transport.user(identity.current, "POST", "/devices", body: encoded)
                if answer.status == 200 {
                    _ = changeIdentity { i in
                        if [i.current, i.pushToken ?? "", String(i.pushEnabled ?? true)] == want { i.registered = want }
                    }
                    continue
                }
                if !Transport.isTransient(answer.status) {
                    logger.error("beckon: the device was not registered: \(answer.status) \(answer.message)")
                    return
                }
                failures += 1
                try? await Task.sleep(for: configuration.retry.wait(after: failures, retryAfter: answer.retryAfter))
            } catch  where error.isTransient {
                failures += 1
                try? await Task.sleep(for: configuration.retry.delay(after: failures))
            } catch {
                logger.error("beckon: the device was not registered: \(error)")
                return
            }
        }
    }
}
