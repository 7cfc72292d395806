/// The primitives of the state encoding (docs/state.md): LEB128 varints, zigzag for signed numbers, times relative to
/// a reference, length-prefixed UTF-8, and ``Value``s with a tag byte. Plain arrays of bytes: no raw memory.
struct StateWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 128) { bytes.reserveCapacity(capacity) }

    mutating func byte(_ b: UInt8) { bytes.append(b) }

    mutating func uint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func int(_ v: Int64) { uint(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }

    /// A time as its distance from `reference` (small for the times a user's state holds); `Int64.min`, the engine's
    /// "never", is 0.
    mutating func time(_ t: Int64, from reference: Int64) {
        guard t != Int64.min else { return uint(0) }
        let d = t &- reference
        uint(UInt64(bitPattern: (d << 1) ^ (d >> 63)) &+ 1)
    }

    mutating func fixed64(_ v: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
    }

    mutating func string(_ s: String) {
        uint(UInt64(s.utf8.count))
        bytes.append(contentsOf: s.utf8)
    }

    mutating func optionalString(_ s: String?) {
        guard let s else { return byte(0) }
        byte(1)
        string(s)
    }

    mutating func value(_ v: Value) {
        switch v {
        case .null, .error: byte(ValueTag.null.rawValue)
        case .bool(let b): byte(b ? ValueTag.true.rawValue : ValueTag.false.rawValue)
        case .int(let i):
            byte(ValueTag.int.rawValue)
            int(i)
        case .uint(let u):
            byte(ValueTag.uint.rawValue)
            uint(u)
        case .double(let d):
            byte(ValueTag.double.rawValue)
            fixed64(d.bitPattern)
        case .string(let s):
            byte(ValueTag.string.rawValue)
            string(s)
        case .bytes(let b):
            byte(ValueTag.bytes.rawValue)
            uint(UInt64(b.count))
            bytes.append(contentsOf: b)
        case .list(let xs):
            byte(ValueTag.list.rawValue)
            uint(UInt64(xs.count))
            for x in xs { value(x) }
        case .map(let m):
            byte(ValueTag.map.rawValue)
            uint(UInt64(m.count))
            for (k, x) in m.entries {
                value(k)
                value(x)
            }
        case .timestamp(let t):
            byte(ValueTag.timestamp.rawValue)
            int(t.seconds)
            uint(UInt64(t.nanos))
        case .duration(let d):
            byte(ValueTag.duration.rawValue)
            int(d.seconds)
            int(Int64(d.nanos))
        case .type(let name):
            byte(ValueTag.type.rawValue)
            string(name)
        }
    }
}

/// The tag byte before each encoded ``Value`` (an error value is stored as null: no state keeps one).
enum ValueTag: UInt8 {
    case null = 0, `false`, `true`, int, uint, double, string, bytes, list, map, timestamp, duration, type
}

/// Why bytes are not a user's state: what was wrong and at which byte.
public struct StateDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    /// Offset of the byte where decoding stopped.
    public var offset: Int

    public var description: String { "not a Beckon user state: \(reason) (at byte \(offset))" }
}

/// Reads what ``StateWriter`` wrote, checking every count against the bytes left, every string's UTF-8 and every
/// time's range: bad or truncated bytes are a ``StateDecodingError``, never a trap or an outsized allocation.
struct StateReader {
    let bytes: [UInt8]
    private(set) var at = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Times beyond ±2⁵³ ms (±285,000 years) are refused: the engine's arithmetic on them could overflow.
    static let timeBound: Int64 = 1 << 53
    /// Deepest nesting of a decoded value (as the event decoder's).
    static let maxDepth = SegmentDecoder.maxDepth

    var isAtEnd: Bool { at == bytes.count }
    var remaining: Int { bytes.count - at }

    func error(_ reason: String) -> StateDecodingError { StateDecodingError(reason: reason, offset: at) }

    mutating func byte() throws(StateDecodingError) -> UInt8 {
        guard at < bytes.count else { throw error("the bytes end early") }
        defer { at += 1 }
        return bytes[at]
    }

