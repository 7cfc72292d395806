import BeckonCore
import BeckonPostgres
import BeckonServer
import Foundation
import Logging
import ServiceLifecycle

/// The console's store in a fleet (``ConsoleStore``): a user's events from their partition's log, every event by
/// merging the partitions' logs by arrival, states as their partitions' owners last wrote them, and the rules' live
/// counts: this process's as they stand, and the other processes' rows in `beckon_activity` (``FleetActivity``
/// writes each process's every 10 s).
struct FleetConsoleStore: ConsoleStore {
    let log: FleetLog
    /// This process's counts.
    let activity: RuleActivity
    let owner: String
    /// Entries read from one partition at a time while merging.
    static let page = 512

    func eachRecord(naming user: String?, _ body: ([UInt8]) throws -> Void) throws {
        let log = log
        if let user {
            for entry in try Blocking.wait({ try await log.entries(of: user) }) { try body(entry.body) }
            return
        }
        // Each partition's entries are in arrival order; the partitions are merged by arrival, a page of each at a time.
        let n = FleetLog.partitionCount
        var pages = [[FleetLog.Entry]](repeating: [], count: n)
        var next = [Int](repeating: 0, count: n)
        var after = [Int64](repeating: 0, count: n)
        var open = Set(0..<n)
        func fill(_ p: Int) throws {
            let from = after[p]
            pages[p] = try Blocking.wait { try await log.read(partition: p, after: from, limit: Self.page) }
            next[p] = 0
            if pages[p].isEmpty { open.remove(p) } else { after[p] = pages[p].last!.seq }
        }
        for p in 0..<n { try fill(p) }
        while !open.isEmpty {
            var best = -1
            for p in open where best < 0 || (pages[p][next[p]].receivedAt, p) < (pages[best][next[best]].receivedAt, best) {
                best = p
            }
            try body(pages[best][next[best]].body)
            next[best] += 1
            if next[best] == pages[best].count { try fill(best) }
        }
    }

    func state(of user: String) async throws -> UserState? { try await log.state(of: user) }

    func storedStates(after: String?, limit: Int) async throws -> [(userID: String, bytes: [UInt8])] {
        try await log.states(after: after, limit: limit)
    }

    var logsTicks: Bool { false }

    func activity(at now: Int64) async -> [String: [Int64: RuleActivity.Counts]] {
        let oldest = (now - Milliseconds.day) / RuleActivity.bucketMs
        var out = activity.buckets(since: oldest)
        guard let rows = try? await log.activity(since: oldest, except: owner) else { return out }
        for r in rows {
            func counts(_ json: String) -> [String: Int] {
                (try? JSONDecoder().decode([String: Int].self, from: Data(json.utf8))) ?? [:]
            }
            out[r.rule, default: [:]][r.bucket, default: .init()].add(
                .init(
                    triggered: Int(r.triggered), fired: Int(r.fired), scheduled: Int(r.scheduled), heldBack: Int(r.heldBack),
                    blocked: counts(r.blocked), messages: counts(r.messages)))
        }
        return out
    }
}

/// Writes this process's live counts (its partitions' runners add to ``activity``) to `beckon_activity` every
/// ``every``, so that every process's console shows the fleet's; the latest two buckets each time (a bucket is 5
/// minutes), and once more when stopping.
struct FleetActivity: Service {
    let log: FleetLog
    let activity: RuleActivity
    let owner: String
    let faults: FaultLog
    static let every = Duration.seconds(10)

    func run() async throws {
        while !Task.isCancelled {
            await write()
            if Task.isShuttingDownGracefully { return }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.every) }
        }
    }

    static func json(_ counts: [String: Int]) -> String {
        String(decoding: (try? JSONEncoder().encode(counts)) ?? Data("{}".utf8), as: UTF8.self)
    }

    func write() async {
        let now = Processor.nowMs()
        let rows = activity.buckets(since: now / RuleActivity.bucketMs - 1).flatMap { rule, buckets in
            buckets.map { bucket, c in
                FleetLog.ActivityRow(
                    rule: rule, bucket: bucket, triggered: Int64(c.triggered), fired: Int64(c.fired),
                    scheduled: Int64(c.scheduled), heldBack: Int64(c.heldBack), blocked: Self.json(c.blocked),
                    messages: Self.json(c.messages))
            }
        }
        do {
            try await log.writeActivity(
                owner: owner, rows, oldest: (now - Milliseconds.day) / RuleActivity.bucketMs)
            faults.ok("activity")
        } catch {
            faults.failed("activity", error)
        }
    }
}
