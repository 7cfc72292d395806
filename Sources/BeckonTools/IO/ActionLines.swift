import BeckonCore
import Dispatch
import Foundation
import Synchronization

/// Fired actions written as JSON lines (``FiredActions/write(_:to:)``), in the order they were added, on another
/// thread's serial queue when the machine has a core to spare (a file's stream: its helper, which decodes lines too):
/// the engine's thread hands over a run of events' actions and goes on, while another core writes them (a fifth of the
/// engine thread's time end to end: docs/bench.md).
///
/// The actions are taken from each outcome as they are kept there (no action is made, nothing is written on the
/// engine's thread), and at most ``maxRunsOut`` runs of ``runActions`` actions are out at once, so memory stays
/// bounded however fast the engine is. Output goes to `write` in chunks of about ``chunkBytes``, on the writing
/// queue; ``drain()`` waits for everything added and flushes it (at the end of the stream, and before anything else is
/// written to the same output: ``ordering(_:)``).
package final class ActionLines: @unchecked Sendable {
    /// Actions gathered before a run is handed to the writing queue.
    package static let runActions = 256
    /// Runs handed over and not yet written, at most.
    package static let maxRunsOut = 4
    /// Output bytes gathered before `write` is called.
    package static let chunkBytes = 1 << 16

    private let write: @Sendable ([UInt8]) -> Void
    /// `nil`: written on the caller's thread.
    private let queue: DispatchQueue?
    private let slots = DispatchSemaphore(value: ActionLines.maxRunsOut)
    private let runsOut = Atomic(0)
    /// The most runs that were out at once (for the bound's test).
    package private(set) var mostRunsOut = 0
    /// The run being gathered (the caller's thread only: no run-time exclusivity check an event).
    @exclusivity(unchecked) private var gathering = FiredActions()
    /// The JSON written and not yet passed to `write` (the writing queue only, or the caller's when not threaded; no
    /// run-time exclusivity check an action).
    @exclusivity(unchecked) private var out = JSONWriter()

    /// Lines written on `queue` (a serial queue: the lines keep their order), or on the caller's thread when `nil`.
    package init(on queue: DispatchQueue?, write: @escaping @Sendable ([UInt8]) -> Void) {
        self.write = write
        self.queue = queue
    }

    /// `threaded`: write on a queue of its own.
    package convenience init(threaded: Bool, write: @escaping @Sendable ([UInt8]) -> Void) {
        self.init(on: threaded ? DispatchQueue(label: "beckon.actions", qos: .userInitiated) : nil, write: write)
    }

    /// Lines for `console`'s standard output, written on the stream's helper thread (``EventStream/helper``, which
    /// decodes too) when `stream` is a file and the machine has a core to spare (a live stream's lines are written as
    /// they come). Report what else goes to `console` through ``ordering(_:)`` so that it keeps its place among the
    /// lines.
    package convenience init(for stream: EventStream, to console: any Console) {
        let target = Target(console)
        self.init(on: stream.isFile && ProcessInfo.processInfo.activeProcessorCount > 1 ? stream.helper : nil) {
            target.console.out(bytes: $0)
        }
    }

    /// The console that `write` goes to, written from the writing queue only while nothing else writes to it: every
    /// other write goes through ``ordering(_:)``, which waits for the queue first.
    private final class Target: @unchecked Sendable {
        let console: any Console
        init(_ console: any Console) { self.console = console }
    }

    /// `console` for anything else written while lines are added: each write waits until the lines added before it
    /// are out, so that a bad line's report or a summary keeps its place.
    package func ordering(_ console: any Console) -> any Console { Ordered(base: console, lines: self) }

    private final class Ordered: Console {
        let base: any Console
        let lines: ActionLines
        init(base: any Console, lines: ActionLines) {
            self.base = base
            self.lines = lines
        }
        func out(_ s: String) {
            lines.drain()
            base.out(s)
        }
        func out(bytes: [UInt8]) {
            lines.drain()
            base.out(bytes: bytes)
        }
        func err(_ s: String) {
            lines.drain()
            base.err(s)
        }
        var errIsTerminal: Bool { base.errIsTerminal }
        var writeFailure: String? { base.writeFailure }
    }

    /// Adds an outcome's actions (taken as they are; the outcome can be reused at once).
    package func add(_ actions: FiredActions) {
        guard let queue else { return format(actions) }
        gathering.append(contentsOf: actions)
        if gathering.count >= Self.runActions { handOver(queue) }
    }

    /// Hands the run gathered so far to the writing queue (waiting while ``maxRunsOut`` runs are out).
    private func handOver(_ queue: DispatchQueue) {
        guard !gathering.isEmpty else { return }
        let run = gathering
        gathering = FiredActions()
        slots.wait()
        mostRunsOut = max(mostRunsOut, runsOut.add(1, ordering: .relaxed).newValue)
        queue.async { [self] in
            format(run)
            runsOut.subtract(1, ordering: .relaxed)
            slots.signal()
        }
    }

    /// Writes `actions` as JSON lines into `out`, passing it on once a chunk is full (the writing queue, or the
    /// caller's thread when not threaded).
    private func format(_ actions: FiredActions) {
        for i in actions.indices {
            actions.write(i, to: &out)
            out.newline()
        }
        if out.bytes.count >= Self.chunkBytes { flush() }
    }

    private func flush() {
        guard !out.bytes.isEmpty else { return }
        write(out.bytes)
        out.removeAll()
    }

    /// Writes everything added so far and waits until `write` has had it all.
    package func drain() {
        guard let queue else { return flush() }
        handOver(queue)
        queue.sync { flush() }
    }
}