    mutating func uint() throws(StateDecodingError) -> UInt64 {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            guard shift < 64, shift < 63 || b <= 1 else { throw error("a number is longer than 64 bits") }
            v |= UInt64(b & 0x7f) << shift
            if b < 0x80 { return v }
            shift += 7
        }
    }

    mutating func int() throws(StateDecodingError) -> Int64 {
        let u = try uint()
        return Int64(bitPattern: (u >> 1) ^ (0 &- (u & 1)))
    }

    mutating func uint32() throws(StateDecodingError) -> UInt32 {
        let u = try uint()
        guard let v = UInt32(exactly: u) else { throw error("a count is over 32 bits") }
        return v
    }

    /// A count of things each at least `minBytes` long, which the bytes left must be able to hold.
    mutating func count(minBytes: Int = 1) throws(StateDecodingError) -> Int {
        let u = try uint()
        guard u <= UInt64(bytes.count - at) / UInt64(max(1, minBytes)) else { throw error("a count is larger than the bytes") }
        return Int(u)
    }

    mutating func time(from reference: Int64) throws(StateDecodingError) -> Int64 {
        let u = try uint()
        guard u != 0 else { return Int64.min }
        let z = u - 1
        let d = Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1)))
        let (t, overflow) = reference.addingReportingOverflow(d)
        // (Not `abs(t)`: it traps on Int64.min.)
        guard !overflow, t >= -StateReader.timeBound, t <= StateReader.timeBound else { throw error("a time is out of range") }
        return t
    }

    mutating func fixed64() throws(StateDecodingError) -> UInt64 {
        guard bytes.count - at >= 8 else { throw error("the bytes end early") }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[at + i]) << (8 * UInt64(i)) }
        at += 8
        return v
    }

    mutating func bool() throws(StateDecodingError) -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw error("a flag is neither 0 nor 1")
        }
    }

    mutating func string() throws(StateDecodingError) -> String {
        let n = try count()
        guard let s = String(validating: bytes[at..<at + n], as: UTF8.self) else { throw error("a string is not UTF-8") }
        at += n
        return s
    }

    mutating func optionalString() throws(StateDecodingError) -> String? { try bool() ? try string() : nil }

    mutating func value(depth: Int = 0) throws(StateDecodingError) -> Value {
        guard depth < StateReader.maxDepth else { throw error("a value nests more than \(StateReader.maxDepth) levels deep") }
        let b = try byte()
        guard let tag = ValueTag(rawValue: b) else { throw error("unknown value tag \(b)") }
        switch tag {
        case .null: return .null
        case .false: return .bool(false)
        case .true: return .bool(true)
        case .int: return .int(try int())
        case .uint: return .uint(try uint())
        case .double: return .double(Double(bitPattern: try fixed64()))
        case .string: return .string(try string())
        case .bytes:
            let n = try count()
            defer { at += n }
            return .bytes(Array(bytes[at..<at + n]))
        case .list:
            let n = try count()
            var xs: [Value] = []
            xs.reserveCapacity(n)
            for _ in 0..<n { xs.append(try value(depth: depth + 1)) }
            return .list(xs)
        case .map:
            let n = try count(minBytes: 2)
            var pairs: [(Value, Value)] = []
            pairs.reserveCapacity(n)
            for _ in 0..<n { pairs.append((try value(depth: depth + 1), try value(depth: depth + 1))) }
            do {
                return .map(try ValueMap(checking: pairs))
            } catch {
                throw self.error("a map's keys: \(error.message)")
            }
        case .timestamp:
            let s = try int()
            let n = try uint()
            guard n < 1_000_000_000, let t = try? Timestamp(seconds: s, nanos: Int32(n)) else {
                throw error("a timestamp is out of range")
            }
            return .timestamp(t)
        case .duration:
            let s = try int()
            let n = try int()
            // (Not `abs(n)`: it traps on Int64.min, which a damaged varint can hold.)
            guard n > -1_000_000_000, n < 1_000_000_000, let d = try? TimeDuration(seconds: s, nanos: Int32(n)) else {
                throw error("a duration is out of range")
            }
            return .duration(d)
        case .type: return .type(try string())
        }
    }
}
