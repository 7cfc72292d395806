import BeckonCore
import BeckonYAML
import Foundation
import GRDB
import Logging
import Synchronization
import Testing

@testable import BeckonServer
@testable import BeckonStore

/// `destinations:` in a settings file: what it means, and the mistakes `validate` names.
struct DestinationSettingsTests {
    static let rules = """
        version: 1
        campaign: c
        rules:
          - id: buy
            on: Purchase
            do:
              - emit: { event: Bought, payload: { event_id: "${event.messageId}", value: 3 } }
              - message: { surface: launch, title: Thanks }
        """

    static func load(_ settings: String) -> LoadResult {
        RuleLoader.load(texts: [("s.yaml", "version: 1\nsettings: app\n" + settings), ("r.yaml", rules)])
    }

    static func errors(_ settings: String) -> [String] {
        load(settings).diagnostics.filter { $0.severity == .error }.map(\.message)
    }

    @Test func aDestinationHasItsDefaults() throws {
        let r = Self.load("destinations:\n  - name: capi\n    url: https://example.com/events\n")
        let d = try #require(r.ruleSet?.settings.destinations.first)
        #expect(d == Destination(name: "capi", url: "https://example.com/events"))
        #expect(
            (d.method, d.kinds, d.body, d.timeoutMs, d.maxAttempts, d.backoffMs) == ("POST", ["emit"], .action, 10_000, 10, 1_000)
        )
        #expect(d.envelope == nil && d.events == nil && d.maxBackoffMs == 3_600_000)
    }

    @Test func everyKeyIsRead() throws {
        let r = Self.load(
            """
            destinations:
              - name: capi
                url: http://127.0.0.1:9/e
                method: PUT
                headers: { X-A: "1" }
                secret_headers: { Authorization: CAPI_TOKEN }
                kinds: [emit, message]
                events: [Bought]
                body: payload
                envelope: data
                timeout: 2s
                max_attempts: 3
                backoff: 100ms
                max_backoff: 1s

            """)
        let d = try #require(r.ruleSet?.settings.destinations.first)
        #expect(d.method == "PUT" && d.kinds == ["emit", "message"] && d.events == ["Bought"] && d.body == .payload)
        #expect(d.headers == [.init(name: "X-A", value: "1")])
        #expect(d.secretHeaders == [.init(name: "Authorization", value: "CAPI_TOKEN")])
        #expect((d.envelope, d.timeoutMs, d.maxAttempts, d.backoffMs, d.maxBackoffMs) == ("data", 2_000, 3, 100, 1_000))
    }

    @Test(arguments: [
        ("url: ftp://example.com", "must be an http:// or https:// URL"),
        ("url: https://", "must be an http:// or https:// URL"),
        ("url: https://x\n    method: GET", "'method' must be POST, PUT or PATCH"),
        ("url: https://x\n    headers: { \"Bad Header\": x }", "not a valid HTTP header name"),
        ("url: https://x\n    secret_headers: { Authorization: lower_case }", "the name of an environment variable"),
        ("url: https://x\n    kinds: [emitt]", "'emitt' is not an action kind"),
        ("url: https://x\n    backoff: 10s\n    max_backoff: 1s", "'max_backoff' is shorter than 'backoff'"),
        ("url: https://x\n    timeout: 0s", "'timeout' must be longer than 0"),
        ("url: https://x\n    max_attempts: 0", "'max_attempts' must be at least 1"),
        ("url: https://x\n    body: everything", "'body' must be 'action' or 'payload'"),
        ("url: https://x\n    retries: 3", "unknown key 'retries'"),
    ])
    func mistakesAreNamed(_ keys: String, _ message: String) {
        let errors = Self.errors("destinations:\n  - name: d\n    \(keys)\n")
        #expect(errors.contains { $0.contains(message) }, "\(errors)")
    }

    @Test func aNameIsUsedOnce() {
        let errors = Self.errors(
            "destinations:\n  - { name: d, url: \"https://a\" }\n  - { name: d, url: \"https://b\" }\n")
        #expect(errors.contains { $0.contains("destination 'd' is defined twice") }, "\(errors)")
    }
}

