/// A problem found in an expression's text, with where it is.
public struct ExprProblem: Error, Sendable {
    public var message: String
    public var span: SourceSpan
    /// Matchable id, as in diagnostics: `expression_syntax`, `expression_type`, `unknown_identifier`…
    public var id: DiagnosticID
    public var suggestion: String?

    public init(_ message: String, _ span: SourceSpan, id: DiagnosticID = .expressionSyntax, suggestion: String? = nil) {
        self.message = message
        self.span = span
        self.id = id
        self.suggestion = suggestion
    }
}

struct Token {
    enum Kind: Equatable {
        case ident(String)
        /// A backquoted field name.
        case quotedIdent(String)
        /// The magnitude of a decimal or hex integer literal; `-` is applied by the parser.
        case int(UInt64)
        case uint(UInt64)
        case double(Double)
        case string(String)
        case bytes([UInt8])
        case punct(String)
        case eof
    }
    var kind: Kind
    var span: SourceSpan
}

/// Splits CEL text into tokens. Positions are Unicode-scalar offsets.
struct Lexer {
    let s: [Unicode.Scalar]
    var i = 0

    init(_ text: String) { s = Array(text.unicodeScalars) }

    static let reserved: Set<String> = [
        "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package",
        "namespace", "return", "var", "void", "while",
    ]

    func peekChar(_ k: Int = 0) -> Unicode.Scalar? { i + k < s.count ? s[i + k] : nil }

    mutating func tokens() throws(ExprProblem) -> [Token] {
        var out: [Token] = []
        while true {
            let t = try next()
            out.append(t)
            if t.kind == .eof { return out }
        }
    }

    private mutating func skipSpaceAndComments() {
        while let c = peekChar() {
            if c == " " || c == "\t" || c == "\n" || c == "\r" || c == "\u{0C}" {
                i += 1
            } else if c == "/" && peekChar(1) == "/" {
                while let d = peekChar(), d != "\n" { i += 1 }
            } else {
                return
            }
        }
    }

