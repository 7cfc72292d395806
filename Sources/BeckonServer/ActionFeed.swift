import Synchronization

/// Wakes the long polls of users who got new actions. Each user has a version, changed after each commit that stored
/// actions for them; a poll notes the version before it reads the database and waits only while it is unchanged, so
/// no action committed between the read and the wait is missed.
///
/// A version is the feed's sequence number at the user's latest notice. The feed remembers at most ``keptVersions`` of
/// them beside those of users with a poll waiting: past that it forgets the others, and every user without a
/// remembered version reads `floor`, the sequence number when it last forgot. So memory does not grow with every user
/// who ever got an action (it did: a dictionary entry each, for good), and no wake-up is lost — a version noted before
/// a forgetting is either still remembered or below the new floor, so the wait returns at once and the poll reads
/// again (a spurious wake, once per forgetting at most).
package final class ActionFeed: Sendable {
    /// Versions remembered for users without a waiting poll before the feed forgets them.
    package static let keptVersions = 65_536

    private struct State {
        var versions: [String: UInt64] = [:]
        var sequence: UInt64 = 0
        var floor: UInt64 = 0
        var waiters: [String: [UInt64: CheckedContinuation<Void, Never>]] = [:]
        var nextWaiter: UInt64 = 0
        /// Once closed (the service is stopping), waits return at once.
        var closed = false
        /// Each registered waiter's timeout, cancelled when it ends otherwise.
        var timeouts: [UInt64: Task<Void, Never>] = [:]
        /// Waits cancelled before their waiter was registered.
        var cancelled: Set<UInt64> = []

        /// `user`'s version: their latest notice's, or the floor once it is forgotten or for none.
        func version(of user: String) -> UInt64 { versions[user] ?? floor }
    }
    private let state = Mutex(State())

    package init() {}

    package var isClosed: Bool { state.withLock { $0.closed } }

    package func version(of user: String) -> UInt64 { state.withLock { $0.version(of: user) } }

    /// Versions remembered now (for tests: bounded by ``keptVersions`` plus the users with a poll waiting).
    package var remembered: Int { state.withLock { $0.versions.count } }

    package func notify(_ users: Set<String>) {
        let woken = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            var out: [CheckedContinuation<Void, Never>] = []
            for u in users {
                s.sequence += 1
                s.versions[u] = s.sequence
                if let w = s.waiters.removeValue(forKey: u) { out += w.values }
            }
            if s.versions.count > ActionFeed.keptVersions {
                let waiting = s.waiters
                s.versions = s.versions.filter { waiting[$0.key] != nil }
                s.floor = s.sequence
            }
            return out
        }
        for c in woken { c.resume() }
    }

    /// Returns when `user`'s version passes `seen`, or after `seconds`, or when the task is cancelled.
    package func wait(for user: String, seen: UInt64, seconds: Double) async {
        let id = state.withLock { s -> UInt64 in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.closed || s.version(of: user) != seen || s.cancelled.contains(id) { return true }
                    s.waiters[user, default: [:]][id] = c
                    return false
                }
                if now {
                    c.resume()
                    return
                }
                // The timeout starts once the waiter is registered, so it always finds it (or finds it gone).
                let timeout = Task {
                    guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
                    resume(user, id)
                }
                state.withLock { $0.timeouts[id] = timeout }
            }
        } onCancel: {
            // Before the waiter is registered, this marks it so that it does not wait at all.
            if !resume(user, id) { state.withLock { _ = $0.cancelled.insert(id) } }
        }
        state.withLock { s in
            s.cancelled.remove(id)
            s.timeouts.removeValue(forKey: id)?.cancel()
        }
    }

    /// Ends every wait, now and later (a stopping service answers its long polls at once).
    package func close() {
        let woken = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.closed = true
            defer { s.waiters = [:] }
            return s.waiters.values.flatMap(\.values)
        }
        for c in woken { c.resume() }
    }

    /// Resumes a registered waiter; false when there is none (not yet registered, or already resumed).
    @discardableResult
    private func resume(_ user: String, _ id: UInt64) -> Bool {
        let c = state.withLock { s -> CheckedContinuation<Void, Never>? in
            let c = s.waiters[user]?.removeValue(forKey: id)
            if s.waiters[user]?.isEmpty == true { s.waiters[user] = nil }
            return c
        }
        c?.resume()
        return c != nil
    }
}

extension Duration {
    /// The duration in seconds, as the feed's waits and the services' rates take it.
    package var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