/// What goes to a destination, when it is tried again, and when it is given up.
struct DeliveryTests {
    func fired(_ settings: String, _ event: String = "Purchase") throws -> ([FiredAction], [Destination]) {
        let r = DestinationSettingsTests.load(settings)
        let rs = try #require(r.ruleSet)
        let engine = Engine(ruleSet: rs)
        let e = try SegmentDecoder(ruleSet: rs).decode(
            #"{"type":"track","event":"\#(event)","userId":"u1","messageId":"m1","timestamp":"2026-03-02T09:00:00Z"}"#)
        return (Array(engine.process(e).actions), rs.settings.destinations)
    }

    @Test func entriesFollowKindsEventsBodyAndEnvelope() throws {
        let (actions, destinations) = try fired(
            """
            destinations:
              - { name: all, url: "https://a" }
              - { name: other, url: "https://b", events: [Other] }
              - { name: payload, url: "https://c", body: payload, envelope: data }
              - { name: messages, url: "https://d", kinds: [message] }

            """)
        var entries: [OutboxEntry] = []
        for a in actions {
            let logged = LoggedAction(userID: a.userID, actionID: a.id, json: Processor.json(a, late: false))
            entries += Delivery.entries(for: a, logged, destinations: destinations, at: 7)
        }
        #expect(entries.map(\.destination) == ["all", "payload", "messages"])
        let emit = try #require(actions.first { $0.kind == "emit" })
        #expect(entries[0].body == emit.json && entries[0].actionID == emit.id && entries[0].createdAt == 7)
        #expect(entries[1].body == #"{"data":[{"event_id":"m1","value":3}]}"#)
        #expect(entries[2].actionID == actions.first { $0.kind == "message" }?.id)
    }

    @Test(arguments: [
        (200, Delivery.Outcome.delivered), (204, .delivered), (400, .dead("HTTP 400")), (401, .dead("HTTP 401")),
        (404, .dead("HTTP 404")), (302, .dead("HTTP 302")), (408, .retry(error: "HTTP 408", after: nil)),
        (429, .retry(error: "HTTP 429", after: nil)), (500, .retry(error: "HTTP 500", after: nil)),
        (503, .retry(error: "HTTP 503", after: nil)),
    ])
    func statusesDecide(_ status: Int, _ outcome: Delivery.Outcome) {
        #expect(Delivery.outcome(status: status, retryAfter: nil, now: Date()) == outcome)
    }

    @Test func retryAfterIsSecondsOrADate() {
        let now = Date(timeIntervalSince1970: 1_780_000_000)
        #expect(Delivery.retryAfterMs("3", now: now) == 3_000)
        #expect(Delivery.retryAfterMs(" 0 ", now: now) == 0)
        #expect(Delivery.retryAfterMs("999999999999999999", now: now) == Delivery.maxRetryAfterMs)
        #expect(Delivery.retryAfterMs("99999999999999999999", now: now) == Delivery.maxRetryAfterMs)
        #expect(Delivery.retryAfterMs("-1", now: now) == nil)
        #expect(Delivery.retryAfterMs("soon", now: now) == nil)
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        #expect(Delivery.retryAfterMs(f.string(from: now.addingTimeInterval(90)), now: now) == 90_000)
        #expect(Delivery.retryAfterMs(f.string(from: now.addingTimeInterval(-90)), now: now) == 0)
        #expect(
            Delivery.outcome(status: 429, retryAfter: "2", now: now) == .retry(error: "HTTP 429", after: 2_000))
    }

    @Test func backoffDoublesUpToItsMaximumWithJitter() {
        var d = Destination(name: "d", url: "https://x")
        d.backoffMs = 1_000
        d.maxBackoffMs = 10_000
        #expect(
            (1...6).map { Delivery.delayMs(d, attempts: $0, retryAfter: nil, jitter: 1) } == [
                1_000, 2_000, 4_000, 8_000, 10_000, 10_000,
            ])
        #expect(Delivery.delayMs(d, attempts: 2, retryAfter: nil, jitter: 0) == 1_000)
        #expect(Delivery.delayMs(d, attempts: 1_000, retryAfter: nil, jitter: 1) == 10_000)
        // A Retry-After is a floor, above the backoff's maximum too.
        #expect(Delivery.delayMs(d, attempts: 1, retryAfter: 60_000, jitter: 0) == 60_000)
        d.maxBackoffMs = .max
        #expect(Delivery.delayMs(d, attempts: 100, retryAfter: nil, jitter: 1) > 0)
    }
}

