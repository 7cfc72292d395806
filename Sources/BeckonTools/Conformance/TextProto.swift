/// A minimal reader of protocol-buffer text format, enough for cel-spec's `SimpleTestFile`s:
/// fields `name: value`, messages `name { … }` or `name: < … >`, repeated fields, `[type.url]` Any expansions,
/// adjacent string literals, C-style escapes, `#` comments.
final class TextProto {
    enum Field {
        case scalar(String)
        /// A quoted literal, unescaped to bytes.
        case string([UInt8])
        case message(TextProto)
    }

    var fields: [(name: String, value: Field)] = []
    init() {}

    subscript(_ name: String) -> Field? { fields.first { $0.name == name }?.value }
    func all(_ name: String) -> [Field] { fields.filter { $0.name == name }.map(\.value) }

    func message(_ name: String) -> TextProto? {
        if case .message(let m)? = self[name] { return m }
        return nil
    }

    func string(_ name: String) -> String? {
        if case .string(let b)? = self[name] { return String(decoding: b, as: UTF8.self) }
        if case .scalar(let s)? = self[name] { return s }
        return nil
    }

    func bool(_ name: String) -> Bool {
        if case .scalar(let s)? = self[name] { return s == "true" || s == "True" || s == "t" || s == "1" } else { return false }
    }

    struct ParseError: Error, CustomStringConvertible {
        var message: String
        var line: Int
        var description: String { "line \(line): \(message)" }
    }

    static func parse(_ text: String) throws(ParseError) -> TextProto {
        var p = Reader(bytes: Array(text.utf8))
        let m = try p.fields(until: nil, depth: 0)
        return m
    }

    /// Messages nest at most this deep (cel-spec's files nest 6).
    static let maxDepth = 64

    struct Reader {
        let bytes: [UInt8]
        var i = 0
        var line = 1

        func error(_ m: String) -> ParseError { ParseError(message: m, line: line) }

        mutating func skip() {
            while i < bytes.count {
                let c = bytes[i]
                if c == 10 {
                    line += 1
                    i += 1
                } else if c == 32 || c == 9 || c == 13 {
                    i += 1
                } else if c == UInt8(ascii: "#") {
                    while i < bytes.count && bytes[i] != 10 { i += 1 }
                } else {
                    return
                }
            }
        }

        mutating func fields(until close: UInt8?, depth: Int) throws(ParseError) -> TextProto {
            guard depth <= TextProto.maxDepth else { throw error("messages nest more than \(TextProto.maxDepth) levels deep") }
            let m = TextProto()
            while true {
                skip()
                if i >= bytes.count {
                    if close != nil { throw error("unexpected end of file") }
                    return m
                }
                if let close, bytes[i] == close {
                    i += 1
                    return m
                }
                let name = try fieldName()
                skip()
                var sawColon = false
                if i < bytes.count && bytes[i] == UInt8(ascii: ":") {
                    sawColon = true
                    i += 1
                    skip()
                }
                guard i < bytes.count else { throw error("missing value for \(name)") }
                let c = bytes[i]
                if c == UInt8(ascii: "{") || c == UInt8(ascii: "<") {
                    i += 1
                    let sub = try fields(
                        until: c == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: ">"), depth: depth + 1)
                    m.fields.append((name, .message(sub)))
                } else if c == UInt8(ascii: "[") && sawColon {
                    i += 1
                    while true {
                        skip()
                        guard i < bytes.count else { throw error("unexpected end of file in a list") }
                        if bytes[i] == UInt8(ascii: "]") {
                            i += 1
                            break
                        }
                        m.fields.append((name, try scalarValue()))
                        skip()
                        if i < bytes.count && bytes[i] == UInt8(ascii: ",") { i += 1 }
                    }
                } else {
                    m.fields.append((name, try scalarValue()))
                }
                skip()
                if i < bytes.count && (bytes[i] == UInt8(ascii: ",") || bytes[i] == UInt8(ascii: ";")) { i += 1 }
            }
        }

