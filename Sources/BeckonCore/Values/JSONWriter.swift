/// A small, fast JSON writer with a fixed key order.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    /// Room for the bytes of an action id before they are hashed (kept, so an id allocates nothing).
    private var scratch: [UInt8] = []
    /// Whether the next member of the innermost open object or array needs a comma; the same for the ones around it.
    private var needsComma = false
    private var outer: [Bool] = []
    /// A key was just written: the next value follows it without a comma.
    private var afterKey = false

    public init() { bytes.reserveCapacity(256) }

    public var output: String { String(decoding: bytes, as: UTF8.self) }

    /// Ends a line (JSON lines output).
    public mutating func newline() { bytes.append(10) }

    /// Empties the output, keeping its capacity, to write the next batch.
    public mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        outer.removeAll(keepingCapacity: true)
        needsComma = false
        afterKey = false
    }

    /// A string value whose bytes need no escaping (hex digits, timestamps), appended by `write` to the output (it is
    /// handed the writer's scratch buffer too).
    mutating func plainString(_ write: (inout [UInt8], inout [UInt8]) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        write(&bytes, &scratch)
        bytes.append(UInt8(ascii: "\""))
    }

    /// Members already written as JSON (`"k":v,"k2":v2`, no braces), into the open object.
    mutating func members(_ json: [UInt8]) {
        separate()
        bytes.append(contentsOf: json)
    }

    private mutating func separate() {
        if afterKey {
            afterKey = false
            return
        }
        guard !outer.isEmpty else { return }
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
    }

    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        outer.append(needsComma)
        needsComma = false
    }

    private mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        needsComma = outer.removeLast()
    }

    public mutating func beginObject() { open(UInt8(ascii: "{")) }
    public mutating func endObject() { close(UInt8(ascii: "}")) }
    public mutating func beginArray() { open(UInt8(ascii: "[")) }
    public mutating func endArray() { close(UInt8(ascii: "]")) }

    /// A key that needs no escaping, written without scanning it.
    mutating func key(static k: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        Bytes.append(utf8: k, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    /// A key; the value written next belongs to it.
    public mutating func key(_ k: String) {
        separate()
        writeString(k)
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    public mutating func string(_ s: String) {
        separate()
        writeString(s)
    }

    public mutating func raw(_ s: String) {
        separate()
        bytes.append(contentsOf: s.utf8)
    }

    public mutating func value(_ v: Value) {
        switch v {
        case .null: raw("null")
        case .bool(let b): raw(b ? "true" : "false")
        case .int(let i): raw(String(i))
        case .uint(let u): raw(String(u))
        case .double(let d): raw(d.isFinite ? JSONWriter.formatDouble(d) : "null")
        case .string(let s): string(s)
        case .bytes(let b): string(Base64.encode(b))
        case .timestamp(let t): string(t.description)
        case .duration(let d): string(d.description)
        case .type(let t): string(t)
        case .error(let e): string("error: \(e.message)")
        case .list(let xs):
            beginArray()
            for x in xs { value(x) }
            endArray()
        case .map(let m):
            beginObject()
            for (k, x) in m.entries {
                if case .string(let s) = k { key(s) } else { key(JSONWriter.encode(k)) }
                value(x)
            }
            endObject()
        }
    }

    static func formatDouble(_ d: Double) -> String {
        if d == d.rounded() && abs(d) < 1e15 { return String(Int64(d)) + ".0" }
        return "\(d)"
    }

    /// Whether `s` holds a byte JSON escapes: a control character, `"` or `\` (read in place, byte by byte).
    static func needsEscaping(_ s: String) -> Bool {
        let utf8 = s.utf8.span
        for i in utf8.indices {
            let b = utf8[i]
            if b < 32 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return true }
        }
        return false
    }

    private mutating func writeString(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings need no escape: scanned, then copied at once.
        if !JSONWriter.needsEscaping(s) {
            Bytes.append(utf8: s, to: &bytes)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [92, 92])
            case 10: bytes.append(contentsOf: [92, UInt8(ascii: "n")])
            case 13: bytes.append(contentsOf: [92, UInt8(ascii: "r")])
            case 9: bytes.append(contentsOf: [92, UInt8(ascii: "t")])
            case 0..<32:
                bytes.append(contentsOf: Array("\\u00".utf8))
                bytes.append(Hex.hexDigit(c >> 4))
                bytes.append(Hex.hexDigit(c & 15))
            default: bytes.append(c)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A value as a JSON text.
    public static func encode(_ v: Value) -> String {
        var w = JSONWriter()
        w.value(v)
        return w.output
    }

    /// Indented two spaces a level, keys in their order: for files people read and diff.
    public static func pretty(_ v: Value, indent: String = "") -> String {
        let inner = indent + "  "
        switch v {
        case .map(let m) where !m.isEmpty:
            let members = m.entries.map { inner + encode($0.key) + ": " + pretty($0.value, indent: inner) }
            return "{\n" + members.joined(separator: ",\n") + "\n" + indent + "}"
        case .list(let xs) where !xs.isEmpty:
            return "[\n" + xs.map { inner + pretty($0, indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
        default: return encode(v)
        }
    }
}

/// Lower-case hex text of bytes (digests, ids).
public enum Hex {
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        append(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Two lower-case hex digits per byte, appended to `out`.
    static func append(_ bytes: some Sequence<UInt8>, to out: inout [UInt8]) {
        for b in bytes {
            out.append(hexDigit(b >> 4))
            out.append(hexDigit(b & 15))
        }
    }

    /// The lower-case hex digit of `d` (0–15).
    @inline(__always) static func hexDigit(_ d: UInt8) -> UInt8 { d < 10 ? 48 + d : 87 + d }
}

enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static func encode(_ b: [UInt8]) -> String {
        var out: [UInt8] = []
        var i = 0
        while i + 2 < b.count {
            let n = (UInt32(b[i]) << 16) | (UInt32(b[i + 1]) << 8) | UInt32(b[i + 2])
            for s in [18, 12, 6, 0] { out.append(alphabet[Int((n >> UInt32(s)) & 63)]) }
            i += 3
        }
        let rest = b.count - i
        if rest > 0 {
            var n = UInt32(b[i]) << 16
            if rest == 2 { n |= UInt32(b[i + 1]) << 8 }
            out.append(alphabet[Int((n >> 18) & 63)])
            out.append(alphabet[Int((n >> 12) & 63)])
            out.append(rest == 2 ? alphabet[Int((n >> 6) & 63)] : UInt8(ascii: "="))
            out.append(UInt8(ascii: "="))
        }
        return String(decoding: out, as: UTF8.self)
    }
}
