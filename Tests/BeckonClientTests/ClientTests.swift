import BeckonClient
import Foundation
import Testing

/// BeckonClient against a real `beckon serve` on loopback: the issue's "done when", one test each.
@Suite(.serialized)
struct ClientTests {
    static func configuration(
        _ service: LiveService, _ name: String,
        provider: (@Sendable (String) async throws -> String)? = nil
    ) -> BeckonClient.Configuration {
        var c = BeckonClient.Configuration(
            server: service.url, writeKey: LiveService.writeKey, directory: service.folder.appendingPathComponent(name),
            tokenProvider: provider ?? { LiveService.token($0) })
        c.flushAt = 10
        c.flushInterval = .milliseconds(50)
        c.retry = .init(first: .milliseconds(20), max: .milliseconds(200))
        c.pollWait = .seconds(2)
        c.pushPlatform = "ios"
        c.app = .init(name: "Client Tests", version: "1.0", build: "1", namespace: "com.example.clienttests")
        return c
    }

    /// The first `count` actions of the stream, failing after `seconds`.
    static func take(_ count: Int, from client: BeckonClient, seconds: Double = 30) async throws -> [BeckonAction] {
        try await withThrowingTaskGroup(of: [BeckonAction].self) { group in
            group.addTask {
                var taken: [BeckonAction] = []
                for try await action in client.actions() {
                    taken.append(action)
                    if taken.count == count { break }
                }
                return taken
            }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                throw Failure("fewer than \(count) actions in \(seconds) s")
            }
            let taken = try await group.next()!
            group.cancelAll()
            return taken
        }
    }

    /// The first element of `stream` that `condition` holds for, failing after `seconds`.
    static func first<T: Sendable>(
        of stream: AsyncStream<T>, seconds: Double = 30, where condition: @escaping @Sendable (T) -> Bool
    ) async throws -> T {
        let seen = Shared<[T]>([])
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                for await value in stream {
                    seen.update { $0.append(value) }
                    if condition(value) { return value }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                throw Failure("none in \(seconds) s of \(seen())")
            }
            defer { group.cancelAll() }
            guard let value = try await group.next() ?? nil else { throw Failure("the stream ended") }
            return value
        }
    }

    static func echoes(_ actions: [BeckonAction]) -> [Int64] {
        actions.compactMap { a in
            if case .emit(_, let payload) = a.kind { return payload["n"]?.intValue }
            return nil
        }
    }

    @Test func eventsQueuedWhileTheServiceIsDownAreDeliveredOnceItStarts() async throws {
        let service = try LiveService()
        try await service.start()
        service.stop()
        let client = try BeckonClient(Self.configuration(service, "app"))
        defer { client.close() }
        client.identify(userId: "dora")
        for n in 0..<25 { #expect(client.track("Probe", properties: ["n": .int(Int64(n))]) != nil) }
        #expect(await client.flush() == false)
        #expect(client.queuedEvents == 26)
        try await service.start()
        try await eventually("the queue is sent") { await client.flush() }
        #expect(client.queuedEvents == 0)
        #expect(try await service.echoed("dora").sorted() == Array(0..<25))
        #expect(try await service.ingested("duplicate") == 0)
    }

    @Test func aBatchSentAgainAfterARestartKeepsItsMessageIDs() async throws {
        let service = try LiveService()
        try await service.start()
        var configuration = Self.configuration(service, "app")
        configuration.flushAt = 500
        configuration.flushInterval = .seconds(3600)
        let queued = try BeckonClient(configuration)
        queued.identify(userId: "rey")
        for n in 0..<15 { queued.track("Probe", properties: ["n": .int(Int64(n))]) }
        queued.close()
        // The folder as a kill right after the service answered 200, before the client deleted the batch, leaves it.
        let copy = service.folder.appendingPathComponent("copy")
        try FileManager.default.copyItem(at: configuration.directory, to: copy)

        let sender = try BeckonClient(configuration)
        #expect(sender.queuedEvents == 16)
        #expect(await sender.flush())
        sender.close()
        configuration.directory = copy
        let again = try BeckonClient(configuration)
        #expect(again.queuedEvents == 16)
        #expect(await again.flush())
        again.close()

        #expect(try await service.echoed("rey").sorted() == Array(0..<15))
        #expect(try await service.ingested("accepted") == 16)
        #expect(try await service.ingested("duplicate") == 16)
    }

    @Test func aClientKilledMidBatchSendsEachEventOnce() async throws {
        let service = try LiveService()
        try await service.start()
        let folder = service.folder.appendingPathComponent("probe")
        var queued = Set<Int64>()
        for round in 0..<3 {
            let probe = try Probe("send", service: service, directory: folder, user: "kim", [String(round * 300), "300"])
            try await probe.waitFor { $0.filter { $0.hasPrefix("queued ") }.count >= 60 + 70 * round }
            probe.kill9()
            queued.formUnion(probe.output.all.compactMap { $0.hasPrefix("queued ") ? Int64($0.dropFirst(7)) : nil })
        }
        let flusher = try Probe("flush", service: service, directory: folder, user: "kim")
        try await flusher.waitFor { $0.contains("done") }
        let echoed = try await service.echoed("kim")
        #expect(echoed.count == Set(echoed).count, "an event was processed twice")
        #expect(queued.isSubset(of: Set(echoed)), "an event queued before the kill was lost")
        #expect(queued.count >= 60 + 70 + 140)
    }

    @Test func aServiceKilledDuringBatchesLosesNothing() async throws {
        let service = try LiveService()
        try await service.start()
        let client = try BeckonClient(Self.configuration(service, "app"))
        defer { client.close() }
        client.identify(userId: "sam")
        let sender = Task {
            for n in 0..<1200 {
                client.track("Probe", properties: ["n": .int(Int64(n))])
                if n % 20 == 0 { try? await Task.sleep(for: .milliseconds(5)) }
            }
        }
        for pause in [150, 400] {
            try await Task.sleep(for: .milliseconds(pause))
            service.kill9()
            try await Task.sleep(for: .milliseconds(200))
            try await service.start()
        }
        await sender.value
        try await eventually("the queue is sent") { await client.flush() }
        #expect(try await service.echoed("sam").sorted() == Array(0..<1200))
    }

    @Test func theActionStreamResumesAtItsCursorAfterARestart() async throws {
        let service = try LiveService()
        try await service.start()
        let configuration = Self.configuration(service, "app")
        let first = try BeckonClient(configuration)
        first.identify(userId: "ada")
        for n in 0..<30 { first.track("Probe", properties: ["n": .int(Int64(n))]) }
        #expect(await first.flush())
        let before = try await Self.take(12, from: first)
        first.close()

        let second = try BeckonClient(configuration)
        let after = try await Self.take(18, from: second)
        second.close()
        let ids = (before + after).map(\.id)
        #expect(Set(ids).count == 30, "an action was handed over twice")
        #expect(Self.echoes(before + after) == Array(0..<30))

        // Nothing more comes, and nothing again, to a third start.
        let third = try BeckonClient(configuration)
        defer { third.close() }
        third.track("Probe", properties: ["n": 30])
        #expect(await third.flush())
        let next = try await Self.take(1, from: third)
        #expect(Self.echoes(next) == [30])
    }

    @Test func theActionStreamGoesOnAfterTheClientIsKilled() async throws {
        let service = try LiveService()
        try await service.start()
        let folder = service.folder.appendingPathComponent("probe")
        let sender = try Probe("send", service: service, directory: folder, user: "tia", ["0", "40"])
        try await sender.waitFor { $0.contains("done") }
        let taker = try Probe("take", service: service, directory: folder, user: "tia", ["1000"])
        try await taker.waitFor { $0.filter { $0.hasPrefix("action ") }.count >= 15 }
        taker.kill9()
        let restarted = try Probe("take", service: service, directory: folder, user: "tia", ["1000"])
        let before = taker.output.all.filter { $0.hasPrefix("action ") }
        try await restarted.waitFor { $0.filter { $0.hasPrefix("action ") }.count + before.count >= 39 }
        try await Task.sleep(for: .milliseconds(300))
        restarted.kill9()
        let lines = before + restarted.output.all.filter { $0.hasPrefix("action ") }
        let ids = lines.map { $0.split(separator: " ")[1] }
        #expect(Set(ids).count == ids.count, "an action was handed over twice")
        // Each action counts as taken when next() returns it: at most the one in hand at the kill is not printed.
        #expect(ids.count >= 39)
        #expect(Set(lines.compactMap { Int($0.split(separator: " ")[2]) }).isSubset(of: Set(0..<40)))
    }

    @Test func theInboxIsObservedAsActionsArriveAndItsReadStateRoundTrips() async throws {
        let service = try LiveService()
        try await service.start()
        let client = try BeckonClient(Self.configuration(service, "app"))
        client.identify(userId: "ivy")
        let updates = client.inboxUpdates()
        client.track("Signed In")
        #expect(await client.flush())
        let arrived = try await Self.first(of: updates) { $0.unread == 1 }
        #expect(arrived.items.map(\.id) == ["welcome"])
        #expect(arrived.items.first?.sender == "The team")
        let read = try await client.markRead("welcome")
        #expect(read.unread == 0)
        #expect(read.items.first?.read == true)

        // The typed actions of the same fire.
        let kinds = try await Self.take(3, from: client).map(\.kind)
        guard case .notify(let item, let unread) = kinds[0], case .message(let message) = kinds[1],
            case .prompt(let permission) = kinds[2]
        else {
            Issue.record("unexpected kinds: \(kinds)")
            return
        }
        #expect(item.id == "welcome" && item.link == "app://welcome" && unread == 1)
        #expect(message.title == "Hello" && message.buttons.first?.deepLink == URL(string: "app://go"))
        #expect(permission == "notifications")
        client.close()

        // Another install of the same user reads it as read.
        let other = try BeckonClient(Self.configuration(service, "other"))
        defer { other.close() }
        other.identify(userId: "ivy")
        let inbox = try await other.inbox()
        #expect(inbox.unread == 0 && inbox.items.first?.read == true && inbox.items.first?.readAt != nil)
    }

    @Test func anExpiredTokenIsRenewedOnce() async throws {
        let service = try LiveService()
        try await service.start()
        let calls = Shared(0)
        let client = try BeckonClient(
            Self.configuration(service, "app") { user in
                guard user == "eve" else { return LiveService.token(user) }
                let call = calls.update { c in
                    c += 1
                    return c
                }
                return call == 1 ? LiveService.token(user, expires: Date().addingTimeInterval(-60)) : LiveService.token(user)
            })
        defer { client.close() }
        client.identify(userId: "eve")
        client.track("Probe", properties: ["n": 1])
        client.track("Probe", properties: ["n": 2])
        #expect(await client.flush())
        #expect(Self.echoes(try await Self.take(2, from: client)) == [1, 2])
        let inbox = try await client.inbox()
        #expect(inbox.userId == "eve")
        #expect(calls() == 2)
        #expect(client.streamError == nil)
    }

    @Test func aForgedTokenStopsWithAnErrorAndAnotherUsersIsForbidden() async throws {
        let service = try LiveService()
        try await service.start()
        let calls = Shared(0)
        let forged = try BeckonClient(
            Self.configuration(service, "forged") { user in
                calls.update { $0 += user == "fay" ? 1 : 0 }
                return LiveService.token(user, secret: "not-the-service-secret-0123456789")
            })
        forged.identify(userId: "fay")
        await #expect(throws: BeckonClientError.self) { _ = try await Self.take(1, from: forged) }
        if case .unauthorized = forged.streamError {
        } else {
            Issue.record("stream error: \(String(describing: forged.streamError))")
        }
        // A refused token is asked for again once, then the pull stops; the loop of the id before the sign-in asks
        // nothing for the new one.
        #expect(calls() == 2)
        await #expect(throws: BeckonClientError.self) { _ = try await forged.inbox() }
        forged.close()

        let other = try BeckonClient(Self.configuration(service, "other") { _ in LiveService.token("somebody-else") })
        defer { other.close() }
        other.identify(userId: "gus")
        await #expect(throws: BeckonClientError.self) { _ = try await Self.take(1, from: other) }
        if case .forbidden = other.streamError {} else { Issue.record("stream error: \(String(describing: other.streamError))") }
    }

    @Test func anEventTheServiceRefusesIsDroppedAndTheRestDelivered() async throws {
        let service = try LiveService()
        try await service.start()
        let client = try BeckonClient(Self.configuration(service, "app"))
        defer { client.close() }
        client.identify(userId: "bo")
        client.track("Probe", properties: ["n": 1])
        // Over the service's 1,024-byte bound on an event name: a 400 naming this event of the batch.
        client.track(String(repeating: "x", count: 2_000))
        client.track("Probe", properties: ["n": 2])
        #expect(await client.flush())
        #expect(client.droppedEvents == 1)
        #expect(try await service.echoed("bo") == [1, 2])
    }

    @Test func aPushTokenIsRegisteredForTheUserAndCarriedInEvents() async throws {
        let service = try LiveService()
        try await service.start()
        let client = try BeckonClient(Self.configuration(service, "app"))
        defer { client.close() }
        client.identify(userId: "pia")
        let token = String(repeating: "ab", count: 32)
        client.setPushToken(token)
        try await eventually("the device is registered") { client.deviceRegistered }
        let (status, export) = try await service.get("/v1/users/pia/export", bearer: LiveService.adminKey)
        #expect(status == 200)
        #expect(export?.jsonText.contains(token) == true)
    }
}
