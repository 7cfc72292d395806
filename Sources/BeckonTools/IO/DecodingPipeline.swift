import BeckonCore
import Dispatch
import Synchronization

/// Lines of a file decoded on other cores while the calling thread runs the engine: the one reading loop's way of
/// using every core (``EventStream/events(decoder:console:workers:_:)``).
///
/// The reading thread copies the lines it reads into blocks of at most ``blockLines`` lines or ``blockBytes`` bytes;
/// each block is decoded whole on one of `workers` serial queues (block *i* on queue *i* mod `workers`), and the
/// reading thread takes the blocks back in the order it read them. At most ``inFlight(workers:)`` blocks are read
/// ahead, so memory stays bounded (by `blockBytes` plus one line each) however long the file is. A block is decoded
/// by whichever thread claims it first: its queue's, or the reading thread's, which decodes instead of waiting
/// (``next()``). Decoding is free of side effects, so a stream that stops at a bad line (``BadLinePolicy/strict``)
/// only drops work it had read ahead.
package struct DecodingPipeline: ~Copyable {
    /// A line's event, or why it is bad, with its 1-based number and the bytes read up to its end.
    typealias Decoded = (event: Result<BoundEvent, DecodeError>, line: Int, bytesRead: Int)

    static let blockLines = 512
    static let blockBytes = 128 << 10
    /// The most threads a stream decodes on: the engine's thread is the bound (on 2 cores one decoding thread is two
    /// thirds busy: docs/bench.md), so more than a few would only hold more lines ahead.
    static let maxWorkers = 4
    /// Blocks read ahead of the one the engine takes next: two a worker, so each queue has the next block waiting.
    static func inFlight(workers: Int) -> Int { 2 * workers }
    /// The most lines read and not yet handed over: the blocks out, the one being filled and the one being taken.
    package static func maxLinesAhead(workers: Int) -> Int { (inFlight(workers: workers) + 2) * blockLines }

    private let decoder: SegmentDecoder
    private let queues: [DispatchQueue]
    private var filling = Block.Input()
    /// The blocks out, oldest first (at most ``inFlight(workers:)`` + 1: removing the first is cheap).
    private var pending: [Block] = []
    /// Blocks sent off, and taken back, since the start: block *i* went to queue *i* mod `workers`.
    private var submitted = 0
    private var taken = 0

    /// `first`: the queue of the first decoding thread (the stream's ``EventStream/helper``, which writes the actions'
    /// JSON too); the others' are the pipeline's own.
    init(decoder: SegmentDecoder, workers: Int, first: DispatchQueue) {
        precondition(workers > 0, "a pipeline decodes on at least one other thread")
        self.decoder = decoder
        queues = [first] + (1..<workers).map { DispatchQueue(label: "beckon.decode.\($0)", qos: .userInitiated) }
        pending.reserveCapacity(Self.inFlight(workers: workers) + 1)
    }

    /// Adds a line read (a blank one is skipped); sends its block off once full. Returns whether a block is waiting
    /// beyond the read-ahead, to be taken with ``next()`` before reading on.
    mutating func add(_ line: LineReader.Line, number: Int, bytesRead: Int) -> Bool {
        switch line {
        case .overlong(let n): filling.lines.append(.init(start: -1, end: n, number: number, bytesRead: bytesRead))
        case .text(let bytes):
            if LineReader.Line.isBlank(bytes) { return false }
            let start = filling.bytes.count
            filling.bytes.append(contentsOf: bytes)
            filling.lines.append(.init(start: start, end: filling.bytes.count, number: number, bytesRead: bytesRead))
        }
        if filling.lines.count >= Self.blockLines || filling.bytes.count >= Self.blockBytes { submit() }
        return pending.count > Self.inFlight(workers: queues.count)
    }

    /// Sends the lines gathered so far off to be decoded.
    mutating func submit() {
        guard !filling.lines.isEmpty else { return }
        let block = Block(filling)
        filling = Block.Input()
        filling.bytes.reserveCapacity(Self.blockBytes + 4096)
        filling.lines.reserveCapacity(Self.blockLines)
        let decoder = decoder
        queues[submitted % queues.count].async { if block.claim() { block.decode(decoder) } }
        submitted += 1
        pending.append(block)
    }

    /// The oldest block's lines, decoded, or `nil` when none is out. The calling thread does not sit idle while they
    /// are not: it decodes the oldest block itself when no thread has started it, and otherwise, until it is done, the
    /// newest blocks no thread has started (those their queue would reach last), so that the engine's thread takes a
    /// share of the decoding when the decoding threads are the slower side (on 2 cores, one decoding thread).
    mutating func next() -> [Decoded]? {
        guard let oldest = pending.first else { return nil }
        if oldest.claim() {
            oldest.decode(decoder)
        } else {
            var i = pending.count - 1
            while i > 0, !oldest.isDone {
                if pending[i].claim() { pending[i].decode(decoder) }
                i -= 1
            }
        }
        taken += 1
        return pending.removeFirst().take()
    }

    /// Lets go of a block's events on the queue it was sent to (its thread's memory, most of the time), so that
    /// freeing them is not the engine thread's work; an event `body` kept lives on, and is freed where it is let go.
    func release(_ decoded: consuming [Decoded]) {
        let events = decoded
        queues[(taken - 1) % queues.count].async { withExtendedLifetime(events) {} }
    }

    /// Drops the blocks still out: those not started are never decoded, those being decoded are waited for, so that no
    /// decoding outlives the stream.
    mutating func cancel() {
        for block in pending where !block.claim() { _ = block.take() }
        pending.removeAll()
    }

    /// One block's lines (copied out of the reader's buffer) and, once decoded, their events.
    private final class Block: Sendable {
        struct Line: Sendable {
            /// The line's bytes in ``Input/bytes``; `start` −1: an overlong line of `end` bytes.
            var start: Int
            var end: Int
            var number: Int
            var bytesRead: Int
        }
        struct Input: Sendable {
            var bytes: [UInt8] = []
            var lines: [Line] = []
        }

        private let input: Input
        private let output = Mutex<[Decoded]>([])
        private let done = DispatchSemaphore(value: 0)
        /// Set by the one thread that decodes the block: its queue's, or the engine's (``DecodingPipeline/next()``).
        private let claimed = Atomic<Bool>(false)
        private let finished = Atomic<Bool>(false)

        init(_ input: Input) { self.input = input }

        /// Whether this call makes the calling thread the block's decoder (once: the first caller).
        func claim() -> Bool {
            claimed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        }

        /// Whether the block's events are ready to be taken.
        var isDone: Bool { finished.load(ordering: .acquiring) }

        /// Decodes the lines; called once, by the thread that claimed the block.
        func decode(_ decoder: SegmentDecoder) {
            var out: [Decoded] = []
            out.reserveCapacity(input.lines.count)
            input.bytes.withUnsafeBufferPointer { all in
                for l in input.lines {
                    let line: LineReader.Line =
                        l.start < 0 ? .overlong(l.end) : .text(UnsafeBufferPointer(rebasing: all[l.start..<l.end]))
                    // (A block holds no blank line, the one kind `event` has no answer for.)
                    if let event = line.event(decoder) { out.append((event, l.number, l.bytesRead)) }
                }
            }
            output.withLock { $0 = out }
            finished.store(true, ordering: .releasing)
            done.signal()
        }

        func take() -> [Decoded] {
            done.wait()
            return output.withLock { out in
                defer { out = [] }
                return out
            }
        }
    }
}
