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

/// One waiter woken by `notify()` or after a timeout, whichever comes first; a `notify()` with no waiter is kept for the
/// next `wait`. The uploader and the pull loop sleep on one each.
final class Signal: Sendable {
    private struct State {
        var pending = false
        var waiter: (id: UInt64, continuation: CheckedContinuation<Void, Never>)?
        var next: UInt64 = 0
        /// The latest wait whose timeout or cancellation came before it was waiting.
        var fired: UInt64 = 0
    }
    private let state = Locked(State())

    init() {}

    func notify() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let w = s.waiter else {
                s.pending = true
                return nil
            }
            s.waiter = nil
            return w.continuation
        }
        waiter?.resume()
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
                    if let old = s.waiter { old.continuation.resume() }
                    s.waiter = (id, continuation)
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
            guard let w = s.waiter, w.id == id else {
                s.fired = max(s.fired, id)
                return nil
            }
            s.waiter = nil
            return w.continuation
        }
        waiter?.resume()
    }
}
