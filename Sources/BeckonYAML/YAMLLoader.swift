import BeckonCore
import Foundation

/// Reads YAML text into BeckonCore's ``SourceNode`` tree from libyaml's event stream, so that every value keeps its
/// line and column, and turns YAML syntax errors into diagnostics with positions.
///
/// Rule files use plain YAML: no aliases, anchors, merge keys or tags. They are refused where they are written,
/// and an alias is never expanded, so that memory and time stay in proportion to the file's size (an alias of an
/// alias of … a list grows exponentially when expanded).
public enum YAMLLoader {
    /// Limits for rule files (docs/reference/limits.md).
    public static let maxFileBytes = 4 << 20
    public static let maxDepth = 64

    /// Parses `text` (the contents of `path`). Returns the root node, or `nil` with diagnostics.
    public static func parse(_ text: String, path: String) -> (SourceNode?, [Diagnostic]) {
        let lines = SourceLines(text)
        func at(_ p: SourcePosition, length: Int = 1) -> SourceLocation {
            SourceLocation(file: path, position: p, length: length)
        }
        if text.utf8.count > maxFileBytes {
            return (
                nil,
                [
                    .error(
                        .limitExceeded, "the file is \(text.utf8.count) bytes; the limit is \(maxFileBytes)",
                        at: at(SourcePosition(line: 1, column: 1)))
                ]
            )
        }
        if let bad = unprintable(text, lines: lines, path: path) { return (nil, [bad]) }
        var composer = Composer(path: path, text: text, lines: lines)
        let root = composer.run()
        if composer.diagnostics.isEmpty && root == nil {
            return (
                nil,
                [
                    .error(
                        .yamlSyntax, "the file is empty", at: at(SourcePosition(line: 1, column: 1)),
                        suggestion: "start it with `version: 1`")
                ]
            )
        }
        // Past a duplicate key (the second is dropped) the tree is still the file's; past anything else it is not, and
        // reading it further would only repeat the same problem in other words.
        let whole = !composer.failed && composer.diagnostics.allSatisfy { $0.id == .duplicateKey }
        return (whole ? root : nil, composer.diagnostics)
    }

