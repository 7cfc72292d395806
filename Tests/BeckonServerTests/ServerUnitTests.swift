import BeckonCore
import BeckonStore
import BeckonYAML
import Foundation
import JWTKit
import Logging
import Testing

@testable import BeckonServer

struct IngestTests {
    let decoder: SegmentDecoder

    init() throws {
        let loaded = RuleLoader.load(texts: [
            (
                "r.yaml",
                "version: 1\ncampaign: c\nrules:\n  - id: r\n    on: Opened\n    do: [{ message: { surface: launch, title: Hi } }]\n"
            )
        ])
        decoder = SegmentDecoder(ruleSet: try #require(loaded.ruleSet))
    }

    func events(_ body: String, kind: Event.Kind? = nil) throws(SegmentRequest.Problem) -> ([BoundEvent], InputLog) {
        let bytes = Array(body.utf8)
        let request = try Ingest.decode(bytes, kind: kind, now: 1_000_000, clock: .wall, decoder: decoder)
        return (request.events, Ingest.record(bytes, request))
    }

    @Test func aBatchIsDecodedInOrderWithItsInputLog() throws {
        let body =
            #"{"batch":[{"type":"track","event":"Opened","userId":"a","messageId":"m1"},{"type":"identify","userId":"b","traits":{"x":1}}]}"#
        let (e, log) = try events(body)
        #expect(e.map(\.userID) == ["a", "b"])
        #expect(e.map(\.timestamp) == [1_000_000, 1_000_000])
        #expect(log.events == 2)
        var read: [String] = []
        try InputLog.read(log.bytes) { input in
            guard case .event(let json, let arrival) = input else { return }
            #expect(arrival.receivedAt == 1_000_000 && arrival.latest == 1_000_000 && arrival.kind == nil)
            read.append(String(decoding: json, as: UTF8.self))
        }
        #expect(
            read == [
                #"{"type":"track","event":"Opened","userId":"a","messageId":"m1"}"#,
                #"{"type":"identify","userId":"b","traits":{"x":1}}"#,
            ])
    }

    @Test func theEndpointGivesTheType() throws {
        let (e, _) = try events(#"{"event":"Opened","userId":"a"}"#, kind: .track)
        #expect(e[0].kind == .track)
    }
}

struct InputLogTests {
    @Test func everyInputReadsBackAsWritten() throws {
        var log = InputLog()
        let json = Array("{\"a\":\"x\ny\"}\n".utf8)
        log.arrival(Arrival(kind: .screen, receivedAt: 5, sentAt: -3, latest: nil))
        log.event(json[...])
        log.markRead(userID: "u 1", itemID: "wel come\n", time: 7)
        log.tick(9)
        log.forget(userID: "u 1\n")
        log.rules(version: 12)
        log.handOver(from: "a 1", to: "k\n")
        log.takeOver(from: "a 1", to: "k")
        log.merged(id: "", into: "k")
        log.device(
            userID: "u 1",
            Device(token: "ab\ncd", platform: .android, app: "com.x", firstSeen: 5, lastSeen: 5, pushEnabled: false))
        log.device(userID: "u", Device(token: "t", platform: .ios, app: nil, firstSeen: 6, lastSeen: 6, pushEnabled: true))
        log.deviceRemoved(userID: "u 1", token: "t")
        log.deviceRemoved(userID: "u", token: "t 2", seenBy: 42)
        var seen: [String] = []
        try InputLog.read(log.bytes) { input in
            switch input {
            case .event(let j, let a):
                #expect(Array(j) == json)
                seen.append("E \(a.kind!) \(a.receivedAt!) \(a.sentAt!) \(a.latest == nil)")
            case .markRead(let u, let i, let t): seen.append("R \(u)|\(i)|\(t)")
            case .tick(let t): seen.append("T \(t)")
            case .forget(let u): seen.append("F \(u)")
            case .rules(let v): seen.append("V \(v)")
            case .handOver(let f, let t): seen.append("H \(f)|\(t)")
            case .takeOver(let f, let t): seen.append("W \(f)|\(t)")
            case .merged(let i, let t): seen.append("M \(i)|\(t)")
            case .device(let u, let d):
                seen.append("P \(u)|\(d.token)|\(d.app ?? "-")|\(d.platform)|\(d.lastSeen)|\(d.pushEnabled)")
            case .deviceRemoved(let u, let t, let by): seen.append("U \(u)|\(t)" + (by.map { "|\($0)" } ?? ""))
            }
        }
        #expect(
            seen == [
                "E screen 5 -3 true", "R u 1|wel come\n|7", "T 9", "F u 1\n", "V 12", "H a 1|k\n", "W a 1|k", "M |k",
                "P u 1|ab\ncd|com.x|android|5|false", "P u|t|-|ios|6|true", "U u 1|t", "U u|t 2|42",
            ])
    }

