// libyaml, the C parser Yams is built on (Yams' CYaml module, compiled with it). Beckon reads libyaml's event stream
// itself instead of Yams' composed node tree: Yams resolves an alias to the anchored node while composing, so a
// few hundred bytes of aliases of aliases (`b: &b [*a,*a,…]`) become billions of nodes for whoever walks the tree,
// and Yams hashes whole key nodes to find duplicate keys. From events, an alias is one event at its position and is
// refused there, and nothing is ever expanded.
import CYaml

/// A position in the parsed text as libyaml reports it. Only `index` is used for positions: it counts Unicode
/// scalars from the start of the text (CR LF as two), while libyaml's line numbers also break at U+0085, U+2028
/// and U+2029, which Beckon (as YAML 1.2 and editors) does not.
struct YAMLMark {
    var index: Int
}

/// One libyaml event, with what Beckon needs of it.
enum YAMLEvent {
    case streamStart, streamEnd
    case documentStart(YAMLMark)
    case documentEnd
    case alias(anchor: String, start: YAMLMark)
    case scalar(YAMLScalar)
    case sequenceStart(YAMLCollection)
    case sequenceEnd
    case mappingStart(YAMLCollection)
    case mappingEnd
}

struct YAMLScalar {
    enum Style { case plain, singleQuoted, doubleQuoted, literal, folded }
    var value: String
    var style: Style
    var anchor: String?
    /// An explicit tag (`!!str`, `!name`), as libyaml resolved it.
    var tag: String?
    var start: YAMLMark
    var end: YAMLMark
}

struct YAMLCollection {
    var anchor: String?
    var tag: String?
    var start: YAMLMark
}

/// A syntax error as libyaml reports it.
struct YAMLFailure: Error {
    enum Kind { case reader, scanner, parser, other }
    var kind: Kind
    var problem: String
    var mark: YAMLMark
    /// What libyaml was reading, and where that started ("while scanning a quoted scalar" at the opening quote).
    var context: String?
    var contextMark: YAMLMark?
    /// For reader errors: the byte offset of the bad input.
    var byteOffset: Int?
}

/// libyaml's event parser over a copy of the text: the only unsafe code of the YAML module.
///
/// Invariants: `input` is allocated here, holds the text's UTF-8 bytes, and outlives `parser`, which reads it in
/// place; `parser` is allocated here, initialized once, deleted and freed in `deinit`; every event `yaml_parser_parse`
/// fills is converted to Swift values and deleted before `next()` returns. A reader is used by one thread at a time.
final class YAMLEventReader {
    private let input: UnsafeMutableBufferPointer<UInt8>
    private let parser: UnsafeMutablePointer<yaml_parser_t>
    private var finished = false

    init(_ text: String) {
        var text = text
        let bytes = text.utf8.count
        let input = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, bytes))
        text.withUTF8 { _ = input.initialize(fromContentsOf: $0) }
        self.input = input
        parser = .allocate(capacity: 1)
        parser.initialize(to: yaml_parser_t())
        // yaml_parser_initialize fails only when it cannot allocate its buffers.
        precondition(yaml_parser_initialize(parser) == 1, "libyaml could not allocate its parser")
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
        yaml_parser_set_input_string(parser, input.baseAddress, bytes)
    }

    deinit {
        yaml_parser_delete(parser)
        parser.deinitialize(count: 1)
        parser.deallocate()
        input.deallocate()
    }

    /// The next event, `nil` after the end of the stream, or the syntax error that stopped the parser.
    func next() throws(YAMLFailure) -> YAMLEvent? {
        guard !finished else { return nil }
        var event = yaml_event_t()
        guard yaml_parser_parse(parser, &event) == 1 else {
            finished = true
            throw failure()
        }
        defer { yaml_event_delete(&event) }
        let start = YAMLMark(index: Int(event.start_mark.index))
        switch event.type {
        case YAML_STREAM_START_EVENT: return .streamStart
        case YAML_STREAM_END_EVENT:
            finished = true
            return .streamEnd
        case YAML_DOCUMENT_START_EVENT: return .documentStart(start)
        case YAML_DOCUMENT_END_EVENT: return .documentEnd
        case YAML_ALIAS_EVENT:
            return .alias(anchor: Self.string(event.data.alias.anchor) ?? "", start: start)
        case YAML_SCALAR_EVENT:
            let s = event.data.scalar
            let value = String(decoding: UnsafeBufferPointer(start: s.value, count: s.length), as: UTF8.self)
            let style: YAMLScalar.Style
            switch s.style {
            case YAML_SINGLE_QUOTED_SCALAR_STYLE: style = .singleQuoted
            case YAML_DOUBLE_QUOTED_SCALAR_STYLE: style = .doubleQuoted
            case YAML_LITERAL_SCALAR_STYLE: style = .literal
            case YAML_FOLDED_SCALAR_STYLE: style = .folded
            default: style = .plain
            }
            return .scalar(
                YAMLScalar(
                    value: value, style: style, anchor: Self.string(s.anchor), tag: Self.string(s.tag), start: start,
                    end: YAMLMark(index: Int(event.end_mark.index))))
        case YAML_SEQUENCE_START_EVENT:
            let s = event.data.sequence_start
            return .sequenceStart(YAMLCollection(anchor: Self.string(s.anchor), tag: Self.string(s.tag), start: start))
        case YAML_SEQUENCE_END_EVENT: return .sequenceEnd
        case YAML_MAPPING_START_EVENT:
            let m = event.data.mapping_start
            return .mappingStart(YAMLCollection(anchor: Self.string(m.anchor), tag: Self.string(m.tag), start: start))
        case YAML_MAPPING_END_EVENT: return .mappingEnd
        default:
            finished = true
            throw YAMLFailure(kind: .other, problem: "unexpected YAML event \(event.type.rawValue)", mark: start)
        }
    }

    private func failure() -> YAMLFailure {
        let p = parser.pointee
        let kind: YAMLFailure.Kind
        switch p.error {
        case YAML_READER_ERROR: kind = .reader
        case YAML_SCANNER_ERROR: kind = .scanner
        case YAML_PARSER_ERROR: kind = .parser
        default: kind = .other
        }
        let problem = p.problem.map { String(cString: $0) } ?? "the YAML parser failed"
        return YAMLFailure(
            kind: kind, problem: problem, mark: YAMLMark(index: Int(p.problem_mark.index)),
            context: p.context.map { String(cString: $0) },
            contextMark: p.context == nil ? nil : YAMLMark(index: Int(p.context_mark.index)),
            byteOffset: kind == .reader ? Int(p.problem_offset) : nil)
    }

    private static func string(_ p: UnsafeMutablePointer<UInt8>?) -> String? {
        guard let p else { return nil }
        return String(cString: p)
    }
}
