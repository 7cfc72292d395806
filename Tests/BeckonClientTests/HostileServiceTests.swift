import BeckonClient
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A loopback server that answers every request one way (Fixtures/stub.py): a status and body, or a redirect.
final class Stub: @unchecked Sendable {
    let process = Process()
    let requests: LineReader
    private let input = Pipe()
    let port: Int

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    init(_ arguments: [String]) async throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/stub.py")
        process.arguments = ["python3", script.path] + arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        let lines = LineReader(out.fileHandleForReading)
        requests = LineReader(err.fileHandleForReading)
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while lines.all.isEmpty {
            guard Date() < deadline, process.isRunning else { throw Failure("the stub server did not start") }
            try await Task.sleep(for: .milliseconds(20))
        }
        port = Int(lines.all[0])!
    }

    /// Closes the stub's standard input, which ends it (within 20 s; past that, SIGKILL).
    deinit {
        try? input.fileHandleForWriting.close()
        if !exits(process, within: 20) {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// The client against a service, or something in front of it, that misbehaves, and against its own files damaged.
@Suite(.serialized)
struct HostileServiceTests {
    /// A redirect is not followed: neither the write key nor the user's token, nor the events, reach the other host;
    /// the events stay queued.
    @Test func aRedirectIsNotFollowedAndCarriesNoCredentialElsewhere() async throws {
        let elsewhere = try await Stub(["status", "200", #"{"success":true}"#])
        let redirect = try await Stub(["redirect", elsewhere.url.absoluteString])
        let (client, folder) = try Self.client(of: redirect.url)
        defer {
            client.close()
            try? FileManager.default.removeItem(at: folder)
        }
        client.identify(userId: "rex")
        client.track("Probe", properties: ["n": 1])
        #expect(await client.flush() == false)
        // (The pull loop asks for actions meanwhile, through the same redirect.)
        try await eventually("the stub saw a pull") { redirect.requests.all.contains { $0.contains("/actions") } }
        #expect(client.queuedEvents == 2)
        #expect(client.droppedEvents == 0)
        #expect(elsewhere.requests.all == [], "a redirect was followed")
        #expect(redirect.requests.all.contains { $0.contains(#""authorization": true"#) })
    }

    /// Answers that are not the service's keep the events: a 400 that names no event when every event is well-formed
    /// (a proxy in front of the service, a plain-HTTP request to an HTTPS port), a proxy's 202 or 204, which do not say
    /// stored, and a 413 for one event, a proxy's bound (the service refuses a large event with a 400 naming it). A
    /// 2xx deleted the batch, and a 413 dropped the events one a request.
    @Test(arguments: [
        ("400", "<html>400 The plain HTTP request was sent to HTTPS port</html>"), ("202", #"{"success":true}"#),
        ("204", ""), ("413", "<html>413 Request Entity Too Large</html>"),
    ])
    func answersThatAreNotTheServicesKeepTheEvents(_ status: String, _ body: String) async throws {
        let proxy = try await Stub(["status", status, body])
        let (client, folder) = try Self.client(of: proxy.url)
        defer {
            client.close()
            try? FileManager.default.removeItem(at: folder)
        }
        for n in 0..<5 { client.track("Probe", properties: ["n": .int(Int64(n))]) }
        #expect(await client.flush() == false)
        #expect(client.queuedEvents == 5)
        #expect(client.droppedEvents == 0)
    }

    /// Files in the queue's folder with names the queue does not write are left alone: `18446744073709551615.jsonl`
    /// overflowed the next sequence and crashed the app at every launch.
    @Test func queueFilesOfOtherNamesAreLeftAlone() async throws {
        let proxy = try await Stub(["status", "503", ""])
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-client-\(UUID().uuidString)")
        let queue = folder.appendingPathComponent("queue")
        try FileManager.default.createDirectory(at: queue, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for name in ["18446744073709551615.jsonl", "5.jsonl", "+000000000000007.jsonl"] {
            try Data(#"{"type":"track","event":"X","userId":"u"}"#.utf8 + [0x0A]).write(to: queue.appendingPathComponent(name))
        }
        var configuration = BeckonClient.Configuration(
            server: proxy.url, writeKey: LiveService.writeKey, directory: folder, tokenProvider: { LiveService.token($0) })
        configuration.pushPlatform = nil
        let client = try BeckonClient(configuration)
        defer { client.close() }
        #expect(client.queuedEvents == 0)
        client.track("Probe")
        #expect(client.queuedEvents == 1)
    }

    /// A line of the queue damaged on disk: the service cannot read the batch; that line alone is dropped, the rest
    /// delivered.
    @Test func aDamagedLineInTheQueueIsDroppedAndTheRestDelivered() async throws {
        let service = try LiveService()
        try await service.start()
        let (configuration, segment) = try Self.queuedByAnEarlierRun(service, user: "dax")
        var lines = try Data(contentsOf: segment).split(separator: 0x0A, omittingEmptySubsequences: false)
        lines.insert(Data(#"{"type":"track","event":"#.utf8)[...], at: 2)
        try Data(lines.joined(separator: [0x0A])).write(to: segment)

        let sender = try BeckonClient(configuration)
        defer { sender.close() }
        #expect(await sender.flush())
        #expect(sender.droppedEvents == 1)
        #expect(try await service.echoed("dax") == [1, 2, 3])
    }

    /// A batch file that cannot be read now (here: a folder in its place) is kept, not taken for empty and deleted;
    /// once readable it is sent.
    @Test func aBatchThatCannotBeReadIsKeptAndSentOnceItCan() async throws {
        let service = try LiveService()
        try await service.start()
        let (configuration, segment) = try Self.queuedByAnEarlierRun(service, user: "uma")
        let saved = try Data(contentsOf: segment)
        try FileManager.default.removeItem(at: segment)
        try FileManager.default.createDirectory(at: segment, withIntermediateDirectories: false)

        let sender = try BeckonClient(configuration)
        defer { sender.close() }
        #expect(await sender.flush() == false)
        #expect(FileManager.default.fileExists(atPath: segment.path))
        try FileManager.default.removeItem(at: segment)
        try saved.write(to: segment)
        try await eventually("the batch is sent") { await sender.flush() }
        #expect(try await service.echoed("uma") == [1, 2, 3])
    }

    /// A client the app lets go of without `close()` is freed (its loops do not keep it), and stops.
    @Test func aClientLetGoOfIsFreed() async throws {
        let service = try LiveService()
        try await service.start()
        weak var weakClient: BeckonClient?
        do {
            let client = try BeckonClient(ClientTests.configuration(service, "app"))
            weakClient = client
            client.identify(userId: "lee")
            client.setPushToken(String(repeating: "cd", count: 32))
            #expect(await client.flush())
            _ = client.inboxUpdates()
        }
        try await eventually(seconds: 10, "the client is freed") { weakClient == nil }
    }

    /// A token provider that fails (the app's backend offline at launch) is asked again later; the stream goes on.
    @Test func aTokenProviderThatFailsAtFirstIsAskedAgain() async throws {
        let service = try LiveService()
        try await service.start()
        let calls = Shared(0)
        let client = try BeckonClient(
            ClientTests.configuration(service, "app") { user in
                let call = calls.update { c in
                    c += 1
                    return c
                }
                if call <= 3 { throw URLError(.notConnectedToInternet) }
                return LiveService.token(user)
            })
        defer { client.close() }
        client.identify(userId: "noa")
        client.track("Probe", properties: ["n": 7])
        #expect(await client.flush())
        #expect(ClientTests.echoes(try await ClientTests.take(1, from: client)) == [7])
        #expect(client.streamError == nil)
        #expect(calls() > 3)
    }

    /// A client's folder holding one batch file of `user`'s identify and three Probe events (n 1 to 3), written by a
    /// client that closed before sending it; the configuration to open it again and the file.
    static func queuedByAnEarlierRun(
        _ service: LiveService, user: String
    ) throws -> (BeckonClient.Configuration, URL) {
        var configuration = ClientTests.configuration(service, "app")
        configuration.flushAt = 500
        configuration.flushInterval = .seconds(3600)
        let writer = try BeckonClient(configuration)
        writer.identify(userId: user)
        for n in 1...3 { writer.track("Probe", properties: ["n": .int(Int64(n))]) }
        writer.close()
        let queue = configuration.directory.appendingPathComponent("queue")
        let names = try FileManager.default.contentsOfDirectory(atPath: queue.path).filter { $0.hasSuffix(".jsonl") }
        guard names.count == 1 else { throw Failure("expected one batch file, found \(names)") }
        return (configuration, queue.appendingPathComponent(names[0]))
    }

    /// A client of a fresh folder sending to `server` (a stub), retrying fast, registering no device.
    static func client(of server: URL) throws -> (BeckonClient, folder: URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-client-\(UUID().uuidString)")
        var configuration = BeckonClient.Configuration(
            server: server, writeKey: LiveService.writeKey, directory: folder, tokenProvider: { LiveService.token($0) })
        configuration.retry = .init(first: .milliseconds(50), max: .milliseconds(200))
        configuration.pushPlatform = nil
        return (try BeckonClient(configuration), folder)
    }
}
