import BeckonCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where a command writes: standard output and error, or strings in tests.
public protocol Console: AnyObject {
    func out(_ s: String)
    /// UTF-8 text, as it is (JSON lines written in bulk).
    func out(bytes: [UInt8])
    func err(_ s: String)
    /// Whether standard error is a terminal (for progress lines).
    var errIsTerminal: Bool { get }
    /// Why standard output could not be written (a full disk, a reader gone), once it could not: what was not written
    /// is lost, a command reading a stream stops, and the command exits 74.
    var writeFailure: String? { get }
}

extension Console {
    public func out(bytes: [UInt8]) { out(String(decoding: bytes, as: UTF8.self)) }
    public var writeFailure: String? { nil }
}

/// The process's standard output and error, buffered. A write to standard output that fails for good (not `EINTR`; a
/// non-blocking descriptor's `EAGAIN` waits until it can take more) is recorded in ``writeFailure``, and standard
/// output is not buffered any more after it.
public final class StandardConsole: Console {
    private var buffer: [UInt8] = []
    /// Set once a write failed: read on every event by a stream's loop (``EventStream``), possibly on another thread
    /// than the writer's (``ActionLines``).
    private let failed = Atomic(false)
    private let failure = Mutex<String?>(nil)

    public init() { buffer.reserveCapacity(1 << 16) }

    deinit { flush() }

    public func out(_ s: String) {
        if failed.load(ordering: .relaxed) { return }
        buffer.append(contentsOf: s.utf8)
        if buffer.count >= 1 << 16 { flush() }
    }

    public func out(bytes: [UInt8]) {
        if failed.load(ordering: .relaxed) { return }
        buffer.append(contentsOf: bytes)
        if buffer.count >= 1 << 16 { flush() }
    }

    public func err(_ s: String) {
        flush()
        var bytes = Array(s.utf8)
        send(2, &bytes)
    }