    /// The first character YAML does not allow in a file (NUL, other control characters, U+FFFE, U+FFFF), with
    /// its position and how many more there are.
    static func unprintable(_ text: String, lines: SourceLines, path: String) -> Diagnostic? {
        func allowed(_ c: Unicode.Scalar) -> Bool {
            switch c.value {
            case 0x09, 0x0A, 0x0D, 0x20...0x7E, 0x85, 0xA0...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: true
            default: false
            }
        }
        var first: (offset: Int, scalar: Unicode.Scalar)?
        var more = 0
        for (i, c) in text.unicodeScalars.enumerated() where !allowed(c) {
            if first == nil { first = (i, c) } else { more += 1 }
        }
        guard let first else { return nil }
        let hex = String(first.scalar.value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        let what =
            first.scalar.value == 0
            ? "a NUL byte" : first.scalar.value < 0xFFFE ? "the control character \(code)" : "the character \(code)"
        return .error(
            .yamlSyntax,
            "the file contains \(what), which YAML does not allow" + (more > 0 ? " (and \(more) more such characters)" : ""),
            at: SourceLocation(file: path, position: lines.position(ofScalarOffset: first.offset)),
            suggestion: "remove it: a rule file is plain text")
    }

    // MARK: Syntax errors

    /// A libyaml error as a diagnostic at its place, with the most likely fix.
    static func diagnostic(
        _ f: YAMLFailure, path: String, text: String, lines: SourceLines, lastScalar: YAMLScalar?, offsetOfIndex: (Int) -> Int
    ) -> Diagnostic {
        let pos = lines.position(ofScalarOffset: offsetOfIndex(f.mark.index))
        func at(_ p: SourcePosition) -> SourceLocation { SourceLocation(file: path, position: p) }
        if f.kind == .reader {
            // Not expected: the text is valid UTF-8 and unprintable characters were refused before parsing.
            return .error(.yamlSyntax, "YAML: \(f.problem)", at: at(pos))
        }
        let contextPos = f.contextMark.map { lines.position(ofScalarOffset: offsetOfIndex($0.index)) }
        // An escape a double-quoted value cannot hold (`\q`, `\uZZZZ`, a lone surrogate `\ud800`): at the backslash (the
        // digits after `\u`).
        if f.context?.contains("quoted scalar") == true, isBadEscape(f.problem) {
            return .error(
                .yamlSyntax,
                "this is not an escape a double-quoted value can hold (\\n, \\t, \\\\, \\\", \\uXXXX for a character "
                    + "that is not half of a surrogate pair, …)", at: at(pos),
                suggestion: "write \\\\ for a backslash, or quote the value with ' instead (it has no escapes)")
        }
        // A quote that is never closed: the file ends inside the quoted value. Point at the opening quote.
        if f.context?.contains("quoted scalar") == true, let open = contextPos {
            return .error(
                .yamlSyntax, "this quote is never closed: the quoted value runs on to the end of the file", at: at(open),
                suggestion: "close the quote")
        }
        // A quote closed only by the next quote, lines later: what follows it no longer parses.
        if let s = lastScalar, s.style == .singleQuoted || s.style == .doubleQuoted {
            let open = lines.position(ofScalarOffset: offsetOfIndex(s.start.index))
            let close = lines.position(ofScalarOffset: offsetOfIndex(s.end.index))
            if open.line < close.line && pos.line == close.line {
                return .error(
                    .yamlSyntax,
                    "this quote runs on to line \(close.line), where the next quote closes it, and the rest of that line "
                        + "no longer reads as YAML", at: at(open), suggestion: "close the quote")
            }
        }
        // A tab in the indentation of the line, or right at the error.
        if pos.line >= 1 && pos.line <= lines.count {
            let line = lines.lines[pos.line - 1]
            let indent = line.prefix { $0 == " " || $0 == "\t" }
            if let tab = indent.firstIndex(of: "\t") {
                return .error(
                    .yamlSyntax, "a tab indents this line; YAML indents with spaces only",
                    at: at(SourcePosition(line: pos.line, column: tab + 1)), suggestion: "replace the tab with spaces")
            }
            if pos.column >= 1 && pos.column <= line.count && line[pos.column - 1] == "\t" {
                return .error(
                    .yamlSyntax, "YAML does not allow a tab here", at: at(pos), suggestion: "replace the tab with spaces")
            }
        }
        var message = f.problem
        if let c = f.context, let cp = contextPos { message = "\(f.problem) (\(c) at line \(cp.line))" }
        return .error(
            .yamlSyntax, "YAML: " + message, at: at(pos),
            suggestion: indentationHint(lines.lines, line: pos.line) ?? hint(f.problem, context: f.context))
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
        // `- key: value`: the item's map starts at `key`, and a line below that goes on with it must line up with it.
        if aboveLine.count > above + 1, aboveLine[above] == "-", aboveLine[above + 1] == " ", aboveLine.last != ":",
            let key = aboveLine[(above + 1)...].firstIndex(where: { $0 != " " }), here > above, here != key
        {
            return "this line is indented \(here) spaces and the key above \(key); keys of the same map must line up"
        }
        let opensBlock = aboveLine.last == ":" || (aboveLine.count > above && aboveLine[above] == "-")
        if here != above && !(opensBlock && here > above) {
            return "this line is indented \(here) spaces and the line above \(above); keys of the same map must line up"
        }
        return nil
    }

    /// Whether libyaml's problem inside a quoted value is an escape it cannot read (`\q`, `\uZZZZ`, `\ud800`), not
    /// the end of the file.
    static func isBadEscape(_ problem: String) -> Bool { problem.contains("escape") || problem.contains("hexdecimal") }

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
        if context?.contains("quoted scalar") == true && !isBadEscape(problem) { return "close the quote" }
        return nil
    }
}

