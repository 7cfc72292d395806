import Synchronization

/// A database call that did not answer in time: it failed, and its pool was replaced (``FleetLog``).
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var call: String
    public var after: Duration
    /// Whether the call has ended since (late); one that never does is the sign of a wedged connection.
    public var ended: @Sendable () -> Bool
    public var description: String { "the database call '\(call)' did not answer within \(after)" }
}

/// Runs `body` and returns what it returns, or throws ``DeadlineExceeded`` once `deadline` has passed, whether or not
/// `body` ever ends: a call into a connection that was closed under it may never return (its query's promise is
/// dropped with the write), and neither a task group nor cancellation can end it. Such a call is left to finish on
/// its own task; the caller goes on.
public func withDeadline<T: Sendable>(
    _ deadline: Duration, _ call: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = Race<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            race.slot.withLock { $0 = c }
            let work = Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                race.ended.withLock { $0 = true }
                if let c = race.take() {
                    race.tasks.withLock { $0.timer }?.cancel()
                    c.resume(with: result)
                }
            }
            let timer = Task {
                try? await Task.sleep(for: deadline)
                guard !Task.isCancelled, let c = race.take() else { return }
                race.tasks.withLock { $0.work }?.cancel()
                c.resume(throwing: DeadlineExceeded(call: call, after: deadline, ended: { race.ended.withLock { $0 } }))
            }
            race.tasks.withLock { $0 = (work, timer) }
        }
    } onCancel: {
        if let c = race.take() {
            let t = race.tasks.withLock { $0 }
            t.work?.cancel()
            t.timer?.cancel()
            c.resume(throwing: CancellationError())
        }
    }
}

/// The caller's continuation, resumed once by whichever ends first (the call, the timer, a cancellation), and the two
/// tasks.
private final class Race<T: Sendable>: Sendable {
    let slot = Mutex<CheckedContinuation<T, any Error>?>(nil)
    let ended = Mutex(false)
    let tasks = Mutex<(work: Task<Void, Never>?, timer: Task<Void, Never>?)>((nil, nil))
    func take() -> CheckedContinuation<T, any Error>? { slot.withLock { $0.take() } }
}
