import BeckonStore
import Foundation
import Synchronization
import Testing

@testable import BeckonServer

/// The service's one committer (``GroupCommit``), as both stores use it: what arrives during a write goes in the next
/// one, in order and within its size bound; a chained failure fails what follows until a reset, an unchained one only
/// its own items; the depth bound holds back the caller; a stop writes what is queued and refuses the rest.
@Suite struct GroupCommitTests {
    struct Failed: Error {}

    /// A write that waits, on its first call, until `gate` opens, and records each call's items.
    final class Writer: Sendable {
        let calls = Mutex<[[Int]]>([])
        /// Open, or the first write's continuation waiting for it to open.
        private let gate = Mutex<(open: Bool, waiting: CheckedContinuation<Void, Never>?)>((false, nil))
        let failing = Mutex<Set<Int>>([])

        /// Lets the first write go on.
        func open() {
            gate.withLock { g in
                g.open = true
                defer { g.waiting = nil }
                return g.waiting
            }?.resume()
        }

        func write(_ items: [Int]) async throws -> [Int] {
            let first = calls.withLock { c in
                c.append(items)
                return c.count == 1
            }
            if first {
                await withCheckedContinuation { c in
                    let open = gate.withLock { g in
                        if !g.open { g.waiting = c }
                        return g.open
                    }
                    if open { c.resume() }
                }
            }
            if !failing.withLock({ $0.isDisjoint(with: items) }) { throw Failed() }
            return items.map { $0 * 10 }
        }
    }

    /// Runs `body` on a thread of its own, as the processing thread calls the committer's waiting methods (they block
    /// their thread: never one of the concurrency pool's, which the writes need).
    static func offPool(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { c in
            Thread {
                body()
                c.resume()
            }.start()
        }
    }

