import Foundation
import Testing

@testable import BeckonPostgres

/// The log's bodies compressed against the preset dictionary (no database needed).
struct LogBodyTests {
    /// A record as the fleet appends it for one event of the benchmark's (scripts/bench-service/batch.lua).
    static func record(_ n: Int) -> [UInt8] {
        let json =
            #"{"type":"track","userId":"u\#(n % 10_000)","event":"Product Viewed","messageId":"w3-\#(n)","properties":{"url":"https://example.com/?utm_source=facebook&fbclid=x\#(n)"},"context":{"os":{"name":"iOS"},"locale":"en_US"}}"#
        return Array("A - 1764380\(100_000 + n) - -\nE \(json.utf8.count)\n\(json)\n".utf8)
    }

    @Test func aRecordIsStoredCompressedAndReadBackWhole() {
        let record = Self.record(42)
        let stored = LogBody.pack(record)
        #expect(stored.first == 0x04)
        #expect(stored.count * 100 < record.count * 60, "\(record.count) bytes stored as \(stored.count)")
        #expect(LogBody.unpack(stored) == record)
    }

    @Test func recordsThatDoNotShrinkAndRowsWrittenBeforeAreKeptAsTheyAre() {
        var rng = SystemRandomNumberGenerator()
        let noise = Array("E 64\n".utf8) + (0..<64).map { _ in UInt8.random(in: 0...255, using: &rng) }
        #expect(LogBody.pack(noise) == noise)
        #expect(LogBody.pack(Array("T 5\n".utf8)) == Array("T 5\n".utf8))
        let old = Self.record(7)
        #expect(LogBody.unpack(old) == old)
    }

    @Test func aDamagedBodyComesBackAsStoredNeverAsAnotherRecord() {
        let stored = LogBody.pack(Self.record(9))
        var flipped = stored
        flipped[flipped.count / 2] ^= 0x5A
        var longer = stored
        longer[1] &+= 1
        for damaged in [
            Array(stored.prefix(8)), flipped, longer, stored + [0], [0x04], [0x04, 0xFF, 0xFF, 0xFF, 0x7F, 0], [0x01],
            [0x01, 0xFF, 0xFF, 0xFF, 0x7F, 0],
        ] {
            let read = LogBody.unpack(damaged)
            #expect(read == damaged || read == Self.record(9))
            #expect(read.first != UInt8(ascii: "A") || read == Self.record(9))
        }
        // A length past the bound is not allocated.
        #expect(LogBody.unpack([0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x03]) == [0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x03])
        #expect(LogBody.unpack([0x04, 0xFF, 0xFF, 0xFF, 0xFF, 0x03]) == [0x04, 0xFF, 0xFF, 0xFF, 0xFF, 0x03])
    }

    /// Every frame holds its checksum: whichever byte after the length is changed, the body is read as damaged or as
    /// what was stored (a bit zstd's decoder does not read: 2 of the 339 changes here), never as other bytes.
    @Test func aChangedByteOfARecordOrAPageIsNeverReadAsOtherBytes() {
        let record = Self.record(11)
        let stored = LogBody.pack(record)
        let entries = Self.page(6)
        let page = LogBody.packPage(entries, receivedAt: 1_000)
        var found = 0
        for k in 5..<stored.count {
            var changed = stored
            changed[k] ^= 0x01
            let read = LogBody.unpack(changed)
            #expect(read == changed || read == record, "byte \(k) of \(stored.count)")
            if read == changed { found += 1 }
        }
        for k in 5..<page.count {
            var changed = page
            changed[k] ^= 0x01
            let read = LogBody.unpackPage(changed, receivedAt: 1_000)
            #expect(read == nil || read == entries, "byte \(k) of \(page.count)")
            if read == nil { found += 1 }
        }
        let changes = stored.count + page.count - 10
        #expect(found * 100 >= changes * 95, "\(found) of \(changes) changes found")
    }

