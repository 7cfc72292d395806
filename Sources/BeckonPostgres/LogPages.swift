import PostgresNIO

/// The rows `beckon_log` keeps its entries in. A partition's entries of one append share a row, a page, whose body
/// deflates them as one (``LogBody/packPage(_:receivedAt:)``): the row's header, its key and the fields and values
/// every event repeats are written once a page, not once an event (docs/fleet.md, "The log", "Pages").
///
/// | | `seq` | `user_id` | `received_at` | `last_seq` | `users` | `body` |
/// |---|---|---|---|---|---|---|
/// | one entry | its number | its user | when it was received | null | null | ``LogBody/pack(_:)`` |
/// | a page | its first entry's | `''` | its latest entry's | its last entry's | each entry's ``userHash(_:)`` | ``LogBody/packPage(_:receivedAt:)`` |
///
/// An entry keeps its sequence number within its page: a page's entries are numbered from `seq` to `last_seq`, and
/// numbers are missing where entries were taken out of it (a forget, a merge's entries sent on). Rows of one
/// partition never overlap, so the one row that can hold the entry after a position is the last row that starts at
/// or before it.
enum LogPages {
    /// The most entries one page holds.
    static let maxEntries = 256
    /// The most record bytes one page holds (more entries take another page).
    static let maxBytes = 256 << 10

    /// A user's number in a page's `users`: the high half of their id's FNV-1a, as SQL's `int`. Two users can share
    /// one; a reader checks the entries' own ids.
    static func userHash(_ userID: String) -> Int32 {
        Int32(truncatingIfNeeded: FleetLog.fnv(userID) >> 32)
    }

    /// The rows of one append, as `unnest`'s columns: each row's partition, its first entry's rank within the
    /// partition's entries of the append, and its last's (-1: a row of one entry).
    struct Rows {
        var partitions: [Int] = []
        var firsts: [Int64] = []
        var lasts: [Int64] = []
        var users: [String] = []
        var times: [Int64] = []
        var bodies: [ByteBuffer] = []
        /// Each page's `users` as an array literal (`''`: none).
        var hashes: [String] = []
    }

    /// The rows for `events` (in `partitionOf`, ranked within each), their bodies packed on several cores at once
    /// when there is much to deflate.
    static func rows(
        _ events: [(userID: String, body: [UInt8], receivedAt: Int64)], partitionOf: [Int], ranks: [Int64]
    ) async -> Rows {
        let groups = pages(events.map { $0.body.count }, partitionOf: partitionOf)
        // A row's `received_at`: its latest entry's.
        let latest = groups.map { g in g.map { events[$0].receivedAt }.max()! }
        func body(_ k: Int) -> [UInt8] {
            let group = groups[k]
            guard group.count > 1 else { return LogBody.pack(events[group[0]].body) }
            let first = ranks[group[0]]
            return LogBody.packPage(
                group.map { i in
                    LogBody.PageEntry(
                        offset: ranks[i] - first, userID: events[i].userID, receivedAt: events[i].receivedAt,
                        record: events[i].body)
                }, receivedAt: latest[k])
        }
        var bodies: [[UInt8]]
        let total = events.reduce(0) { $0 + $1.body.count }
        if total < parallelAbove {
            bodies = groups.indices.map(body)
        } else {
            bodies = await withTaskGroup(of: (Int, [UInt8]).self) { tasks in
                for k in groups.indices { tasks.addTask { (k, body(k)) } }
                var out = Array(repeating: [UInt8](), count: groups.count)
                for await (k, b) in tasks { out[k] = b }
                return out
            }
        }
        var rows = Rows()
        for (k, group) in groups.enumerated() {
            let first = group[0]
            rows.partitions.append(partitionOf[first])
            rows.firsts.append(ranks[first])
            rows.bodies.append(ByteBuffer(bytes: bodies[k]))
            rows.times.append(latest[k])
            if group.count == 1 {
                rows.lasts.append(-1)
                rows.users.append(events[first].userID)
                rows.hashes.append("")
            } else {
                rows.lasts.append(ranks[group.last!])
                rows.users.append("")
                rows.hashes.append(literal(group.map { userHash(events[$0].userID) }))
            }
        }
        return rows
    }

