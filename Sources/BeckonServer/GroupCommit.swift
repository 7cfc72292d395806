import BeckonStore
import Foundation

/// The service's one committer, on both stores: items written together, in order. While one write is in progress the
/// items that arrive queue, and the next write takes them all (a group commit: one transaction and one sync to disk
/// however far behind the writer is). Each item is answered once the write holding it has committed, with its own
/// result or the write's error.
///
/// - The single service's processing thread queues its rounds with ``enqueue(_:then:)``, waiting while ``depth`` are
///   queued ahead (a bound on memory and on latency), and waits for them with ``waitIdle()`` before a barrier.
/// - A fleet process submits its ingest requests' appends and its partitions' batches with ``submit(_:)``.
///
/// When `chained`, each item was built on top of the ones before it (a round on the rounds before it): after a failed
/// write, every item queued or queued later fails too, until ``reset()`` (the processor has rebuilt its engine from
/// the database). Otherwise a failure is the failed items' alone.
package final class GroupCommit<Item: Sendable, Output: Sendable>: @unchecked Sendable {
    // @unchecked: every stored property but the constants is read and written only under `lock`.
    package typealias Done = @Sendable (Result<Output, any Error>) -> Void
    private struct Waiting {
        var item: Item
        var done: Done
    }

    private let lock = NSCondition()
    private var queue: [Waiting] = []
    /// Items are being written: a drain runs (a task, or the committer's own thread), until it finds none queued.
    private var running = false
    private var failure: (any Error)?
    private var stopped = false
    private let chained: Bool
    private let depth: Int
    private let maxSize: Int
    private let size: @Sendable (Item) -> Int
    private let stoppedError: @Sendable () -> any Error
    /// Writes items in one transaction; returns each one's output, in order (or throws for all of them).
    private enum Writer {
        /// Async (a database client): each run of writes is a task.
        case task(@Sendable ([Item]) async throws -> [Output])
        /// Blocking (an embedded database): the writes run on a thread of the committer's own, so that no thread of
        /// the concurrency pool waits on a sync to disk and a write costs no hop between threads.
        case thread(@Sendable ([Item]) throws -> [Output])
    }
    private let write: Writer

    /// - Parameters:
    ///   - chained: a failed write fails every later item until ``reset()``.
    ///   - depth: items queued (not yet being written) before ``enqueue(_:then:)`` waits.
    ///   - maxSize: the most one write takes, by `size` (one item is always taken; the rest wait for the next write).
    ///   - stoppedError: what items queued after ``stop()`` fail with.
    package convenience init(
        chained: Bool = false, depth: Int = .max, maxSize: Int = .max, size: @escaping @Sendable (Item) -> Int = { _ in 1 },
        stoppedError: @escaping @Sendable () -> any Error = { CancellationError() },
        write: @escaping @Sendable ([Item]) async throws -> [Output]
    ) {
        self.init(.task(write), chained, depth, maxSize, size, stoppedError)
    }

    private init(
        _ write: Writer, _ chained: Bool, _ depth: Int, _ maxSize: Int, _ size: @escaping @Sendable (Item) -> Int,
        _ stoppedError: @escaping @Sendable () -> any Error
    ) {
        self.write = write
        self.chained = chained
        self.depth = depth
        self.maxSize = maxSize
        self.size = size
        self.stoppedError = stoppedError
    }

    /// A committer whose blocking `write` runs on a thread of its own, named `thread` (see the other initializer).
    package convenience init(
        thread name: String, chained: Bool = false, depth: Int = .max, maxSize: Int = .max,
        size: @escaping @Sendable (Item) -> Int = { _ in 1 },
        stoppedError: @escaping @Sendable () -> any Error = { CancellationError() },
        write: @escaping @Sendable ([Item]) throws -> [Output]
    ) {
        self.init(.thread(write), chained, depth, maxSize, size, stoppedError)
        startThread(named: name) { [self] in
            // Drains whenever items are queued; ends once stopped with nothing queued.
            while true {
                lock.lock()
                while !running && !stopped { lock.wait() }
                let active = running
                lock.unlock()
                guard active else { return }
                while let (group, earlier) = take() {
                    var outcome: Result<[Output], any Error>
                    if let earlier {
                        outcome = .failure(earlier)
                    } else {
                        do { outcome = .success(try write(group.map(\.item))) } catch { outcome = .failure(error) }
                    }
                    answer(group, outcome)
                }
            }
        }
    }

    /// Writes `item` with the items queued beside it; returns its output.
    package func submit(_ item: Item) async throws -> Output {
        try await withCheckedThrowingContinuation { c in enqueue(item) { c.resume(with: $0) } }
    }

    /// Queues `item` (first waiting, on the caller's thread, while ``depth`` items are queued ahead); `done` is called
    /// once it is written or has failed.
    package func enqueue(_ item: Item, then done: @escaping Done) {
        lock.lock()
        while queue.count >= depth && !stopped { lock.wait() }
        if stopped || (chained && failure != nil) {
            let error = stopped ? stoppedError() : failure!
            lock.unlock()
            done(.failure(error))
            return
        }
        queue.append(Waiting(item: item, done: done))
        let start = !running
        running = true
        lock.broadcast()
        lock.unlock()
        if start, case .task(let write) = write { Task { await drain(write) } }
    }

    /// Whether a write failed and ``reset()`` has not been called since (`chained` only).
    package var failed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return failure != nil
    }

    /// Waits, on the caller's thread, until every queued item is written (or failed).
    package func waitIdle() {
        lock.lock()
        while !queue.isEmpty || running { lock.wait() }
        lock.unlock()
    }

    /// Takes items again after a failure.
    package func reset() {
        lock.lock()
        failure = nil
        lock.unlock()
    }

    /// Writes what is queued and refuses what comes after.
    package func stop() {
        lock.lock()
        stopped = true
        lock.broadcast()
        while !queue.isEmpty || running { lock.wait() }
        lock.unlock()
    }

    private func drain(_ write: @Sendable ([Item]) async throws -> [Output]) async {
        while let (group, earlier) = take() {
            var outcome: Result<[Output], any Error>
            if let earlier {
                outcome = .failure(earlier)
            } else {
                do { outcome = .success(try await write(group.map(\.item))) } catch { outcome = .failure(error) }
            }
            answer(group, outcome)
        }
    }

    /// Answers each item of a write, then notes its outcome (a chained failure sticks).
    private func answer(_ group: [Waiting], _ outcome: Result<[Output], any Error>) {
        switch outcome {
        case .success(let outputs):
            for (w, o) in zip(group, outputs) { w.done(.success(o)) }
        case .failure(let error):
            for w in group { w.done(.failure(error)) }
        }
        finished(outcome)
    }

    /// The next items to write, by ``maxSize``, and the failure they inherit (`chained`); `nil` when none is queued
    /// (the drain ends).
    private func take() -> ([Waiting], earlier: (any Error)?)? {
        lock.lock()
        defer { lock.unlock() }
        guard !queue.isEmpty else {
            running = false
            lock.broadcast()
            return nil
        }
        var n = 0
        var k = 0
        while k < queue.count && (k == 0 || n + size(queue[k].item) <= maxSize) {
            n += size(queue[k].item)
            k += 1
        }
        let group = Array(queue.prefix(k))
        queue.removeFirst(k)
        lock.broadcast()
        return (group, chained ? failure : nil)
    }

    /// A write's outcome is answered: a chained failure sticks.
    private func finished(_ outcome: Result<[Output], any Error>) {
        lock.lock()
        if chained, case .failure(let error) = outcome, failure == nil { failure = error }
        lock.broadcast()
        lock.unlock()
    }
}
