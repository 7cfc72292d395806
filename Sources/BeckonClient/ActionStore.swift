import Foundation
import Logging

/// The pulled actions the app has not taken yet, and where each user's pull goes on, kept so that a restart neither
/// loses nor repeats an action: `actions/state.json` holds each user's cursor, the pulled actions not yet handed over
/// and the ids of the latest pulled ones; `actions/taken.json` how many of those the app has taken. A pull rewrites
/// the first (with the taken ones gone and a new epoch), taking one rewrites only the second, a few bytes; a taken
/// count of another epoch than the state's is void (the state was rewritten after it), so a kill between the two
/// writes is safe either way.
final class ActionStore: Sendable {
    /// How many ids of pulled actions are remembered to skip an action a second pull gives again (an identity merge
    /// can make the known user's feed repeat what the anonymous one pulled).
    static let rememberedIDs = 512

    private struct Saved: Codable {
        var epoch: UInt64 = 0
        var cursors: [String: String] = [:]
        var pending: [Pending] = []
        var recent: [String] = []
    }

    private struct Pending: Codable {
        var userId: String
        var action: JSONValue
    }

    private struct Taken: Codable {
        var epoch: UInt64
        var taken: Int
    }

    private struct State {
        var saved: Saved
        var taken: Int
    }

    private let state: Locked<State>
    private let stateURL: URL
    private let takenURL: URL

    init(folder: URL, logger: Logger) throws {
        try Disk.makeDirectory(folder)
        stateURL = folder.appendingPathComponent("state.json")
        takenURL = folder.appendingPathComponent("taken.json")
        let saved = Disk.readJSON(Saved.self, from: stateURL, logger: logger) ?? Saved()
        var taken = 0
        if let t = Disk.readJSON(Taken.self, from: takenURL, logger: logger), t.epoch == saved.epoch {
            taken = min(max(t.taken, 0), saved.pending.count)
        }
        state = Locked(State(saved: saved, taken: taken))
    }

    func cursor(for userId: String) -> String {
        state.withLock { $0.saved.cursors[userId] ?? "0" }
    }

    /// Actions pulled and not yet taken.
    var pendingCount: Int { state.withLock { $0.saved.pending.count - $0.taken } }

    /// Keeps a pull's actions (those not pulled before) and the user's next cursor, on disk before it returns.
    /// Returns the actions kept.
    func add(_ actions: [JSONValue], cursor: String, for userId: String) throws -> [JSONValue] {
        try state.withLock { s in
            var next = s.saved
            next.epoch &+= 1
            next.pending.removeFirst(s.taken)
            var seen = Set(next.recent)
            var kept: [JSONValue] = []
            for action in actions {
                guard let id = action["id"]?.stringValue, seen.insert(id).inserted else { continue }
                kept.append(action)
                next.pending.append(Pending(userId: userId, action: action))
                next.recent.append(id)
            }
            if next.recent.count > Self.rememberedIDs { next.recent.removeFirst(next.recent.count - Self.rememberedIDs) }
            next.cursors[userId] = cursor
            try Disk.writeJSON(next, to: stateURL)
            s.saved = next
            s.taken = 0
            return kept
        }
    }

    /// The oldest action not yet taken that was pulled for one of `users` (the current user and the anonymous id
    /// they signed in from), counted as taken on disk before it is returned; the actions of other users before it (a
    /// sign-out's leftovers, pulled as it happened) are passed over with it.
    func take(for users: Set<String>) -> JSONValue? {
        state.withLock { s in
            guard let i = s.saved.pending.indices.dropFirst(s.taken).first(where: { users.contains(s.saved.pending[$0].userId) })
            else { return nil }
            do {
                try Disk.writeJSON(Taken(epoch: s.saved.epoch, taken: i + 1), to: takenURL)
            } catch {
                return nil
            }
            s.taken = i + 1
            return s.saved.pending[i].action
        }
    }

    /// Drops what was pulled for users other than `userId` and not taken (the app signed out: the next user must not
    /// see the last one's messages); in memory even when the disk cannot be written (then again at the next pull's
    /// write).
    func discardPending(except userId: String) {
        state.withLock { s in
            var next = s.saved
            next.epoch &+= 1
            next.pending = Array(next.pending.dropFirst(s.taken)).filter { $0.userId == userId }
            try? Disk.writeJSON(next, to: stateURL)
            s.saved = next
            s.taken = 0
        }
    }
}
