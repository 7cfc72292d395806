import Foundation
import Logging

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension BeckonClient {
    /// What an app gives the client. Only `server`, `writeKey`, `directory` and `tokenProvider` have no default.
    public struct Configuration: Sendable {
        /// `beckon serve`'s address, e.g. `https://beckon.example.com`.
        public var server: URL
        /// The write key ingest takes (HTTP Basic, as Segment's SDKs send it).
        public var writeKey: String
        /// Where the client keeps its queue, identity and action cursors (docs/client.md lists what and how big).
        /// An app passes a folder in Application Support; it is created if missing.
        public var directory: URL
        /// Mints the user's token for the user endpoints (actions, inbox, devices): the app asks its backend for a
        /// JWT whose `sub` is the id given. Called when the client has none for that id, and once more after a 401.
        public var tokenProvider: @Sendable (_ userId: String) async throws -> String

        /// A batch is sent once this many events are queued (Segment's `flushAt`)...
        public var flushAt = 20
        /// ... or this long after the first of them was queued (Segment's `flushInterval`).
        public var flushInterval: Duration = .seconds(30)
        /// At most this many events wait on disk; beyond it the oldest batch is dropped, and the drop logged.
        public var maxQueuedEvents = 10_000
        /// Gzip request bodies of batches (`Content-Encoding: gzip`).
        public var gzip = true
        /// Waits between retries of a failed send or pull: doubling from `first` up to `max`, with jitter; a
        /// `Retry-After` the server gives replaces it.
        public var retry = Retry()
        /// How long one pull waits for a new action (the long poll's `wait`; the service takes at most 30 s).
        public var pollWait: Duration = .seconds(25)
        /// While this many pulled actions wait for the app, the client stops pulling (looked at before each pull; a
        /// pull brings a page of at most 500, so up to this + 499 may wait; none is dropped).
        public var maxPendingActions = 1_000
        /// What `context.app` says: by default the main bundle's name, version, build and identifier.
        public var app = AppInfo.main
        /// The platform devices are registered as (`ios` or `android`, what the service sends pushes to); nil
        /// registers none. iOS by default on Apple's platforms.
        public var pushPlatform: String? = AppInfo.defaultPushPlatform
        /// Where the client logs dropped events, retries and refused tokens.
        public var logger = Logger(label: "beckon.client")
        /// How requests are made; the default has no cache and no cookies.
        public var session: URLSession = .beckonDefault

        public init(
            server: URL, writeKey: String, directory: URL,
            tokenProvider: @escaping @Sendable (_ userId: String) async throws -> String
        ) {
            self.server = server
            self.writeKey = writeKey
            self.directory = directory
            self.tokenProvider = tokenProvider
        }
    }

    /// Waits between retries.
    public struct Retry: Sendable {
        public var first: Duration = .seconds(1)
        public var max: Duration = .seconds(300)
        public init(first: Duration = .seconds(1), max: Duration = .seconds(300)) {
            self.first = first
            self.max = max
        }

        /// The wait before attempt `failures + 1` (failures ≥ 1): `first` doubled per failure up to `max`, then
        /// between half and all of it, so a fleet of apps coming back online does not retry in step.
        func delay(after failures: Int) -> Duration {
            let base = first * (1 << Swift.min(Swift.max(failures - 1, 0), 20))
            let capped = Swift.min(base, max)
            return capped * Double.random(in: 0.5...1.0)
        }

        /// The wait after a failed answer: its `Retry-After` when that is longer than the backoff, else the backoff
        /// (a `Retry-After: 0`, or a date already past, must not make every app retry at once and in a loop).
        func wait(after failures: Int, retryAfter: Duration?) -> Duration {
            Swift.max(retryAfter ?? .zero, delay(after: failures))
        }
    }

    /// `context.app` of every event.
    public struct AppInfo: Sendable {
        public var name: String?
        public var version: String?
        public var build: String?
        public var namespace: String?
        public init(name: String? = nil, version: String? = nil, build: String? = nil, namespace: String? = nil) {
            self.name = name
            self.version = version
            self.build = build
            self.namespace = namespace
        }

        public static var main: AppInfo {
            let info = Bundle.main.infoDictionary ?? [:]
            return AppInfo(
                name: info["CFBundleDisplayName"] as? String ?? info["CFBundleName"] as? String,
                version: info["CFBundleShortVersionString"] as? String,
                build: info["CFBundleVersion"] as? String,
                namespace: Bundle.main.bundleIdentifier
            )
        }

        static var defaultPushPlatform: String? {
            #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS) || os(macOS)
                "ios"
            #else
                nil
            #endif
        }
    }
}

extension URLSession {
    /// No cache, no cookies, no credential store: every request carries its own credential.
    public static var beckonDefault: URLSession {
        let c = URLSessionConfiguration.ephemeral
        c.requestCachePolicy = .reloadIgnoringLocalCacheData
        c.httpShouldSetCookies = false
        c.timeoutIntervalForRequest = 60
        // (A whole request, a long poll's wait included, ends within 5 minutes: an answer dripped a byte at a time
        // does not hold the uploader for the default 7 days.)
        c.timeoutIntervalForResource = 300
        return URLSession(configuration: c)
    }
}

/// What the client reports: from the action stream, the inbox and device calls.
public enum BeckonClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The user's token was refused twice: once, then again after the provider gave a new one (forged, or minted for
    /// the wrong secret). The stream stops; `enterForeground()` or a sign-in starts it again.
    case unauthorized(String)
    /// The token is for another user than the one asked for (403). The stream stops.
    case forbidden(String)
    /// The token provider threw (the stream and device registration retry it; inbox calls report it).
    case tokenProvider(String)
    /// The service answered something the client cannot use.
    case server(status: Int, message: String)
    /// No answer (offline, timed out); calls other than the stream report it, the stream retries.
    case network(String)

    public var description: String {
        switch self {
        case .unauthorized(let m): "the user's token was refused: \(m)"
        case .forbidden(let m): "the token is for another user: \(m)"
        case .tokenProvider(let m): "the token provider failed: \(m)"
        case .server(let status, let m): "the service answered \(status): \(m)"
        case .network(let m): "no answer from the service: \(m)"
        }
    }

    /// Worth trying again later: no answer, or a token provider that threw (the app's backend may be offline too).
    var isTransient: Bool {
        switch self {
        case .network, .tokenProvider: true
        case .unauthorized, .forbidden, .server: false
        }
    }
}
