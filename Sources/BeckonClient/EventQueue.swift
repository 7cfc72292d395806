import Foundation
import Logging

/// Events on disk until the service took them: `queue/` holds segments, one batch each, named by an increasing
/// sequence number (`0000000000000042.jsonl`), one event a line. `track` appends to the open segment with one
/// `write`; a segment is sealed at `flushAt` events or 400 KB, and the uploader sends sealed ones oldest first, and
/// deletes one only once the service answered 200 (or named its every event bad). A line the app was killed in the
/// middle of has no newline and is skipped. At most `maxEvents` wait: beyond, the oldest segment is dropped (logged).
final class EventQueue: Sendable {
    /// An event over this is refused at `track` (the service's bound: 32 KB an event).
    static let maxEventBytes = 32 * 1024
    /// A segment is sealed before it would pass this (the service takes 500 KB a request).
    static let maxSegmentBytes = 400 * 1024

    struct Segment: Sendable, Equatable {
        let sequence: UInt64
        var events: Int
        var bytes: Int
    }

    private struct Open {
        var segment: Segment
        var handle: FileHandle
        var since: ContinuousClock.Instant
    }

    private struct State {
        var open: Open?
        var sealed: [Segment] = []
        var nextSequence: UInt64 = 1
        var dropped = 0

        /// Events waiting, sealed or not.
        var count: Int { sealed.reduce(open?.segment.events ?? 0) { $0 + $1.events } }
    }

    private let state: Locked<State>
    private let folder: URL
    private let maxEvents: Int
    private let batchEvents: Int
    private let logger: Logger

    init(folder: URL, maxEvents: Int, batchEvents: Int, logger: Logger) throws {
        self.folder = folder
        self.maxEvents = max(1, maxEvents)
        self.batchEvents = max(1, min(batchEvents, 500))
        self.logger = logger
        try Disk.makeDirectory(folder)
        // What a previous run left is sealed as it is: appends go to a new segment.
        var state = State()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names where name.hasSuffix(".jsonl") {
            // (Only the names this queue writes: 16 digits. `5.jsonl` was counted and never found again by its name,
            // and a sequence of UInt64.max overflowed at every launch.)
            let digits = name.dropLast(6)
            guard digits.utf8.count == 16, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let sequence = UInt64(digits)
            else { continue }
            let data = (try? Data(contentsOf: folder.appendingPathComponent(name))) ?? Data()
            let events = data.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 }
            state.sealed.append(Segment(sequence: sequence, events: events, bytes: data.count))
            state.nextSequence = max(state.nextSequence, sequence + 1)
        }
        state.sealed.sort { $0.sequence < $1.sequence }
        self.state = Locked(state)
    }

    private func url(_ sequence: UInt64) -> URL {
        let digits = String(sequence)
        return folder.appendingPathComponent(String(repeating: "0", count: max(0, 16 - digits.count)) + digits + ".jsonl")
    }

    /// Events waiting, sealed or not.
    var count: Int {
        state.withLock { $0.count }
    }

    /// Events dropped since the client started: the queue was full.
    var dropped: Int { state.withLock { $0.dropped } }

    /// How long the open segment has had events (nil: none).
    var openSince: ContinuousClock.Instant? { state.withLock { $0.open?.since } }

    enum Appended {
        /// Written; `wake` when the uploader has something new to time or send: the first event of a segment (its
        /// `flushInterval` starts), or a segment now full.
        case queued(wake: Bool)
        case tooLarge
    }

    /// Writes one event line (JSON without a newline) before returning.
    func append(_ line: Data) throws -> Appended {
        guard line.count <= Self.maxEventBytes else { return .tooLarge }
        // (Logged after the lock is let go: a log handler may call back into the client.)
        var dropped: [Int] = []
        defer {
            for n in dropped {
                logger.warning("beckon: the event queue is full (\(maxEvents) events): the oldest \(n) dropped unsent")
            }
        }
        return try state.withLock { s in
            if let o = s.open, o.segment.bytes + line.count + 1 > Self.maxSegmentBytes { seal(&s) }
            dropped = makeRoom(&s)
            if s.open == nil {
                let sequence = s.nextSequence
                s.nextSequence += 1
                let url = url(sequence)
                guard FileManager.default.createFile(atPath: url.path, contents: nil),
                    let handle = try? FileHandle(forWritingTo: url)
                else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path]) }
                s.open = Open(segment: Segment(sequence: sequence, events: 0, bytes: 0), handle: handle, since: .now)
            }
            var record = line
            record.append(0x0A)
            do {
                try s.open!.handle.write(contentsOf: record)
            } catch {
                // A full disk: what was written of the line has no newline and is skipped when read. Later events go
                // to a new segment.
                seal(&s)
                throw error
            }
            s.open!.segment.events += 1
            s.open!.segment.bytes += record.count
            if s.open!.segment.events >= batchEvents {
                seal(&s)
                return .queued(wake: true)
            }
            return .queued(wake: s.open!.segment.events == 1)
        }
    }

    /// Seals the open segment, if it has events, so that the next send takes it.
    func sealOpen() {
        state.withLock { seal(&$0) }
    }

    private func seal(_ s: inout State) {
        guard let o = s.open else { return }
        try? o.handle.close()
        s.open = nil
        if o.segment.events > 0 {
            s.sealed.append(o.segment)
        } else {
            try? FileManager.default.removeItem(at: url(o.segment.sequence))
        }
    }

    /// Drops the oldest segments while the queue is full; returns how many events each held.
    private func makeRoom(_ s: inout State) -> [Int] {
        var dropped: [Int] = []
        while s.count >= maxEvents {
            if s.sealed.isEmpty { seal(&s) }
            guard !s.sealed.isEmpty else { break }
            let oldest = s.sealed.removeFirst()
            try? FileManager.default.removeItem(at: url(oldest.sequence))
            s.dropped += oldest.events
            dropped.append(oldest.events)
        }
        return dropped
    }

    /// The oldest sealed segment.
    func oldest() -> Segment? { state.withLock { $0.sealed.first } }

    /// A segment's complete lines (each an event's JSON), in order. A line without its newline (the app was killed
    /// while writing it, or the disk was full) is left out; a segment whose file is gone has none. A file that is
    /// there and cannot be read now (a device locked under data protection, no descriptor left) throws: its events
    /// stay queued.
    func lines(of segment: Segment) throws -> [Data] {
        let file = url(segment.sequence)
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            guard FileManager.default.fileExists(atPath: file.path) else { return [] }
            throw error
        }
        var lines: [Data] = []
        var start = data.startIndex
        while let end = data[start...].firstIndex(of: 0x0A) {
            if end > start { lines.append(data[start..<end]) }
            start = end + 1
        }
        return lines
    }

    /// The service took (or refused for good) every event of the segment.
    func remove(_ segment: Segment) {
        state.withLock { s in
            try? FileManager.default.removeItem(at: url(segment.sequence))
            s.sealed.removeAll { $0.sequence == segment.sequence }
        }
    }

    /// Keeps only `lines` of the segment (the rest were taken or refused), written whole before it returns.
    func replace(_ segment: Segment, with lines: [Data]) throws {
        guard !lines.isEmpty else { return remove(segment) }
        var data = Data()
        for line in lines {
            data.append(line)
            data.append(0x0A)
        }
        try Disk.write(data, to: url(segment.sequence))
        state.withLock { s in
            if let i = s.sealed.firstIndex(where: { $0.sequence == segment.sequence }) {
                s.sealed[i].events = lines.count
                s.sealed[i].bytes = data.count
            }
        }
    }
}
