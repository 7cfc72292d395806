import BeckonCore
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The bounds of the service's connections (docs/operations.md, "Connections"): how long a request's head and body
/// may take to arrive, how long a kept-alive connection may sit idle, and how many connections may be open at once.
/// A connection past a time bound is closed; at the cap, the connection that has waited longest for a request's head
/// makes room for a new one, so that silent or half-sent connections can never take the service's descriptors.
public struct ConnectionLimits: Sendable {
    /// From a connection's opening, or from the first byte of a request after a response, to the end of its head.
    public var headTimeout: Duration = .milliseconds(Int64(ServiceLimits.headTimeoutSeconds * 1000))
    /// From the end of a request's head to the end of its body.
    public var bodyTimeout: Duration = .milliseconds(Int64(ServiceLimits.bodyTimeoutSeconds * 1000))
    /// How long a kept-alive connection may wait, after a response, for the first byte of another request: longer than
    /// the idle timeout of the load balancers in front (60 s for AWS's and Google's), so that they close first.
    public var keepAliveTimeout: Duration = .milliseconds(Int64(ServiceLimits.keepAliveTimeoutSeconds * 1000))
    /// The most connections open at once; `nil`: the descriptor limit less ``reservedDescriptors``.
    public var maxConnections: Int?
    /// Bytes of request bodies all connections may hold at once (``ServiceLimits/bodyMemoryBytes``).
    public var maxBodyBytes = ServiceLimits.bodyMemoryBytes
    /// Descriptors kept for everything but the clients' connections: the database, destinations, threads, logs.
    public static let reservedDescriptors = ServiceLimits.reservedDescriptors
    /// The least cap there is, whatever the descriptor limit.
    public static let minConnections = ServiceLimits.minConnections

    public init() {}

    /// The cap in force: the one given, or the descriptor limit (raised to the hard limit at start) less the reserve,
    /// at most ``ServiceLimits/maxDefaultConnections``.
    public func cap(descriptorLimit: Int) -> Int {
        maxConnections
            ?? max(Self.minConnections, min(ServiceLimits.maxDefaultConnections, descriptorLimit - Self.reservedDescriptors))
    }

    /// Raises the process's soft descriptor limit to its hard limit and returns the limit in force.
    public static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }
}

