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
        #expect(try queue.lines(of: first) == (0..<3).map(Self.line))
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
            sent += try reopened.lines(of: segment)
            reopened.remove(segment)
        }
        #expect(sent == (0..<7).map(Self.line))
        _ = try reopened.append(Self.line(7))
        reopened.sealOpen()
        #expect(try reopened.lines(of: try #require(reopened.oldest())) == [Self.line(7)])
    }

    @Test func aFullQueueDropsItsOldestBatchAndABigEventIsRefused() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let queue = try EventQueue(folder: folder, maxEvents: 6, batchEvents: 3, logger: Logger(label: "test"))
        for n in 0..<8 { _ = try queue.append(Self.line(n)) }
        #expect(queue.count == 5)
        #expect(queue.dropped == 3)
        #expect(try queue.lines(of: try #require(queue.oldest())) == (3..<6).map(Self.line))
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
        var store = try ActionStore(folder: folder, logger: Logger(label: "test"))
        #expect(try store.add([action("a"), action("b"), action("c")], cursor: "3", for: "u").count == 3)
        #expect(store.take(for: ["u"])?["id"] == "a")
        store = try ActionStore(folder: folder, logger: Logger(label: "test"))
        #expect(store.cursor(for: "u") == "3")
        #expect(store.pendingCount == 2)
        // A later pull that repeats an action (a merge of identities) does not hand it over again.
        #expect(try store.add([action("c"), action("d")], cursor: "9", for: "u").count == 1)
        #expect(store.take(for: ["u"])?["id"] == "b")
        store = try ActionStore(folder: folder, logger: Logger(label: "test"))
        #expect([store.take(for: ["u"]), store.take(for: ["u"]), store.take(for: ["u"])].map { $0?["id"] } == ["c", "d", nil])
        #expect(store.cursor(for: "u") == "9" && store.cursor(for: "other") == "0")
    }

    @Test func retryAfterIsSecondsOrAnHTTPDateAndBounded() {
        #expect(Transport.retryAfter("7") == .seconds(7))
        #expect(Transport.retryAfter("99999") == .seconds(3600))
        #expect(Transport.retryAfter("soon") == nil)
        #expect(Transport.retryAfter("-3") == nil)
        #expect(Transport.retryAfter("Wed, 21 Oct 2015 07:28:00 GMT") == .zero)
        // A `Retry-After` shorter than the backoff (0, a date past) does not shorten it; a longer one is waited.
        let retry = BeckonClient.Retry(first: .seconds(2), max: .seconds(60))
        #expect((1...20).allSatisfy { _ in retry.wait(after: 1, retryAfter: .zero) >= .seconds(1) })
        #expect(retry.wait(after: 1, retryAfter: .seconds(90)) == .seconds(90))
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

    /// Every waiter is woken by a notify; waiters with nothing to wake them sleep their timeout, however many there are
    /// (one waiter used to wake the one before it: two action streams woke each other for ever).
    @Test func aSignalWakesEveryWaiterAndLetsTheOthersSleep() async {
        let signal = Signal()
        let clock = ContinuousClock()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<3 { group.addTask { await signal.wait(timeout: .seconds(3600)) } }
            while signal.waiting < 3 { try? await Task.sleep(for: .milliseconds(10)) }
            signal.notify()
            // (Every waiter is let go by the notify itself, not by its timeout.)
            #expect(signal.waiting == 0)
            await group.waitForAll()
        }
        var woken = 0
        let rounds = Locked(0)
        let quiet = clock.now
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    while clock.now - quiet < .milliseconds(600) {
                        await signal.wait(timeout: .milliseconds(200))
                        rounds.withLock { $0 += 1 }
                    }
                }
            }
        }
        woken = rounds.withLock { $0 }
        // Two waiters, 600 ms, 200 ms timeouts: about 3 rounds each, not thousands.
        #expect(woken <= 12, "\(woken) wake-ups")
    }

    /// A segment that is there and cannot be read throws (its events stay); one whose file is gone has no lines.
    @Test func anUnreadableSegmentThrowsAndAMissingOneIsEmpty() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let queue = try EventQueue(folder: folder, maxEvents: 100, batchEvents: 2, logger: Logger(label: "test"))
        for n in 0..<4 { _ = try queue.append(Self.line(n)) }
        let first = try #require(queue.oldest())
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().first)
        let file = folder.appendingPathComponent(name)
        let saved = try Data(contentsOf: file)
        // (A folder in the file's place: unreadable whoever runs the test, root included.)
        try FileManager.default.removeItem(at: file)
        try FileManager.default.createDirectory(at: file, withIntermediateDirectories: false)
        #expect(throws: (any Error).self) { try queue.lines(of: first) }
        #expect(queue.count == 4)
        try FileManager.default.removeItem(at: file)
        #expect(try queue.lines(of: first) == [])
        try saved.write(to: file)
        #expect(try queue.lines(of: first) == [Self.line(0), Self.line(1)])
    }

    /// Actions pulled for another user than the current one (a sign-out's leftovers) are passed over.
    @Test func takingPassesOverAnotherUsersActions() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try ActionStore(folder: folder, logger: Logger(label: "test"))
        let action = { (id: String) -> JSONValue in ["id": .string(id), "action": "prompt", "permission": "att"] }
        _ = try store.add([action("a1")], cursor: "1", for: "ann")
        _ = try store.add([action("b1"), action("b2")], cursor: "2", for: "bob")
        _ = try store.add([action("a2")], cursor: "3", for: "ann")
        #expect(store.take(for: ["bob"])?["id"] == "b1")
        #expect(store.take(for: ["ann"])?["id"] == "a2")
        #expect(store.take(for: ["ann", "bob"]) == nil)
    }

    /// A damaged file is moved aside and logged, not silently replaced.
    @Test func aDamagedStateFileIsMovedAside() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("state.json")
        try Data(#"{"epoch":3,"cursors":{"u":"#.utf8).write(to: file)
        #expect(Disk.readJSON([String: Int].self, from: file, logger: Logger(label: "test")) == nil)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(names.count == 1 && names[0].hasPrefix("state.json.damaged-"))
        #expect(Disk.readJSON([String: Int].self, from: file, logger: Logger(label: "test")) == nil)
    }

    @Test func aLineIsAnEventOnlyWhenItIsAJSONObject() {
        #expect(ClientParts.isJSONObject(Self.line(1)))
        #expect(!ClientParts.isJSONObject(Data(#"{"type":"track","#.utf8)))
        #expect(!ClientParts.isJSONObject(Data("[1]".utf8)))
        #expect(!ClientParts.isJSONObject(Data([0, 0, 0])))
    }
}
