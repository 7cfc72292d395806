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

    func run() async throws {
        try? await cancelWhenGracefulShutdown { [self] in
            while !Task.isCancelled {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let now = state.withLock { s -> Bool in
                        if !s.users.isEmpty { return true }
                        s.waiting = c
                        return false
                    }
                    if now { c.resume() }
                }
                let users = state.withLock { s -> Set<String> in
                    defer { s.users = [] }
                    return s.users
                }
                // (A notice lost delays the other processes' polls to their next look, nothing more.)
                do { try await log.noticeActions(for: users) } catch {
                    logger.debug("a notice of new actions was not sent", metadata: ["error": "\(error)"])
                }
            }
        }
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

    func run() async throws {
        let listening = listening
        let feed = feed
        try? await cancelWhenGracefulShutdown {
            await log.listenForActions(listening: { listening.value.store($0, ordering: .relaxed) }) { users in
                feed.notify(Set(users))
            }
        }
    }
}