/// The open connections of one server, in the order they began to wait for a request's head: the one to close when
/// the cap is reached. Shared by every connection's ``ConnectionGuard``.
package final class ConnectionTable: Sendable {
    package struct Entry {
        var close: @Sendable () -> Void
        /// When the connection began to wait for a head (`nil`: a request is being read or answered).
        var waitingSince: UInt64?
        /// Between a request's head and the end of its body.
        var reading = false
    }
    private struct State {
        var entries: [UInt64: Entry] = [:]
        var next: UInt64 = 0
        var order: UInt64 = 0
    }
    private let state = Mutex(State())
    package let cap: Int
    package let logger: Logger
    /// Bytes of request bodies the connections hold (``hold(_:)``), and the most they may.
    private let bodyBytes = Atomic<Int>(0)
    package let maxBodyBytes: Int

    package init(cap: Int, maxBodyBytes: Int = ServiceLimits.bodyMemoryBytes, logger: Logger) {
        self.cap = cap
        self.maxBodyBytes = maxBodyBytes
        self.logger = logger
    }

    /// Counts `n` more bytes of a request body held; `false` (nothing counted) when that would pass ``maxBodyBytes``.
    package func hold(_ n: Int) -> Bool {
        let total = bodyBytes.add(n, ordering: .relaxed).newValue
        guard total > maxBodyBytes else { return true }
        bodyBytes.subtract(n, ordering: .relaxed)
        return false
    }

    /// Bytes of bodies no longer held (their requests answered, or their connection closed).
    package func release(_ n: Int) {
        if n > 0 { bodyBytes.subtract(n, ordering: .relaxed) }
    }

    package var count: Int { state.withLock { $0.entries.count } }

    /// Registers a new connection; returns its id, or `nil` when it must be closed at once (the table is full of
    /// connections that are all reading or answering a request). At the cap, the connection waiting longest for a head
    /// is closed to make room.
    package func open(close: @escaping @Sendable () -> Void) -> UInt64? {
        let (id, evicted): (UInt64?, (@Sendable () -> Void)?) = state.withLock { s in
            var evicted: (@Sendable () -> Void)?
            if s.entries.count >= cap {
                // (A pass over at most the cap's entries, without copying them: only at the cap.)
                var oldest: (key: UInt64, since: UInt64)?
                for (key, entry) in s.entries {
                    if let since = entry.waitingSince, since < oldest?.since ?? .max { oldest = (key, since) }
                }
                guard let oldest else { return (nil, nil) }
                evicted = s.entries.removeValue(forKey: oldest.key)?.close
            }
            s.next += 1
            s.order += 1
            s.entries[s.next] = Entry(close: close, waitingSince: s.order)
            return (s.next, evicted)
        }
        if let evicted {
            evicted()
            logger.debug("connection cap reached: closed the connection waiting longest for a request")
        }
        if id == nil { logger.notice("connection cap reached and every connection busy: a new one was closed") }
        return id
    }

    package func waiting(_ id: UInt64, _ isWaiting: Bool) {
        state.withLock { s in
            guard s.entries[id] != nil else { return }
            if isWaiting {
                s.order += 1
                s.entries[id]!.waitingSince = s.order
            } else {
                s.entries[id]!.waitingSince = nil
            }
        }
    }

    package func closed(_ id: UInt64) { _ = state.withLock { $0.entries.removeValue(forKey: id) } }

    package func reading(_ id: UInt64, _ isReading: Bool) {
        state.withLock { s in if s.entries[id] != nil { s.entries[id]!.reading = isReading } }
    }

    /// Closes the connections still sending a request's body (a stop: their requests were not taken, and the client
    /// sends them again; a body withheld would otherwise hold the stop for the body timeout). Returns how many.
    @discardableResult
    package func closeReading() -> Int {
        let closing = state.withLock { s in s.entries.values.filter(\.reading).map(\.close) }
        for close in closing { close() }
        return closing.count
    }
}

/// At a graceful stop, before the HTTP server's own (it is listed after the server: services stop in reverse order),
/// closes the connections that are still sending a request's body, so that the server's wait for what is in flight is
/// a wait for answers, not for clients. One service for either store.
package struct ConnectionDrain: Service {
    package let table: ConnectionTable
    package init(table: ConnectionTable) { self.table = table }
    package func run() async throws {
        try? await gracefulShutdown()
        let n = table.closeReading()
        if n > 0 { table.logger.info("stopping: closed connections still sending a request", metadata: ["connections": "\(n)"]) }
    }
}