    /// A fleet's ingest makes a request's arrival line once and appends it to each event's record, made with room for
    /// it: the record is the one written line by line.
    @Test func aRecordWithASharedArrivalLineIsTheOneWrittenWhole() throws {
        let arrival = Arrival(kind: .track, receivedAt: 1_700_000_000_000, sentAt: nil, latest: 1_700_000_000_001)
        var line = InputLog()
        line.arrival(arrival)
        let records: [(json: String, before: String?)] = [
            ("{\"userId\":\"u\"}", nil), ("{}", "a 1"), (String(repeating: "x", count: 300), nil),
        ]
        for (json, before) in records {
            var whole = InputLog()
            if let before { whole.takeOver(from: before, to: "u") }
            whole.arrival(arrival)
            whole.event(Array(json.utf8)[...])
            var shared = InputLog(capacity: line.bytes.count + json.utf8.count + 16)
            if let before { shared.takeOver(from: before, to: "u") }
            shared.append(line)
            shared.event(Array(json.utf8)[...])
            #expect(shared.bytes == whole.bytes)
            #expect(shared.events == 1)
            var read: [Arrival] = []
            try InputLog.read(shared.bytes) { if case .event(_, let a) = $0 { read.append(a) } }
            #expect(read.map(\.latest) == [1_700_000_000_001] && read.map(\.kind) == [.track])
        }
    }

    @Test func aDamagedRecordIsAnErrorNotACrash() {
        var log = InputLog()
        log.arrival(Arrival(receivedAt: 1))
        log.event(Array("{}".utf8)[...])
        log.tick(2)
        for cut in 0..<log.bytes.count {
            var n = 0
            do { try InputLog.read(Array(log.bytes[..<cut])) { _ in n += 1 } } catch {}
            #expect(n <= 2)
        }
        #expect(throws: InputLog.Damaged.self) { try InputLog.read(Array("A - - - -\nE 99\n{}\n".utf8)) { _ in } }
        #expect(throws: InputLog.Damaged.self) { try InputLog.read(Array("E 2\n{}\n".utf8)) { _ in } }
        #expect(throws: InputLog.Damaged.self) { try InputLog.read(Array("X 1\n".utf8)) { _ in } }
        // A header's type is one letter, its numbers are numbers, and its kind and flags are the ones written.
        for bad in [
            "AA - - - -\n", "T x\n", "T 1x\n", "T 99999999999999999999\n", "A tracks - - -\n", "A - - -\n",
            "V 1 2\n", "P 1 1 1 - ios 2\nut\n", "P 1 1 1 - windows 1\nut\n", "\u{E9} 1\n",
            "U 1 1 1 1 1 1 1 1\nut\n", "P 1 1 1 - ios 1 1 1 1 1 1 1 1\nut\n",
        ] {
            #expect(throws: InputLog.Damaged.self, "\(bad)") { try InputLog.read(Array(bad.utf8)) { _ in } }
        }
        var read: [String] = []
        try? InputLog.read(Array("A identify -5 +7 - \nT 3\nP 4 1 1 - ios 1\nut\n".utf8)) { read.append("\($0)") }
        #expect(read.count == 2, "\(read)")
        // Fields are split at spaces as `split` does: runs of spaces and spaces at either end make no empty field.
        var ticks: [String] = []
        try? InputLog.read(Array("  T   3 \nT 4\n".utf8)) { ticks.append("\($0)") }
        #expect(ticks == ["tick(3)", "tick(4)"])
    }
}

struct AuthTests {
    let keys = KeyRing(keys: ["wk1", "wk2"])

    func basic(_ s: String) -> String { "Basic " + Data(s.utf8).base64EncodedString() }

