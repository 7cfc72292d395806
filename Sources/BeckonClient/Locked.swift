import Foundation

/// A value behind a lock (`NSLock`: every platform the client builds on has it; `Mutex` needs iOS 18).
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Waiters woken by `notify()` or after their timeout, whichever comes first; a `notify()` with nobody waiting is kept
/// for the next `wait`. The uploader and the pull loop sleep on one each; the action stream's readers (one or several
/// iterators) on another: a `notify()` wakes every reader, and each that finds nothing waits again.
final class Signal: Sendable {
    private struct State {
        var pending = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var next: UInt64 = 0
        /// The latest wait whose timeout or cancellation came (ids grow: a wait between taking its id and waiting
        /// returns at once if a later one's came, a spurious wake its caller's loop absorbs).
        var fired: UInt64 = 0
    }
    private let state = Locked(State())

    init() {}

    /// How many wait now (for tests).
    var waiting: Int { state.withLock { $0.waiters.count } }

    func notify() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            guard !s.waiters.isEmpty else {
                s.pending = true
                return []
            }
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for w in waiters { w.resume() }
    }

    /// Returns at a `notify()`, after `timeout`, or when the task is cancelled.
    func wait(timeout: Duration) async {
        let id = state.withLock { s -> UInt64 in
            s.next += 1
            return s.next
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            self.fire(id)
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.pending || s.fired >= id || Task.isCancelled {
                        s.pending = false
                        return true
                    }
                    s.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            fire(id)
        }
    }

    private func fire(_ id: UInt64) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let w = s.waiters.removeValue(forKey: id) else {
                s.fired = max(s.fired, id)
                return nil
            }
            return w
        }
        waiter?.resume()
    }
}