/// Enforces ``ConnectionLimits`` on one HTTP/1 connection: it sits after the HTTP decoder (it sees request and response
/// parts) and puts a small handler first in the pipeline to see a next request's first byte.
///
/// A connection owes responses for the heads it sent (`unanswered`) and may be reading a request (between a head and
/// its end). Reading a request is bound by the body timeout from its head; owing nothing and reading nothing, it is
/// idle (the keep-alive timeout) until a byte comes, then reading a head (the head timeout). Owing nothing, it may be
/// closed for a new connection at the cap (a response sent before its request's body ended included: the rest is only
/// drained). Answering is bound by the service (a long poll waits 30 s at most), and a response its client does not
/// read for the body timeout closes the connection.
///
/// Requests are let through one at a time: the next request's head goes on only once the one before is answered and
/// the socket can take more (pipelined requests are answered in order anyway). Parts read ahead of their turn wait
/// here, and the socket is not read while any wait, so a client that sends requests and reads no answer holds at most
/// one read of requests and one answer beyond the socket's buffer, until the stalled answer closes it.
///
/// A request that says `Connection: close` (``KeepAlive`` says it for one that does not keep alive), or an answer that
/// does, ends the connection: the answer says so and the connection is closed once it has been written.
///
/// A body counts against the bytes all connections may hold (``ConnectionTable/hold(_:)``) until its request is
/// answered: what comes after the answer (a body over its route's bound, or one its route never reads) is only drained
/// and held nowhere.
package final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    package let limits: ConnectionLimits
    package let table: ConnectionTable
    private var id: UInt64?
    private var timer: Scheduled<Void>?
    /// Armed while the socket cannot take the response (the client reads nothing).
    private var stalled: Scheduled<Void>?
    /// Heads read whose response has not ended (pipelined requests are answered in order).
    private var unanswered = 0
    /// Between a request's head and its end.
    private var readingRequest = false
    /// Owing nothing, reading nothing, and no byte of another request yet.
    private var idle = false
    /// A byte arrived while a response was owed: the next request's head has begun.
    private var headBegun = false
    /// Bytes of request bodies read on this connection and counted in the table, until it owes nothing.
    private var held = 0
    /// A response's head went out and its end has not.
    private var responding = false
    /// The request being read was answered before its end: the rest of its body is drained, not held.
    private var answeredEarly = false
    /// Parts read and not yet let through (every part passes here; a pipelined request waits while one is owed, or
    /// while the socket takes no more), in order; the socket is not read while any wait here.
    private var waiting = CircularBuffer<HTTPRequestPart>()
    /// A read was asked for while parts waited: it is passed on once they have gone.
    private var readHeld = false
    /// A pass over ``waiting`` is scheduled.
    private var passScheduled = false
    /// The request being answered, or its answer, says `Connection: close`: the connection ends with the answer.
    private var closeAfterAnswer = false

    package init(limits: ConnectionLimits, table: ConnectionTable) {
        self.limits = limits
        self.table = table
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        try? context.pipeline.syncOperations.addHandler(FirstByte(guard: self), position: .first)
        if let codec = try? context.pipeline.syncOperations.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? context.pipeline.syncOperations.addHandler(KeepAlive(), position: .before(codec))
        }
        if context.channel.isActive { opened(context) }
    }

    package func channelActive(context: ChannelHandlerContext) {
        if id == nil { opened(context) }
        context.fireChannelActive()
    }

    private func opened(_ context: ChannelHandlerContext) {
        guard id == nil else { return }
        let channel = context.channel
        guard let id = table.open(close: { channel.close(promise: nil) }) else {
            context.close(promise: nil)
            return
        }
        self.id = id
        arm(context, limits.headTimeout)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    package func handlerRemoved(context: ChannelHandlerContext) { release() }

    private func release() {
        timer?.cancel()
        timer = nil
        stalled?.cancel()
        stalled = nil
        if let id { table.closed(id) }
        id = nil
        table.release(held)
        held = 0
        waiting.removeAll()
    }

    /// A byte arrived (seen before the HTTP decoder).
    package func byteArrived(_ context: ChannelHandlerContext) {
        if idle {
            idle = false
            arm(context, limits.headTimeout)
        } else if !readingRequest {
            headBegun = true
        }
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // (Every part joins the line, which goes on at once unless a request must wait its turn.)
        waiting.append(unwrapInboundIn(data))
        takeWaiting(context)
    }

    private func isHead(_ part: HTTPRequestPart) -> Bool {
        if case .head = part { true } else { false }
    }

    /// A new request may go on: nothing is owed, and the socket takes the answer.
    private func mayTakeRequest(_ context: ChannelHandlerContext) -> Bool {
        unanswered == 0 && context.channel.isWritable
    }

    /// Lets through the parts that waited, as far as their turn has come (the one rule of when a request goes on);
    /// then reads again if a read was held.
    private func takeWaiting(_ context: ChannelHandlerContext) {
        while let part = waiting.first {
            if isHead(part) && !mayTakeRequest(context) { break }
            waiting.removeFirst()
            // (Taking a part may close the connection, which drops what waits.)
            take(part, context)
        }
        if waiting.isEmpty && readHeld {
            readHeld = false
            context.read()
        }
    }

    /// After the current event: an answer's end or the socket's writability may let a waiting request through.
    private func scheduleTakeWaiting(_ context: ChannelHandlerContext) {
        guard !waiting.isEmpty, !passScheduled else { return }
        passScheduled = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = loopBound.value
            handler.passScheduled = false
            guard handler.id != nil else { return }
            let before = handler.waiting.count
            handler.takeWaiting(context)
            // (Out of a read, what was passed on must be said complete: the handlers after hand reads on only then,
            // and a pipelined request sat there unanswered, its connection open for good.)
            if handler.waiting.count != before { context.fireChannelReadComplete() }
        }
    }

    package func read(context: ChannelHandlerContext) {
        if waiting.isEmpty {
            context.read()
        } else {
            readHeld = true
        }
    }

    private func take(_ part: HTTPRequestPart, _ context: ChannelHandlerContext) {
        switch part {
        case .head(let request):
            // A client that waits for a 100 Continue before it sends the body (curl does above 1 KB) is told to go on;
            // the request is then read like any other, under the body timeout.
            if request.headerFields[.expect]?.lowercased() == "100-continue" {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            }
            unanswered += 1
            closeAfterAnswer = request.headerFields[.connection] == "close"
            readingRequest = true
            answeredEarly = false
            idle = false
            headBegun = false
            if let id {
                table.waiting(id, false)
                table.reading(id, true)
            }
            arm(context, limits.bodyTimeout)
        case .body(let bytes):
            if !answeredEarly {
                guard table.hold(bytes.readableBytes) else { return refuseBody(context) }
                held += bytes.readableBytes
            }
        case .end:
            readingRequest = false
            if let id { table.reading(id, false) }
            settle(context)
        }
        context.fireChannelRead(wrapInboundOut(part))
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head(var head) = unwrapOutboundIn(data), head.status.kind != .informational {
            responding = true
            // (A request or an answer that ends the connection: the answer says so, and the connection is closed once
            // it has gone, whether or not the client closes its side.)
            if head.headerFields[.connection] == "close" { closeAfterAnswer = true }
            if closeAfterAnswer {
                head.headerFields[.connection] = "close"
                return context.write(wrapOutboundOut(.head(head)), promise: promise)
            }
        }
        var promise = promise
        if case .end = unwrapOutboundIn(data), closeAfterAnswer {
            let channel = context.channel
            let written = promise ?? context.eventLoop.makePromise()
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
            promise = written
        }
        if case .end = unwrapOutboundIn(data) {
            responding = false
            unanswered = max(0, unanswered - 1)
            if !readingRequest {
                settle(context)
            } else if unanswered == 0 {
                // (Answered before its body ended: what is left is drained, under the body timeout, held nowhere, and
                // the connection owes nothing.)
                answeredEarly = true
                table.release(held)
                held = 0
                if let id { table.waiting(id, true) }
            }
        }
        context.write(data, promise: promise)
        if case .end = unwrapOutboundIn(data) { scheduleTakeWaiting(context) }
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stalled?.cancel()
            stalled = nil
            scheduleTakeWaiting(context)
        } else if stalled == nil {
            let channel = context.channel
            stalled = context.eventLoop.scheduleTask(in: TimeAmount(limits.bodyTimeout)) { channel.close(promise: nil) }
        }
        context.fireChannelWritabilityChanged()
    }

    /// The bodies held at once would pass ``ConnectionTable/maxBodyBytes``: the request is answered 503 (unless its
    /// response has begun) and the connection closed, its bytes no longer held. The client sends it again.
    private func refuseBody(_ context: ChannelHandlerContext) {
        if !responding {
            var head = HTTPResponse(status: .serviceUnavailable)
            head.headerFields[.retryAfter] = "1"
            head.headerFields[.connection] = "close"
            head.headerFields[.contentType] = "application/json"
            let body = #"{"success":false,"error":"the service holds as many request bodies as it may; send it again"}"#
            head.headerFields[.contentLength] = "\(body.utf8.count)"
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(ByteBuffer(string: body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        table.logger.debug("request bodies held at their bound: a connection sending one more was closed")
        let channel = context.channel
        context.eventLoop.execute { channel.close(promise: nil) }
        release()
    }

    /// Nothing is being read: idle if nothing is owed (or reading a head whose bytes came while it was), else
    /// answering, which the service bounds.
    private func settle(_ context: ChannelHandlerContext) {
        guard unanswered == 0 else {
            disarm()
            return
        }
        // (Every request read is answered: their bodies are no longer held.)
        table.release(held)
        held = 0
        if let id { table.waiting(id, true) }
        if headBegun {
            headBegun = false
            arm(context, limits.headTimeout)
        } else {
            idle = true
            arm(context, limits.keepAliveTimeout)
        }
    }

    private func arm(_ context: ChannelHandlerContext, _ after: Duration) {
        timer?.cancel()
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: TimeAmount(after)) { channel.close(promise: nil) }
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }

    /// Before the request head becomes HTTP types, which keep no version: a request that does not keep its connection
    /// alive (HTTP/1.0 without `Connection: keep-alive`, or `close` among its `Connection` tokens in any case) is
    /// marked with exactly `Connection: close`, the one form after which the server closes the connection once it has
    /// answered. Without it, an HTTP/1.0 client's connection stayed open for the keep-alive timeout.
    final class KeepAlive: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias InboundOut = HTTPServerRequestPart
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .head(var head) = unwrapInboundIn(data), !Self.keepsAlive(head) else {
                return context.fireChannelRead(data)
            }
            head.headers.replaceOrAdd(name: "connection", value: "close")
            context.fireChannelRead(wrapInboundOut(.head(head)))
        }

        /// `close` among the `Connection` tokens ends it in any version (NIO's `isKeepAlive` looks only for
        /// `keep-alive` in HTTP/1.0); without it, HTTP/1.1 keeps alive, and HTTP/1.0 only with `keep-alive`.
        static func keepsAlive(_ head: HTTPRequestHead) -> Bool {
            let tokens = head.headers[canonicalForm: "connection"].map { $0.lowercased() }
            if tokens.contains("close") { return false }
            return head.version.major > 1 || head.version.minor >= 1 || tokens.contains("keep-alive")
        }
    }

    /// First in the pipeline: tells the guard that bytes arrived, and passes them on.
    final class FirstByte: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        private let owner: ConnectionGuard
        init(guard owner: ConnectionGuard) { self.owner = owner }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            owner.byteArrived(context)
            context.fireChannelRead(data)
        }
    }
}

extension ConnectionLimits {
    /// The table of a server's connections under these limits; raises the descriptor limit to set the cap.
    package func table(logger: Logger) -> ConnectionTable {
        ConnectionTable(cap: cap(descriptorLimit: Self.raiseDescriptorLimit()), maxBodyBytes: maxBodyBytes, logger: logger)
    }

    /// The server's address and listen backlog (``ServiceLimits/listenBacklog``).
    package func configuration(host: String, port: Int) -> ApplicationConfiguration {
        .init(address: .hostname(host, port: port), serverName: "beckon", backlog: ServiceLimits.listenBacklog)
    }

    /// Hummingbird's HTTP/1 server with these limits enforced on every connection (``ConnectionGuard``), counted in
    /// `table`.
    package func server(table: ConnectionTable) -> HTTPServerBuilder {
        .http1(
            configuration: HTTP1Channel.Configuration(additionalChannelHandlers: [ConnectionGuard(limits: self, table: table)]))
    }
}

@available(*, unavailable)
extension ConnectionGuard: Sendable {}
