import BeckonCore
import Hummingbird
import Logging
import Prometheus

/// Who a request proved to be, set by the route group's authentication middleware.
package enum Principal: Sendable, Equatable {
    /// A write key (ingest).
    case writer
    /// An admin key, by its fingerprint (``LoadedRules/fingerprint(_:)``).
    case admin(fingerprint: String)
    /// A user's token, naming this user.
    case user(String)
}

/// Ingest: HTTP Basic with a write key as the user name, as Segment's API (docs/service.md#authentication).
package struct WriteKeyAuthentication: RouterMiddleware {
    package typealias Context = BeckonContext
    package let keys: KeyRing
    package let metrics: ServiceMetrics

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws
        -> Response
    {
        guard keys.allowsBasic(request.headers[.authorization]) else {
            metrics.ingest(.rejected).increment()
            throw APIError.needsWriteKey
        }
        var context = context
        context.principal = .writer
        return try await next(request, context)
    }
}

/// Admin routes: `Authorization: Bearer KEY` with an admin key (write keys and user tokens never are one). Each admin
/// request is logged with its route pattern (never a user id) and the key's fingerprint, never the key.
package struct AdminKeyAuthentication: RouterMiddleware {
    package typealias Context = BeckonContext
    package let keys: KeyRing
    package let logger: Logger

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws
        -> Response
    {
        let what = "\(request.method) \(context.endpointPath ?? "?")"
        guard let key = keys.bearer(request.headers[.authorization]) else {
            logger.notice("admin request refused", metadata: ["request": "\(what)"])
            throw APIError.needsAdminKey
        }
        let fingerprint = LoadedRules.fingerprint(key)
        logger.info("admin request", metadata: ["request": "\(what)", "key": "\(fingerprint)"])
        var context = context
        context.principal = .admin(fingerprint: fingerprint)
        return try await next(request, context)
    }
}

/// A user's routes (`/v1/users/{userId}/…`): a JWT signed with the app's secret whose `sub` is the user in the path,
/// as Braze's SDK authentication. One user's token never reads another's actions.
package struct UserTokenAuthentication: RouterMiddleware {
    package typealias Context = BeckonContext
    package let auth: UserAuth?

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws
        -> Response
    {
        let user = try API.parameter(context, "userId")
        guard let auth else { throw APIError.noUserSecret }
        do {
            try await auth.check(request.headers[.authorization], user: user)
        } catch .otherUser {
            throw APIError.otherUser
        } catch {
            throw APIError.needsUserToken
        }
        var context = context
        context.principal = .user(user)
        return try await next(request, context)
    }
}
