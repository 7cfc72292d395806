/// A whole JSON document as a tree, for the few places that need one (a user's state read back from its JSON
/// export: ``UserState/init(json:)``), read with the event decoder's ``JSONScanner``: the same strings, escapes and
/// UTF-8 checks, and no `Double` in the way of an integer. Events never go through it: the decoder reads them in place.
///
/// Raw memory: the scanner reads the bytes through a buffer pointer valid only inside ``parse(_:maxDepth:)``; every
/// `Node` holds copies (Strings), never a pointer.
enum JSONTree {
    /// A JSON value as read: the offset of its first byte, an object's members in order, a number as its text (read
    /// as the type its member needs, so that no integer passes through a `Double`).
    struct Node {
        enum Kind {
            case null
            case bool(Bool)
            case number(String)
            case string(String)
            case array([Node])
            case object([(key: String, value: Node)])
        }
        var kind: Kind
        var offset: Int
    }

    /// The JSON text as a tree, read with the event decoder's scanner (its strings, escapes and UTF-8 checks); a value
    /// nested deeper than `maxDepth` is an error.
    static func parse(_ bytes: [UInt8], maxDepth: Int) throws(DecodeError) -> Node {
        let result: Result<Node, DecodeError> = bytes.withUnsafeBufferPointer { buf in
            var p = JSONScanner(buf)
            do throws(DecodeError) {
                let root = try node(&p, depth: 0, maxDepth: maxDepth)
                p.skipSpace()
                guard p.atEnd else { throw p.error("text after the JSON object") }
                return .success(root)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private static func node(_ p: inout JSONScanner, depth: Int, maxDepth: Int) throws(DecodeError) -> Node {
        p.skipSpace()
        guard depth < maxDepth else { throw p.error("nested more than \(maxDepth) levels deep") }
        let at = p.i
        guard let c = p.peek() else { throw p.error("a value is missing") }
        switch c {
        case UInt8(ascii: "\""):
            return Node(kind: .string(try p.rawString()), offset: at)
        case UInt8(ascii: "{"):
            p.i += 1
            var members: [(key: String, value: Node)] = []
            var keys: Set<ExactString> = []
            try p.members { (p, key) throws(DecodeError) in
                let value = try node(&p, depth: depth + 1, maxDepth: maxDepth)
                guard keys.insert(ExactString(key)).inserted else { throw JSONScanner.repeated(key, value.offset + 1) }
                members.append((key, value))
            }
            return Node(kind: .object(members), offset: at)
        case UInt8(ascii: "["):
            p.i += 1
            var elements: [Node] = []
            p.skipSpace()
            if p.peek() == UInt8(ascii: "]") {
                p.i += 1
                return Node(kind: .array(elements), offset: at)
            }
            while true {
                elements.append(try node(&p, depth: depth + 1, maxDepth: maxDepth))
                p.skipSpace()
                guard let d = p.peek() else { throw p.error("the array is not closed (']' missing)") }
                p.i += 1
                if d == UInt8(ascii: "]") { return Node(kind: .array(elements), offset: at) }
                guard d == UInt8(ascii: ",") else { throw DecodeError("expected ',' or ']'", column: p.i) }
            }
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            if case .bool(let b) = try p.value(depth: 0) { return Node(kind: .bool(b), offset: at) }
            return Node(kind: .null, offset: at)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            _ = try p.number()
            let text = UnsafeBufferPointer(rebasing: p.b[at..<p.i])
            guard isNumber(text) else {
                throw DecodeError("'\(String(decoding: text, as: UTF8.self))' is not a JSON number", column: at + 1)
            }
            return Node(kind: .number(String(decoding: text, as: UTF8.self)), offset: at)
        default:
            throw p.error("unexpected character '\(Character(Unicode.Scalar(c)))'")
        }
    }

    /// Whether `t` is a number as RFC 8259 writes it: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    static func isNumber(_ t: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        func digits() -> Int {
            let start = i
            while i < t.count, t[i] >= UInt8(ascii: "0"), t[i] <= UInt8(ascii: "9") { i += 1 }
            return i - start
        }
        if i < t.count, t[i] == UInt8(ascii: "-") { i += 1 }
        let first = i
        let n = digits()
        guard n > 0, n == 1 || t[first] != UInt8(ascii: "0") else { return false }
        if i < t.count, t[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { return false }
        }
        if i < t.count, t[i] == UInt8(ascii: "e") || t[i] == UInt8(ascii: "E") {
            i += 1
            if i < t.count, t[i] == UInt8(ascii: "+") || t[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { return false }
        }
        return i == t.count
    }

}
