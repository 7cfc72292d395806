import BeckonCore
import Synchronization

/// What became of each rule's trigger matches over the last day, by wall-clock time in 5-minute buckets: the
/// console's live counts. The processing thread adds what the engine's counters gained since it last looked, after
/// every round; the console reads sums. Kept in memory: the counts start when the process does.
package final class RuleActivity: Sendable {
    package static let bucketMs: Int64 = 5 * 60_000

    /// One rule's counts in one bucket (or summed over several).
    package struct Counts: Sendable, Equatable {
        package var triggered = 0
        package var fired = 0
        package var scheduled = 0
        package var heldBack = 0
        /// Verdicts that were not fires, by ``Verdict/code``.
        package var blocked: [String: Int] = [:]
        /// The pushes and emails Beckon sent for the rule itself, by what became of them (``MessageCounts``).
        package var messages: [String: Int] = [:]

        package init(
            triggered: Int = 0, fired: Int = 0, scheduled: Int = 0, heldBack: Int = 0, blocked: [String: Int] = [:],
            messages: [String: Int] = [:]
        ) {
            self.triggered = triggered
            self.fired = fired
            self.scheduled = scheduled
            self.heldBack = heldBack
            self.blocked = blocked
            self.messages = messages
        }

        package mutating func add(_ o: Counts) {
            triggered += o.triggered
            fired += o.fired
            scheduled += o.scheduled
            heldBack += o.heldBack
            for (k, v) in o.blocked { blocked[k, default: 0] += v }
            for (k, v) in o.messages { messages[k, default: 0] += v }
        }
        var isEmpty: Bool { self == Counts() }
    }

    private struct State {
        /// The engine's per-rule counters when last looked at (`nil`: a new engine, not looked at yet).
        var baseline: Engine.Stats?
        /// Rule → bucket (start time / ``bucketMs``) → counts.
        var rules: [String: [Int64: Counts]] = [:]
        /// The bucket of the last pruning (once a bucket, buckets older than a day are dropped).
        var pruned: Int64 = 0
    }
    private let state = Mutex(State())

    package init() {}

    /// A new engine's counters (after a reload or a reopen, which replays): what they hold now is not new activity.
    package func restart(from stats: Engine.Stats) { state.withLock { $0.baseline = stats } }

    /// What the engine's counters gained since the last call, by rule (`names`: the rules' qualified ids by index).
    /// Called by the processing thread after a round; the gain is added (``add(_:at:)``) once the round is written,
    /// so a group that fails to commit (its events come again) is not counted.
    package func take(_ stats: Engine.Stats, names: [String]) -> [String: Counts] {
        state.withLock { s in
            let base = s.baseline
            s.baseline = stats
            func before(_ column: KeyPath<Engine.Stats, [Int]>, _ i: Int) -> Int {
                guard let base, i < base[keyPath: column].count else { return 0 }
                return base[keyPath: column][i]
            }
            var gained: [String: Counts] = [:]
            for (i, name) in names.enumerated() where i < stats.triggered.count {
                var c = Counts()
                c.triggered = stats.triggered[i] - before(\.triggered, i)
                c.fired = stats.fired[i] - before(\.fired, i)
                c.scheduled = stats.scheduled[i] - before(\.scheduled, i)
                c.heldBack = stats.heldBack[i] - before(\.heldBack, i)
                let old = base.flatMap { i < $0.blocked.count ? $0.blocked[i] : nil } ?? [:]
                for (code, n) in stats.blocked[i] where n - (old[code] ?? 0) > 0 { c.blocked[code] = n - (old[code] ?? 0) }
                if !c.isEmpty { gained[name] = c }
            }
            return gained
        }
    }

    /// Adds a gain (``take(_:names:)``) at wall time `now`.
    package func add(_ gained: [String: Counts], at now: Int64) {
        guard !gained.isEmpty else { return }
        let bucket = now / Self.bucketMs
        state.withLock { s in
            for (name, c) in gained { s.rules[name, default: [:]][bucket, default: Counts()].add(c) }
            // Once a bucket, buckets older than a day are dropped.
            let oldest = (now - Milliseconds.day) / Self.bucketMs
            if s.pruned != bucket {
                s.pruned = bucket
                for (name, buckets) in s.rules where buckets.keys.contains(where: { $0 < oldest }) {
                    s.rules[name] = buckets.filter { $0.key >= oldest }
                }
            }
        }
    }

    /// One rule's sums over the last hour and day before `now` — in whole buckets: the current one and the 11 (or
    /// 287) before it, so 55 to 60 minutes (23 h 55 min to a day) — and its fires and trigger matches per hour over
    /// the day (oldest first, 24 of each).
    package struct Summary: Sendable {
        var hour = Counts()
        var day = Counts()
        var firedByHour = [Int](repeating: 0, count: 24)
        var triggeredByHour = [Int](repeating: 0, count: 24)
    }

    package func summary(of rule: String, at now: Int64) -> Summary {
        Self.summary(state.withLock { $0.rules[rule] ?? [:] }, at: now)
    }

    /// Every rule's buckets (of the last day) as this process counted them: what a fleet process writes to the
    /// database for the others' consoles, `since` a bucket.
    package func buckets(since bucket: Int64 = 0) -> [String: [Int64: Counts]] {
        state.withLock { s in s.rules.mapValues { $0.filter { $0.key >= bucket } }.filter { !$0.value.isEmpty } }
    }

    /// ``summary(of:at:)`` of one rule's buckets, however gathered (one process's, or summed across a fleet's).
    package static func summary(_ buckets: [Int64: Counts], at now: Int64) -> Summary {
        var s = Summary()
        let current = now / Self.bucketMs
        for (b, c) in buckets {
            let age = current - b
            guard age >= 0, age < 288 else { continue }
            s.day.add(c)
            if age < 12 { s.hour.add(c) }
            let hour = 23 - Int(age / 12)
            s.firedByHour[hour] += c.fired
            s.triggeredByHour[hour] += c.triggered
        }
        return s
    }
}
