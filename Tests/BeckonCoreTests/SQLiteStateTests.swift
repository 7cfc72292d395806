import BeckonCore
import BeckonStore
import Foundation
import PropertyBased
import Testing

/// Users' states in SQLite (``SQLiteStateBackend``): what a restarted process finds is what the last flush wrote.
struct SQLiteStateTests {
    /// A fresh database file, removed with its write-ahead log after `body`.
    static func withDatabase<R>(_ body: (String) throws -> R) throws -> R {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-sqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        return try body(dir.appendingPathComponent("state.sqlite").path)
    }

    /// The stream straight through in memory equals, per user, a first process on SQLite that stops at a random cut
    /// (its engine and database handle dropped after a flush) followed by a second process that opens the same file.
    @Test func aRestartedProcessContinuesFromTheDatabase() async throws {
        let rs = try StateTests.ruleSet()
        let picks = Gen.int(in: 0...10_000).array(of: 20...90)
        let cut = Gen.int(in: 0...1_000)
        await propertyCheck(count: 12, input: picks, cut) { picks, cut in
            let events = StateTests.stream(picks)
            let straight = StateTests.run(Engine(ruleSet: rs), events[...], until: StateTests.end(events))
            let c = cut % (events.count + 1)
            let restarted = try! SQLiteStateTests.withDatabase { path in
                try StateTests.runWithRestart(rs, events, cut: c) { try SQLiteStateBackend(path: path) }
            }
            #expect(StateTests.byUser(restarted.actions) == StateTests.byUser(straight), "cut at \(c) of \(events.count)")
            #expect(restarted.failures == 0)
        }
    }

    @Test func aBatchIsStoredAndReadBack() throws {
        try SQLiteStateTests.withDatabase { path in
            let backend = try SQLiteStateBackend(path: path)
            try backend.write([
                SavedState(userID: "u1", bytes: [1, 2, 3], nextDue: 5_000),
                SavedState(userID: "u2", bytes: [], nextDue: nil),
                SavedState(userID: "ü3", bytes: [0, 255], nextDue: 7_000),
            ])
            try backend.write([SavedState(userID: "u1", bytes: [9], nextDue: nil)])
            let reopened = try SQLiteStateBackend(path: path)
            #expect(try reopened.read("u1") == [9])
            #expect(try reopened.read("u2") == [])
            #expect(try reopened.read("ü3") == [0, 255])
            #expect(try reopened.read("u4") == nil)
            #expect(try reopened.userCount() == 3)
            #expect(try reopened.usersWithPendingActions().map(\.userID) == ["ü3"])
            #expect(try reopened.usersWithPendingActions().map(\.due) == [7_000])
            #expect(try reopened.readStream() == nil)
            try reopened.writeStream([4, 2])
            #expect(try SQLiteStateBackend(path: path).readStream() == [4, 2])
        }
    }

    /// A service's database folds its write-ahead log in on a thread of its own: its writer only appends (SQLite's
    /// own checkpoint waits for the backstop), the log is folded in with no further write, and a clean stop leaves
    /// no log. A command's database keeps SQLite's checkpoint.
    @Test func aServicesLogIsFoldedInOnAThreadOfItsOwn() throws {
        try SQLiteStateTests.withDatabase { path in
            let command = try SQLiteStateBackend(path: path)
            #expect(try command.pragma("wal_autocheckpoint") == 1000)
            let backend = try SQLiteStateBackend(path: path, service: true)
            #expect(try backend.pragma("wal_autocheckpoint") == SQLiteStateBackend.backstopLogPages)
            for n in 0..<50 {
                try backend.write(
                    (0..<20).map { SavedState(userID: "u\(n)-\($0)", bytes: Array(repeating: 7, count: 2000), nextDue: nil) })
            }
            let deadline = Date(timeIntervalSinceNow: 10)
            while backend.framesFoldedInBackground == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
            #expect(backend.framesFoldedInBackground > 0, "nothing was folded in within 10 s")
            #expect(try backend.userCount() == 1000)
            try backend.truncateLog()
            let log = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
            #expect(log == 0)
            #expect(try SQLiteStateBackend(path: path).read("u49-19") == Array(repeating: 7, count: 2000))
        }
    }

    /// A row that does not decode is reported and its user starts empty: one damaged row never stops the stream.
    @Test func aDamagedRowIsReportedNotFatal() throws {
        try SQLiteStateTests.withDatabase { path in
            let rs = try StateTests.ruleSet()
            let backend = try SQLiteStateBackend(path: path)
            try backend.write([SavedState(userID: "u1", bytes: [0x42, 0x4b, 0x53, 0xff], nextDue: nil)])
            let store = SavedStateStore(backend: backend)
            let engine = Engine(ruleSet: rs, store: store)
            let events = StateTests.stream([1, 2, 3, 4])
            _ = StateTests.run(engine, events[...])
            #expect(store.decodingFailures.map(\.userID).contains("u1") == events.contains { $0.userID == "u1" })
        }
    }
}
