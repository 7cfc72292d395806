import BeckonPostgres
import Synchronization

/// Requests written together: while one write is being committed, the requests that arrive queue, and the next write
/// takes them all (a group commit, as the single service's committer does for its rounds). Each request is answered
/// once the write holding it has committed, with its own result or error.
///
/// A fleet process has two: the ingest requests' appends to the log (``Appender``: appends that share partitions take
/// turns on their counter rows, so each turn carries every request waiting), and its partitions' batches
/// (``FleetLog/commit(_:)``: one statement and one commit for every partition ready, instead of one each).
final class GroupCommit<Item: Sendable, Result: Sendable>: Sendable {
    private struct Waiting {
        var item: Item
        var continuation: CheckedContinuation<Result, any Error>
    }
    private let state = Mutex((queue: [Waiting](), running: false))
    /// Writes items in one transaction; returns each one's result, in order (or throws for all of them).
    private let write: @Sendable ([Item]) async throws -> [Result]
    /// An item's size, and the most one write takes (the rest wait for the next; one item is always taken).
    private let size: @Sendable (Item) -> Int
    private let maxSize: Int

    init(
        maxSize: Int, size: @escaping @Sendable (Item) -> Int,
        write: @escaping @Sendable ([Item]) async throws -> [Result]
    ) {
        self.maxSize = maxSize
        self.size = size
        self.write = write
    }

    /// Writes `item` with the requests queued beside it; returns its result.
    func submit(_ item: Item) async throws -> Result {
        try await withCheckedThrowingContinuation { c in
            let start = state.withLock { s in
                s.queue.append(Waiting(item: item, continuation: c))
                if s.running { return false }
                s.running = true
                return true
            }
            if start { Task { await drain() } }
        }
    }

    private func drain() async {
        while true {
            let group: [Waiting]? = state.withLock { s in
                guard !s.queue.isEmpty else {
                    s.running = false
                    return nil
                }
                var n = 0
                var k = 0
                while k < s.queue.count && (k == 0 || n + size(s.queue[k].item) <= maxSize) {
                    n += size(s.queue[k].item)
                    k += 1
                }
                defer { s.queue.removeFirst(k) }
                return Array(s.queue.prefix(k))
            }
            guard let group else { return }
            do {
                let results = try await write(group.map(\.item))
                for (w, r) in zip(group, results) { w.continuation.resume(returning: r) }
            } catch {
                for w in group { w.continuation.resume(throwing: error) }
            }
        }
    }
}

/// Ingest's appends, grouped (see ``GroupCommit``): a request's events, all or none, with their entries in order.
typealias Appender = GroupCommit<[(userID: String, body: [UInt8], receivedAt: Int64)], [FleetLog.Entry]>

extension Appender {
    convenience init(log: FleetLog) {
        self.init(maxSize: 20_000, size: \.count) { requests in
            var entries = try await log.append(requests.flatMap { $0 })[...]
            return requests.map { r in
                defer { entries = entries.dropFirst(r.count) }
                return Array(entries.prefix(r.count))
            }
        }
    }
}

/// Partitions' batches, grouped (see ``GroupCommit``): how many of a batch's actions were new, `nil` when its lease had
/// moved and nothing of it was written.
typealias BatchCommitter = GroupCommit<(lease: FleetLog.Lease, batch: FleetLog.PartitionCommit), Int?>

extension BatchCommitter {
    convenience init(log: FleetLog) {
        self.init(maxSize: 20_000, size: { 1 + $0.batch.states.count + $0.batch.actions.count }) { batches in
            let results = try await log.commit(batches)
            return batches.map { results[$0.lease.partition] ?? nil }
        }
    }
}
