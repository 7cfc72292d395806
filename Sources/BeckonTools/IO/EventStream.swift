import BeckonCore
import Foundation

/// What a command does at a bad event line: the one policy of `dry-run`, `explain`, `report`, `test` and `bench`.
///
/// A bad line — not a JSON object, not a Segment event Beckon can keep, or longer than
/// ``SegmentDecoder/maxLineBytes`` — is reported as `FILE:LINE:COLUMN: bad event: MESSAGE` on standard error.
public enum BadLinePolicy: Sendable {
    /// Count each bad line, report the first ``BadLinePolicy/reportedLines`` of them, skip them all and go on; at the
    /// end one line says how many more there were. Every command's default.
    case goOn
    /// Stop at the first bad line and report it; the command fails (`--strict`).
    case strict

    /// How many bad lines ``goOn`` reports one by one.
    public static let reportedLines = 10
}

/// The bad lines of one stream under a ``BadLinePolicy``: counted, the first ones reported, the rest summed up at
/// the end. The policy's only implementation; every reader of events goes through it.
struct BadLines {
    let policy: BadLinePolicy
    /// The file as reports name it.
    let file: String
    private(set) var count = 0
    /// Lines whose event does not fit the tracking plans (processed all the same; ``BadLinePolicy/strict`` stops at the
    /// first).
    private(set) var offPlan = 0
    /// The bad line the stream stopped at (``BadLinePolicy/strict``): its line, column and what is wrong.
    private(set) var stoppedAt: (line: Int, column: Int, message: String)?

    init(policy: BadLinePolicy, file: String) {
        self.policy = policy
        self.file = file
    }

    /// Counts a bad line, reports it when it is among the first, and says whether to go on reading.
    mutating func note(line: Int, column: Int?, _ message: String, console: any Console) -> Bool {
        count += 1
        if count <= BadLinePolicy.reportedLines {
            console.err(Terminal.safe("\(file):\(line):\(column ?? 1): bad event: \(message)") + "\n")
        }
        guard policy == .goOn else {
            stoppedAt = (line, column ?? 1, message)
            return false
        }
        return true
    }

    /// Counts a line whose event does not fit the tracking plans, reports it when it is among the first (each thing
    /// that does not fit), and says whether to go on: the event is processed either way, but ``BadLinePolicy/strict``
    /// stops after it.
    mutating func noteOffPlan(line: Int, _ messages: [String], console: any Console) -> Bool {
        offPlan += 1
        if offPlan <= BadLinePolicy.reportedLines {
            for m in messages { console.err(Terminal.safe("\(file):\(line): off plan: \(m)") + "\n") }
        }
        guard policy == .goOn else {
            stoppedAt = (line, 1, messages.joined(separator: "; "))
            stoppedOffPlan = true
            return false
        }
        return true
    }

    /// The line stopped at was off the plan (not a bad line).
    private var stoppedOffPlan = false

    /// Says how many bad lines (and lines off the plan) were not reported one by one, or that the stream stopped at
    /// one. Returns whether the command must fail (it stopped).
    func finish(console: any Console) -> Bool {
        if stoppedAt != nil {
            console.err(
                stoppedOffPlan
                    ? "stopped at the first event off the tracking plan (--strict); without it they are counted and processed\n"
                    : "stopped at the first bad line (--strict); without it bad lines are counted and skipped\n")
            return true
        }
        let more = count - BadLinePolicy.reportedLines
        if more > 0 { console.err("… and \(more) more bad line\(more == 1 ? "" : "s")\n") }
        let moreOff = offPlan - BadLinePolicy.reportedLines
        if moreOff > 0 { console.err("… and \(moreOff) more line\(moreOff == 1 ? "" : "s") off the tracking plan\n") }
        return false
    }
}