/// Builds the ``SourceNode`` tree from libyaml's events, with an explicit stack (no recursion), refusing what rule
/// files do not use (aliases, anchors, merge keys, tags, non-scalar keys, a second document) where it is written.
private struct Composer {
    let path: String
    let text: String
    let lines: SourceLines
    var diagnostics: [Diagnostic] = []
    /// A syntax error stopped the parser: there is no tree.
    var failed = false
    /// The text's Unicode scalars.
    private var scalars: [Unicode.Scalar]
    /// 1 when the text starts with a byte-order mark: libyaml, told the text is UTF-8, reads the mark as text, so
    /// the mark is left out of what it reads and its positions (counted in scalars) are one more in the text.
    private let bomShift: Int
    /// The node being added is an alias (refused already).
    private var addingAlias = false

    init(path: String, text: String, lines: SourceLines) {
        self.path = path
        self.text = text
        self.lines = lines
        self.scalars = Array(text.unicodeScalars)
        self.bomShift = scalars.first == "\u{FEFF}" ? 1 : 0
    }

    enum Frame {
        case sequence(items: [SourceNode], location: SourceLocation)
        case mapping(pairs: [(key: ScalarNode, value: SourceNode)], location: SourceLocation, key: Key, seen: [String: Int])
        /// Contents not kept: a collection nested too deep, or a key that is not a scalar.
        case skipped
    }

    enum Key {
        case none
        case scalar(ScalarNode)
        /// The key was refused: drop its value.
        case dropped
    }

    func location(_ mark: YAMLMark, length: Int = 1) -> SourceLocation {
        SourceLocation(file: path, position: lines.position(ofScalarOffset: mark.index + bomShift), length: length)
    }

    mutating func error(_ id: DiagnosticID, _ message: String, at: SourceLocation, suggestion: String? = nil) {
        diagnostics.append(.error(id, message, at: at, suggestion: suggestion))
    }

