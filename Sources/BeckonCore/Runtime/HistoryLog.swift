/// A user's event history, as compact as exactness allows.
///
/// Every tracked occurrence is one `UInt64`: the series index in the top 20 bits, milliseconds since 1970 in the
/// low 44 (good until the year 2527). Entries stay sorted, so the count of a series in any time range is two
/// binary searches. Entries older than the longest window any loaded rule asks of their series are dropped.
/// Series that need `first_seen`, `last_seen` or a lifetime count also keep a ``LifetimeStat``.
///
/// Not copyable: a profile's log is read and changed in place, in memory it owns (reading it counts no references,
/// and there is no array header or uniqueness check per entry).
public struct HistoryLog: ~Copyable {
    static let timeBits: UInt64 = 44
    static let timeMask: UInt64 = (1 << 44) - 1
    public static let maxSeries = ValueLimits.maxSeries

    /// The entries, sorted.
    private var log = RawVector<UInt64>()
    /// Lifetime facts by series, and numeric values keyed like `log`: each in memory of its own, made on first use
    /// (most users' logs need neither, and one stat is one 24-byte allocation).
    private var stats = RawVector<LifetimeStat>()
    private var valued = RawVector<ValuedEntry>()

    public init() {}

    /// The entries, oldest series first (a copy).
    public var entries: [UInt64] { log.elements }
    /// Lifetime facts, by series (a copy).
    public var lifetime: [LifetimeStat] { stats.elements }
    /// Numeric property values of series that `sum` reads, keyed like `entries` (a copy).
    public var values: [ValuedEntry] { valued.elements }

    /// Asks the CPU for the entries' memory (a hint).
    @inline(__always) func prefetch() { log.prefetch(maxLines: 8) }

    @inline(__always) static func key(_ series: Int32, _ ms: Int64) -> UInt64 {
        (UInt64(UInt32(bitPattern: series)) << timeBits) | (UInt64(max(0, ms)) & timeMask)
    }

    /// The first index whose entry is not below `k`.
    @inline(__always) func lowerBound(_ k: UInt64) -> Int { log.lowerBound { $0 < k } }

    /// ``lowerBound(_:)`` within `from..<to`, where it is known to be.
    @inline(__always) func lowerBound(_ k: UInt64, from: Int, to: Int) -> Int { log.lowerBound(from: from, to: to) { $0 < k } }

    /// Records an occurrence at `ms`, dropping this series' entries at or before `ms - retention`
    /// relative to `now` (entries no window can reach any more).
    public mutating func record(series: Int32, at ms: Int64, now: Int64, retentionMs: Int64, keepsLifetime: Bool) {
        if retentionMs > 0 {
            let k = HistoryLog.key(series, ms)
            // Where it goes, after equal entries. Common case: the newest entry of the newest series goes at the end.
            let at = log.last.map { $0 <= k } ?? true ? log.count : lowerBound(k &+ 1)
            let cutoff = now - retentionMs
            if cutoff <= 0 {
                log.insert(k, at: at)
            } else {
                record(k, at: at, series: series, ms: ms, cutoff: cutoff)
            }
        }
        if keepsLifetime { bumpLifetime(series, ms) }
    }

    /// Puts `k` (of `series`, at `ms`) at `at` and drops the series' entries at or before `cutoff`, moving as little
    /// as it can.
    private mutating func record(_ k: UInt64, at: Int, series: Int32, ms: Int64, cutoff: Int64) {
        // The series' entries before `at` are `start..<at`.
        let start = lowerBound(HistoryLog.key(series, 0), from: 0, to: at)
        let keep = HistoryLog.key(series, cutoff + 1)
        if ms <= cutoff {
            // Out of reach already: it goes at once, with every entry of the series at or before the cutoff.
            return log.removeSubrange(start..<lowerBound(keep, from: at, to: log.count))
        }
        // Those at or before the cutoff, `start..<cut`, go.
        let cut = lowerBound(keep, from: start, to: at)
        if cut == start { return log.insert(k, at: at) }
        // One in, `cut - start` out: the survivors move down over the expired ones, the new entry follows them, and
        // only what is left of the gap moves the later series (nothing, in the steady one-in-one-out case).
        let kept = at - cut
        log.copy(cut..<at, to: start)
        log[start + kept] = k
        log.removeSubrange((start + kept + 1)..<at)
    }

    private mutating func bumpLifetime(_ series: Int32, _ ms: Int64) {
        let i = stats.lowerBound { $0.series < series }
        if i < stats.count && stats[i].series == series {
            stats[i].count &+= 1
            stats[i].first = min(stats[i].first, ms)
            stats[i].last = max(stats[i].last, ms)
        } else {
            stats.insert(LifetimeStat(series: series, count: 1, first: ms, last: ms), at: i)
        }
    }

