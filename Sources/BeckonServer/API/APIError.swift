import BeckonCore
import HTTPTypes
import Hummingbird

/// A refusal of the HTTP API: its status, its ``ProblemBody`` and headers (`WWW-Authenticate`, `Retry-After`).
/// Routes and middleware throw it; Hummingbird turns it into the response.
struct APIError: HTTPResponseError, Sendable {
    var status: HTTPResponse.Status
    var body: ProblemBody
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        body = ProblemBody(error: message)
        self.headers = headers
    }

    /// A bad ingest body: the event's place in the batch and the column, when one event is at fault.
    init(_ problem: SegmentRequest.Problem) {
        status = .badRequest
        body = ProblemBody(error: problem.message, event: problem.event, column: problem.column)
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try context.responseEncoder.encode(body, from: request, context: context)
        response.status = status
        for field in headers { response.headers[field.name] = field.value }
        return response
    }

    // The refusals more than one route gives.

    static let needsWriteKey = APIError(
        .unauthorized, "a write key is needed (HTTP Basic, the key as user name)",
        headers: [.wwwAuthenticate: "Basic realm=\"beckon\""])
    static let needsAdminKey = APIError(
        .unauthorized, "an admin key is needed (Authorization: Bearer KEY)", headers: [.wwwAuthenticate: "Bearer"])
    static let needsUserToken = APIError(
        .unauthorized, "a valid user token is needed (Authorization: Bearer JWT)", headers: [.wwwAuthenticate: "Bearer"])
    static let noUserSecret = APIError(.unauthorized, "no user secret is configured (--user-secret)")
    static let otherUser = APIError(.forbidden, "the token is for another user")
    static let unexpected = APIError(.internalServerError, "unexpected result")
    /// A whole-log read (export, forget) while the heavy-work slots are taken (docs/reference/limits.md).
    static let busy = APIError(
        .serviceUnavailable, "busy: other reads of the whole input log are under way; ask again",
        headers: [.retryAfter: "1"])
    static func unavailable(_ message: String) -> APIError { APIError(.serviceUnavailable, message) }
}