    /// Reads every event. Returns the document's root, or `nil` when the stream has none or a syntax error stopped it.
    mutating func run() -> SourceNode? {
        let reader = YAMLEventReader(bomShift == 0 ? text : String(String.UnicodeScalarView(scalars.dropFirst())))
        var stack: [Frame] = []
        var root: SourceNode?
        var documents = 0
        var lastScalar: YAMLScalar?
        var skipDepth = 0  // nesting inside a skipped collection
        var tooDeepReported = false
        while true {
            let event: YAMLEvent
            do {
                guard let e = try reader.next() else { break }
                event = e
            } catch {
                if error.problem.contains("Maximum nesting level") {
                    // libyaml's own limit (1,000), reached while its scanner looks ahead through `[[[[…`: that is
                    // Beckon's limit passed, at the bracket that passes it.
                    if !tooDeepReported {
                        let at = tooDeepBracket(from: error.mark.index + bomShift, depth: stack.count)
                        self.error(
                            .limitExceeded, "the YAML nests more than \(YAMLLoader.maxDepth) levels deep",
                            at: at.map { location(YAMLMark(index: $0 - bomShift)) } ?? location(error.mark))
                    }
                    failed = true
                    return nil
                }
                diagnostics.append(
                    YAMLLoader.diagnostic(
                        error, path: path, text: text, lines: lines, lastScalar: lastScalar,
                        offsetOfIndex: { [bomShift] in $0 + bomShift }))
                failed = true
                return nil
            }
            switch event {
            case .streamStart, .streamEnd, .documentEnd: continue
            case .documentStart(let mark):
                documents += 1
                if documents == 2 {
                    error(
                        .yamlSyntax, "a rule file holds one YAML document, and a second one starts here", at: location(mark),
                        suggestion: "remove the '---' line and everything after it, or move it to a file of its own")
                }
                continue
            default: break
            }
            if documents > 1 { continue }
            if skipDepth > 0 {
                switch event {
                case .sequenceStart, .mappingStart: skipDepth += 1
                case .sequenceEnd, .mappingEnd: skipDepth -= 1
                default: break
                }
                if skipDepth > 0 { continue }
                // The skipped collection ended: it counts as one (empty) node of its parent.
                if case .skipped = stack.removeLast() {}
                add(
                    .sequence([], SourceLocation(file: path, position: SourcePosition(line: 1, column: 1))), to: &stack,
                    root: &root)
                continue
            }
            var node: SourceNode?
            switch event {
            case .alias(let anchor, let start):
                let merge: Bool
                if case .mapping(_, _, .scalar(let k), _)? = stack.last, k.text == "<<", k.style == .plain {
                    merge = true
                } else {
                    merge = false
                }
                error(
                    .yamlSyntax,
                    merge
                        ? "YAML merge keys (<<: *\(anchor)) are not supported in rule files"
                        : "YAML aliases (*\(anchor)) are not supported in rule files",
                    at: location(start, length: anchor.count + 1),
                    suggestion: merge
                        ? "write the keys of '\(anchor)' out here instead of merging them"
                        : "write the value out here instead of *\(anchor)")
                node = .scalar(ScalarNode(text: "", style: .plain, location: location(start)))
                addingAlias = true
            case .scalar(let s):
                lastScalar = s
                checkAnchorAndTag(anchor: s.anchor, tag: s.tag, start: s.start, scalar: s)
                node = .scalar(scalarNode(s))
            case .sequenceStart(let c), .mappingStart(let c):
                checkAnchorAndTag(anchor: c.anchor, tag: c.tag, start: c.start, scalar: nil)
                // The root is level 0, as the converter of Yams' tree counted: 64 collections may nest in it.
                if stack.count > YAMLLoader.maxDepth {
                    if !tooDeepReported {
                        error(
                            .limitExceeded, "the YAML nests more than \(YAMLLoader.maxDepth) levels deep", at: location(c.start))
                        tooDeepReported = true
                    }
                    stack.append(.skipped)
                    skipDepth = 1
                    continue
                }
                if case .mapping(_, _, .none, _)? = stack.last {
                    // A list or map as a key: refused, and its value with it.
                    error(.wrongType, "map keys must be plain names, not lists or maps", at: location(c.start))
                    stack.append(.skipped)
                    skipDepth = 1
                    continue
                }
                if case .sequenceStart = event {
                    stack.append(.sequence(items: [], location: location(c.start)))
                } else {
                    stack.append(.mapping(pairs: [], location: location(c.start), key: .none, seen: [:]))
                }
                continue
            case .sequenceEnd:
                guard case .sequence(let items, let loc)? = stack.popLast() else { continue }
                node = .sequence(items, loc)
            case .mappingEnd:
                guard case .mapping(let pairs, let loc, _, _)? = stack.popLast() else { continue }
                node = .mapping(pairs, loc)
            default: continue
            }
            if let node { add(node, to: &stack, root: &root) }
            addingAlias = false
        }
        return root
    }

    /// The index of the `[` or `{` that nests flow collections past ``YAMLLoader/maxDepth``, reading on from `index`
    /// (a bracket at `depth` open collections) past quoted text and comments; `nil` when there is none.
    private func tooDeepBracket(from index: Int, depth: Int) -> Int? {
        var level = depth
        var i = index
        var quote: Unicode.Scalar?
        while i < scalars.count {
            let c = scalars[i]
            if let q = quote {
                if c == "\\" && q == "\"" {
                    i += 1
                } else if c == q {
                    quote = nil
                }
            } else {
                switch c {
                case "\"", "'": quote = c
                case "#":
                    while i < scalars.count && scalars[i] != "\n" && scalars[i] != "\r" { i += 1 }
                case "[", "{":
                    level += 1
                    if level > YAMLLoader.maxDepth + 1 { return i }  // the root is level 0
                case "]", "}": level -= 1
                default: break
                }
            }
            i += 1
        }
        return nil
    }