    /// The rows of an append of records of `sizes` bytes in `partitionOf`: each the indices of its entries, a
    /// partition's in order and split at ``maxEntries`` and ``maxBytes``.
    static func pages(_ sizes: [Int], partitionOf: [Int]) -> [[Int]] {
        var byPartition: [Int: [Int]] = [:]
        for (i, p) in partitionOf.enumerated() { byPartition[p, default: []].append(i) }
        var groups: [[Int]] = []
        for p in byPartition.keys.sorted() {
            var group: [Int] = []
            var bytes = 0
            for i in byPartition[p]! {
                if !group.isEmpty && (group.count == maxEntries || bytes + sizes[i] > maxBytes) {
                    groups.append(group)
                    (group, bytes) = ([], 0)
                }
                group.append(i)
                bytes += sizes[i]
            }
            groups.append(group)
        }
        return groups
    }

    /// Record bytes in one append above which its pages are deflated on several cores.
    static let parallelAbove = 32 << 10

    /// `users` as SQL's array literal.
    static func literal(_ hashes: [Int32]) -> String {
        "{" + hashes.map(String.init).joined(separator: ",") + "}"
    }

    /// A row as read.
    struct Row {
        var seq: Int64
        var userID: String
        var receivedAt: Int64
        /// Set for a page.
        var last: Int64?
        var body: [UInt8]

        /// Its entries, in order. A page that cannot be read is one entry, numbered as its last, whose body is the
        /// page as stored: the runner stops at it as at any damaged record.
        func entries(partition: Int) -> [FleetLog.Entry] {
            guard let last else {
                return [
                    FleetLog.Entry(
                        partition: partition, seq: seq, userID: userID, receivedAt: receivedAt, body: LogBody.unpack(body))
                ]
            }
            return pageEntries(partition: partition)
                ?? [FleetLog.Entry(partition: partition, seq: last, userID: userID, receivedAt: receivedAt, body: body)]
        }

        /// A page's entries, in order; nil when it cannot be read.
        func pageEntries(partition: Int) -> [FleetLog.Entry]? {
            LogBody.unpackPage(body, receivedAt: receivedAt)?.map {
                FleetLog.Entry(
                    partition: partition, seq: seq + $0.offset, userID: $0.userID, receivedAt: $0.receivedAt, body: $0.record)
            }
        }
    }

    /// Takes the entries `drop` names out of the pages `condition` selects in `partition` (the caller's transaction,
    /// `c`, holds them locked until it commits): a page left empty is deleted, any other rewritten with the entries
    /// it keeps, under its own numbers. Rows of one entry are the caller's to delete.
    static func remove(
        in partition: Int, where condition: PostgresQuery, drop: (FleetLog.Entry) -> Bool, log: FleetLog,
        on c: PostgresConnection
    ) async throws {
        var select = PostgresQuery(unsafeSQL: "last_seq IS NOT NULL AND ")
        select.sql += condition.sql + " ORDER BY seq FOR UPDATE"
        select.binds = condition.binds
        let pages = try await log.readRows(partition, select) { try await allRows(c.query($0, logger: log.logger)) }
        for page in pages {
            // (A damaged page is left as it is: what it holds cannot be told apart.)
            guard let entries = page.pageEntries(partition: partition) else { continue }
            let kept = entries.filter { !drop($0) }
            guard kept.count < entries.count else { continue }
            if kept.isEmpty {
                try await c.query(
                    "DELETE FROM beckon_log WHERE partition = \(partition) AND seq = \(page.seq)", logger: log.logger)
                continue
            }
            let body = LogBody.packPage(
                kept.map {
                    LogBody.PageEntry(offset: $0.seq - page.seq, userID: $0.userID, receivedAt: $0.receivedAt, record: $0.body)
                }, receivedAt: page.receivedAt)
            try await c.query(
                """
                UPDATE beckon_log SET body = \(ByteBuffer(bytes: body)), users = \(literal(kept.map { userHash($0.userID) }))::int[]
                WHERE partition = \(partition) AND seq = \(page.seq)
                """, logger: log.logger)
        }
    }
}