/// The events of a file (or standard input, `-`), decoded for a rule set: the one reading loop of `dry-run`,
/// `explain`, `report`, `test` and `bench`, with one policy for bad lines (``BadLinePolicy``). Blank lines are
/// skipped.
package final class EventStream {
    let path: String
    private let reader: LineReader
    #if DEBUG
        private(set) var bad: BadLines
    #else
        /// (Reached for every event: without run-time exclusivity checks in release builds. One thread reads a stream.)
        @exclusivity(unchecked) private(set) var bad: BadLines
    #endif

    /// `nil` when the file cannot be opened.
    package init?(path: String, badLines policy: BadLinePolicy, chunkSize: Int = 1 << 20) {
        guard let reader = LineReader(path: path, chunkSize: chunkSize) else { return nil }
        self.path = path
        self.reader = reader
        bad = BadLines(policy: policy, file: path == "-" ? "<stdin>" : path)
    }

    /// The stream of a command's `--events PATH`; when it cannot be opened, says why on standard error
    /// (``cannotOpen(_:)``) and returns `nil`.
    package static func opened(_ path: String, badLines policy: BadLinePolicy, console: any Console) -> EventStream? {
        guard let stream = EventStream(path: path, badLines: policy) else {
            console.err("error: " + cannotOpen(path) + "\n")
            return nil
        }
        return stream
    }

    /// Why `path` could not be opened as an event stream: "cannot open events file 'PATH': REASON" (as `open` says it
    /// now; the file may have changed since).
    package static func cannotOpen(_ path: String) -> String {
        let fd = open(path, O_RDONLY)
        let reason =
            fd < 0
            ? String(cString: strerror(errno))
            : LineReader.isDirectory(fd) ? String(cString: strerror(EISDIR)) : "it can be opened now; try again"
        if fd >= 0 { close(fd) }
        return Terminal.safe("cannot open events file '\(path)': \(reason)")
    }

    var displayName: String { bad.file }
    /// Bad lines met so far (reported or counted, and skipped or stopped at).
    package var badLines: Int { bad.count }
    /// 1-based number of the line last read.
    package var lineNumber: Int { reader.lineNumber }
    /// Why reading stopped before the end of the file, if it did.
    var readError: String? { reader.readError }

    /// Threads that decode a file's lines while the calling thread runs the engine (``DecodingPipeline``): one fewer
    /// than the cores, at most ``DecodingPipeline/maxWorkers``; none on a single core.
    package static var decodingWorkers: Int {
        min(DecodingPipeline.maxWorkers, ProcessInfo.processInfo.activeProcessorCount - 1)
    }

    /// Decodes every line and hands each event to `body`, in order, with a progress line on a terminal. A regular
    /// file (standard input redirected from one too) is decoded on `workers` other threads ahead of `body`
    /// (``DecodingPipeline``); a pipe, a FIFO or a terminal is decoded line by line as it comes, so that a live
    /// stream's output is not held back for a block.
    package func events(
        decoder: SegmentDecoder, console: any Console, workers: Int = EventStream.decodingWorkers,
        _ body: (BoundEvent) -> Void
    ) {
        let progress = Progress(console: console, total: reader.fileSize)
        var events = 0
        func take(_ d: DecodingPipeline.Decoded) -> Bool {
            eventLine = d.line
            switch d.event {
            case .success(let event):
                body(event)
                events += 1
                progress.tick(events: events, bytes: d.bytesRead)
                // (Output that cannot be written any more: the rest of the stream would be lost; stop.)
                if console.writeFailure != nil { return false }
                return !event.isOffPlan || bad.noteOffPlan(line: d.line, event.offPlan, console: console)
            case .failure(let error):
                return bad.note(line: d.line, column: error.column, error.message, console: console)
            }
        }
        if workers == 0 || !isFile {
            reader.readLines { line in
                guard let event = line.event(decoder) else { return true }
                return take((event, reader.lineNumber, reader.bytesRead))
            }
        } else {
            var pipeline = DecodingPipeline(decoder: decoder, workers: workers, first: helper)
            var stopped = false
            reader.readLines { line in
                guard pipeline.add(line, number: reader.lineNumber, bytesRead: reader.bytesRead),
                    let block = pipeline.next()
                else { return true }
                stopped = !block.allSatisfy(take)
                pipeline.release(block)
                return !stopped
            }
            if !stopped { pipeline.submit() }
            while !stopped, let block = pipeline.next() {
                stopped = !block.allSatisfy(take)
                pipeline.release(block)
            }
            pipeline.cancel()
        }
        progress.finish()
    }

    /// The serial queue of the first decoding thread (block *i* of the file goes to decoding thread *i* mod the
    /// workers: ``events(decoder:console:workers:_:)``), which writes the actions' JSON too (``ActionLines/init(for:to:)``):
    /// with the engine's thread, the threads of a file's run are no more than the cores, so that none waits for one. On
    /// 2 cores a writer of its own, a third thread, took the engine's core at its hand-overs; sharing one thread, end to
    /// end went from 1.09–1.24M to 1.30–1.34M events/s in six rounds alternating the two builds (docs/bench.md).
    package let helper = DispatchQueue(label: "beckon.helper", qos: .userInitiated)

    /// Whether the stream is a regular file (standard input redirected from one too), which
    /// ``events(decoder:console:workers:_:)`` decodes on other threads: not a live stream.
    package var isFile: Bool { reader.fileSize != nil }

    #if DEBUG
        /// The line of the event ``events(decoder:console:workers:_:)`` handed over last (the reader may be ahead of
        /// it).
        package private(set) var eventLine = 0
    #else
        /// The line of the event ``events(decoder:console:workers:_:)`` handed over last (the reader may be ahead of
        /// it). Set and read for every event: without run-time exclusivity checks in release builds (one thread).
        @exclusivity(unchecked) package private(set) var eventLine = 0
    #endif
    /// Lines read but not yet handed over (decoded ahead, or being decoded): of them, those that are not blank are at
    /// most ``DecodingPipeline/maxLinesAhead(workers:)``.
    package var linesAhead: Int { reader.lineNumber - eventLine }

    /// The raw bytes of each line that is not blank, for a caller that decodes them itself (the bench's decoding
    /// measure and its workload) until `body` returns false. An overlong line is a bad line here; a line the caller
    /// cannot decode goes to ``badLine(_:console:)``, whose answer `body` returns.
    package func lines(console: any Console, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        reader.readLines { line in
            switch line {
            case .overlong(let n): return badLine(SegmentDecoder.overlong(n), console: console)
            case .text(let bytes): return LineReader.Line.isBlank(bytes) || body(bytes)
            }
        }
    }

    /// Counts the bad line just read under the policy; whether to go on.
    package func badLine(_ error: DecodeError, console: any Console) -> Bool {
        bad.note(line: reader.lineNumber, column: error.column, error.message, console: console)
    }

    /// At the end of the stream: says on standard error why the stream could not be read to its end, or that it
    /// stopped at a bad line, or how many bad lines were not shown. Returns whether the command must fail.
    package func finish(console: any Console) -> Bool {
        // (Output that could not be written is said by the command's end, ``ConsoleCommand``; what is said here still
        // goes to standard error.)
        let stopped = bad.finish(console: console) || console.writeFailure != nil
        // (Reading ahead may have met an error past the line a strict stream stopped at: line by line it would not.)
        guard !stopped, let error = readError else { return stopped }
        console.err(Terminal.safe("error: \(displayName): reading stopped after line \(reader.lineNumber): \(error)") + "\n")
        return true
    }
}

extension LineReader.Line {
    /// The event on this line: `nil` for a blank line, the reason for a bad one (an overlong line is one).
    func event(_ decoder: SegmentDecoder) -> Result<BoundEvent, DecodeError>? {
        switch self {
        case .overlong(let n): return .failure(SegmentDecoder.overlong(n))
        case .text(let bytes):
            if Self.isBlank(bytes) { return nil }
            do throws(DecodeError) { return .success(try decoder.decode(bytes)) } catch { return .failure(error) }
        }
    }

    /// Whether a line holds nothing but spaces and tabs (skipped, not a bad line).
    static func isBlank(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { bytes.allSatisfy { $0 == 32 || $0 == 9 } }
}