    public func flush() {
        guard !buffer.isEmpty else { return }
        send(1, &buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    public var writeFailure: String? { failed.load(ordering: .acquiring) ? failure.withLock { $0 } : nil }

    /// Writes to standard output (1) or error (2). Only standard output's failure counts: diagnostics that cannot be
    /// shown (standard error closed or full) do not make the output itself incomplete, as with coreutils.
    private func send(_ fd: Int32, _ bytes: inout [UInt8]) {
        guard let error = StandardConsole.writeAll(fd, &bytes), fd == 1 else { return }
        let reason = "standard output: \(String(cString: strerror(error)))"
        failure.withLock { if $0 == nil { $0 = reason } }
        failed.store(true, ordering: .releasing)
    }

    /// Writes all of `bytes`, going on after `EINTR` and waiting for a non-blocking descriptor to take more after
    /// `EAGAIN`; the `errno` of a failure that is not that.
    static func writeAll(_ fd: Int32, _ bytes: inout [UInt8]) -> Int32? {
        bytes.withUnsafeBufferPointer { p -> Int32? in
            var off = 0
            while off < p.count {
                let n = write(fd, p.baseAddress! + off, p.count - off)
                if n > 0 {
                    off += n
                    continue
                }
                let error = n < 0 ? errno : EIO
                if error == EINTR { continue }
                if error == EAGAIN || error == EWOULDBLOCK {
                    var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    if poll(&ready, 1, -1) >= 0 || errno == EINTR { continue }
                    return errno
                }
                return error
            }
            return nil
        }
    }

    public var errIsTerminal: Bool { isatty(2) != 0 }
}

/// Collects output in strings, for tests.
public final class StringConsole: Console {
    public private(set) var stdout = ""
    public private(set) var stderr = ""
    /// Whether to act as if standard error were a terminal (progress lines are written only to one).
    public let errIsTerminal: Bool
    public init(errIsTerminal: Bool = false) { self.errIsTerminal = errIsTerminal }
    public func out(_ s: String) { stdout += s }
    public func err(_ s: String) { stderr += s }
}

/// Reads a file (or standard input for `-`) line by line in large chunks; memory stays flat however long it is.
///
/// A line ends at `\n`, `\r\n` or a lone `\r`; a UTF-8 byte-order mark before the first line is skipped. A line
/// longer than `maxLineBytes` is never held whole: its bytes are skipped up to its end, and it is handed on as
/// ``Line/overlong(_:)`` with its length, so its number is still counted and reported.
public final class LineReader {
    public enum Line {
        case text(UnsafeBufferPointer<UInt8>)
        /// A line of this many bytes (its end excluded), longer than the limit.
        case overlong(Int)
    }

    private let fd: Int32
    private let ownsFD: Bool
    private let maxLineBytes: Int
    private var buffer: UnsafeMutableBufferPointer<UInt8>
    private var start = 0
    private var end = 0
    private var eof = false
    /// The bytes of an overlong line skipped so far (0: not in one).
    private var skipped = 0
    /// The last line ended with a `\r`: a `\n` right after it (perhaps in the next read) belongs to it.
    private var afterCR = false
    private var atFirstLine = true
    // (Read for every line by the loop that hands the lines on: without run-time exclusivity checks in release builds,
    // which cost more than the read. One thread reads a reader; debug builds keep the checks.)
    #if DEBUG
        /// 1-based number of the line last returned.
        public private(set) var lineNumber = 0
        public private(set) var bytesRead = 0
    #else
        /// 1-based number of the line last returned.
        @exclusivity(unchecked) public private(set) var lineNumber = 0
        @exclusivity(unchecked) public private(set) var bytesRead = 0
    #endif
    /// Why reading stopped before the end of the file, if it did (the lines before it were read).
    public private(set) var readError: String?

    public init?(path: String, chunkSize: Int = 1 << 20, maxLineBytes: Int = SegmentDecoder.maxLineBytes) {
        if path == "-" {
            fd = 0
            ownsFD = false
        } else {
            fd = open(path, O_RDONLY)
            guard fd >= 0 else { return nil }
            // (A folder opens, and only its first read fails: it is refused here, where a path is refused.)
            guard !LineReader.isDirectory(fd) else {
                close(fd)
                errno = EISDIR
                return nil
            }
            ownsFD = true
        }
        self.maxLineBytes = maxLineBytes
        buffer = .allocate(capacity: max(chunkSize, 1))
    }

    deinit {
        buffer.deallocate()
        if ownsFD { close(fd) }
    }

    /// The bytes the reader holds for lines (tests check that it stays near the line limit).
    public var bufferCapacity: Int { buffer.count }

    static func isDirectory(_ fd: Int32) -> Bool {
        var st = stat()
        return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// Total size of the file, when it is a regular file.
    public var fileSize: Int? {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int(st.st_size)
    }

    /// Calls `body` with each line that fits the limit (without its end) until the end or until `body` returns false;
    /// overlong lines are skipped (``readLines(_:)`` hands them on).
    public func forEachLine(_ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        readLines { line in
            if case .text(let bytes) = line { return body(bytes) }
            return true
        }
    }

    /// Calls `body` with each line until the end or until `body` returns false.
    public func readLines(_ body: (Line) -> Bool) {
        while true {
            if atFirstLine {
                // A byte-order mark needs its three bytes buffered to be seen.
                if end - start < 3 && !eof {
                    fill()
                    continue
                }
                atFirstLine = false
                if end - start >= 3 && buffer[start] == 0xEF && buffer[start + 1] == 0xBB && buffer[start + 2] == 0xBF {
                    start += 3
                }
            }
            if afterCR && start < end {
                afterCR = false
                if buffer[start] == 10 { start += 1 }
            }
            if let (lineEnd, terminator) = findLineEnd() {
                lineNumber += 1
                let line: Line
                if skipped > 0 {
                    line = .overlong(skipped + lineEnd - start)
                    skipped = 0
                } else if lineEnd - start > maxLineBytes {
                    line = .overlong(lineEnd - start)
                } else {
                    line = .text(UnsafeBufferPointer(rebasing: buffer[start..<lineEnd]))
                }
                start = lineEnd + 1
                if terminator == 13 { afterCR = true }
                if !body(line) { return }
                continue
            }
            if eof {
                if start < end || skipped > 0 {
                    lineNumber += 1
                    let line: Line
                    if skipped > 0 || end - start > maxLineBytes {
                        line = .overlong(skipped + end - start)
                    } else {
                        line = .text(UnsafeBufferPointer(rebasing: buffer[start..<end]))
                    }
                    start = end
                    skipped = 0
                    _ = body(line)
                }
                return
            }
            // A line past the limit is not kept: count its bytes and drop them.
            if end - start > maxLineBytes {
                skipped += end - start
                start = end
            }
            fill()
        }
    }

    /// The first line end in the buffered bytes and which byte it is (`\n` or `\r`).
    private func findLineEnd() -> (Int, UInt8)? {
        guard start < end, let base = buffer.baseAddress else { return nil }
        let nl = memchr(base + start, 10, end - start).map { base.distance(to: $0.assumingMemoryBound(to: UInt8.self)) }
        let upTo = nl ?? end
        if upTo > start, let cr = memchr(base + start, 13, upTo - start) {
            return (base.distance(to: cr.assumingMemoryBound(to: UInt8.self)), 13)
        }
        return nl.map { ($0, 10) }
    }

    private func fill() {
        // Move the partial line to the front; grow when one line is longer than the buffer.
        if start > 0 {
            let n = end - start
            if n > 0 { memmove(buffer.baseAddress!, buffer.baseAddress! + start, n) }
            start = 0
            end = n
        }
        if end == buffer.count {
            let bigger = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: buffer.count * 2)
            memcpy(bigger.baseAddress!, buffer.baseAddress!, end)
            buffer.deallocate()
            buffer = bigger
        }
        var n = read(fd, buffer.baseAddress! + end, buffer.count - end)
        while n < 0 && errno == EINTR { n = read(fd, buffer.baseAddress! + end, buffer.count - end) }
        if n <= 0 {
            if n < 0 { readError = String(cString: strerror(errno)) }
            eof = true
        } else {
            end += n
            bytesRead += n
        }
    }
}
