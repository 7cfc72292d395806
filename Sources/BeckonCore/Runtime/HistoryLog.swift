import CBeckon

/// A user's event history, as compact as exactness allows.
///
/// Every tracked occurrence is one `UInt64`: the series index in the top 20 bits, milliseconds since 1970 in the
/// low 44 (good until the year 2527). Entries stay sorted, so the count of a series in any time range is two
/// binary searches. Entries older than the longest window any loaded rule asks of their series are dropped.
/// Series that need `first_seen`, `last_seen` or a lifetime count also keep a ``LifetimeStat``.
public struct HistoryLog: Sendable {
    static let timeBits: UInt64 = 44
    static let timeMask: UInt64 = (1 << 44) - 1
    public static let maxSeries = 1 << 20

    public private(set) var entries: ContiguousArray<UInt64> = []
    /// Lifetime facts and numeric values live in a side object made on first use (copied on write): most users'
    /// logs need neither, and the log stays two words smaller.
    private var side: Side?

    final class Side: @unchecked Sendable {
        var lifetime: ContiguousArray<LifetimeStat> = []
        var values: ContiguousArray<ValuedEntry> = []
        init() {}
        init(_ other: Side) {
            lifetime = other.lifetime
            values = other.values
        }
    }

    private mutating func uniqueSide() -> Side {
        if side != nil && isKnownUniquelyReferenced(&side!) { return side! }
        let s = side.map(Side.init) ?? Side()
        side = s
        return s
    }

    public private(set) var lifetime: ContiguousArray<LifetimeStat> {
        get { side?.lifetime ?? [] }
        _modify { yield &uniqueSide().lifetime }
    }
    /// Numeric property values of series that `sum` reads, keyed like `entries`.
    public private(set) var values: ContiguousArray<ValuedEntry> {
        get { side?.values ?? [] }
        _modify { yield &uniqueSide().values }
    }

    public init() {}

    /// Asks the CPU for the entries' memory.
    @inline(__always) func prefetch() { entries.withUnsafeBufferPointer { beckon_prefetch($0.baseAddress) } }

    @inline(__always) static func key(_ series: Int32, _ ms: Int64) -> UInt64 {
        (UInt64(UInt32(bitPattern: series)) << timeBits) | (UInt64(max(0, ms)) & timeMask)
    }

    @inline(__always) func lowerBound(_ k: UInt64) -> Int {
        var lo = 0
        var hi = entries.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if entries[mid] < k { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Records an occurrence at `ms`, dropping this series' entries at or before `ms - retention`
    /// relative to `now` (entries no window can reach any more).
    public mutating func record(series: Int32, at ms: Int64, now: Int64, retentionMs: Int64, keepsLifetime: Bool) {
        if retentionMs > 0 {
            let k = HistoryLog.key(series, ms)
            // Common case: the newest entry of the newest series goes at the end.
            if let last = entries.last, last <= k {
                entries.append(k)
            } else {
                entries.insert(k, at: lowerBound(k &+ 1))
            }
            let cutoff = now - retentionMs
            if cutoff > 0 {
                let start = lowerBound(HistoryLog.key(series, 0))
                let keep = lowerBound(HistoryLog.key(series, cutoff + 1))
                if keep > start { entries.removeSubrange(start..<keep) }
            }
        }
        if keepsLifetime { bumpLifetime(series, ms) }
    }

    private mutating func bumpLifetime(_ series: Int32, _ ms: Int64) {
        let side = uniqueSide()
        var lo = 0
        var hi = side.lifetime.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if side.lifetime[mid].series < series { lo = mid + 1 } else { hi = mid }
        }
        if lo < side.lifetime.count && side.lifetime[lo].series == series {
            side.lifetime[lo].count &+= 1
            side.lifetime[lo].first = min(side.lifetime[lo].first, ms)
            side.lifetime[lo].last = max(side.lifetime[lo].last, ms)
        } else {
            side.lifetime.insert(LifetimeStat(series: series, count: 1, first: ms, last: ms), at: lo)
        }
    }

    /// Records a numeric value at `ms` for `sum`, dropping values no window can reach any more.
    public mutating func recordValue(series: Int32, at ms: Int64, value: Double, now: Int64, retentionMs: Int64) {
        let k = HistoryLog.key(series, ms)
        let side = uniqueSide()
        if let last = side.values.last, last.key <= k {
            side.values.append(ValuedEntry(key: k, value: value))
        } else {
            side.values.insert(ValuedEntry(key: k, value: value), at: valuesBound(k &+ 1))
        }
        let cutoff = now - retentionMs
        if cutoff > 0 {
            let start = valuesBound(HistoryLog.key(series, 0))
            let keep = valuesBound(HistoryLog.key(series, cutoff + 1))
            if keep > start { side.values.removeSubrange(start..<keep) }
        }
    }

    private func valuesBound(_ k: UInt64) -> Int {
        let values = self.values
        var lo = 0
        var hi = values.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if values[mid].key < k { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The sum of `series`' values with time in `from...to`.
    public func sum(series: Int32, from: Int64, to: Int64) -> Double {
        guard to >= from else { return 0 }
        let a = valuesBound(HistoryLog.key(series, max(0, from)))
        let b = valuesBound(HistoryLog.key(series, to) &+ 1)
        let values = self.values
        var total = 0.0
        var i = a
        while i < b {
            total += values[i].value
            i += 1
        }
        return total
    }

    /// Occurrences of `series` with time in `from...to` (milliseconds, inclusive).
    public func count(series: Int32, from: Int64, to: Int64) -> Int {
        guard to >= from, !entries.isEmpty else { return 0 }
        let a = lowerBound(HistoryLog.key(series, max(0, from)))
        let b = lowerBound(HistoryLog.key(series, to) &+ 1)
        return max(0, b - a)
    }

    /// The times of `series` in `from...to`, oldest first.
    public func times(series: Int32, from: Int64, to: Int64) -> [Int64] {
        guard to >= from else { return [] }
        let a = lowerBound(HistoryLog.key(series, max(0, from)))
        let b = lowerBound(HistoryLog.key(series, to) &+ 1)
        return entries[a..<max(a, b)].map { Int64($0 & HistoryLog.timeMask) }
    }

    /// The latest time of `series` at or before `to`, if it is still in the log.
    public func latest(series: Int32, atOrBefore to: Int64) -> Int64? {
        let b = lowerBound(HistoryLog.key(series, to) &+ 1)
        guard b > 0 else { return nil }
        let e = entries[b - 1]
        guard e >> HistoryLog.timeBits == UInt64(UInt32(bitPattern: series)) else { return nil }
        return Int64(e & HistoryLog.timeMask)
    }

    public func lifetimeStat(series: Int32) -> LifetimeStat? {
        let lifetime = self.lifetime
        var lo = 0
        var hi = lifetime.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if lifetime[mid].series < series { lo = mid + 1 } else { hi = mid }
        }
        return lo < lifetime.count && lifetime[lo].series == series ? lifetime[lo] : nil
    }

    /// Heap bytes this log holds.
    public var byteCount: Int {
        entries.capacity * 8 + lifetime.capacity * MemoryLayout<LifetimeStat>.stride + values.capacity * 16
    }
}

/// Lifetime facts of one series for one user.
public struct LifetimeStat: Sendable, Hashable {
    public var series: Int32
    public var count: UInt32
    public var first: Int64
    public var last: Int64
}

/// A time-keyed numeric value.
public struct ValuedEntry: Sendable, Hashable {
    public var key: UInt64
    public var value: Double
}