    static func isIdentStart(_ c: Unicode.Scalar) -> Bool {
        (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c == "_"
    }
    static func isDigit(_ c: Unicode.Scalar) -> Bool { c >= "0" && c <= "9" }
    static func isHex(_ c: Unicode.Scalar) -> Bool {
        isDigit(c) || (c >= "a" && c <= "f") || (c >= "A" && c <= "F")
    }

    mutating func next() throws(ExprProblem) -> Token {
        skipSpaceAndComments()
        let start = i
        guard let c = peekChar() else { return Token(kind: .eof, span: SourceSpan(i, i)) }

        // String and bytes literals, with r/R and b/B prefixes in either order.
        var j = 0
        var raw = false
        var bytes = false
        while j < 2, let p = peekChar(j), p == "r" || p == "R" || p == "b" || p == "B" {
            if p == "r" || p == "R" {
                if raw { break }
                raw = true
            } else {
                if bytes { break }
                bytes = true
            }
            j += 1
        }
        if let q = peekChar(j), q == "\"" || q == "'" {
            i += j
            return try stringLiteral(start: start, raw: raw, bytes: bytes)
        }

        if c == "`" {
            // An escaped field name: `content-type` (only valid after '.').
            i += 1
            let s0 = i
            while let d = peekChar(), d != "`" {
                if d == "\n" { break }
                i += 1
            }
            guard peekChar() == "`", i > s0 else {
                throw ExprProblem("unterminated or empty `quoted` field name", SourceSpan(start, i))
            }
            let name = String(String.UnicodeScalarView(s[s0..<i]))
            i += 1
            return Token(kind: .quotedIdent(name), span: SourceSpan(start, i))
        }
        if Lexer.isIdentStart(c) {
            while let d = peekChar(), Lexer.isIdentStart(d) || Lexer.isDigit(d) { i += 1 }
            let name = String(String.UnicodeScalarView(s[start..<i]))
            return Token(kind: .ident(name), span: SourceSpan(start, i))
        }
        if Lexer.isDigit(c) || (c == "." && peekChar(1).map(Lexer.isDigit) == true) {
            return try number(start: start)
        }
        let two = peekChar(1).map { String(c) + String($0) }
        if let two, ["==", "!=", "<=", ">=", "&&", "||"].contains(two) {
            i += 2
            return Token(kind: .punct(two), span: SourceSpan(start, i))
        }
        if "<>!+-*/%?:.,[](){}".unicodeScalars.contains(c) {
            i += 1
            return Token(kind: .punct(String(c)), span: SourceSpan(start, i))
        }
        if c == "=" {
            throw ExprProblem(
                "'=' is not an operator; use '==' to compare", SourceSpan(start, start + 1),
                suggestion: "==")
        }
        if c == "&" || c == "|" {
            throw ExprProblem(
                "'\(c)' is not an operator; use '\(c)\(c)'", SourceSpan(start, start + 1),
                suggestion: "\(c)\(c)")
        }
        throw ExprProblem("unexpected character '\(c)'", SourceSpan(start, start + 1))
    }

    private mutating func number(start: Int) throws(ExprProblem) -> Token {
        // Hex integers.
        if peekChar() == "0", let x = peekChar(1), x == "x" || x == "X" {
            i += 2
            let ds = i
            while let d = peekChar(), Lexer.isHex(d) { i += 1 }
            guard i > ds, let v = UInt64(String(String.UnicodeScalarView(s[ds..<i])), radix: 16) else {
                throw ExprProblem("invalid hex literal", SourceSpan(start, i))
            }
            if let u = peekChar(), u == "u" || u == "U" {
                i += 1
                return Token(kind: .uint(v), span: SourceSpan(start, i))
            }
            return Token(kind: .int(v), span: SourceSpan(start, i))
        }
        while let d = peekChar(), Lexer.isDigit(d) { i += 1 }
        var isDouble = false
        if peekChar() == ".", let d = peekChar(1), Lexer.isDigit(d) {
            isDouble = true
            i += 1
            while let d = peekChar(), Lexer.isDigit(d) { i += 1 }
        }
        if let e = peekChar(), e == "e" || e == "E" {
            var k = 1
            if let sign = peekChar(1), sign == "+" || sign == "-" { k = 2 }
            if let d = peekChar(k), Lexer.isDigit(d) {
                isDouble = true
                i += k
                while let d = peekChar(), Lexer.isDigit(d) { i += 1 }
            }
        }
        let text = String(String.UnicodeScalarView(s[start..<i]))
        if isDouble {
            guard let v = Double(text) else { throw ExprProblem("invalid number '\(text)'", SourceSpan(start, i)) }
            return Token(kind: .double(v), span: SourceSpan(start, i))
        }
        if let u = peekChar(), u == "u" || u == "U" {
            i += 1
            guard let v = UInt64(text) else {
                throw ExprProblem("integer literal '\(text)' is out of range", SourceSpan(start, i))
            }
            return Token(kind: .uint(v), span: SourceSpan(start, i))
        }
        guard let v = UInt64(text) else {
            throw ExprProblem("integer literal '\(text)' is out of range", SourceSpan(start, i))
        }
        return Token(kind: .int(v), span: SourceSpan(start, i))
    }

    private mutating func stringLiteral(start: Int, raw: Bool, bytes: Bool) throws(ExprProblem) -> Token {
        let q = s[i]
        let triple = peekChar(1) == q && peekChar(2) == q
        i += triple ? 3 : 1
        var out: [UInt8] = []
        func appendScalar(_ u: Unicode.Scalar) { out.append(contentsOf: Array(String(u).utf8)) }
        while true {
            guard let c = peekChar() else {
                throw ExprProblem("unterminated string literal", SourceSpan(start, i))
            }
            if triple {
                if c == q && peekChar(1) == q && peekChar(2) == q {
                    i += 3
                    break
                }
            } else {
                if c == q {
                    i += 1
                    break
                }
                if c == "\n" || c == "\r" {
                    throw ExprProblem("newline in string literal", SourceSpan(start, i))
                }
            }
            if c == "\\" && !raw {
                let escStart = i
                i += 1
                guard let e = peekChar() else { throw ExprProblem("unterminated string literal", SourceSpan(start, i)) }
                i += 1
                switch e {
                case "\\", "?", "\"", "'", "`": out.append(UInt8(e.value))
                case "a": out.append(7)
                case "b": out.append(8)
                case "f": out.append(12)
                case "n": out.append(10)
                case "r": out.append(13)
                case "t": out.append(9)
                case "v": out.append(11)
                case "x", "X", "u", "U":
                    let n = (e == "x" || e == "X") ? 2 : (e == "u" ? 4 : 8)
                    var v: UInt32 = 0
                    for _ in 0..<n {
                        guard let h = peekChar(), Lexer.isHex(h) else {
                            throw ExprProblem("invalid escape sequence", SourceSpan(escStart, i))
                        }
                        v = v * 16 + UInt32(String(h), radix: 16)!
                        i += 1
                    }
                    if (e == "x" || e == "X") && bytes {
                        out.append(UInt8(v))
                    } else {
                        if e == "u" || e == "U", bytes {
                            throw ExprProblem("\\u escapes are not allowed in bytes literals", SourceSpan(escStart, i))
                        }
                        guard let u = Unicode.Scalar(v) else {
                            throw ExprProblem("invalid Unicode code point in escape", SourceSpan(escStart, i))
                        }
                        appendScalar(u)
                    }
                case "0"..."3":
                    var v = UInt32(e.value - 48)
                    for _ in 0..<2 {
                        guard let o = peekChar(), o >= "0" && o <= "7" else {
                            throw ExprProblem("invalid octal escape", SourceSpan(escStart, i))
                        }
                        v = v * 8 + (o.value - 48)
                        i += 1
                    }
                    if bytes { out.append(UInt8(v)) } else { appendScalar(Unicode.Scalar(v)!) }
                default:
                    throw ExprProblem("invalid escape sequence '\\\(e)'", SourceSpan(escStart, i))
                }
                continue
            }
            appendScalar(c)
            i += 1
        }
        if bytes { return Token(kind: .bytes(out), span: SourceSpan(start, i)) }
        guard let str = String(validating: out, as: UTF8.self) else {
            throw ExprProblem("string literal is not valid UTF-8", SourceSpan(start, i))
        }
        return Token(kind: .string(str), span: SourceSpan(start, i))
    }
}