    @Test func writeKeysAreTheUserNameWithAnEmptyPassword() {
        #expect(keys.allowsBasic(basic("wk1:")))
        #expect(keys.allowsBasic(basic("wk2")))
        #expect(keys.allowsBasic("basic " + Data("wk1:".utf8).base64EncodedString()))
        #expect(!keys.allowsBasic(basic("wk3:")))
        #expect(!keys.allowsBasic(basic("wk1:password")))
        #expect(!keys.allowsBasic(basic(":")))
        #expect(!keys.allowsBasic("Bearer wk1"))
        #expect(!keys.allowsBasic("Basic !!!"))
        #expect(!keys.allowsBasic(nil))
        // The form Segment's libraries send is compared whole; the others are decoded, as before.
        #expect(keys.allowsBasic(basic("wk2:")) && keys.allowsBasic(" " + basic("wk2:") + " ") == false)
        #expect(keys.allowsBasic(basic("wk2:") + "  "))
        #expect(!keys.allowsBasic(String(basic("wk2:").dropLast())))
        #expect(!keys.allowsBasic(basic("wk2:").uppercased()))
        #expect(!keys.allowsBasic(basic("wk:")) && !keys.allowsBasic(basic("wk22:")))
        // A key that is empty or has a colon is named by no Basic header, in the form sent or another.
        let odd = KeyRing(keys: ["", "a:b"])
        #expect(!odd.allowsBasic(basic(":")) && !odd.allowsBasic(basic("a:b:")) && !odd.allowsBasic(basic("a:b")))
    }

    @Test func adminKeysAreBearerKeysComparedByBytes() {
        let admin = KeyRing(keys: ["adm-1", "caf\u{E9}"])
        #expect(admin.bearer("Bearer adm-1") == "adm-1")
        #expect(admin.bearer("bearer  adm-1 ") == "adm-1")
        #expect(admin.bearer("Bearer adm-2") == nil)
        #expect(admin.bearer("Basic " + Data("adm-1:".utf8).base64EncodedString()) == nil)
        #expect(admin.bearer("Bearer cafe\u{301}") == nil)
        #expect(admin.bearer(nil) == nil)
    }

    @Test func aUserTokenProvesOneUser() async throws {
        let secret = String(repeating: "s", count: 32)
        let auth = await UserAuth(secret: secret)
        let signer = JWTKeyCollection()
        await signer.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        let token = try await signer.sign(UserToken(sub: "amy", exp: .init(value: Date().addingTimeInterval(60))))
        try await auth.check("Bearer " + token, user: "amy")
        await #expect(throws: UserAuth.Failure.otherUser) { try await auth.check("Bearer " + token, user: "bo") }
        await #expect(throws: UserAuth.Failure.missing) { try await auth.check(nil, user: "amy") }
        let expired = try await signer.sign(UserToken(sub: "amy", exp: .init(value: Date().addingTimeInterval(-60))))
        await #expect(throws: UserAuth.Failure.invalid) { try await auth.check("Bearer " + expired, user: "amy") }
        let cafe = try await signer.sign(UserToken(sub: "caf\u{E9}", exp: nil))
        await #expect(throws: UserAuth.Failure.otherUser) { try await auth.check("Bearer " + cafe, user: "cafe\u{301}") }
        let other = JWTKeyCollection()
        await other.add(hmac: HMACKey(from: String(repeating: "t", count: 32)), digestAlgorithm: .sha256)
        let forged = try await other.sign(UserToken(sub: "amy", exp: nil))
        await #expect(throws: UserAuth.Failure.invalid) { try await auth.check("Bearer " + forged, user: "amy") }
    }
}

struct ActionFeedTests {
    @Test func aWaitEndsWhenTheUserGetsActions() async {
        let feed = ActionFeed()
        let seen = feed.version(of: "u")
        let start = ContinuousClock.now
        // (Bounds far apart: other suites may hold the cooperative pool's threads for seconds.)
        async let waited: Void = feed.wait(for: "u", seen: seen, seconds: 120)
        try? await Task.sleep(for: .milliseconds(50))
        feed.notify(["u"])
        await waited
        #expect(ContinuousClock.now - start < .seconds(60))
    }