    /// Waits (at most 60 s: the whole suite runs in parallel on few cores) until `condition` holds.
    static func until(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            try #require(ContinuousClock.now < deadline)
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test func itemsArrivingDuringAWriteGoTogetherInTheNextInOrderAndWithinTheBound() async throws {
        let w = Writer()
        defer { w.open() }
        let commit = GroupCommit<Int, Int>(maxSize: 3, write: w.write)
        let results = Mutex<[Int: Int]>([:])
        let record: (Int) -> GroupCommit<Int, Int>.Done = { i in { r in results.withLock { $0[i] = try? r.get() } } }
        // The first write takes item 1 alone; 2…7 queue behind it.
        commit.enqueue(1, then: record(1))
        try await Self.until { w.calls.withLock { $0.count } == 1 }
        for i in 2...7 { commit.enqueue(i, then: record(i)) }
        w.open()
        await Self.offPool { commit.waitIdle() }
        #expect(w.calls.withLock { $0 } == [[1], [2, 3, 4], [5, 6, 7]])
        #expect(results.withLock { $0 } == Dictionary(uniqueKeysWithValues: (1...7).map { ($0, $0 * 10) }))
        #expect(try await commit.submit(8) == 80)
    }

    @Test func aChainedFailureFailsWhatFollowsUntilAReset() async throws {
        let w = Writer()
        defer { w.open() }
        w.failing.withLock { $0 = [1] }
        let commit = GroupCommit<Int, Int>(chained: true, write: w.write)
        let failed = Mutex<[Int]>([])
        let record: (Int) -> GroupCommit<Int, Int>.Done = { i in
            { r in if case .failure = r { failed.withLock { $0.append(i) } } }
        }
        commit.enqueue(1, then: record(1))
        try await Self.until { w.calls.withLock { $0.count } == 1 }
        for i in 2...3 { commit.enqueue(i, then: record(i)) }
        w.open()
        await Self.offPool { commit.waitIdle() }
        #expect(failed.withLock { $0 } == [1, 2, 3])
        #expect(commit.failed)
        // 2 and 3 were never written: they failed with the write before them.
        #expect(w.calls.withLock { $0 } == [[1]])
        await #expect(throws: Failed.self) { try await commit.submit(4) }
        commit.reset()
        #expect(try await commit.submit(5) == 50)
    }

    @Test func anUnchainedFailureIsTheFailedItemsAlone() async throws {
        let w = Writer()
        defer { w.open() }
        w.failing.withLock { $0 = [1] }
        let commit = GroupCommit<Int, Int>(write: w.write)
        try await withThrowingTaskGroup(of: Void.self) { group in
            // (Opened on every way out of the group, which waits for its tasks: a wait below that throws would
            // otherwise leave the first write at the gate, and the test hung rather than failed.)
            defer { w.open() }
            group.addTask { await #expect(throws: Failed.self) { try await commit.submit(1) } }
            try await Self.until { w.calls.withLock { $0.count } == 1 }
            group.addTask {
                let v = try await commit.submit(2)
                #expect(v == 20)
            }
            w.open()
            try await group.waitForAll()
        }
        #expect(!commit.failed)
    }

    @Test func theDepthHoldsTheCallerBackAndAStopWritesWhatIsQueued() async throws {
        let w = Writer()
        defer { w.open() }
        let commit = GroupCommit<Int, Int>(depth: 2, stoppedError: { Failed() }, write: w.write)
        commit.enqueue(1) { _ in }
        try await Self.until { w.calls.withLock { $0.count } == 1 }
        // Item 1 is being written: the caller queues 2 and 3, then waits to queue 4.
        let queued = Mutex(0)
        let caller = Thread {
            for i in 2...4 {
                commit.enqueue(i) { _ in }
                queued.withLock { $0 += 1 }
            }
        }
        caller.start()
        try await Self.until { queued.withLock { $0 } == 2 }
        try await Task.sleep(for: .milliseconds(50))
        #expect(queued.withLock { $0 } == 2)
        w.open()
        try await Self.until { queued.withLock { $0 } == 3 }
        await Self.offPool { commit.stop() }
        #expect(w.calls.withLock { $0.flatMap { $0 } } == [1, 2, 3, 4])
        await #expect(throws: Failed.self) { try await commit.submit(5) }
    }

    /// The single service's kind: a blocking write on the committer's own thread, chained.
    @Test func aThreadCommitterWritesOnItsOwnThreadInOrderChained() async throws {
        let calls = Mutex<[[Int]]>([])
        let inTask = Mutex(false)
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        let commit = GroupCommit<Int, Int>(thread: "test-committer", chained: true, stoppedError: { Failed() }) { items in
            let first = calls.withLock { c in
                c.append(items)
                return c.count == 1
            }
            // (On the committer's thread: no task runs the write.)
            if withUnsafeCurrentTask(body: { $0 != nil }) { inTask.withLock { $0 = true } }
            if first { gate.wait() }  // (the committer's own thread, not the pool's)
            if items.contains(3) { throw Failed() }
            return items.map { $0 * 10 }
        }
        let answers = Mutex<[Int: Int?]>([:])
        let record: (Int) -> GroupCommit<Int, Int>.Done = { i in
            { r in answers.withLock { $0[i] = .some(try? r.get()) } }
        }
        commit.enqueue(1, then: record(1))
        try await Self.until { calls.withLock { $0.count } == 1 }
        commit.enqueue(2, then: record(2))
        commit.enqueue(3, then: record(3))
        gate.signal()
        await Self.offPool { commit.waitIdle() }
        #expect(calls.withLock { $0 } == [[1], [2, 3]])
        #expect(answers.withLock { $0 } == [1: 10, 2: nil, 3: nil])
        #expect(commit.failed)
        await #expect(throws: Failed.self) { try await commit.submit(4) }
        #expect(calls.withLock { $0.count } == 2, "a round after a failed one was written")
        commit.reset()
        #expect(try await commit.submit(5) == 50)
        await Self.offPool { commit.stop() }
        await #expect(throws: Failed.self) { try await commit.submit(6) }
        #expect(!inTask.withLock { $0 })
    }
}

/// The service's own threads carry their names into the kernel, where `top -H`, `perf` and
/// `scripts/bench-service/threads.py` find them (Foundation's `Thread.name` alone does not reach it on Linux).
@Suite struct NamedThreadTests {
    /// The calling thread's name as the kernel has it.
    static func ownKernelName() -> String? {
        (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines)
    }

    /// The name a thread started by ``startThread(named:_:)`` reads back from the kernel.
    func kernelName(of name: String) -> String? {
        let seen = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        startThread(named: name) {
            seen.withLock { $0 = Self.ownKernelName() }
            done.signal()
        }
        done.wait()
        return seen.withLock { $0 }
    }

    @Test func aThreadIsKnownToTheKernelByItsName() throws {
        #if os(Linux)
            #expect(kernelName(of: "beckon-engine") == "beckon-engine")
            // The kernel keeps 15 bytes of a name.
            #expect(kernelName(of: "beckon-a-long-thread-name") == "beckon-a-long-t")
        #endif
    }

    @Test func theCommittersThreadIsNamed() async throws {
        #if os(Linux)
            let names = Mutex<[String]>([])
            let commit = GroupCommit<Int, Int>(thread: "beckon-test-gc") { items in
                names.withLock { $0.append(Self.ownKernelName() ?? "") }
                return items
            }
            _ = try await commit.submit(1)
            commit.stop()
            #expect(names.withLock { $0 } == ["beckon-test-gc"])
        #endif
    }
}
