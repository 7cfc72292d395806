import Foundation
import Logging

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client's requests: ingest with the write key, the user endpoints with the user's token from the app's
/// provider (asked once more after a 401), and what an answer says about retrying.
final class Transport: Sendable {
    struct Answer: Sendable {
        let status: Int
        let body: Data
        /// `Retry-After`, in seconds or as an HTTP date.
        let retryAfter: Duration?

        var json: JSONValue? { try? JSONDecoder().decode(JSONValue.self, from: body) }
        var message: String {
            json?["error"]?.stringValue ?? json?["reason"]?.stringValue ?? String(decoding: body.prefix(300), as: UTF8.self)
        }
    }

    let configuration: BeckonClient.Configuration
    private let tokens = Locked([String: String]())

    init(configuration: BeckonClient.Configuration) {
        self.configuration = configuration
    }

    func url(_ path: String, query: [URLQueryItem] = []) -> URL {
        var text = configuration.server.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        var components = URLComponents(string: text + path)!
        if !query.isEmpty { components.queryItems = query }
        return components.url!
    }

    /// `/v1/users/{id}` with the id percent-encoded (an id may hold any character, `/` included).
    func userPath(_ userId: String, _ rest: String = "") -> String {
        "/v1/users/" + Self.pathSegment(userId) + rest
    }

    /// One path segment of any text: percent-encoded, `/` included.
    static func pathSegment(_ text: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/;?#%")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// One request; no answer at all is `.network`. Cancelling the calling task answers `.network("cancelled")` at
    /// once.
    ///
    /// Not `URLSession.data(for:)`, and on Linux no `URLSessionTask.cancel()`: swift-corelibs-foundation has two races
    /// there. Cancelling inside `data(for:)` can deadlock (the task's cancellation handler, under the task's status
    /// lock, waits on the session's queue while that queue, finishing the request, waits for the lock). And `cancel()`
    /// while the answer is arriving can crash the process: it enqueues a failure for a task the session has just
    /// finished and removed ("Trying to access a behaviour for a task that in not in the registry",
    /// swift-corelibs-foundation#3292). So on Linux a cancelled request is abandoned: the caller is answered at once
    /// and the request runs to its end (a long poll's `wait`, at most) with nobody listening. On Apple platforms the
    /// request is cancelled.
    func send(_ request: URLRequest) async throws(BeckonClientError) -> Answer {
        typealias Waiter = CheckedContinuation<Result<Answer, BeckonClientError>, Never>
        let state = Locked<(waiter: Waiter?, task: URLSessionDataTask?, cancelled: Bool)>((nil, nil, false))
        /// The waiter, once: whoever takes it (the answer or the cancellation) resumes it.
        let take: @Sendable () -> Waiter? = {
            state.withLock { s -> Waiter? in
                defer { s.waiter = nil }
                return s.waiter
            }
        }
        let result: Result<Answer, BeckonClientError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: Waiter) in
                let task = configuration.session.dataTask(with: request) { data, response, error in
                    guard let waiter = take() else { return }
                    guard let http = response as? HTTPURLResponse, error == nil else {
                        waiter.resume(
                            returning: .failure(.network(error.map { String(describing: $0) } ?? "not an HTTP answer")))
                        return
                    }
                    waiter.resume(
                        returning: .success(
                            Answer(
                                status: http.statusCode, body: data ?? Data(),
                                retryAfter: http.value(forHTTPHeaderField: "Retry-After").flatMap(Self.retryAfter))))
                }
                // (Redirects are refused: the 3xx is the answer. A request carries its credential, the write key or
                // the user's token, and on Linux a followed redirect would carry it to the other host, over plain
                // HTTP too.)
                task.delegate = RefusesRedirects.shared
                let cancelled = state.withLock { s -> Bool in
                    if !s.cancelled {
                        s.waiter = waiter
                        s.task = task
                    }
                    return s.cancelled
                }
                if cancelled {
                    waiter.resume(returning: .failure(.network("cancelled")))
                } else {
                    task.resume()
                }
            }
        } onCancel: {
            let (waiter, task) = state.withLock { s -> (Waiter?, URLSessionDataTask?) in
                s.cancelled = true
                defer { s.waiter = nil }
                return (s.waiter, s.task)
            }
            waiter?.resume(returning: .failure(.network("cancelled")))
            #if canImport(FoundationNetworking)
                _ = task
            #else
                // Off the cancellation handler: it runs under the task's status lock.
                if let task { DispatchQueue.global().async { task.cancel() } }
            #endif
        }
        return try result.get()
    }

    /// A batch to ingest (`POST /v1/batch`), gzipped when the configuration says so.
    func ingest(_ body: Data) async throws(BeckonClientError) -> Answer {
        var request = URLRequest(url: url("/v1/batch"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let credential = Data((configuration.writeKey + ":").utf8).base64EncodedString()
        request.setValue("Basic \(credential)", forHTTPHeaderField: "Authorization")
        if configuration.gzip, let compressed = Gzip.compress(body) {
            request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
            request.httpBody = compressed
        } else {
            request.httpBody = body
        }
        return try await send(request)
    }

    /// A request to the user's endpoints with their token. A 401 asks the provider for a new token once and sends
    /// again; a second 401 is `.unauthorized`, a 403 `.forbidden`. Other answers are the caller's.
    func user(
        _ userId: String, _ method: String, _ rest: String, query: [URLQueryItem] = [], body: Data? = nil,
        timeout: TimeInterval = 60
    ) async throws(BeckonClientError) -> Answer {
        var renewed = false
        while true {
            let token = try await token(for: userId, renew: renewed)
            var request = URLRequest(url: url(userPath(userId, rest), query: query), timeoutInterval: timeout)
            request.httpMethod = method
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            if let body {
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                request.httpBody = body
            }
            let answer = try await send(request)
            switch answer.status {
            case 401 where !renewed:
                configuration.logger.info("beckon: the user's token was refused (401); asking the app for a new one")
                renewed = true
            // (A refused token is not kept: the next request, after `enterForeground()` or a sign-in, asks anew.)
            case 401:
                forget(userId)
                throw .unauthorized(answer.message)
            case 403:
                forget(userId)
                throw .forbidden(answer.message)
            default: return answer
            }
        }
    }

    private func forget(_ userId: String) { tokens.withLock { _ = $0.removeValue(forKey: userId) } }

    private func token(for userId: String, renew: Bool) async throws(BeckonClientError) -> String {
        if !renew, let known = tokens.withLock({ $0[userId] }) { return known }
        let fresh: String
        do {
            fresh = try await configuration.tokenProvider(userId)
        } catch {
            throw .tokenProvider(String(describing: error))
        }
        tokens.withLock { $0 = [userId: fresh] }
        return fresh
    }

    /// `Retry-After`: seconds, or an HTTP date (RFC 9110); at most an hour is honoured.
    static func retryAfter(_ value: String) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Double(text), seconds.isFinite, seconds >= 0 { return .seconds(min(seconds, 3600)) }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = f.date(from: text) else { return nil }
        return .seconds(min(max(date.timeIntervalSinceNow, 0), 3600))
    }

    /// Whether a failed answer is worth sending again later: 5xx, 429 and 408.
    static func isTransient(_ status: Int) -> Bool {
        status >= 500 || status == 429 || status == 408
    }
}

/// A task's delegate that follows no redirect (``Transport/send(_:)``).
final class RefusesRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    static let shared = RefusesRedirects()

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