    @Test func manyShortWaitsAllTimeOut() async {
        let feed = ActionFeed()
        let start = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<300 {
                group.addTask { await feed.wait(for: "u\(i % 7)", seen: 0, seconds: 0) }
            }
        }
        #expect(ContinuousClock.now - start < .seconds(60))
    }

    @Test func aWaitAfterANotificationReturnsAtOnceAndOtherwiseTimesOut() async {
        let feed = ActionFeed()
        let seen = feed.version(of: "u")
        feed.notify(["u"])
        let start = ContinuousClock.now
        await feed.wait(for: "u", seen: seen, seconds: 120)
        #expect(ContinuousClock.now - start < .seconds(60))
        await feed.wait(for: "v", seen: feed.version(of: "v"), seconds: 0.1)
        #expect(ContinuousClock.now - start >= .milliseconds(100))
    }

    /// The feed remembers a bounded number of versions however many users got actions, and forgetting one loses no
    /// wake-up: a version noted before the forgetting no longer matches, so the wait returns at once.
    @Test func versionsAreBoundedAndForgettingLosesNoWakeUp() async {
        let feed = ActionFeed()
        let others = Set((0..<(ActionFeed.keptVersions + 10)).map { "o\($0)" })
        let never = feed.version(of: "u")
        feed.notify(["u", "w"])
        let noted = feed.version(of: "w")
        feed.notify(others)
        #expect(feed.remembered <= ActionFeed.keptVersions)
        let start = ContinuousClock.now
        // "u" got a notice after its version was noted, "w" before a forgetting: neither waits.
        await feed.wait(for: "u", seen: never, seconds: 120)
        await feed.wait(for: "w", seen: noted, seconds: 120)
        #expect(ContinuousClock.now - start < .seconds(60))
        // A user with nothing new since the forgetting still waits its time out.
        await feed.wait(for: "v", seen: feed.version(of: "v"), seconds: 0.1)
        #expect(ContinuousClock.now - start >= .milliseconds(100))
        // A waiting poll's user is not forgotten: a notice after many others still wakes it.
        let seen = feed.version(of: "x")
        async let waited: Void = feed.wait(for: "x", seen: seen, seconds: 120)
        try? await Task.sleep(for: .milliseconds(50))
        feed.notify(Set((0..<(ActionFeed.keptVersions + 10)).map { "p\($0)" }))
        feed.notify(["x"])
        await waited
        #expect(ContinuousClock.now - start < .seconds(60))
    }
}

/// A processor's test bed: a new SQLite file in a folder of its own (``remove()`` deletes it), and the metrics the
/// processor counts in.
struct ProcessorHarness {
    let dir: URL
    let backend: SQLiteStateBackend
    let metrics = ServiceMetrics(version: "test")

    init(_ label: String) throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        backend = try SQLiteStateBackend(path: dir.appendingPathComponent("db.sqlite").path)
    }

    /// A processor serving `loaded` over the file, started (the caller stops it).
    func start(
        _ loaded: LoadResult, clock: ClockMode, coldLoadsPerRound: Int = ServiceLimits.coldLoadsPerRound
    ) throws -> Processor {
        let rules = try ServingRules.make(loaded, environment: [:], at: Processor.nowMs()) { _, _ in 1 }
        let processor = try Processor(
            current: CurrentRules(rules), backend: backend, clock: clock, metrics: metrics, feed: ActionFeed(),
            logger: Logger(label: "test"), coldLoadsPerRound: coldLoadsPerRound)
        processor.start()
        return processor
    }

    func remove() { try? FileManager.default.removeItem(at: dir) }
}

/// Free heap pages go back to the system once the process settles after work (docs/service.md, "Memory"): once a
/// burst, never while idle with nothing done, never twice within the least interval.
struct MemorySettlerTests {
    @Test func freePagesGoBackOnceSettledAfterWork() {
        let metrics = ServiceMetrics(version: "test")
        let settler = metrics.memory
        let given = { BoundedRunTests.counter("beckon_memory_given_back_total", metrics) }
        let t0 = ContinuousClock.now + .seconds(1)
        #expect(!settler.giveBackIfSettled(now: t0))
        settler.noteWork()
        #expect(!settler.giveBackIfSettled(now: .now))
        let settled = ContinuousClock.now + MemorySettler.settleTime
        #expect(settler.giveBackIfSettled(now: settled))
        #expect(given() == 1)
        #expect(!settler.giveBackIfSettled(now: settled + .seconds(10)))
        #expect(given() == 1)
        // More work, settled again: given back once the least interval since the last has passed.
        settler.noteWork()
        let again = ContinuousClock.now + MemorySettler.settleTime
        #expect(!settler.giveBackIfSettled(now: max(again, settled + MemorySettler.leastInterval - .milliseconds(1))))
        #expect(settler.giveBackIfSettled(now: max(again, settled + MemorySettler.leastInterval)))
        #expect(given() == 2)
    }

    /// The single service's processor notes each round written: a burst is followed by one give-back.
    @Test func theProcessorNotesItsWork() async throws {
        let harness = try ProcessorHarness("trim")
        defer { harness.remove() }
        let processor = try harness.start(
            RuleLoader.load(texts: [
                (
                    "a.yaml",
                    "version: 1\ncampaign: a\nrules:\n  - id: r\n    on: x\n    do: [{ message: { surface: home, title: T } }]\n"
                )
            ]), clock: .events)
        defer { processor.stop() }
        let metrics = harness.metrics
        let later = { ContinuousClock.now + MemorySettler.settleTime }
        #expect(!metrics.memory.giveBackIfSettled(now: later()))
        _ = try await processor.submit(.state(userID: "u"))
        #expect(metrics.memory.giveBackIfSettled(now: later()))
    }
}

