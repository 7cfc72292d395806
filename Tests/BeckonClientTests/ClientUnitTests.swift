import Foundation
import Logging
import Testing

@testable import BeckonClient

/// The client's parts without a service: the queue on disk, `Retry-After`, the typed actions, the action store.
struct ClientUnitTests {
    static func folder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("beckon-client-unit-\(UUID().uuidString)")
    }

    static func line(_ n: Int) -> Data { Data(#"{"type":"track","event":"E","messageId":"m\#(n)"}"#.utf8) }

    @Test func theQueueSealsBatchesKeepsThemAcrossARestartAndSkipsAHalfWrittenLine() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let queue = try EventQueue(folder: folder, maxEvents: 100, batchEvents: 3, logger: Logger(label: "test"))
        for n in 0..<7 { _ = try queue.append(Self.line(n)) }
        #expect(queue.count == 7)
        let first = try #require(queue.oldest())
        #expect(queue.lines(of: first) == (0..<3).map(Self.line))
        // The open segment (one event) gets a line cut short, as a kill in the middle of a write leaves it.
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(names.count == 3)
        let handle = try FileHandle(forWritingTo: folder.appendingPathComponent(names[2]))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"type":"track","eve"#.utf8))
        try handle.close()

        let reopened = try EventQueue(folder: folder, maxEvents: 100, batchEvents: 3, logger: Logger(label: "test"))
        #expect(reopened.count == 7)
        var sent: [Data] = []
        while let segment = reopened.oldest() {
            sent += reopened.lines(of: segment)
            reopened.remove(segment)
        }
        #expect(sent == (0..<7).map(Self.line))
        _ = try reopened.append(Self.line(7))
        reopened.sealOpen()
        #expect(reopened.lines(of: try #require(reopened.oldest())) == [Self.line(7)])
    }

    @Test func aFullQueueDropsItsOldestBatchAndABigEventIsRefused() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let queue = try EventQueue(folder: folder, maxEvents: 6, batchEvents: 3, logger: Logger(label: "test"))
        for n in 0..<8 { _ = try queue.append(Self.line(n)) }
        #expect(queue.count == 5)
        #expect(queue.dropped == 3)
        #expect(queue.lines(of: try #require(queue.oldest())) == (3..<6).map(Self.line))
        guard case .tooLarge = try queue.append(Data(repeating: 0x61, count: EventQueue.maxEventBytes + 1)) else {
            Issue.record("an event over 32 KB was queued")
            return
        }
        #expect(queue.count == 5)
    }

    @Test func theActionStoreHandsEachActionOverOnceAcrossRestarts() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let action = { (id: String) -> JSONValue in ["id": .string(id), "action": "prompt", "permission": "att"] }
        var store = try ActionStore(folder: folder)
        #expect(try store.add([action("a"), action("b"), action("c")], cursor: "3", for: "u").count == 3)
        #expect(store.take()?["id"] == "a")
        store = try ActionStore(folder: folder)
        #expect(store.cursor(for: "u") == "3")
        #expect(store.pendingCount == 2)
        // A later pull that repeats an action (a merge of identities) does not hand it over again.
        #expect(try store.add([action("c"), action("d")], cursor: "9", for: "u").count == 1)
        #expect(store.take()?["id"] == "b")
        store = try ActionStore(folder: folder)
        #expect([store.take(), store.take(), store.take()].map { $0?["id"] } == ["c", "d", nil])
        #expect(store.cursor(for: "u") == "9" && store.cursor(for: "other") == "0")
    }

    @Test func retryAfterIsSecondsOrAnHTTPDateAndBounded() {
        #expect(Transport.retryAfter("7") == .seconds(7))
        #expect(Transport.retryAfter("99999") == .seconds(3600))
        #expect(Transport.retryAfter("soon") == nil)
        #expect(Transport.retryAfter("-3") == nil)
        #expect(Transport.retryAfter("Wed, 21 Oct 2015 07:28:00 GMT") == .zero)
        let delays = (1...12).map { BeckonClient.Retry(first: .seconds(1), max: .seconds(60)).delay(after: $0) }
        #expect(delays.allSatisfy { $0 <= .seconds(60) && $0 >= .milliseconds(500) })
        #expect(delays[11] >= .seconds(30))
    }

    @Test func actionsAreTypedAndKeepTheirRawJSON() throws {
        let text = #"""
            {"id":"x1","time":"2026-03-02T09:00:00Z","userId":"mia","ruleset":"onboarding","rule":"tour",
             "action":"screen","screen":"welcome","params":{"email":"a@b.c"},"futureField":1}
            """#
        let json = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        let action = try #require(BeckonAction(json: json))
        #expect(action.rule == "onboarding/tour" && action.userId == "mia" && action.time != nil)
        #expect(action.kind == .screen(id: "welcome", params: ["email": "a@b.c"]))
        #expect(action.raw["futureField"] == 1)
        let newer = try #require(BeckonAction(json: ["id": "x2", "action": "hologram"]))
        #expect(newer.kind == .other("hologram"))
        #expect(BeckonAction(json: ["action": "prompt"]) == nil)
    }

    @Test func gzipMakesAGzipStream() throws {
        let body = Data(String(repeating: #"{"event":"Probe"},"#, count: 200).utf8)
        let packed = try #require(Gzip.compress(body))
        #expect(packed.prefix(2) == Data([0x1F, 0x8B]))
        #expect(packed.count < body.count / 10)
    }
}
