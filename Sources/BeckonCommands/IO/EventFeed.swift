import BeckonCore

/// The events of a file (or standard input, `-`) decoded for a rule set: the one reading loop of `dry-run`, `explain`
/// and `report`, with one policy for bad lines.
///
/// A bad line — not a JSON object, not a Segment event Beckon can keep, or longer than
/// ``SegmentDecoder/maxLineBytes`` — is reported as `FILE:LINE:COLUMN: bad event: MESSAGE`. With ``BadLines/stop``
/// (`dry-run`, unless `--keep-going`) the feed stops there and the command fails; with ``BadLines/skip`` (`explain`,
/// `report`, `dry-run --keep-going`) each bad line is reported on standard error, counted, and skipped. Blank lines
/// are skipped.
struct EventFeed {
    enum BadLines: Sendable { case stop, skip }

    let path: String
    private let reader: LineReader
    /// Bad lines met (reported, and skipped or stopped at).
    private(set) var badLines = 0
    /// The report of the bad line the feed stopped at (with ``BadLines/stop``).
    private(set) var stoppedAt: String?

    /// `nil` when the file cannot be opened.
    init?(path: String) {
        guard let reader = LineReader(path: path) else { return nil }
        self.path = path
        self.reader = reader
    }

    var displayName: String { path == "-" ? "<stdin>" : path }

    /// When the file could not be read to its end, says so on standard error (the command then fails).
    func reportReadError(_ console: any Console) -> Bool {
        guard let error = reader.readError else { return false }
        console.err(Terminal.safe("error: \(displayName): reading stopped after line \(reader.lineNumber): \(error)") + "\n")
        return true
    }

    /// When the feed stopped at a bad line, or could not read the file to its end, says so on standard error (the
    /// command then fails).
    func reportStop(_ console: any Console) -> Bool {
        if reportReadError(console) { return true }
        guard let stoppedAt else { return false }
        console.err(stoppedAt)
        console.err("stopped at the first bad line; use --keep-going to skip bad lines and count them\n")
        return true
    }

    /// Decodes every line and hands each event to `body`, in order.
    mutating func run(
        decoder: SegmentDecoder, badLines policy: BadLines, console: any Console, _ body: (BoundEvent) -> Void
    ) {
        let progress = Progress(console: console, total: reader.fileSize)
        var events = 0
        var bad = 0
        var stopped: String?
        let name = displayName
        reader.readLines { line in
            guard let result = line.event(decoder) else { return true }
            switch result {
            case .success(let event):
                body(event)
                events += 1
                progress.tick(events: events, bytes: reader.bytesRead)
                return true
            case .failure(let error):
                bad += 1
                let message =
                    Terminal.safe("\(name):\(reader.lineNumber):\(error.column ?? 1): bad event: \(error.message)") + "\n"
                if policy == .skip {
                    console.err(message)
                    return true
                }
                stopped = message
                return false
            }
        }
        progress.finish()
        badLines = bad
        stoppedAt = stopped
    }
}

extension LineReader.Line {
    /// The event on this line: `nil` for a blank line, the reason for a bad one (an overlong line is one).
    func event(_ decoder: SegmentDecoder) -> Result<BoundEvent, DecodeError>? {
        switch self {
        case .overlong(let n): return .failure(SegmentDecoder.overlong(n))
        case .text(let bytes):
            if bytes.allSatisfy({ $0 == 32 || $0 == 9 }) { return nil }
            do throws(DecodeError) { return .success(try decoder.decode(bytes)) } catch { return .failure(error) }
        }
    }
}
