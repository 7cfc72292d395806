import Foundation
import GRDB

/// Folds a database's write-ahead log into the database file on a thread and a connection of its own, so that the
/// connection that commits only appends to the log.
///
/// SQLite's own checkpoint runs inside a commit, on the committing connection, each time the log has grown by ~4 MB
/// (1,000 pages): in `beckon serve` that is the group-commit thread, and every request of a group waited for it to copy
/// the pages and wait for the database file's fsync — 29% of that thread's CPU under ingest (bench.md). Here a
/// passive checkpoint (which never blocks a writer or a reader) runs every ``busyInterval`` while the log has frames
/// to fold in, and every ``idleInterval`` otherwise. The writer keeps SQLite's checkpoint as a backstop at
/// ``SQLiteStateBackend/backstopLogPages``: should this thread fall behind, the log grows no further than it does
/// today before the writer folds it in itself.
final class WALCheckpointer: Sendable {
    private let loop: Loop

    /// How long the thread waits between checkpoints while the log grows, and while it does not.
    static let busyInterval = 0.05
    static let idleInterval = 0.5

    init(path: String) throws {
        var config = Configuration()
        config.label = "beckon-checkpoint"
        // (A passive checkpoint waits for no one; the stop's own checkpoint may hold the lock for a moment.)
        config.busyMode = .timeout(1)
        // The database file is synced before the log may start again over what was folded in (SQLite's default too:
        // stated, as the writer's is).
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let loop = Loop(try DatabaseQueue(path: path, configuration: config))
        self.loop = loop
        startThread(named: "beckon-walfold") { loop.run() }
    }

    /// Frames the thread has folded into the database file so far.
    var framesFolded: Int { loop.framesFolded }

    /// Ends the thread, after the checkpoint it may be running; idempotent.
    func stop() { loop.stop() }

    deinit { loop.stop() }

    /// The thread's state (the thread holds this, not the checkpointer, so that letting the checkpointer go stops it).
    private final class Loop: @unchecked Sendable {
        // @unchecked: `stopped`, `running` and `folded` are read and written only under `lock`; GRDB's queue is
        // thread-safe.
        private let lock = NSCondition()
        private var stopped = false
        private var running = true
        private var folded = 0
        private let queue: DatabaseQueue

        init(_ queue: DatabaseQueue) { self.queue = queue }

        var framesFolded: Int {
            lock.lock()
            defer { lock.unlock() }
            return folded
        }

        func run() {
            var wait = WALCheckpointer.idleInterval
            var (lastFrames, lastDone) = (0, 0)
            while true {
                lock.lock()
                if !stopped { _ = lock.wait(until: Date(timeIntervalSinceNow: wait)) }
                if stopped {
                    running = false
                    lock.broadcast()
                    lock.unlock()
                    return
                }
                lock.unlock()
                // (A failure — the file gone, a full disk — is the writer's to report, whose commits fail too; the next
                // checkpoint tries again.)
                let (frames, done) = (try? queue.writeWithoutTransaction { db in try db.checkpoint(.passive) }) ?? (0, 0)
                // (`done` counts the log's frames folded in since the writer last started it again: from 0 after that.)
                let restarted = frames < lastFrames
                lock.lock()
                folded += max(0, done - (restarted ? 0 : lastDone))
                lock.unlock()
                // (The log grew, or was started again, since the last look: more may come at once.)
                wait = frames != lastFrames ? WALCheckpointer.busyInterval : WALCheckpointer.idleInterval
                (lastFrames, lastDone) = (frames, done)
            }
        }

        func stop() {
            lock.lock()
            stopped = true
            lock.broadcast()
            while running { lock.wait() }
            lock.unlock()
        }
    }
}
