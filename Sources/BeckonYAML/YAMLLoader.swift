import BeckonCore
import Yams

/// Reads YAML text into BeckonCore's ``SourceNode`` tree through Yams' node tree, so that every value keeps its
/// line and column, and turns YAML syntax errors into diagnostics with positions.
public enum YAMLLoader {
    /// Limits for rule files (docs/reference/limits.md).
    public static let maxFileBytes = 4 << 20
    public static let maxDepth = 64

    /// Parses `text` (the contents of `path`). Returns the root node, or `nil` with diagnostics.
    public static func parse(_ text: String, path: String) -> (SourceNode?, [Diagnostic]) {
        if text.utf8.count > maxFileBytes {
            return (
                nil,
                [
                    .error(
                        .limitExceeded, "the file is \(text.utf8.count) bytes; the limit is \(maxFileBytes)",
                        at: SourceLocation(file: path, position: SourcePosition(line: 1, column: 1)))
                ]
            )
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> [Unicode.Scalar] in
            var l = Array(line.unicodeScalars)
            if l.last == "\r" { l.removeLast() }
            return l
        }
        do {
            let parser = try Parser(yaml: text)
            guard let root = try parser.singleRoot() else {
                return (
                    nil,
                    [
                        .error(
                            .yamlSyntax, "the file is empty",
                            at: SourceLocation(file: path, position: SourcePosition(line: 1, column: 1)),
                            suggestion: "start it with `version: 1`")
                    ]
                )
            }
            var converter = Converter(path: path, lines: lines)
            let node = converter.convert(root, depth: 0)
            return (converter.diagnostics.isEmpty ? node : nil, converter.diagnostics)
        } catch let e as YamlError {
            return (nil, [diagnostic(e, path: path, lines: lines)])
        } catch {
            return (
                nil,
                [.error(.yamlSyntax, "\(error)", at: SourceLocation(file: path, position: SourcePosition(line: 1, column: 1)))]
            )
        }
    }

    static func diagnostic(_ e: YamlError, path: String, lines: [[Unicode.Scalar]]) -> Diagnostic {
        func at(_ m: Mark) -> SourceLocation {
            SourceLocation(file: path, position: SourcePosition(line: max(1, m.line), column: max(1, m.column)))
        }
        switch e {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            var message = problem
            if let c = context { message = "\(problem) (\(c.text) at line \(c.mark.line))" }
            return .error(
                .yamlSyntax, "YAML: " + message, at: at(mark),
                suggestion: indentationHint(lines, line: mark.line) ?? hint(problem, context: context?.text))
        case .duplicatedKeysInMapping(let duplicates, let context):
            // Yams reports the mapping; find the second occurrence of the key for a precise caret.
            let key = duplicates.first ?? "?"
            var loc = at(context.mark)
            var seen = 0
            for (i, line) in lines.enumerated() where i + 1 >= context.mark.line {
                let s = String(String.UnicodeScalarView(line))
                let trimmed = s.drop(while: { $0 == " " || $0 == "-" })
                if trimmed.hasPrefix(key + ":") || trimmed.hasPrefix("\"\(key)\":") {
                    seen += 1
                    if seen == 2 {
                        let col = s.count - trimmed.count + 1
                        loc = SourceLocation(file: path, position: SourcePosition(line: i + 1, column: col), length: key.count)
                        break
                    }
                }
            }
            return .error(.duplicateKey, "'\(key)' appears twice in the same map", at: loc, suggestion: "remove one of them")
        case .reader(let problem, let offset, _, _):
            return .error(
                .yamlSyntax, "YAML: \(problem)" + (offset.map { " at byte \($0)" } ?? ""),
                at: SourceLocation(file: path, position: SourcePosition(line: 1, column: 1)))
        default:
            return .error(.yamlSyntax, "YAML: \(e)", at: SourceLocation(file: path, position: SourcePosition(line: 1, column: 1)))
        }
    }

    /// When a line is indented differently from every line before it at its level, say so.
    static func indentationHint(_ lines: [[Unicode.Scalar]], line: Int) -> String? {
        guard line >= 2, line <= lines.count else { return nil }
        func indent(_ l: [Unicode.Scalar]) -> Int? {
            guard let i = l.firstIndex(where: { $0 != " " }), l[i] != "#" else { return nil }
            return i
        }
        guard let here = indent(lines[line - 1]) else { return nil }
        var k = line - 2
        while k >= 0 && indent(lines[k]) == nil { k -= 1 }
        guard k >= 0, let above = indent(lines[k]) else { return nil }
        let aboveLine = lines[k]
        let opensBlock = aboveLine.last == ":" || (aboveLine.count > above && aboveLine[above] == "-")
        if here != above && !(opensBlock && here > above) {
            return "this line is indented \(here) spaces and the line above \(above); keys of the same map must line up"
        }
        return nil
    }

    static func hint(_ problem: String, context: String?) -> String? {
        if problem.contains("tab") { return "indent with spaces, not tabs" }
        if problem.contains("mapping values are not allowed") {
            return "a value containing ': ' must be quoted, e.g. title: \"Note: …\""
        }
        if problem.contains("did not find expected key") { return "check the indentation of this line against the one above" }
        if problem.contains("found character that cannot start any token") {
            return "quote values that start with `, @ or %"
        }
        if problem.contains("could not find expected ':'") {
            return "a key needs ':' after it; a multi-line string needs '|' or quotes"
        }
        if context?.contains("quoted scalar") == true { return "close the quote" }
        return nil
    }
}