    /// Adds a finished node to its parent: an item of a list, a key or a value of a map, or the document's root.
    ///
    /// The parent's frame is taken off the stack while it grows, so that its list is held once and grows in place (a
    /// copy left on the stack made each append copy the whole list: 10,000 rules took a second to load).
    private mutating func add(_ node: SourceNode, to stack: inout [Frame], root: inout SourceNode?) {
        guard let top = stack.popLast() else {
            root = node
            return
        }
        switch consume top {
        case .sequence(var items, let loc):
            items.append(node)
            stack.append(.sequence(items: items, location: loc))
        case .mapping(var pairs, let loc, let key, var seen):
            switch key {
            case .none:
                if case .scalar(let k) = node {
                    stack.append(.mapping(pairs: pairs, location: loc, key: .scalar(k), seen: seen))
                } else {
                    // A refused key collection ended: its value follows and is dropped.
                    stack.append(.mapping(pairs: pairs, location: loc, key: .dropped, seen: seen))
                }
            case .dropped:
                stack.append(.mapping(pairs: pairs, location: loc, key: .none, seen: seen))
            case .scalar(let k):
                if k.style == .plain && k.text == "<<" {
                    // `<<: *name` was refused at the alias.
                    if !addingAlias {
                        error(
                            .yamlSyntax, "YAML merge keys (<<) are not supported in rule files", at: k.location,
                            suggestion: "write the keys out here instead of merging them")
                    }
                } else if seen[k.text] != nil {
                    error(
                        .duplicateKey, "'\(k.text)' appears twice in the same map", at: k.location,
                        suggestion: "remove one of them")
                } else {
                    seen[k.text] = pairs.count
                    pairs.append((k, node))
                }
                stack.append(.mapping(pairs: pairs, location: loc, key: .none, seen: seen))
            }
        case .skipped:
            stack.append(.skipped)
        }
    }

    /// Anchors and tags are refused where they are written. A value that starts with `!` reads as a tag: say so.
    private mutating func checkAnchorAndTag(anchor: String?, tag: String?, start: YAMLMark, scalar: YAMLScalar?) {
        if let anchor {
            error(
                .yamlSyntax, "YAML anchors (&\(anchor)) are not supported in rule files",
                at: location(start, length: anchor.count + 1), suggestion: "remove '&\(anchor)'; write each value out in full")
        }
        guard tag != nil else { return }
        // The source text of the node from its start (the tag) to its end, when it is on one line.
        var written = ""
        if let s = scalar {
            let a = start.index + bomShift
            let b = s.end.index + bomShift
            if a >= 0, b <= scalars.count, a < b {
                let t = scalars[a..<b]
                if !t.contains(where: { $0 == "\n" || $0 == "\r" }) {
                    written = String(String.UnicodeScalarView(t)).trimmingCharacters(in: .whitespaces)
                }
            }
        }
        if !written.isEmpty, written.first == "!", scalar?.style == .plain {
            let escaped = written.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            error(
                .yamlSyntax, "'\(written)' reads as a YAML tag (a value that starts with '!'), not as text",
                at: location(start, length: written.unicodeScalars.count), suggestion: "quote the value: \"\(escaped)\"")
        } else {
            error(
                .yamlSyntax, "YAML tags (!…) are not supported in rule files", at: location(start),
                suggestion: "remove the tag; a value that starts with '!' must be quoted")
        }
    }

    func scalarNode(_ s: YAMLScalar) -> ScalarNode {
        let style: ScalarNode.Style
        switch s.style {
        case .singleQuoted: style = .singleQuoted
        case .doubleQuoted: style = .doubleQuoted
        case .literal: style = .literal
        case .folded: style = .folded
        case .plain: style = .plain
        }
        let start = lines.position(ofScalarOffset: s.start.index + bomShift)
        let length =
            style == .plain || style == .singleQuoted || style == .doubleQuoted
            ? s.value.unicodeScalars.count + (style == .plain ? 0 : 2) : 1
        let loc = SourceLocation(file: path, position: start, length: min(length, 200))
        return ScalarNode(text: s.value, style: style, location: loc, segments: segments(s.value, style, start))
    }

