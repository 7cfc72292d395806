/// A 1-based line and column in a source file (columns count Unicode scalars, as YAML does).
public struct SourcePosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
    public static func < (a: SourcePosition, b: SourcePosition) -> Bool {
        (a.line, a.column) < (b.line, b.column)
    }
    public var description: String { "\(line):\(column)" }
}

/// A place in a named file.
public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var position: SourcePosition
    /// How many columns the caret underline spans (at least 1).
    public var length: Int

    public init(file: String, position: SourcePosition, length: Int = 1) {
        self.file = file
        self.position = position
        self.length = max(1, length)
    }
    public var description: String { "\(file):\(position.line):\(position.column)" }
}

/// A parsed document: YAML's tree of scalars, sequences and mappings, every node with its position.
/// The YAML module builds it; everything after works on it, so the core never depends on a YAML library.
public indirect enum SourceNode: Sendable {
    case scalar(ScalarNode)
    case sequence([SourceNode], SourceLocation)
    case mapping([(key: ScalarNode, value: SourceNode)], SourceLocation)

    public var location: SourceLocation {
        switch self {
        case .scalar(let s): s.location
        case .sequence(_, let l), .mapping(_, let l): l
        }
    }

    /// "a string", "a list", "a map": for messages.
    public var kindDescription: String {
        switch self {
        case .scalar(let s): s.isNull ? "nothing (null)" : "'\(s.text)'"
        case .sequence: "a list"
        case .mapping: "a map"
        }
    }
}

/// A YAML scalar: its text, how it was written, and a map from offsets in the text back to the file.
public struct ScalarNode: Sendable {
    public enum Style: Sendable { case plain, singleQuoted, doubleQuoted, literal, folded }
    public var text: String
    public var style: Style
    public var location: SourceLocation
    /// Start of each run of the text that lies contiguous in the file: (offset in text, position in file).
    /// Empty when unknown; then every offset maps to the scalar's start.
    public var segments: [(offset: Int, position: SourcePosition)]

    public init(
        text: String, style: Style, location: SourceLocation,
        segments: [(offset: Int, position: SourcePosition)] = []
    ) {
        self.text = text
        self.style = style
        self.location = location
        self.segments = segments
    }

    /// Plain `null`, `~` or empty.
    public var isNull: Bool {
        style == .plain && (text == "null" || text == "~" || text == "Null" || text == "NULL" || text.isEmpty)
    }

    /// The file position of a Unicode-scalar offset into ``text``.
    public func position(atOffset k: Int) -> SourcePosition {
        guard let seg = segments.last(where: { $0.offset <= k }) else {
            var p = location.position
            if style == .plain { p.column += k } else if style == .singleQuoted || style == .doubleQuoted { p.column += k + 1 }
            return p
        }
        return SourcePosition(line: seg.position.line, column: seg.position.column + (k - seg.offset))
    }

    /// The location of a span of ``text``, for diagnostics inside expressions.
    public func location(of span: SourceSpan) -> SourceLocation {
        let start = position(atOffset: span.start)
        let end = position(atOffset: max(span.start, span.end - 1))
        let len = end.line == start.line ? end.column - start.column + 1 : 1
        return SourceLocation(file: location.file, position: start, length: len)
    }
}

extension SourceNode {
    /// The value of a mapping key, if this is a mapping that has it.
    public subscript(key: String) -> SourceNode? {
        guard case .mapping(let pairs, _) = self else { return nil }
        return pairs.first(where: { $0.key.text == key })?.value
    }

    public var scalar: ScalarNode? { if case .scalar(let s) = self { s } else { nil } }
}

/// A range in an expression's text, in Unicode scalars from its start (the unit YAML columns use).
public struct SourceSpan: Sendable, Hashable {
    public var start: Int
    public var end: Int
    public init(_ start: Int, _ end: Int) {
        self.start = start
        self.end = end
    }
}