private struct Converter {
    let path: String
    let lines: [[Unicode.Scalar]]
    var diagnostics: [Diagnostic] = []

    func location(_ mark: Mark?, length: Int = 1) -> SourceLocation {
        SourceLocation(file: path, position: SourcePosition(line: mark?.line ?? 1, column: mark?.column ?? 1), length: length)
    }

    mutating func convert(_ node: Node, depth: Int) -> SourceNode {
        if depth > YAMLLoader.maxDepth {
            diagnostics.append(
                .error(.limitExceeded, "the YAML nests more than \(YAMLLoader.maxDepth) levels deep", at: location(node.mark)))
            return .sequence([], location(node.mark))
        }
        switch node {
        case .scalar(let s):
            return .scalar(scalar(s))
        case .sequence(let seq):
            return .sequence(seq.map { convert($0, depth: depth + 1) }, location(seq.mark))
        case .mapping(let map):
            var pairs: [(key: ScalarNode, value: SourceNode)] = []
            for (k, v) in map {
                guard case .scalar(let ks) = k else {
                    diagnostics.append(
                        .error(.wrongType, "map keys must be plain names, not lists or maps", at: location(k.mark)))
                    continue
                }
                pairs.append((scalar(ks), convert(v, depth: depth + 1)))
            }
            return .mapping(pairs, location(map.mark))
        case .alias(let a):
            diagnostics.append(.error(.yamlSyntax, "YAML aliases are not supported", at: location(a.mark)))
            return .sequence([], location(a.mark))
        }
    }

    func scalar(_ s: Node.Scalar) -> ScalarNode {
        let style: ScalarNode.Style
        switch s.style {
        case .singleQuoted: style = .singleQuoted
        case .doubleQuoted: style = .doubleQuoted
        case .literal: style = .literal
        case .folded: style = .folded
        default: style = .plain
        }
        let length =
            style == .plain || style == .singleQuoted || style == .doubleQuoted
            ? s.string.unicodeScalars.count + (style == .plain ? 0 : 2) : 1
        let loc = location(s.mark, length: min(length, 200))
        return ScalarNode(text: s.string, style: style, location: loc, segments: segments(s.string, style, s.mark))
    }

    /// Where each run of the scalar's text sits in the file, so that a column inside an expression maps back.
    func segments(_ text: String, _ style: ScalarNode.Style, _ mark: Mark?) -> [(offset: Int, position: SourcePosition)] {
        guard let mark, mark.line >= 1, mark.line <= lines.count else { return [] }
        let textCount = text.unicodeScalars.count
        var out: [(offset: Int, position: SourcePosition)] = []
        switch style {
        case .plain, .singleQuoted, .doubleQuoted:
            // First line: from the mark (after the opening quote), reading escapes for double quotes.
            var line = mark.line
            var col = mark.column + (style == .plain ? 0 : 1)
            var offset = 0
            while offset < textCount && line <= lines.count {
                let src = lines[line - 1]
                out.append((offset, SourcePosition(line: line, column: col)))
                var c = col - 1
                // Walk the source characters of this line, advancing `offset` by the characters they produce.
                while c < src.count && offset < textCount {
                    let ch = src[c]
                    if style == .doubleQuoted && ch == "\"" { return out }
                    if style == .singleQuoted && ch == "'" {
                        if c + 1 < src.count && src[c + 1] == "'" {
                            c += 2
                            offset += 1
                            if offset < textCount { out.append((offset, SourcePosition(line: line, column: c + 1))) }
                            continue
                        }
                        return out
                    }
                    if style == .doubleQuoted && ch == "\\" {
                        let skip: Int
                        switch c + 1 < src.count ? src[c + 1] : " " {
                        case "x": skip = 4
                        case "u": skip = 6
                        case "U": skip = 10
                        default: skip = 2
                        }
                        c += skip
                        offset += 1
                        if offset < textCount { out.append((offset, SourcePosition(line: line, column: c + 1))) }
                        continue
                    }
                    if style == .plain && ch == "#" && c > 0 && src[c - 1] == " " { break }
                    c += 1
                    offset += 1
                }
                // The line break folds into one space; the next line starts at its first non-space.
                offset += 1
                line += 1
                guard line <= lines.count else { break }
                let next = lines[line - 1]
                col = (next.firstIndex(where: { $0 != " " && $0 != "\t" }) ?? 0) + 1
            }
            return out
        case .literal, .folded:
            // Content starts on the line after the indicator, at the block's indentation.
            var line = mark.line + 1
            var indent: Int?
            var offset = 0
            while line <= lines.count && offset < textCount {
                let src = lines[line - 1]
                let first = src.firstIndex(where: { $0 != " " })
                if let first {
                    if indent == nil { indent = first }
                    if first < indent! { break }
                    out.append((offset, SourcePosition(line: line, column: indent! + 1)))
                    offset += src.count - indent! + 1
                } else {
                    offset += 1
                }
                line += 1
            }
            return out
        }
    }
}
