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
    func err(_ s: String)
    /// Whether standard error is a terminal (for progress lines).
    var errIsTerminal: Bool { get }
}

/// The process's standard output and error, buffered.
public final class StandardConsole: Console {
    private var buffer: [UInt8] = []

    public init() { buffer.reserveCapacity(1 << 16) }

    deinit { flush() }

    public func out(_ s: String) {
        buffer.append(contentsOf: s.utf8)
        if buffer.count >= 1 << 16 { flush() }
    }

    public func err(_ s: String) {
        flush()
        var bytes = Array(s.utf8)
        StandardConsole.writeAll(2, &bytes)
    }

    public func flush() {
        guard !buffer.isEmpty else { return }
        StandardConsole.writeAll(1, &buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    static func writeAll(_ fd: Int32, _ bytes: inout [UInt8]) {
        bytes.withUnsafeBufferPointer { p in
            var off = 0
            while off < p.count {
                let n = write(fd, p.baseAddress! + off, p.count - off)
                if n <= 0 { return }
                off += n
            }
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
public final class LineReader {
    private let fd: Int32
    private let ownsFD: Bool
    private var buffer: UnsafeMutableBufferPointer<UInt8>
    private var start = 0
    private var end = 0
    private var eof = false
    /// 1-based number of the line last returned.
    public private(set) var lineNumber = 0
    public private(set) var bytesRead = 0

    public init?(path: String, chunkSize: Int = 1 << 20) {
        if path == "-" {
            fd = 0
            ownsFD = false
        } else {
            fd = open(path, O_RDONLY)
            guard fd >= 0 else { return nil }
            ownsFD = true
        }
        buffer = .allocate(capacity: chunkSize)
    }

    deinit {
        buffer.deallocate()
        if ownsFD { close(fd) }
    }

    /// Total size of the file, when it is a regular file.
    public var fileSize: Int? {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int(st.st_size)
    }

    /// Calls `body` with each line (without its newline) until the end or until `body` returns false.
    public func forEachLine(_ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        while true {
            // Find a newline in the buffered bytes.
            if let nl = findNewline() {
                lineNumber += 1
                var lineEnd = nl
                if lineEnd > start && buffer[lineEnd - 1] == 13 { lineEnd -= 1 }
                let line = UnsafeBufferPointer(rebasing: buffer[start..<lineEnd])
                start = nl + 1
                if !body(line) { return }
                continue
            }
            if eof {
                if start < end {
                    lineNumber += 1
                    let line = UnsafeBufferPointer(rebasing: buffer[start..<end])
                    start = end
                    _ = body(line)
                }
                return
            }
            fill()
        }
    }

    private func findNewline() -> Int? {
        guard start < end, let base = buffer.baseAddress else { return nil }
        guard let p = memchr(base + start, 10, end - start) else { return nil }
        return base.distance(to: p.assumingMemoryBound(to: UInt8.self))
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
        let n = read(fd, buffer.baseAddress! + end, buffer.count - end)
        if n <= 0 {
            eof = true
        } else {
            end += n
            bytesRead += n
        }
    }
}