    /// Records a numeric value at `ms` for `sum`, dropping values no window can reach any more.
    public mutating func recordValue(series: Int32, at ms: Int64, value: Double, now: Int64, retentionMs: Int64) {
        let k = HistoryLog.key(series, ms)
        if let last = valued.last, last.key <= k {
            valued.append(ValuedEntry(key: k, value: value))
        } else {
            valued.insert(ValuedEntry(key: k, value: value), at: valuesBound(k &+ 1))
        }
        let cutoff = now - retentionMs
        if cutoff > 0 {
            let start = valuesBound(HistoryLog.key(series, 0))
            let keep = valuesBound(HistoryLog.key(series, cutoff + 1))
            if keep > start { valued.removeSubrange(start..<keep) }
        }
    }

    private func valuesBound(_ k: UInt64) -> Int { valued.lowerBound { $0.key < k } }

    /// The sum of `series`' values with time in `from...to`.
    public func sum(series: Int32, from: Int64, to: Int64) -> Double {
        guard to >= from else { return 0 }
        let a = valuesBound(HistoryLog.key(series, max(0, from)))
        let b = valuesBound(HistoryLog.key(series, to) &+ 1)
        var total = 0.0
        var i = a
        while i < b {
            total += valued[i].value
            i += 1
        }
        return total
    }

    /// Occurrences of `series` with time in `from...to` (milliseconds, inclusive).
    @inline(__always) public func count(series: Int32, from: Int64, to: Int64) -> Int {
        entries(series: series, from: from, to: to).count
    }

    /// The times of `series` in `from...to`, oldest first.
    public func times(series: Int32, from: Int64, to: Int64) -> [Int64] {
        entries(series: series, from: from, to: to).map { Int64(log[$0] & HistoryLog.timeMask) }
    }

    /// Where the entries of `series` with time in `from...to` are.
    @inline(__always) private func entries(series: Int32, from: Int64, to: Int64) -> Range<Int> {
        guard to >= from, !log.isEmpty else { return 0..<0 }
        let a = lowerBound(HistoryLog.key(series, max(0, from)))
        return a..<lowerBound(HistoryLog.key(series, to) &+ 1, from: a, to: log.count)
    }

    /// The latest time of `series` at or before `to`, if it is still in the log.
    public func latest(series: Int32, atOrBefore to: Int64) -> Int64? {
        let b = lowerBound(HistoryLog.key(series, to) &+ 1)
        guard b > 0 else { return nil }
        let e = log[b - 1]
        guard e >> HistoryLog.timeBits == UInt64(UInt32(bitPattern: series)) else { return nil }
        return Int64(e & HistoryLog.timeMask)
    }

    public func lifetimeStat(series: Int32) -> LifetimeStat? {
        let i = stats.lowerBound { $0.series < series }
        return i < stats.count && stats[i].series == series ? stats[i] : nil
    }

    /// Heap bytes this log holds.
    public var byteCount: Int {
        log.capacity * 8 + stats.capacity * MemoryLayout<LifetimeStat>.stride
            + valued.capacity * MemoryLayout<ValuedEntry>.stride
    }
}

/// Lifetime facts of one series for one user.
public struct LifetimeStat: Sendable, Hashable, BitwiseCopyable {
    public var series: Int32
    public var count: UInt32
    public var first: Int64
    public var last: Int64
}

/// A time-keyed numeric value.
public struct ValuedEntry: Sendable, Hashable, BitwiseCopyable {
    public var key: UInt64
    public var value: Double
}

extension HistoryLog {
    /// Puts back a series' lifetime facts (restoring a ``UserState``).
    mutating func restoreLifetime(series: Int32, count: UInt32, first: Int64, last: Int64) {
        let stat = LifetimeStat(series: series, count: count, first: first, last: last)
        let i = stats.lowerBound { $0.series < series }
        if i < stats.count && stats[i].series == series { stats[i] = stat } else { stats.insert(stat, at: i) }
    }

    /// Puts back an occurrence of `series` at `ms` without dropping any (restoring a ``UserState``: what was recorded
    /// is kept, whatever the windows of the rule set it is restored under).
    mutating func restoreEntry(series: Int32, at ms: Int64) {
        record(series: series, at: ms, now: 0, retentionMs: 1, keepsLifetime: false)
    }

    /// Puts back a numeric value of `series` at `ms`, without dropping any.
    mutating func restoreValue(series: Int32, at ms: Int64, value: Double) {
        recordValue(series: series, at: ms, value: value, now: 0, retentionMs: 1)
    }
}
