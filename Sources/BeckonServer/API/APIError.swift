import BeckonCore
import HTTPTypes
import Hummingbird

/// A refusal of the HTTP API: its status, its ``ProblemBody`` and headers (`WWW-Authenticate`, `Retry-After`).
/// Routes and middleware throw it; Hummingbird turns it into the response.
package struct APIError: HTTPResponseError, Sendable {
    package var status: HTTPResponse.Status
    package var body: ProblemBody
    package var headers: HTTPFields = [:]

    package init(_ status: HTTPResponse.Status, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        body = ProblemBody(error: message)
        self.headers = headers
    }

    /// A bad ingest body: the event's place in the batch and the column, when one event is at fault.
    package init(_ problem: SegmentRequest.Problem) {
        status = .badRequest
        body = ProblemBody(error: problem.message, event: problem.event, column: problem.column)
    }

    /// A body not read whole (``API/collect(_:upTo:encoded:)``): 413 past the route's bound, 400 when not framed as
    /// its head says, 415 when it says it is compressed where it is read as it is.
    package init(_ refusal: API.BodyRefusal, limit: Int) {
        switch refusal {
        case .tooLarge: self.init(.contentTooLarge, "the body is over \(limit) bytes")
        case .unframed: self.init(.badRequest, "the request's body could not be read: it is not framed as its head says")
        case .encoded: self.init(.unsupportedMediaType, "Content-Encoding is not taken here: send the body as it is")
        }
    }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try context.responseEncoder.encode(body, from: request, context: context)
        response.status = status
        for field in headers { response.headers[field.name] = field.value }
        return response
    }

    // The refusals more than one route gives.

    package static let needsWriteKey = APIError(
        .unauthorized, "a write key is needed (HTTP Basic, the key as user name)",
        headers: [.wwwAuthenticate: "Basic realm=\"beckon\""])
    package static let needsAdminKey = APIError(
        .unauthorized, "an admin key is needed (Authorization: Bearer KEY)", headers: [.wwwAuthenticate: "Bearer"])
    package static let needsUserToken = APIError(
        .unauthorized, "a valid user token is needed (Authorization: Bearer JWT)", headers: [.wwwAuthenticate: "Bearer"])
    package static let noUserSecret = APIError(.unauthorized, "no user secret is configured (--user-secret)")
    package static let otherUser = APIError(.forbidden, "the token is for another user")
    package static let unexpected = APIError(.internalServerError, "unexpected result")
    /// A whole-log read (export, forget) while the heavy-work slots are taken (docs/reference/limits.md).
    package static let busy = APIError(
        .serviceUnavailable, "busy: other reads of the whole input log are under way; ask again",
        headers: [.retryAfter: "1"])
    package static func unavailable(_ message: String) -> APIError { APIError(.serviceUnavailable, message) }
}
