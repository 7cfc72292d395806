import Logging
import PostgresNIO

/// Who got new actions, told across a fleet's processes by PostgreSQL's `NOTIFY` (docs/fleet.md, "Pulls"): a process
/// whose partition stored actions sends their users' ids on ``channel`` once the batch is committed, and every process
/// listens, so a long poll waiting on a user another process owns is answered as soon as that commit is, not at its
/// next look.
extension FleetLog {
    /// The channel the notices go on.
    public static let actionsChannel = "beckon_actions"
    /// Bytes of ids in one notice (PostgreSQL's limit on a payload is 8,000).
    static let noticeBytes = 7_000

    /// Sends the ids, newline-separated, in as few notices as their size allows (one statement). A notice that is lost
    /// (the statement fails) delays a poll to its next look, nothing more.
    public func noticeActions(for users: some Collection<String>) async throws {
        var payloads: [String] = []
        var current = ""
        for u in users where u.utf8.count < Self.noticeBytes {
            if current.utf8.count + u.utf8.count + 1 > Self.noticeBytes {
                payloads.append(current)
                current = ""
            }
            current += current.isEmpty ? u : "\n" + u
        }
        if !current.isEmpty { payloads.append(current) }
        guard !payloads.isEmpty else { return }
        try await timed("notice actions", nil) { [self, payloads] in
            try await client.query(
                "SELECT pg_notify(\(Self.actionsChannel), p) FROM unnest(\(payloads)::text[]) AS p", logger: logger)
        }
    }

    /// Listens on ``actionsChannel`` until the task is cancelled, handing each notice's ids to `users`; after a
    /// connection is lost it listens again a second later. `listening` is told whether it is listening now (while it
    /// is not, a poll looks again sooner).
    public func listenForActions(
        listening: @escaping @Sendable (Bool) -> Void, _ users: @escaping @Sendable ([String]) -> Void
    ) async {
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: Self.actionsChannel) { notices in
                        listening(true)
                        for try await n in notices { users(n.payload.split(separator: "\n").map(String.init)) }
                    }
                }
            } catch {
                if !Task.isCancelled {
                    logger.debug("listening for actions stopped; again in a second", metadata: ["error": "\(error)"])
                }
            }
            listening(false)
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
