import BeckonCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// The request context of both services: Hummingbird's, with the client's address (for ``CredentialThrottle``).
package struct BeckonContext: RequestContext, RemoteAddressRequestContext {
    package var coreContext: CoreRequestContextStorage
    package let remoteAddress: SocketAddress?
    /// Who the request proved to be (set by the route group's authentication middleware).
    package var principal: Principal?

    /// Answers' JSON: URLs as they are (no `\/`).
    package var responseEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// Failed credentials per client address (docs/operations.md, "Connections and clients"): each address may fail
/// ``burst`` times at once, then one more each ``refillSeconds``. Beyond that every request of the address that
/// carries a credential (an `Authorization` header, a console sign-in) is answered 429 with `Retry-After`, before its
/// credential is looked at. Once an address has failed, each of its requests takes its allowance ahead and gives it
/// back if the credential is good, so that concurrent guesses cannot pass before they are counted: guessing costs a
/// second a guess whatever the concurrency (past a first burst from an address that never failed, whose requests are
/// counted as they fail). A correct key is never delayed; it is refused only from an address over its allowance. At most ``maxAddresses`` addresses
/// are tracked; past that the ones that have had time to refill are dropped, then the oldest.
package final class CredentialThrottle: Sendable {
    package static let burst = Double(ServiceLimits.credentialBurst)
    package static let refillSeconds = ServiceLimits.credentialRefillSeconds
    package static let maxAddresses = ServiceLimits.maxThrottledAddresses

    private struct Bucket {
        var tokens: Double
        var at: ContinuousClock.Instant
    }
    private let buckets = Mutex<[String: Bucket]>([:])

    /// Whether a request carrying a credential from `address` may be looked at.
    package enum Admission: Equatable {
        /// The address has not failed lately: its failure, if it is one, is counted when it happens.
        case free
        /// The address has failed lately: one failure of its allowance is taken now (so that concurrent guesses
        /// cannot all pass before the first is counted) and given back if the credential is good.
        case taken
        /// Over its allowance: try again in this many seconds.
        case refused(Int)
    }

    package func admit(_ address: String, now: ContinuousClock.Instant = .now) -> Admission {
        buckets.withLock { b in
            guard let bucket = b[address] else { return .free }
            let tokens = Self.refilled(bucket, now)
            // (Refused until a whole failure has been refilled.)
            guard tokens >= 1 else { return .refused(max(1, Int(((1 - tokens) * Self.refillSeconds).rounded(.up)))) }
            b[address] = Bucket(tokens: tokens - 1, at: now)
            return .taken
        }
    }

    /// What became of an admitted request: a failed credential is counted (a `taken` one was already), a good one
    /// gives back what was taken.
    package func settle(_ address: String, _ admission: Admission, failed: Bool, now: ContinuousClock.Instant = .now) {
        switch (admission, failed) {
        case (.free, true): self.failed(address, now: now)
        case (.taken, false):
            buckets.withLock { b in
                guard let bucket = b[address] else { return }
                b[address] = Bucket(tokens: min(Self.burst, Self.refilled(bucket, now) + 1), at: now)
            }
        default: break
        }
    }

    /// Notes a failed credential from `address`.
    package func failed(_ address: String, now: ContinuousClock.Instant = .now) {
        buckets.withLock { b in
            if b[address] == nil && b.count >= Self.maxAddresses {
                b = b.filter { Self.refilled($0.value, now) < Self.burst }
                if b.count >= Self.maxAddresses, let oldest = b.min(by: { $0.value.at < $1.value.at }) {
                    b[oldest.key] = nil
                }
            }
            let tokens = b[address].map { Self.refilled($0, now) } ?? Self.burst
            b[address] = Bucket(tokens: max(0, tokens - 1), at: now)
        }
    }

    private static func refilled(_ bucket: Bucket, _ now: ContinuousClock.Instant) -> Double {
        let elapsed = now - bucket.at
        return min(burst, bucket.tokens + elapsed.inSeconds / refillSeconds)
    }
}

/// Applies a ``CredentialThrottle``: a request carrying a credential from an address over its allowance is answered
/// 429; a 401 answer to one that carried a credential counts as a failure of its address. Refusals are logged with the
/// address and the route, never the credential.
package struct CredentialThrottleMiddleware: RouterMiddleware {
    package typealias Context = BeckonContext
    package let throttle: CredentialThrottle
    package let logger: Logger

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws
        -> Response
    {
        let carries =
            request.headers[.authorization] != nil || (request.method == .post && request.uri.path == "/console/login")
        guard carries, let address = context.remoteAddress?.ipAddress else { return try await next(request, context) }
        let admission = throttle.admit(address)
        if case .refused(let wait) = admission {
            logger.notice("credentials refused: too many failures from the address", metadata: ["address": "\(address)"])
            throw APIError(
                .tooManyRequests, "too many failed credentials from this address; try again later",
                headers: [.retryAfter: String(wait)])
        }
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            let refused = (error as? any HTTPResponseError)?.status == .unauthorized
            throttle.settle(address, admission, failed: refused)
            if refused { refusedLog(request, context, address) }
            throw error
        }
        throttle.settle(address, admission, failed: response.status == .unauthorized)
        if response.status == .unauthorized { refusedLog(request, context, address) }
        return response
    }

    private func refusedLog(_ request: Request, _ context: Context, _ address: String) {
        logger.notice(
            "credential refused", metadata: ["address": "\(address)", "route": "\(context.endpointPath ?? request.uri.path)"])
    }
}