/// A forget leaves the user's events out of the input log and nobody else's.
struct ScrubTests {
    @Test func aRecordLosesOneUsersEventsAndReads() throws {
        let loaded = RuleLoader.load(texts: [("r.yaml", DestinationSettingsTests.rules)])
        let decoder = SegmentDecoder(ruleSet: try #require(loaded.ruleSet))
        func event(_ user: String, _ id: String) -> String {
            #"{"type":"track","event":"Purchase","userId":"\#(user)","messageId":"\#(id)"}"#
        }
        let body = Array(
            (#"{"batch":["# + [event("a", "1"), event("b", "2"), event("a", "3")].joined(separator: ",") + "]}").utf8)
        let log = Ingest.record(body, try Ingest.decode(body, kind: nil, now: 1_000, clock: .wall, decoder: decoder))
        var record = log
        record.markRead(userID: "a", itemID: "i", time: 2_000)
        record.markRead(userID: "b", itemID: "i", time: 2_000)
        record.tick(3_000)
        record.forget(userID: "a")
        record.forget(userID: "b")
        record.rules(version: 7)
        record.handOver(from: "a", to: "k")
        record.takeOver(from: "b", to: "k")
        record.merged(id: "b", into: "a")
        record.device(
            userID: "a", Device(token: "t1", platform: .ios, app: nil, firstSeen: 1, lastSeen: 1, pushEnabled: true))
        record.deviceRemoved(userID: "b", token: "t2")
        record.deviceRemoved(userID: "a", token: "t1", seenBy: 9)
        record.deviceRemoved(userID: "b", token: "t3", seenBy: 9)
        let kept = try #require(try InputLog.without(userIDs: ["a"], in: record.bytes))
        var inputs: [String] = []
        try InputLog.read(kept.bytes) { input in
            switch input {
            case .event(let json, let arrival):
                let e = try decoder.decode(json, arrival: arrival)
                inputs.append("E \(e.userID) \(e.messageID ?? "") \(e.timestamp)")
            case .markRead(let u, _, let t): inputs.append("R \(u) \(t)")
            case .tick(let t): inputs.append("T \(t)")
            case .forget(let u): inputs.append("F \(u)")
            case .rules(let v): inputs.append("V \(v)")
            case .handOver(let f, let t): inputs.append("H \(f) \(t)")
            case .takeOver(let f, let t): inputs.append("W \(f) \(t)")
            case .merged(let i, let t): inputs.append("M \(i) \(t)")
            case .device(let u, let d): inputs.append("P \(u) \(d.token)")
            case .deviceRemoved(let u, let t, let by): inputs.append("U \(u) \(t)" + (by.map { " \($0)" } ?? ""))
            }
        }
        #expect(inputs == ["E b 2 1000", "R b 2000", "T 3000", "F b", "V 7", "W b k", "U b t2", "U b t3 9"])
        #expect(kept.events == 1)
        #expect(try InputLog.without(userIDs: ["nobody"], in: record.bytes) == nil)
    }
}

/// The outbox's rows as the database keeps them.
///
/// A class: each test's database folders are deleted with the test's instance.
final class OutboxStoreTests {
    private var folders: [URL] = []

    deinit {
        for folder in folders { try? FileManager.default.removeItem(at: folder) }
    }

    func backend() throws -> SQLiteStateBackend {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-outbox-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        folders.append(dir)
        return try SQLiteStateBackend(path: dir.appendingPathComponent("db.sqlite").path)
    }

    func fire(_ id: String) -> ServiceCommit { fire(id, user: "u1", to: ["d"]) }

    @Test func anActionFiredAgainIsNotSentAgain() async throws {
        let b = try backend()
        try b.write([fire("a")])
        let row = try #require(try b.dueOutbox(now: 5, destinations: ["d"], limit: 10, excluding: []).first)
        #expect(
            try await b.recordAttempts([OutboxAttempt(id: row.id, state: .delivered, nextAt: 5, error: nil)], at: 6) == [true])
        // Retention deletes the delivered entry; the same action fired again (its messageId after the dedup window)
        // is stored once and so sent once.
        #expect(try b.deleteOlder(than: 7).delivered == 1)
        try b.write([fire("a")])
        #expect(try b.outbox(states: [.pending, .delivered, .dead]).isEmpty)
        try b.write([fire("b")])
        #expect(try b.outbox(states: [.pending]).map(\.entry.actionID) == ["b"])
    }

    @Test func retryAndDropCountEveryEntry() async throws {
        let b = try backend()
        try b.write([fire("a"), fire("b"), fire("c")])
        let rows = try b.dueOutbox(now: 5, destinations: ["d"], limit: 10, excluding: [])
        #expect(rows.count == 3)
        let dead = rows.map { OutboxAttempt(id: $0.id, state: .dead, nextAt: 5, error: "HTTP 400") }
        #expect(try await b.recordAttempts(dead, at: 6) == [true, true, true])
        #expect(try await b.recordAttempts(dead, at: 6) == [false, false, false])  // (no longer pending)
        #expect(try b.retryOutbox(actionIDs: ["a", "b", "nope"], now: 9) == 2)
        #expect(
            try b.outbox(states: [.pending]).map { ($0.entry.actionID, $0.attempts, $0.nextAt) }.elementsEqual(
                [("a", 0, 9), ("b", 0, 9)], by: ==))
        #expect(try b.dropOutbox(actionIDs: ["a", "c"]) == 2)
        #expect(try b.outbox(states: [.pending, .dead]).map(\.entry.actionID) == ["b"])
    }

    /// Pending entries per destination, counted from the rows themselves.
    func counted(_ b: SQLiteStateBackend) throws -> [String: Int] {
        try b.outbox(states: [.pending]).reduce(into: [:]) { $0[$1.entry.destination, default: 0] += 1 }
    }

    func fire(_ id: String, user: String, to destinations: [String]) -> ServiceCommit {
        var c = ServiceCommit()
        c.actions = [LoggedAction(userID: user, actionID: id, json: #"{"id":"\#(id)"}"#)]
        c.outbox = destinations.map { OutboxEntry(destination: $0, actionID: id, userID: user, body: "{}", createdAt: 5) }
        return c
    }

    @Test func thePendingCountFollowsEveryWayAnEntryComesAndGoes() async throws {
        let b = try backend()
        var steps: [[String: Int]] = []
        func check() throws {
            let kept = try b.pendingOutboxCounts()
            #expect(kept == (try counted(b)))
            steps.append(kept)
        }
        try b.write([
            fire("a", user: "u1", to: ["d", "e"]), fire("b", user: "u1", to: ["d"]), fire("c", user: "u2", to: ["d"]),
            fire("f", user: "u3", to: ["d", "e"]),
        ])
        try b.write([fire("a", user: "u1", to: ["d", "e"])])  // (fired again: stored once)
        try check()
        let rows = try b.dueOutbox(now: 5, destinations: ["d", "e"], limit: 10, excluding: [])
        func row(_ action: String, _ destination: String) throws -> Int64 {
            try #require(rows.first { $0.entry.actionID == action && $0.entry.destination == destination }).id
        }
        // Delivered, dead, and pending again later (still pending).
        _ = try await b.recordAttempts(
            [
                OutboxAttempt(id: try row("a", "d"), state: .delivered, nextAt: 5, error: nil),
                OutboxAttempt(id: try row("b", "d"), state: .dead, nextAt: 5, error: "HTTP 400"),
                OutboxAttempt(id: try row("a", "e"), state: .pending, nextAt: 60, error: "HTTP 503"),
                OutboxAttempt(id: try row("c", "d"), state: .dead, nextAt: 5, error: "HTTP 400"),
            ], at: 6)
        try check()
        #expect(try b.retryOutbox(actionIDs: ["b"], now: 9) == 1)
        try check()
        #expect(try b.dropOutbox(actionIDs: ["b"]) == 1)  // (a pending one)
        try check()
        #expect(try b.retryOutbox(actionIDs: nil, now: 9) == 1)  // (c)
        try check()
        try b.forget(["u3"], checkpoint: ServiceCommit())
        try check()
        #expect(try b.deleteOlder(than: 100).delivered == 1)  // (only delivered entries go)
        try check()
        #expect(
            steps == [
                ["d": 4, "e": 2], ["d": 1, "e": 2], ["d": 2, "e": 2], ["d": 1, "e": 2], ["d": 2, "e": 2],
                ["d": 1, "e": 1], ["d": 1, "e": 1],
            ])
    }

    /// The outbox has no unique index (migration v8): what keeps an action's entry for a destination single is the
    /// commit, which adds entries only for an action it stores now, and once each.
    @Test func anActionGetsOneEntryADestinationHoweverOftenItIsFired() throws {
        let b = try backend()
        var twice = fire("a", user: "u1", to: ["d", "e"])
        twice.actions += twice.actions
        twice.outbox += twice.outbox
        try b.write([twice, fire("a", user: "u1", to: ["d"])])
        try b.write([fire("a", user: "u1", to: ["d", "e"])])
        #expect(try b.outbox(states: [.pending]).map { "\($0.entry.destination)/\($0.entry.actionID)" } == ["d/a", "e/a"])
        #expect(try b.pendingOutboxCounts() == ["d": 1, "e": 1])
    }

    @Test func entriesFromBeforeTheirActionsPositionAreFoundByIt() throws {
        let b = try backend()
        try b.write([fire("a", user: "u1", to: ["d", "e"]), fire("b", user: "u2", to: ["d"]), fire("c", user: "u1", to: ["d"])])
        // As a Beckon before migration v8 left the outbox: no positions, indexed by key and by user.
        try b.pool.write { db in
            try db.execute(
                sql: """
                    DROP INDEX outbox_action_seq; ALTER TABLE outbox DROP COLUMN action_seq;
                    CREATE UNIQUE INDEX outbox_action ON outbox(destination, action_id);
                    CREATE INDEX outbox_user ON outbox(user_id);
                    DELETE FROM grdb_migrations WHERE identifier LIKE 'v8:%';
                    """)
        }
        let reopened = try SQLiteStateBackend(path: b.path)
        #expect(try reopened.outbox(of: "u1").map { "\($0.entry.destination)/\($0.entry.actionID)" } == ["d/a", "e/a", "d/c"])
        #expect(try reopened.dropOutbox(actionIDs: ["c"]) == 1)
        try reopened.forget(["u1"], checkpoint: ServiceCommit())
        #expect(try reopened.outbox(states: [.pending]).map(\.entry.actionID) == ["b"])
        #expect(try reopened.pendingOutboxCounts() == ["d": 1])
    }

    @Test func aDatabaseFromBeforeTheCountIsCountedWhenOpened() throws {
        let b = try backend()
        try b.write([fire("a", user: "u1", to: ["d", "e"]), fire("b", user: "u2", to: ["d"])])
        // As a Beckon before the count left it: no table, no triggers, no record of the migration.
        try b.pool.write { db in
            try db.execute(
                sql: """
                    DROP TRIGGER outbox_pending_deleted;
                    DROP TRIGGER outbox_pending_changed; DROP TABLE outbox_pending;
                    DELETE FROM grdb_migrations WHERE identifier LIKE 'v7:%';
                    """)
        }
        let reopened = try SQLiteStateBackend(path: b.path)
        #expect(try reopened.pendingOutboxCounts() == ["d": 2, "e": 1])
        try reopened.write([fire("c", user: "u3", to: ["e"])])
        #expect(try reopened.pendingOutboxCounts() == ["d": 2, "e": 2])
    }
}

/// Events queued before a forget of their user are not processed (their actions never reach a destination).
struct ForgetQueueTests {
    @Test func eventsQueuedBeforeAForgetAreLeftOut() throws {
        let loaded = RuleLoader.load(texts: [("r.yaml", DestinationSettingsTests.rules)])
        let rules = try ServingRules.make(loaded, environment: [:], at: 0) { _, _ in 1 }
        func job(_ users: [String]) throws -> Job {
            let events = users.enumerated().map { i, u in
                #"{"type":"track","event":"Purchase","userId":"\#(u)","messageId":"\#(u)\#(i)"}"#
            }
            let body = #"{"batch":["# + events.joined(separator: ",") + "]}"
            let bytes = Array(body.utf8)
            let request = try Ingest.decode(bytes, kind: nil, now: 1_000, clock: .wall, decoder: rules.decoder)
            let (decoded, log) = (request.events, Ingest.record(bytes, request))
            return .events(decoded, log, decodedUnder: rules)
        }
        let jobs = Processor.droppingForgotten(
            [try job(["a", "b", "a"]), try job(["c"]), .forget(userID: "a"), try job(["a"]), .forget(userID: "d")],
            ids: { $0 == "a" ? ["a", "c"] : [$0] }, undecodable: { Issue.record("\($0)") })
        guard case .events(let first, let log, _) = jobs[0], case .events(let second, _, _) = jobs[1],
            case .events(let after, _, _) = jobs[3]
        else {
            Issue.record("the jobs changed kind: \(jobs)")
            return
        }
        #expect(first.map(\.userID) == ["b"])
        #expect(log.events == 1)
        // (An id merged into the forgotten user goes with them.)
        #expect(second.isEmpty)
        // (An event after the forget is a new user's.)
        #expect(after.map(\.userID) == ["a"])
    }
}

/// A forget's match of stored events: by the ids they name, without the rules.
struct StoredEventMatchTests {
    @Test func eventsAreMatchedOnTheIdsTheyNameWhateverTheRulesRead() {
        let identify = Array(
            #"{"type":"identify","anonymousId":"anon-1","userId":"u-1","timestamp":"2026-01-05T09:00:00Z"}"#.utf8)
        #expect(InputLog.names(identify[...], anyOf: ["anon-1"]))
        #expect(InputLog.names(identify[...], anyOf: ["u-1"]))
        #expect(!InputLog.names(identify[...], anyOf: ["u-2"]))
        // A number id is its literal text.
        let numbered = Array(#"{"type":"track","event":"x","userId":12345678901234567890}"#.utf8)
        #expect(InputLog.names(numbered[...], anyOf: ["12345678901234567890"]))
        // A line that is not JSON at all (logged by an older Beckon with bytes that are not UTF-8) is matched on the
        // id's quoted text, so a forget still removes it.
        let damaged = Array(#"{"type":"track","userId":"u-9","properties":{"p":""#.utf8) + [0xFF] + Array(#""}"#.utf8)
        #expect(InputLog.names(damaged[...], anyOf: ["u-9"]))
        #expect(!InputLog.names(damaged[...], anyOf: ["u-1"]))
    }
}

/// `beckon fleet events` prints each event as `beckon dry-run` must read it to decide as the fleet did.
struct ReplayableEventTests {
    @Test func whatTheArrivalToldTheDecoderIsWrittenIn() throws {
        let arrival = Arrival(kind: .track, receivedAt: 1_767_600_000_000, sentAt: 1_767_599_999_000)
        let line = InputLog.replayable(Array(#"{"event":"x","userId":"u"}"#.utf8)[...], arrival)
        #expect(
            line
                == #"{"event":"x","userId":"u","type":"track","receivedAt":"2026-01-05T08:00:00Z","sentAt":"2026-01-05T07:59:59Z"}"#
        )
        // It decodes as a line of a file, at the time the service gave it.
        let rs = try RuleLoader.load(texts: [("c.yaml", "version: 1\ncampaign: c\nrules: []\n")]).ruleSet!
        #expect(try SegmentDecoder(ruleSet: rs).decode(line).timestamp == 1_767_600_000_000)
        // An event with its own type and sentAt keeps them; an empty object gets no leading comma.
        let own = InputLog.replayable(
            Array(#"{"type":"identify","userId":"u","sentAt":"2026-01-05T07:00:00Z"}"#.utf8)[...], arrival)
        #expect(own == #"{"type":"identify","userId":"u","sentAt":"2026-01-05T07:00:00Z","receivedAt":"2026-01-05T08:00:00Z"}"#)
        #expect(InputLog.replayable(Array("{}".utf8)[...], Arrival(receivedAt: 0)) == #"{"receivedAt":"1970-01-01T00:00:00Z"}"#)
    }
}

/// A destination's send rate bounds what the delivery loop takes, not only when it sends: an entry taken waits for its
/// turn inside its claim, and in a fleet a claim lapses after the timeout and 5 s (another process then sends it too).
struct DeliveryPaceTests {
    /// An outbox with as many due entries as asked for, counting what each turn took.
    final class EndlessOutbox: OutboxStore {
        let taken = Mutex<[Int]>([])
        private let next = Mutex<Int64>(0)

        func due(now: Int64, destinations: [String], limit: Int, excluding busy: Set<Int64>) async throws -> [OutboxRow] {
            let first = next.withLock { n in
                defer { n += Int64(limit) }
                return n
            }
            taken.withLock { $0.append(limit) }
            return (0..<Int64(limit)).map { i in
                let entry = OutboxEntry(
                    destination: destinations[0], actionID: "a\(first + i)", userID: "u", body: "{}", createdAt: now)
                return OutboxRow(id: first + i, entry: entry, state: .pending, attempts: 0, nextAt: now)
            }
        }
        func record(_ attempts: [OutboxAttempt], at time: Int64) async throws -> [Bool] { attempts.map { _ in true } }
        func pendingCounts() async throws -> [String: Int] { [:] }
    }

    /// An attempt's longest time counts each request it may make and the wait for its turn: a fleet claims an entry
    /// that long (and 5 s to record it). An FCM attempt claimed for one timeout was taken and sent again by another
    /// process while its sender fetched a token after a 401.
    @Test func anAttemptsLongestTimeCountsEachRequestItMayMake() {
        var hook = Destination(name: "hook", url: "https://example.com")
        hook.timeoutMs = 3_000
        #expect(Deliverer.longestAttemptMs(hook) == 3_000)
        hook.ratePerSecond = 5
        #expect(Deliverer.longestAttemptMs(hook) == 4_000)
        var fcm = Destination(name: "android", url: "https://fcm.googleapis.com")
        fcm.fcm = Destination.FCM()
        #expect(Deliverer.longestAttemptMs(fcm) == 40_000)
        var apns = Destination(name: "ios", url: "https://api.push.apple.com")
        apns.apns = Destination.APNs(topic: "t", teamID: "T", keyID: "K")
        #expect(Deliverer.longestAttemptMs(apns) == 20_000)
    }

    @Test func aTurnTakesWhatTheRateSendsWithinASecond() async throws {
        // (Port 9 on loopback refuses at once: each attempt ends quickly, as a retry.)
        let loaded = DestinationSettingsTests.load(
            "destinations:\n  - name: hook\n    url: http://127.0.0.1:9/x\n    kinds: [message]\n    rate: 2/s\n")
        let rules = try ServingRules.make(loaded, environment: [:], at: Processor.nowMs()) { _, _ in 1 }
        let outbox = EndlessOutbox()
        let deliverer = Deliverer(
            backend: outbox, current: CurrentRules(rules), metrics: ServiceMetrics(version: "test"),
            activity: RuleActivity(), logger: Logger(label: "test"))
        let run = Task { try await deliverer.run() }
        try await Task.sleep(for: .milliseconds(1500))
        run.cancel()
        _ = try? await run.value
        let taken = outbox.taken.withLock { $0 }
        // A full bucket (2) and a second's worth (2) at the first turn; then about 2 a second. Before, the first turn
        // took the destination's whole share of the slots, each waiting up to share ÷ 2 seconds for its turn.
        #expect(taken.first == 4, "\(taken)")
        #expect(taken.reduce(0, +) <= 4 + 2 * 2, "\(taken)")
    }
}
