import Foundation
import Testing

@testable import BeckonCore

#if os(Linux)
    /// glibc's usable size of an allocation (at least what was asked for).
    @_silgen_name("malloc_usable_size") func mallocUsableSize(_ p: UnsafeMutableRawPointer) -> Int
#endif

/// The history log's own memory: entries stay sorted through growth, late inserts and cuts, and lifetime facts and
/// values are kept beside them.
struct HistoryLogStorageTests {
    @Test func entriesStaySortedThroughGrowthLateInsertsAndCuts() {
        var log = HistoryLog()
        var expected: [UInt64] = []
        // Three series, interleaved, some late; far more entries than the first allocation holds.
        for i in 0..<200 {
            let series = Int32(i % 3)
            let at = Int64(1_000 + (i % 7 == 0 ? i - 5 : i) * 10)
            log.record(series: series, at: at, now: Int64(1_000 + i * 10), retentionMs: 1_000_000, keepsLifetime: false)
            expected.append(HistoryLog.key(series, at))
        }
        #expect(log.entries == expected.sorted())
        #expect(log.count(series: 1, from: 0, to: 10_000) == expected.filter { $0 >> 44 == 1 }.count)
        // A short retention cuts only that series' old entries.
        log.record(series: 2, at: 3_000, now: 3_000, retentionMs: 100, keepsLifetime: false)
        #expect(log.count(series: 2, from: 0, to: 2_900) == 0)
        #expect(
            log.count(series: 2, from: 2_901, to: 3_000) == expected.filter {
                $0 >> 44 == 2 && ($0 & HistoryLog.timeMask) > 2_900
            }.count + 1)
        #expect(log.count(series: 0, from: 0, to: 10_000) == expected.filter { $0 >> 44 == 0 }.count)
        #expect(log.entries == log.entries.sorted())
        #expect(log.byteCount >= log.entries.count * 8)
    }

    @Test func lifetimeAndValuesAreKept() {
        var a = HistoryLog()
        a.record(series: 1, at: 1_000, now: 1_000, retentionMs: 0, keepsLifetime: true)
        a.record(series: 1, at: 2_000, now: 2_000, retentionMs: 0, keepsLifetime: true)
        a.recordValue(series: 2, at: 1_000, value: 5, now: 1_000, retentionMs: 86_400_000)
        a.recordValue(series: 2, at: 2_000, value: 7, now: 2_000, retentionMs: 86_400_000)
        #expect(a.lifetimeStat(series: 1)?.count == 2)
        #expect(a.lifetimeStat(series: 1)?.first == 1_000)
        #expect(a.sum(series: 2, from: 0, to: 10_000) == 12)
        #expect(a.entries.isEmpty)  // retention 0: no entries, only the lifetime stat
        #expect(HistoryLog().lifetimeStat(series: 1) == nil)
        #expect(HistoryLog().count(series: 1, from: 0, to: 10) == 0)
        #expect(HistoryLog().latest(series: 1, atOrBefore: 10) == nil)
    }
}

/// The prefetch hints cover the objects they are for (a hint past an object's end is harmless, one short of it
/// leaves a line to be missed). An allocation's usable size is at least the object's size.
struct PrefetchCoverageTests {
    #if os(Linux)
        @Test func hintedLinesHoldTheWholeObject() {
            let p = UserProfile(userID: "u", attributeCount: 3, contextCount: 0)
            let e = BoundEvent(
                kind: .track, nameID: 0, name: "E", userID: "u", timestamp: 0, messageID: nil, properties: [nil],
                context: [])
            // The usable size is at least what the object asked for.
            #expect(mallocUsableSize(Unmanaged.passUnretained(p).toOpaque()) <= Engine.Lookahead.objectBytes)
            #expect(mallocUsableSize(Unmanaged.passUnretained(e).toOpaque()) <= Engine.Lookahead.objectBytes)
        }
    #endif
}

/// An event owns its property and context slots: what goes in comes out, by slot.
struct EventSlotsTests {
    @Test func slotsHoldWhatTheEventWasMadeWith() {
        let e = BoundEvent(
            kind: .track, nameID: 0, name: "E", userID: "u", timestamp: 0, messageID: nil,
            properties: [.string("a long string that is not small"), nil, .double(2.5)], context: [.int(1)])
        #expect(e.properties.count == 3)
        #expect(e.property(0)?.stringValue == "a long string that is not small")
        #expect(e.property(1) == nil)
        if case .double(2.5)? = e.property(2) {} else { Issue.record("slot 2: \(String(describing: e.property(2)))") }
        if case .int(1)? = e.context[0] {} else { Issue.record("context 0") }
    }
}

/// The byte hash behind the key tables, the store and de-duplication, and the key tables' look-up by bytes.
struct ByteHashAndKeyTableTests {
    /// Every length from 0 to 40 (short loads, one word, an overlapping last word, several words) and keys that differ
    /// only in their first, middle or last byte or in length.
    static let keys: [String] = {
        var keys: [String] = []
        for n in 0...40 {
            let base = (0..<n).map { Character(UnicodeScalar(UInt8(97 + ($0 * 7) % 26))) }
            keys.append(String(base))
            for at in Set([0, n / 2, n - 1]) where n > 0 {
                var k = base
                k[at] = "Z"
                keys.append(String(k))
            }
        }
        return Array(Set(keys))
    }()

    @Test func keysFindThemselvesAndNothingElse() {
        let table = KeyTable(Dictionary(uniqueKeysWithValues: Self.keys.enumerated().map { ($0.element, $0.offset) }))
        func lookup(_ s: String) -> Int? { Array(s.utf8).withUnsafeBufferPointer { table.lookup($0) } }
        let index = Dictionary(uniqueKeysWithValues: Self.keys.enumerated().map { ($0.element, $0.offset) })
        for (i, k) in Self.keys.enumerated() {
            #expect(lookup(k) == i, "\(k)")
            for near in [k + "q", "Q" + k, String(k.dropLast())] { #expect(lookup(near) == index[near], "\(near)") }
        }
        #expect(lookup("not a key at all") == nil)
    }

    @Test func hashesOfSimilarIdsDoNotCollide() {
        // Ids like real ones: a prefix and a counter, at every length the loads distinguish.
        var seen = Set<UInt64>()
        var low = Set<UInt64>()
        let ids = (0..<100_000).map { "u\(String(format: "%06d", $0))" } + (0..<100_000).map { "user-\($0)@example.com" }
        for id in ids {
            let h = ByteHash.hash(id, seed: 42)
            seen.insert(h)
            low.insert(h & 0xF_FFFF)
        }
        #expect(seen.count == ids.count)
        // 200,000 ids into 2^20 buckets by the low bits (what tables use): about 90% distinct if spread evenly.
        #expect(Double(low.count) > 0.85 * Double(ids.count))
        #expect(Self.keys.count == Set(Self.keys.map { ByteHash.hash($0) }).count)
        #expect(ByteHash.hash("abc", seed: 1) != ByteHash.hash("abc", seed: 2))
    }
}
