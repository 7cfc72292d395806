import BeckonPostgres
import BeckonServer

// A fleet process's two group commits, both the service's one committer (``GroupCommit``): the ingest requests'
// appends to the log (appends that share partitions take turns on their counter rows, so each turn carries every
// request waiting), and its partitions' batches (``FleetLog/commit(_:)``: one statement and one commit for every
// partition ready, instead of one each). Neither is chained: a failed write is the failed items' alone.

/// Ingest's appends, grouped (see ``GroupCommit``): a request's input log records (each a user id, the record and when
/// it was received), all or none, with their entries in order. Every request waiting is one append, so that a
/// partition's entries of them share a page of the log (``FleetLog/append(_:)``).
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