        mutating func fieldName() throws(ParseError) -> String {
            if bytes[i] == UInt8(ascii: "[") {
                let start = i
                while i < bytes.count && bytes[i] != UInt8(ascii: "]") { i += 1 }
                guard i < bytes.count else { throw error("'[' without ']' in a field name") }
                i += 1
                return String(decoding: bytes[start..<i], as: UTF8.self)
            }
            let start = i
            while i < bytes.count, isIdent(bytes[i]) { i += 1 }
            guard i > start else { throw error("expected a field name, found '\(Character(Unicode.Scalar(bytes[i])))'") }
            return String(decoding: bytes[start..<i], as: UTF8.self)
        }

        func isIdent(_ c: UInt8) -> Bool {
            (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c == 95 || c == 46
        }

        mutating func scalarValue() throws(ParseError) -> Field {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") {
                var out: [UInt8] = []
                // Adjacent literals concatenate.
                while i < bytes.count && (bytes[i] == UInt8(ascii: "\"") || bytes[i] == UInt8(ascii: "'")) {
                    out += try quoted()
                    skip()
                }
                return .string(out)
            }
            let start = i
            while i < bytes.count, isIdent(bytes[i]) || bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+") { i += 1 }
            guard i > start else { throw error("expected a value") }
            return .scalar(String(decoding: bytes[start..<i], as: UTF8.self))
        }

        mutating func quoted() throws(ParseError) -> [UInt8] {
            let q = bytes[i]
            i += 1
            var out: [UInt8] = []
            while i < bytes.count {
                let c = bytes[i]
                if c == q {
                    i += 1
                    return out
                }
                if c == 10 { throw error("newline in string") }
                if c == UInt8(ascii: "\\") {
                    i += 1
                    guard i < bytes.count else { break }
                    let e = bytes[i]
                    i += 1
                    switch e {
                    case UInt8(ascii: "n"): out.append(10)
                    case UInt8(ascii: "t"): out.append(9)
                    case UInt8(ascii: "r"): out.append(13)
                    case UInt8(ascii: "a"): out.append(7)
                    case UInt8(ascii: "b"): out.append(8)
                    case UInt8(ascii: "f"): out.append(12)
                    case UInt8(ascii: "v"): out.append(11)
                    case UInt8(ascii: "x"), UInt8(ascii: "X"):
                        var v = 0
                        var n = 0
                        while n < 2, i < bytes.count, let d = hexDigit(bytes[i]) {
                            v = v * 16 + d
                            i += 1
                            n += 1
                        }
                        out.append(UInt8(v))
                    case UInt8(ascii: "u"), UInt8(ascii: "U"):
                        let n = e == UInt8(ascii: "u") ? 4 : 8
                        var v: UInt32 = 0
                        for _ in 0..<n {
                            guard i < bytes.count, let d = hexDigit(bytes[i]) else { throw error("bad \\u escape") }
                            v = v * 16 + UInt32(d)
                            i += 1
                        }
                        guard let s = Unicode.Scalar(v) else { throw error("bad code point") }
                        out += Array(String(s).utf8)
                    case 48...55:
                        var v = Int(e - 48)
                        var n = 1
                        while n < 3, i < bytes.count, bytes[i] >= 48 && bytes[i] <= 55 {
                            v = v * 8 + Int(bytes[i] - 48)
                            i += 1
                            n += 1
                        }
                        out.append(UInt8(v & 0xFF))
                    default: out.append(e)
                    }
                    continue
                }
                out.append(c)
                i += 1
            }
            throw error("unterminated string")
        }

        func hexDigit(_ c: UInt8) -> Int? {
            switch c {
            case 48...57: Int(c - 48)
            case 97...102: Int(c - 87)
            case 65...70: Int(c - 55)
            default: nil
            }
        }
    }
}
