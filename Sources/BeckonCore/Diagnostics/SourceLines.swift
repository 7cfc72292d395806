/// A file's text cut into lines the way every diagnostic counts them, whoever finds the problem.
///
/// A line ends at LF, CR LF or a lone CR: YAML 1.2's line breaks, and what editors and `grep -n` count. U+0085,
/// U+2028 and U+2029 are ordinary characters inside a line (YAML 1.1 and libyaml treat them as breaks, which is why
/// positions from the YAML parser are mapped through its character index, never through its line numbers).
/// Columns count Unicode scalars from 1. A byte-order mark at the start belongs to no line: the first line starts
/// after it, as an editor shows it.
///
/// ```swift
/// let lines = SourceLines("a: 1\r\nb: 2")
/// lines.position(ofScalarOffset: 6)  // 2:1
/// ```
public struct SourceLines: Sendable {
    /// The lines' text, without their line breaks.
    public let lines: [[Unicode.Scalar]]
    /// The scalar offset of each line's first character.
    let starts: [Int]

    public init(_ text: String) {
        var lines: [[Unicode.Scalar]] = []
        var starts: [Int] = []
        var current: [Unicode.Scalar] = []
        var offset = 0
        var start = 0
        var afterCR = false
        for c in text.unicodeScalars {
            defer { offset += 1 }
            if offset == 0 && c == "\u{FEFF}" {
                start = 1
                continue
            }
            if c == "\n" && afterCR {
                // The LF of a CR LF: the line already ended at the CR.
                afterCR = false
                start = offset + 1
                continue
            }
            afterCR = false
            if c == "\n" || c == "\r" {
                lines.append(current)
                starts.append(start)
                current = []
                start = offset + 1
                afterCR = c == "\r"
                continue
            }
            current.append(c)
        }
        lines.append(current)
        starts.append(start)
        self.lines = lines
        self.starts = starts
    }

    public var count: Int { lines.count }

    /// The text of line `n` (1-based), or `nil` past the end.
    public func text(ofLine n: Int) -> String? {
        guard n >= 1 && n <= lines.count else { return nil }
        return String(String.UnicodeScalarView(lines[n - 1]))
    }

    /// The line and column of the character at `offset` Unicode scalars from the start of the text. An offset at
    /// a line break is the position just after the line's last character; past the end, the end of the last line.
    public func position(ofScalarOffset offset: Int) -> SourcePosition {
        // The last line that starts at or before the offset.
        var lo = 0
        var hi = starts.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if starts[mid] <= offset { lo = mid } else { hi = mid - 1 }
        }
        let column = min(max(0, offset - starts[lo]), lines[lo].count)
        return SourcePosition(line: lo + 1, column: column + 1)
    }
}