/// `/metrics` says the heap in use, read at each scrape: it grows with what the process holds.
struct HeapMetricTests {
    static func heap(_ metrics: ServiceMetrics) -> Double {
        let line = metrics.text().split(separator: "\n").first { $0.hasPrefix("beckon_heap_bytes ") }
        return line.flatMap { Double($0.split(separator: " ")[1]) } ?? -1
    }

    @Test func theHeapGaugeFollowsWhatIsHeld() {
        let metrics = ServiceMetrics(version: "test", heapReadInterval: .zero)
        // (Read at most once an hour: the page repeats its first reading.)
        let throttled = ServiceMetrics(version: "test", heapReadInterval: .seconds(3_600))
        let before = Self.heap(metrics)
        let first = Self.heap(throttled)
        #expect(before > 0 && first > 0)
        let held = (0..<16_000).map { _ in [UInt8](repeating: 1, count: 4_096) }
        let after = Self.heap(metrics)
        #expect(after - before >= 32_000_000)
        #expect(Self.heap(throttled) == first)
        #expect(held.count == 16_000)
    }
}

/// A run due for more stored users than ``ServiceLimits/coldLoadsPerRound`` goes in rounds: each loads at most the bound,
/// writes a checkpoint with its tick and lets those users go before the next (docs/time.md#schedules-schedule).
struct BoundedRunTests {
    static let users = (0..<30).map { "u\($0)" }

    /// The processor's counters as the metrics page shows them.
    static func counter(_ name: String, _ metrics: ServiceMetrics) -> Double {
        let line = metrics.text().split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Double($0.split(separator: " ")[1]) } ?? 0
    }

    @Test func aRunDueForMoreUsersThanTheBoundGoesInRounds() async throws {
        let harness = try ProcessorHarness("run")
        defer { harness.remove() }
        let backend = harness.backend
        // 30 stored users, every third on "pro", each with the run set (long due): none is held when the service
        // opens, so the run loads every one of them from the database.
        let loaded = RuleLoader.load(texts: [
            (
                "d.yaml",
                "version: 1\ncampaign: digest\nrules:\n  - id: news\n    schedule: 2026-03-02T10:00:00Z\n"
                    + "    if: default(user.plan, \"\") != \"pro\"\n    do: [{ message: { surface: home, title: News } }]\n"
            )
        ])
        let ruleSet = try #require(loaded.ruleSet)
        let storing = Engine(ruleSet: ruleSet, store: SavedStateStore(backend: backend))
        let decoder = SegmentDecoder(ruleSet: ruleSet)
        for (i, u) in Self.users.enumerated() {
            storing.process(
                try decoder.decode(
                    #"{"type":"identify","userId":"\#(u)","timestamp":"2026-02-20T08:00:00Z","traits":{"plan":"\#(i % 3 == 0 ? "pro" : "free")"}}"#
                ))
        }
        #expect(storing.pendingCount == 30)
        try storing.saveStates()

        let processor = try harness.start(loaded, clock: .wall, coldLoadsPerRound: 7)
        defer { processor.stop() }
        let metrics = harness.metrics

        let chosen = Self.users.enumerated().filter { $0.offset % 3 != 0 }.map(\.element)
        var got: [String: Int] = [:]
        // 30 users at 7 a round: five rounds, the first four each with a checkpoint of their own, and each round's
        // users let go before the next loads more (those of the last round go at the next timed checkpoint).
        func done() -> Bool {
            chosen.allSatisfy { got[$0] == 1 } && Self.counter("beckon_checkpoints_total", metrics) >= 4
                && Self.counter("beckon_users_evicted_total", metrics) >= 28
        }
        for _ in 0..<100 {
            for u in Self.users { got[u] = try await backend.actions(of: u, after: 0, limit: 10).count }
            if done() { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(chosen.allSatisfy { got[$0] == 1 }, "\(got)")
        #expect(Self.users.filter { !chosen.contains($0) }.allSatisfy { got[$0] == 0 }, "\(got)")
        #expect(Self.counter("beckon_checkpoints_total", metrics) >= 4)
        #expect(Self.counter("beckon_users_evicted_total", metrics) >= 28)
    }
}
