/// A CEL map: keys are bools, ints, uints or strings; entries keep their insertion order.
///
/// Numeric keys match across int and uint (`{1u: "a"}[1]` is `"a"`), as CEL's heterogeneous equality says;
/// a double looks up the int key of the same value.
public struct ValueMap: Sendable {
    /// Entries in insertion order.
    public private(set) var entries: [(key: Value, value: Value)]
    private var index: [MapKey: Int]

    public init() {
        entries = []
        index = [:]
    }

    /// Builds a map; a repeated key keeps its last value (use ``init(checking:)`` to reject repeats).
    public init(_ pairs: [(Value, Value)]) {
        self.init()
        entries.reserveCapacity(pairs.count)
        index.reserveCapacity(pairs.count)
        for (k, v) in pairs { self[k] = v }
    }

    /// Builds a map from string keys.
    public init(_ pairs: [(String, Value)]) {
        self.init(pairs.map { (Value.string($0.0), $0.1) })
    }

    /// Builds a map, failing on an invalid or repeated key (CEL map literals).
    public init(checking pairs: [(Value, Value)]) throws(EvalError) {
        self.init()
        for (k, v) in pairs {
            guard let mk = MapKey(k) else { throw EvalError("unsupported key type") }
            if index[mk] != nil { throw EvalError("Failed with repeated key") }
            index[mk] = entries.count
            entries.append((k, v))
        }
    }

    /// Adds `key` with `value` unless the map holds `key` already: then it changes nothing and returns false (a JSON
    /// object that gives a key twice, whose meant value cannot be told).
    mutating func insertNew(string key: String, _ value: Value) -> Bool {
        let mk = MapKey.string(ExactString(key))
        if let held = index.updateValue(entries.count, forKey: mk) {
            index[mk] = held
            return false
        }
        entries.append((.string(key), value))
        return true
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    public subscript(key: Value) -> Value? {
        get {
            guard let mk = MapKey(lookup: key), let i = index[mk] else { return nil }
            return entries[i].value
        }
        set {
            guard let mk = MapKey(key) else { return }
            if let i = index[mk] {
                if let newValue { entries[i].value = newValue } else { remove(at: i) }
            } else if let newValue {
                index[mk] = entries.count
                entries.append((key, newValue))
            }
        }
    }

    public subscript(string key: String) -> Value? {
        get {
            guard let i = index[.string(ExactString(key))] else { return nil }
            return entries[i].value
        }
        set { self[.string(key)] = newValue }
    }

    public func contains(_ key: Value) -> Bool {
        guard let mk = MapKey(lookup: key) else { return false }
        return index[mk] != nil
    }

    private mutating func remove(at i: Int) {
        entries.remove(at: i)
        index.removeAll(keepingCapacity: true)
        for (j, e) in entries.enumerated() { if let mk = MapKey(e.key) { index[mk] = j } }
    }
}

/// A map key normalised so that equal numbers of different kinds find each other.
enum MapKey: Hashable, Sendable {
    case bool(Bool)
    case int(Int64)
    case bigUInt(UInt64)
    case string(ExactString)

    /// The key under which a map literal stores `v`; `nil` for kinds CEL does not allow as keys.
    init?(_ v: Value) {
        switch v {
        case .bool(let b): self = .bool(b)
        case .int(let i): self = .int(i)
        case .uint(let u): self = u <= UInt64(Int64.max) ? .int(Int64(u)) : .bigUInt(u)
        case .string(let s): self = .string(ExactString(s))
        default: return nil
        }
    }

    /// The key a lookup with `v` finds: also a double with an integral value.
    init?(lookup v: Value) {
        if case .double(let d) = v {
            guard d.isFinite, d == d.rounded() else { return nil }
            if d >= -9_223_372_036_854_775_808.0 && d < 9_223_372_036_854_775_808.0 {
                self = .int(Int64(d))
            } else if d >= 0 && d < 18_446_744_073_709_551_616.0 {
                self = .bigUInt(UInt64(d))
            } else {
                return nil
            }
            return
        }
        self.init(v)
    }
}

/// A string compared and hashed by its UTF-8 bytes: CEL does not normalise Unicode.
struct ExactString: Hashable, Sendable {
    let value: String
    init(_ value: String) { self.value = value }
    static func == (a: ExactString, b: ExactString) -> Bool { Value.sameBytes(a.value, b.value) }
    func hash(into h: inout Hasher) { Bytes.hash(value, into: &h) }
}
