import Foundation

/// Starts `body` on a thread of its own that the operating system knows by `name` (`top -H`, `ps -L`,
/// `/proc/PID/task/*/comm`, `perf`): `scripts/bench-service.sh` measures each of the service's threads by it.
/// Foundation's `Thread.name` names the thread for Foundation only on Linux, where the kernel keeps the name of the
/// thread that made it; the thread writes its own (`/proc/thread-self/comm`, at most 15 bytes: longer ones are cut).
package func startThread(named name: String, _ body: @escaping @Sendable () -> Void) {
    let t = Thread {
        #if os(Linux)
            try? String(decoding: name.utf8.prefix(15), as: UTF8.self)
                .write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
        #endif
        body()
    }
    t.name = name
    t.start()
}
