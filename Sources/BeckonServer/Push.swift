import AsyncHTTPClient
import BeckonCore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// A push provider Beckon sends through itself (docs/push.md): APNs (``APNsSender``) or FCM (``FCMSender``). The
/// deliverer fans a push out to the user's devices of the provider's platform and reads each device's outcome.
package protocol PushProvider: Sendable {
    /// The provider's name in errors ("APNs").
    var name: String { get }
    /// The devices it reaches.
    var platform: Device.Platform { get }
    /// Sends `push` to one device.
    func send(_ push: PushMessage, to token: String, destination: Destination, client: HTTPClient) async -> PushOutcome
}

/// What a provider said of one device.
package enum PushOutcome: Equatable, Sendable {
    case accepted
    /// The token is no longer valid: removed from the user, never sent to again.
    case invalidToken(String)
    /// Worth trying again (429, 5xx, a connection error), no sooner than `after` ms.
    case retry(String, after: Int64?)
    /// Refused for good for another reason (the payload, the credentials).
    case refused(String)
}

/// A fired `push` action as the providers send it, read from its stored JSON.
package struct PushMessage: Sendable, Decodable {
    package var id: String
    package var campaign: String?
    package var ruleset: String?
    package var rule: String?
    /// The rule that fired it, `unit/rule` (as `beckon_actions_total` names it).
    package var qualifiedRule: String { (campaign ?? ruleset ?? "") + "/" + (rule ?? "") }
    package var push: Content
    package struct Content: Sendable, Decodable {
        package var title: String?
        package var body: String
        package var deep_link: String?
        package var image: String?
        package var data: AnyJSON?
        /// The one device to send to, when the action names it.
        package var to: String?
    }

    /// The push of an action's stored JSON, `nil` when it is not a push.
    package init?(actionJSON: String) {
        guard let m = try? JSONDecoder().decode(PushMessage.self, from: Data(actionJSON.utf8)) else { return nil }
        self = m
    }
}

/// A credential made or fetched once and shared: while it is valid every caller gets it; when it is missing, expired
/// or refused, one caller makes a new one and the others wait for that one (a provider throttles or refuses tokens
/// made too often: a burst of pushes must not make one each).
package final class SharedCredential: Sendable {
    private struct State {
        var value: (token: String, until: ContinuousClock.Instant)?
        var making: Task<(token: String, until: ContinuousClock.Instant), any Error>?
    }
    private let state = Mutex(State())

    package init() {}

    /// The credential to send; `refused`: the one the provider refused (a new one is made unless another caller has
    /// made one since). `make` gives a new credential and until when it may be used.
    package func value(
        refused: String? = nil,
        make: @escaping @Sendable () async throws -> (token: String, until: ContinuousClock.Instant)
    ) async throws -> String {
        enum Step {
            case have(String)
            case wait(Task<(token: String, until: ContinuousClock.Instant), any Error>)
        }
        let step: Step = state.withLock { s in
            if let v = s.value, ContinuousClock.now < v.until, v.token != refused { return .have(v.token) }
            if let m = s.making { return .wait(m) }
            let m = Task { try await make() }
            s.making = m
            return .wait(m)
        }
        switch step {
        case .have(let token): return token
        case .wait(let task):
            do {
                let made = try await task.value
                state.withLock { s in
                    if s.value?.token != made.token { s.value = made }
                    s.making = nil
                }
                return made.token
            } catch {
                state.withLock { $0.making = nil }
                throw error
            }
        }
    }
}

extension SharedCredential {
    /// One request with the shared credential; when the provider answers that the credential itself was refused
    /// (`isRefusal`: APNs' 403 `ExpiredProviderToken`, FCM's 401), one more with a new one. A connection error is a
    /// retry. `make` makes a new credential; `send` sends with one.
    package func sending(
        make: @escaping @Sendable () async throws -> (token: String, until: ContinuousClock.Instant),
        isRefusal: (PushOutcome) -> Bool, refusedAgain: String,
        _ send: (String) async throws -> PushOutcome
    ) async -> PushOutcome {
        var refused: String?
        for _ in 0..<2 {
            let credential: String
            let outcome: PushOutcome
            do {
                credential = try await value(refused: refused, make: make)
                outcome = try await send(credential)
            } catch {
                return .retry(Deliverer.describe(error), after: nil)
            }
            guard isRefusal(outcome), refused == nil else { return outcome }
            refused = credential
        }
        return .refused(refusedAgain)
    }
}

