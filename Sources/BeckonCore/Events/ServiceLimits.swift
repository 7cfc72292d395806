/// The bounds of `beckon serve` on its clients and its work, each defined here once (the service enforces them;
/// docs/reference/limits.md lists them with their tests; docs/operations.md explains them).
public enum ServiceLimits {
    /// Bytes of a request's head (its request line and header fields): SwiftNIO's HTTP parser's bound (llhttp's
    /// `HTTP_MAX_HEADER_SIZE`, fixed when it is built), which answers a longer head 400 and closes the connection.
    /// Stated here so that the limits page gives it; the service does not set it.
    public static let maxHeadBytes = 80 * 1024
    /// Seconds a client has to send a request's head, from connecting or from the head's first byte after a response.
    public static let headTimeoutSeconds = 10.0
    /// Seconds a client has to send a request's body once its head is in.
    public static let bodyTimeoutSeconds = 60.0
    /// Seconds a kept-alive connection may wait for the first byte of another request: above the 60 s idle timeout of
    /// AWS's and Google's load balancers, so that they close an idle connection first.
    public static let keepAliveTimeoutSeconds = 75.0
    /// Descriptors kept for everything but clients' connections (the database, destinations, threads, logs): the
    /// default connection cap is the descriptor limit (raised to the hard limit at start) less this.
    public static let reservedDescriptors = 256
    /// The least default connection cap, whatever the descriptor limit, and the most (each connection costs memory
    /// long before a large descriptor limit is reached).
    public static let minConnections = 32
    public static let maxDefaultConnections = 10_000
    /// Connections the kernel may hold for the service before it accepts them (the listen backlog; Linux caps it at
    /// `net.core.somaxconn`, 4096 by default). A burst of connections past it has its handshakes dropped, and each
    /// client dropped waits a second to try again: with 256, a flood of 1,100 silent connections held up a `/readyz`
    /// for a second.
    public static let listenBacklog = 4096
    /// Bytes of request bodies all connections may hold at once (read, and not yet answered): a body that would pass
    /// it is answered 503 and its connection closed, so that slow or withheld bodies on many connections cannot take
    /// the service's memory (one body is at most ``SegmentRequest/maxRequestBytes``).
    public static let bodyMemoryBytes = 128 << 20
    /// Failed credentials an address may send at once, and the seconds after which it may send one more.
    public static let credentialBurst = 10
    public static let credentialRefillSeconds = 1.0
    /// Addresses whose failures are remembered at most (those that have refilled are dropped first, then the oldest).
    public static let maxThrottledAddresses = 10_000
    /// Heavy work at once, each on a thread of its own: privacy exports and forgets (which read the whole input log),
    /// the console's playground runs, timelines and reports. One more gets 503.
    public static let heavyWorkSlots = 2
    /// Users timers may load from the database between two checkpoints of a single service: when a run is due for
    /// more at once (a broadcast's), a round fires this many, writes a checkpoint, and the next lets them go first.
    public static let coldLoadsPerRound = 5_000
    /// Delivery attempts in flight at once, and to one destination at most (each destination gets an equal share of
    /// the first, up to the second).
    public static let maxDeliveriesInFlight = 64
    public static let maxDeliveriesPerDestination = 32
    /// Milliseconds an outbox entry whose attempt's outcome could not be written waits at least before it is sent
    /// again (doubling while writes keep failing), and at most.
    public static let unrecordedDeliveryHoldMs: Int64 = 1000
    public static let maxUnrecordedDeliveryHoldMs: Int64 = 60_000
    /// Bytes of a single service's write-ahead log at which its writer folds the log into the database file itself
    /// (SQLite's checkpoint, in the commit); below it a thread of its own does (``WALCheckpointer``). The log's file is
    /// cut back to this size when the writer starts it again.
    public static let logBackstopBytes = 64 << 20
    /// Seconds between two small writes that tell a service whose commit failed when the database takes writes again.
    public static let writeProbeSeconds = 1.0
}
