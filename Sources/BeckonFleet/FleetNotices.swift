import BeckonPostgres
import BeckonServer
import Logging
import ServiceLifecycle
import Synchronization

/// Sends the notices of new actions (``FleetLog/noticeActions(for:)``) for this process's partitions, one statement at
/// a time, with the ids that came in meanwhile: a runner hands its users over and goes on without waiting, and
/// PostgreSQL's lock on its notice queue, taken by each statement that notifies, is never queued on by more than one
/// statement of a process (nor by any commit of states: those never notify).
final class ActionNoticer: Service, Sendable {
    private struct State {
        var users: Set<String> = []
        var waiting: CheckedContinuation<Void, Never>?
        var stopped = false
    }
    private let state = Mutex(State())
    let log: FleetLog
    let logger: Logger

    init(log: FleetLog, logger: Logger) {
        self.log = log
        self.logger = logger
    }

    /// Notes users who got actions (sent with the next notice).
    func add(_ users: Set<String>) {
        let waiting = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.users.formUnion(users)
            defer { s.waiting = nil }
            return s.waiting
        }
        waiting?.resume()
    }

    /// Sends until a graceful shutdown; then stops at once (a notice under way is left to end by itself).
    func run() async throws {
        let sender = Task { [self] in await send() }
        try? await gracefulShutdown()
        sender.cancel()
        wake()
    }

    private func send() async {
        while !Task.isCancelled {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if !s.users.isEmpty || s.stopped { return true }
                    s.waiting = c
                    return false
                }
                if now { c.resume() }
            }
            let users = state.withLock { s -> Set<String> in
                defer { s.users = [] }
                return s.users
            }
            guard !users.isEmpty, !Task.isCancelled else { continue }
            // (A notice lost delays the other processes' polls to their next look, nothing more.)
            do { try await log.noticeActions(for: users) } catch {
                logger.debug("a notice of new actions was not sent", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Ends a wait for users (the sender is stopping).
    private func wake() {
        let waiting = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.stopped = true
            defer { s.waiting = nil }
            return s.waiting
        }
        waiting?.resume()
    }
}

/// Listens for the notices of new actions every process sends (``FleetLog/noticeActions(for:)``) and wakes the long
/// polls of their users.
struct ActionNotices: Service {
    let log: FleetLog
    let feed: ActionFeed
    let listening: Listening

    /// Whether the process listens now.
    final class Listening: Sendable {
        let value = Atomic(false)
    }

    /// Listens until a graceful shutdown; then stops at once (a listening connection need not see a cancellation:
    /// its task is left to end with the process).
    func run() async throws {
        let (log, listening, feed) = (log, listening, feed)
        let listener = Task {
            await log.listenForActions(listening: { listening.value.store($0, ordering: .relaxed) }) { users in
                feed.notify(Set(users))
            }
        }
        try? await gracefulShutdown()
        listener.cancel()
    }
}