    /// Bodies as the log wrote them before zstd (0x01 a record, 0x02 a page: raw deflate, a 2 KB window, memLevel 4,
    /// level 6, the dictionary preset; made with zlib at those settings) are still read.
    @Test func bodiesDeflatedBeforeZstdAreStillRead() throws {
        let record = try #require(
            Data(
                base64Encoded:
                    "AeUAAACD6DMzMbYwMAQabmIE02NggEdXqYkRkt8CIJGhEJaZWg72NLJnyo11wYrxRXlqBdCnOal6wISpb4+IfFtgPklNys/PVktLSs7JTLGtAJqEmvExknAtSgKNBybQ2louAA=="
            ))
        #expect(LogBody.unpack(Array(record)) == Self.record(42))
        let page = try #require(
            Data(
                base64Encoded:
                    "AqQDAABjYGAqNXjECNFuZmJsYWBoAAJQrYaW5ng0lxog+TAAEiUKYZmp5WCvI3up3FjXgEC8p1YAvZuTqgdMnfr2iBRgC8wsqUn5+dlqaUnJOZkpthUGaJkfIxnXoiTSeGAira3lYmJkKjXE9KghcR41JMGjhtTyqCFZHmVhYio1wvSoEXEeNSLBo0bU8qgRWR5lY2YqNcb0qDFxHjUmwaPG1PKoMVkeBQA="
            ))
        let entries = (0..<4).map {
            LogBody.PageEntry(offset: Int64($0) * 2, userID: "u\($0)", receivedAt: 1_000 - Int64($0), record: Self.record($0))
        }
        #expect(LogBody.unpackPage(Array(page), receivedAt: 1_000) == entries)
    }

    @Test func threadsPackAndReadAtOnceEachWithAContextOfItsOwn() {
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for n in 0..<500 {
                let record = Self.record(t * 1_000 + n)
                if LogBody.unpack(LogBody.pack(record)) != record { failures.add() }
            }
        }
        #expect(failures.count == 0)
    }

    final class Failures: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        func add() { lock.withLock { n += 1 } }
        var count: Int { lock.withLock { n } }
    }

    @Test func aLargeRecordRoundTrips() {
        let record = (0..<2_000).flatMap(Self.record)
        let stored = LogBody.pack(record)
        #expect(stored.count < record.count / 4)
        #expect(LogBody.unpack(stored) == record)
    }

    static func page(_ n: Int, from start: Int = 0) -> [LogBody.PageEntry] {
        (start..<start + n).map {
            LogBody.PageEntry(
                offset: Int64($0 - start) * 2, userID: "u\($0 % 10_000)", receivedAt: 1_000 - Int64($0), record: record($0))
        }
    }

    @Test func aPageRoundTripsWithItsNumbersUsersAndTimes() {
        let entries = Self.page(16)
        let stored = LogBody.packPage(entries, receivedAt: 1_000)
        #expect(stored.first == 0x05)
        #expect(LogBody.unpackPage(stored, receivedAt: 1_000) == entries)
        // A page of one entry, and of entries that do not shrink, are kept as they are (0x03).
        var rng = SystemRandomNumberGenerator()
        let noise = [
            LogBody.PageEntry(
                offset: 0, userID: "é", receivedAt: 3, record: (0..<40).map { _ in UInt8.random(in: 0...255, using: &rng) })
        ]
        let plain = LogBody.packPage(noise, receivedAt: 3)
        #expect(plain.first == 0x03)
        #expect(LogBody.unpackPage(plain, receivedAt: 3) == noise)
        #expect(LogBody.unpackPage([0x03], receivedAt: 3) == [])
    }

    /// Sixteen of the benchmark's records compressed as one page take under a third of what each compressed alone does:
    /// the fields and values each event repeats are written once a page.
    @Test func aPageOfSixteenIsSmallerThanItsEntriesAlone() {
        let entries = Self.page(16, from: 100)
        let alone = entries.reduce(0) { $0 + LogBody.pack($1.record).count }
        let together = LogBody.packPage(entries, receivedAt: 1_000).count
        #expect(together * 3 < alone, "\(alone) bytes alone, \(together) as a page")
    }

    @Test func aDamagedPageIsNotRead() {
        let stored = LogBody.packPage(Self.page(8), receivedAt: 1_000)
        var flipped = stored
        flipped[flipped.count / 2] ^= 0x5A
        for damaged in [
            Array(stored.prefix(9)), flipped, stored + [0], [0x05], [0x02], [0x01, 1, 0, 0, 0, 65], [0x04, 1, 0, 0, 0, 65],
            [0x41],
        ] {
            let read = LogBody.unpackPage(damaged, receivedAt: 1_000)
            #expect(read == nil || read == Self.page(8))
        }
        // Entries that run past the end, a varint of more than 64 bits, an age before the earliest time.
        #expect(LogBody.unpackPage([0x03, 0, 0, 5, 65], receivedAt: 0) == nil)
        #expect(LogBody.unpackPage([0x03] + Array(repeating: 0xFF, count: 11) + [0], receivedAt: 0) == nil)
        #expect(LogBody.unpackPage([0x03, 0, 1, 0, 0], receivedAt: .min) == nil)
        #expect(LogBody.unpackPage([0x03, 0, 1, 0, 0], receivedAt: 5)?.first?.receivedAt == 4)
        // A length past the bound is not allocated.
        #expect(LogBody.unpackPage([0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0x03], receivedAt: 0) == nil)
        #expect(LogBody.unpackPage([0x05, 0xFF, 0xFF, 0xFF, 0xFF, 0x03], receivedAt: 0) == nil)
    }
}
