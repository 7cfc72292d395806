import Foundation
import Logging
import Synchronization

extension BeckonService {
    /// A service on a free loopback port over the rule files at `paths`, with a throw-away database under
    /// `directory`, started on a task of its own: the HTTP fuzz target (`scripts/fuzz.sh http`) sends it raw
    /// requests. Returns the port once it listens; `nil` if it did not start.
    public static func startForFuzzing(paths: [String], directory: String) -> Int? {
        var options = Options(paths: paths)
        options.database = directory + "/fuzz.sqlite"
        options.port = 0
        options.writeKeys = ["fuzz-write-key"]
        options.adminKeys = ["fuzz-admin-key"]
        options.userSecret = String(repeating: "s", count: 32)
        options.clock = .wall
        var logger = Logger(label: "beckon-fuzz")
        logger.logLevel = .critical
        let started = DispatchSemaphore(value: 0)
        let port = Mutex<Int?>(nil)
        Task.detached {
            do {
                let service = try await BeckonService(options, logger: logger)
                try await service.run { address in
                    port.withLock { $0 = Int(address.split(separator: ":").last ?? "") }
                    started.signal()
                }
            } catch {
                FileHandle.standardError.write(Data("the fuzzed service did not start: \(error)\n".utf8))
                started.signal()
            }
        }
        started.wait()
        return port.withLock { $0 }
    }
}