/// A push or email destination's credentials (a key, a service account, a body template, a `ca_file`) that cannot
/// be used.
package struct CredentialError: Error, CustomStringConvertible {
    package var description: String

    /// TLS trusting only the certificates in `caFile` (a private or test host), for a destination's `ca_file`.
    package static func trusting(_ caFile: String) throws -> TLSConfiguration {
        var c = TLSConfiguration.makeClientConfiguration()
        do { c.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile)) } catch {
            throw CredentialError(description: "\(caFile) holds no certificate: \(error)")
        }
        return c
    }
}

/// A destination's send rate (`rate: 500/s`): a token bucket holding a second's worth of requests at most (at least
/// one), filled at the rate. A request takes a token, waiting for one when the bucket is empty.
package final class SendRate: Sendable {
    let perSecond: Double
    let capacity: Double
    private let state: Mutex<(tokens: Double, at: ContinuousClock.Instant)>

    package init(perSecond: Double, now: ContinuousClock.Instant = .now) {
        self.perSecond = perSecond
        capacity = max(1, perSecond)
        state = Mutex((capacity, now))
    }

    /// Takes a token at `now`: returns how long to wait before sending (zero when one was in the bucket). The token
    /// is spoken for either way, so waiters are served in turn.
    package func take(now: ContinuousClock.Instant = .now) -> Duration {
        state.withLock { s in
            let elapsed = now - s.at
            s.tokens = min(capacity, s.tokens + max(0, elapsed.inSeconds) * perSecond)
            s.at = now
            s.tokens -= 1
            guard s.tokens < 0 else { return .zero }
            return .milliseconds(Int64((-s.tokens / perSecond * 1000).rounded(.up)))
        }
    }

    /// How many requests could start within `horizon` of `now`: the tokens in the bucket (less those spoken for) and
    /// what it gains meanwhile, without taking any. The delivery loop takes no more of a destination's entries than
    /// this (``Deliverer``), so that none it takes waits long for its turn.
    package func room(within horizon: Duration, now: ContinuousClock.Instant = .now) -> Int {
        state.withLock { s in
            let tokens = min(capacity, s.tokens + max(0, (now - s.at).inSeconds) * perSecond)
            return max(0, Int((tokens + horizon.inSeconds * perSecond).rounded(.down)))
        }
    }

    /// Waits for a token.
    package func acquire() async {
        let wait = take()
        if wait > .zero { try? await Task.sleep(for: wait) }
    }
}

/// A receiver's answer, read whole: its status, its head's fields, and its body when it is at most the limit asked
/// for, else none (its status still says what became of the request: a provider's 200 with a huge body is an
/// accepted push, not a failed read to send again).
package struct Answer: Sendable {
    package var status: HTTPResponseStatus
    package var headers: HTTPHeaders
    package var body: [UInt8]
}

extension HTTPClient {
    /// Sends `request` and reads its answer, head and body, within `timeout` all told: every attempt of every
    /// destination, provider and token endpoint goes through here. (async-http-client's own deadline ends when the
    /// head comes: a receiver that sent a head, then its body a byte a second or not at all, held the attempt, its
    /// slot, a forget waiting for the user's deliveries, and a fleet's claim that lapsed and was taken again, for ever.)
    func exchange(
        _ request: HTTPClientRequest, timeout: TimeAmount, bodyUpTo limit: Int, logger: Logger? = nil
    ) async throws -> Answer {
        try await withThrowingTaskGroup(of: Answer?.self) { group in
            group.addTask {
                let response = try await self.execute(request, timeout: timeout, logger: logger)
                let body = (try? await response.body.collect(upTo: limit)).map { Array($0.readableBytesView) } ?? []
                return Answer(status: response.status, headers: response.headers, body: body)
            }
            group.addTask {
                try await _Concurrency.Task.sleep(nanoseconds: UInt64(max(0, timeout.nanoseconds)))
                return nil
            }
            defer { group.cancelAll() }
            guard case let answer?? = try await group.next() else { throw HTTPClientError.deadlineExceeded }
            return answer
        }
    }
}
