import BeckonClient
import Crypto
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A real `beckon serve` on loopback over Fixtures/rules, started from the build directory (`swift build` first), and
/// what the client tests ask it directly: all of a user's actions, the ingest counters, an export.
final class LiveService: @unchecked Sendable {
    static let writeKey = "client-test-key"
    static let secret = "client-test-secret-0123456789abcdef"
    static let adminKey = "client-test-admin-key-0123456789"

    let folder: URL
    private(set) var port = 0
    private var process: Process?

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    deinit {
        if let p = process, p.isRunning { kill(p.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: folder)
    }

    /// The build directory holding `beckon` and `beckon-client-probe`.
    static let buildDirectory: URL = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let candidates = [
            ProcessInfo.processInfo.environment["BECKON_BUILD_DIR"].map { URL(fileURLWithPath: $0) },
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            root.appendingPathComponent(".build/debug"),
        ].compactMap { $0 }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.appendingPathComponent("beckon").path) }
            ?? candidates.last!
    }()

    static func binary(_ name: String) -> URL { buildDirectory.appendingPathComponent(name) }

    static var rules: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/rules").path
    }

    /// Starts the service (on the port it had before, after a stop or a kill; the first time on a free one).
    func start() async throws {
        let p = Process()
        p.executableURL = Self.binary("beckon")
        p.arguments = [
            "serve", Self.rules, "--db", folder.appendingPathComponent("service.sqlite").path, "--port", String(port),
            "--write-key", Self.writeKey, "--user-secret", Self.secret, "--admin-key", Self.adminKey, "--clock", "wall",
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["LOG_LEVEL"] = "warning"
        p.environment = environment
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let lines = LineReader(out.fileHandleForReading)
        // (A bound on a hung start, not a speed check: at the start of `swift test` every suite begins at once, and on
        // 2 cores a debug `beckon serve` once took more than 30 s to listen there.)
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            if let line = lines.all.first(where: { $0.contains("listening on http://") }) {
                let address = line.components(separatedBy: "listening on http://")[1].split(separator: " ")[0]
                port = Int(address.split(separator: ":").last!)!
                return
            }
            if !p.isRunning { throw Failure("beckon serve exited at start (status \(p.terminationStatus))") }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Failure("beckon serve did not start in 120 s")
    }

    func kill9() {
        guard let p = process else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    /// SIGTERM, and the exit it brings (within 60 s: past that, SIGKILL and a failed test, not a hung one).
    func stop() {
        guard let p = process else { return }
        p.terminate()
        if !exits(p, within: 60) {
            Issue.record("beckon serve did not exit within 60 s of SIGTERM")
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        process = nil
    }

    /// A user token (HS256, `sub` the user), expiring at `expires`, signed with `secret`.
    static func token(_ user: String, expires: Date = Date().addingTimeInterval(3600), secret: String = secret) -> String {
        func b64(_ d: Data) -> String {
            d.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let head = b64(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let body = b64(try! JSONSerialization.data(withJSONObject: ["sub": user, "exp": Int(expires.timeIntervalSince1970)]))
        let mac = HMAC<SHA256>.authenticationCode(for: Data("\(head).\(body)".utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return "\(head).\(body).\(b64(Data(mac)))"
    }

    func get(_ path: String, bearer: String) async throws -> (Int, JSONValue?) {
        var request = URLRequest(url: URL(string: url.absoluteString + path)!)
        request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, try? JSONDecoder().decode(JSONValue.self, from: data))
    }

    /// Every action the service stored for the user, oldest first.
    func actions(of user: String) async throws -> [JSONValue] {
        var all: [JSONValue] = []
        var cursor = "0"
        while true {
            let (status, body) = try await get("/v1/users/\(user)/actions?after=\(cursor)", bearer: Self.token(user))
            try #require(status == 200)
            guard case .array(let page)? = body?["actions"], !page.isEmpty else { return all }
            all += page
            cursor = body?["cursor"]?.stringValue ?? cursor
        }
    }

    /// The `n` of each `echo` action the service stored for the user.
    func echoed(_ user: String) async throws -> [Int64] {
        try await actions(of: user).filter { $0["rule"]?.stringValue == "echo" }.compactMap { $0["payload"]?["n"]?.intValue }
    }

    /// `beckon_ingest_events_total{result="…"}`.
    func ingested(_ result: String) async throws -> Int {
        let (data, _) = try await URLSession.shared.data(from: URL(string: url.absoluteString + "/metrics")!)
        let prefix = "beckon_ingest_events_total{result=\"\(result)\"} "
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix(prefix) {
            return Int(Double(line.dropFirst(prefix.count))!)
        }
        return 0
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Lines a child process writes, read on a thread of their own (never the cooperative pool's).
final class LineReader: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    private var partial = ""

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { return }
                lock.lock()
                partial += String(decoding: data, as: UTF8.self)
                while let i = partial.firstIndex(of: "\n") {
                    lines.append(String(partial[..<i]))
                    partial = String(partial[partial.index(after: i)...])
                }
                lock.unlock()
            }
        }
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }
}

/// A `beckon-client-probe` run (Tests/BeckonClientProbe): a client in a process of its own, to kill.
final class Probe: @unchecked Sendable {
    let process = Process()
    let output: LineReader

    init(_ command: String, service: LiveService, directory: URL, user: String, _ rest: [String] = []) throws {
        process.executableURL = LiveService.binary("beckon-client-probe")
        process.arguments =
            [command, service.url.absoluteString, LiveService.writeKey, directory.path, LiveService.token(user), user] + rest
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        output = LineReader(out.fileHandleForReading)
        try process.run()
    }

    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Waits (up to `seconds`) until the output has a line satisfying `condition`.
    func waitFor(seconds: Double = 60, _ condition: ([String]) -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition(output.all) {
            guard Date() < deadline else { throw Failure("the probe did not get there in \(seconds) s: \(output.all.suffix(3))") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Polls `condition` every 20 ms for up to `seconds`.
func eventually(seconds: Double = 30, _ what: String, _ condition: () async throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while try await !condition() {
        guard Date() < deadline else { throw Failure("not within \(seconds) s: \(what)") }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// Whether `process` ends within `seconds`.
func exits(_ process: Process, within seconds: Double) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while process.isRunning {
        guard Date() < deadline else { return false }
        usleep(10_000)
    }
    return true
}

/// A value shared between a test and the closures it gives the client.
final class Shared<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func callAsFunction() -> Value {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
    @discardableResult
    func update<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