    /// Where each run of the scalar's text sits in the file, so that a column inside an expression maps back.
    func segments(_ text: String, _ style: ScalarNode.Style, _ mark: SourcePosition) -> [(offset: Int, position: SourcePosition)]
    {
        let lines = self.lines.lines
        guard mark.line >= 1, mark.line <= lines.count else { return [] }
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
                // An escaped line break (`\` last on a line of a double-quoted scalar) joins the lines with nothing.
                var joined = false
                // Where the last escape of the line ended (a space it wrote is not dropped as the line's end).
                var escaped = col - 1
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
                        if c + 1 == src.count {
                            joined = true
                            break
                        }
                        let skip: Int
                        switch c + 1 < src.count ? src[c + 1] : " " {
                        case "x": skip = 4
                        case "u": skip = 6
                        case "U": skip = 10
                        default: skip = 2
                        }
                        c += skip
                        escaped = c
                        offset += 1
                        if offset < textCount { out.append((offset, SourcePosition(line: line, column: c + 1))) }
                        continue
                    }
                    if style == .plain && ch == "#" && c > 0 && src[c - 1] == " " { break }
                    c += 1
                    offset += 1
                }
                // Folding drops the spaces that end a line; the line break becomes one space, or a line break for each
                // blank line after it (after an escaped one, only those); the next line starts at its first non-space.
                if !joined {
                    var end = c
                    while end > max(col - 1, escaped) && (src[end - 1] == " " || src[end - 1] == "\t") { end -= 1 }
                    offset -= c - end
                }
                line += 1
                var blank = 0
                while line <= lines.count && lines[line - 1].allSatisfy({ $0 == " " || $0 == "\t" }) {
                    blank += 1
                    line += 1
                }
                offset += joined ? blank : max(1, blank)
                guard line <= lines.count else { break }
                let next = lines[line - 1]
                col = (next.firstIndex(where: { $0 != " " && $0 != "\t" }) ?? 0) + 1
            }
            return out
        case .literal, .folded:
            // Content starts on the line after the indicator, at the block's indentation: the one the header gives
            // (`|2`: two more than the parent's), else the first line's that is not blank.
            var indent = Self.indentation(givenBy: lines[mark.line - 1], at: mark.column - 1)
            var line = mark.line + 1
            var offset = 0
            var blank = 0
            var previous: (moreIndented: Bool, seen: Bool) = (false, false)
            while line <= lines.count && offset < textCount {
                let src = lines[line - 1]
                guard let first = src.firstIndex(where: { $0 != " " }) else {
                    blank += 1
                    line += 1
                    continue
                }
                if indent == nil { indent = first }
                guard first >= indent! else { break }
                let moreIndented = first > indent! || src[first] == "\t"
                // The line break before this line and the blank lines between: one character each, except that
                // folding drops the break between two lines at the block's indentation when blank lines come
                // between them (they alone are written) and turns it into a space when none do.
                if previous.seen {
                    let folds = style == .folded && blank > 0 && !moreIndented && !previous.moreIndented
                    offset += folds ? blank : blank + 1
                } else {
                    offset += blank
                }
                out.append((offset, SourcePosition(line: line, column: indent! + 1)))
                offset += src.count - indent!
                previous = (moreIndented, true)
                blank = 0
                line += 1
            }
            return out
        }
    }

    /// The content indentation (0-based) a block scalar's header gives with an indentation indicator (`|2`, `>1-`,
    /// `|-2`): the digit more than its parent's, which is that of the key before it on the line (or of the `-` of the
    /// sequence item it is); `nil` without a digit.
    static func indentation(givenBy header: [Unicode.Scalar], at indicator: Int) -> Int? {
        guard indicator >= 0, indicator < header.count else { return nil }
        let after = header[(indicator + 1)...].prefix(2)
        guard let digit = after.first(where: { ("1"..."9").contains($0) }).map({ Int($0.value) - 0x30 }) else { return nil }
        // The parent: skip the sequence dashes before the key; a line that has no key before the indicator is an
        // item of the sequence whose last dash it follows.
        var i = 0
        var lastDash: Int?
        while i < indicator {
            if header[i] == " " {
                i += 1
            } else if header[i] == "-" && i + 1 < header.count && header[i + 1] == " " {
                lastDash = i
                i += 2
            } else {
                break
            }
        }
        let parent = i < indicator ? i : (lastDash ?? 0)
        return parent + digit
    }
}
