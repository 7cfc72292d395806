import BeckonMemory
import Prometheus
import ServiceLifecycle
import Synchronization

/// Gives the heap's free pages back to the system once the service settles after writing, on both stores.
///
/// glibc keeps what a thread's arena freed resident until asked: after a burst (the requests, events and encoded
/// states of 100,000 new users, freed between the profiles that stay) tens of bytes a user (docs/bench.md, "Memory per
/// user"). Whatever commits work (the single service's committer, a fleet partition's batch) calls ``noteWork()``;
/// ``settleTime`` after the last of it, with nothing since, ``run()`` asks glibc once for the free pages (`malloc_trim`:
/// under a millisecond with 100,000 users held) and waits for the next work; at most once per ``leastInterval``, so
/// that a client sending an event every ``settleTime`` cannot make it run for each. A service that never idles never
/// pays.
package final class MemorySettler: Service, Sendable {
    /// How long after the last work the free pages go back.
    package static let settleTime = Duration.milliseconds(500)
    /// The least time between two give-backs.
    package static let leastInterval = Duration.seconds(5)
    /// How often ``run()`` looks.
    static let lookEvery = Duration.milliseconds(100)

    /// The last work noted, whether memory was given back since, and when it last was.
    private let state = Mutex<(last: ContinuousClock.Instant, pending: Bool, gave: ContinuousClock.Instant?)>(
        (.now, false, nil))
    /// `beckon_memory_given_back_total`.
    private let givenBack: Counter

    /// Also fixes the allocator's thresholds for a service (`beckon_configure_allocator`: so that the free top of an
    /// arena goes back when freed, not only free blocks inside it).
    package init(givenBack: Counter) {
        self.givenBack = givenBack
        beckon_configure_allocator()
    }

    /// Work was written: its transient memory is freed, or about to be.
    package func noteWork() {
        state.withLock { s in
            s.last = .now
            s.pending = true
        }
    }

    /// Gives the free pages back when work was noted, none has come for ``settleTime`` and none was given back for
    /// ``leastInterval``; whether it did.
    @discardableResult
    package func giveBackIfSettled(now: ContinuousClock.Instant = .now) -> Bool {
        let due = state.withLock { s in
            guard s.pending, now - s.last >= Self.settleTime, s.gave.map({ now - $0 >= Self.leastInterval }) ?? true
            else { return false }
            s.pending = false
            s.gave = now
            return true
        }
        guard due else { return false }
        _ = beckon_give_back_memory()
        givenBack.increment()
        return true
    }

    package func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.lookEvery) }
            giveBackIfSettled()
        }
    }
}
