/// A value in Beckon's expression language: the CEL value kinds Beckon supports.
///
/// Event properties, user attributes, literals in rule files and the results of expressions are all `Value`s.
/// Errors are values too (`.error`), as in CEL: `a || b` can absorb an error from one side.
///
/// ```swift
/// let v: Value = .map(ValueMap([("plan", .string("pro")), ("age", .int(31))]))
/// v["plan"] // .string("pro")
/// ```
///
/// ## Topics
/// - ``ValueMap``
/// - ``Timestamp``
/// - ``TimeDuration``
/// - ``EvalError``
public enum Value: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case bytes([UInt8])
    case list([Value])
    case map(ValueMap)
    case timestamp(Timestamp)
    case duration(TimeDuration)
    /// A type as a value, e.g. the result of `type(1)`; its CEL name (`int`, `list`, `google.protobuf.Timestamp`…).
    case type(String)
    case error(EvalError)
}

/// Why an expression could not produce a value: "no such key", "divide by zero", "no such overload"…
public struct EvalError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// The most characters a message keeps: one that quotes a value of an event (a pattern, a string to convert, a
    /// key) is cut there with `…`, so an error never holds, logs or shows a large input whole.
    public static let maxMessageCharacters = 400
    public init(_ message: String) { self.message = message.clipped(to: Self.maxMessageCharacters) }
    public var description: String { message }

    static let noSuchOverload = EvalError("no such overload")
    static let divideByZero = EvalError("divide by zero")
    static let modulusByZero = EvalError("modulus by zero")
    static let overflow = EvalError("return error for overflow")
    static func noSuchKey(_ key: String) -> EvalError { EvalError("no such key: '\(key)'") }
    static let noSuchKeyPlain = EvalError("no such key")
}

extension Value {
    /// The CEL type name of this value, as `type(x)` returns it.
    public var typeName: String {
        switch self {
        case .null: "null_type"
        case .bool: "bool"
        case .int: "int"
        case .uint: "uint"
        case .double: "double"
        case .string: "string"
        case .bytes: "bytes"
        case .list: "list"
        case .map: "map"
        case .timestamp: "google.protobuf.Timestamp"
        case .duration: "google.protobuf.Duration"
        case .type: "type"
        case .error: "error"
        }
    }

    /// The kind name used in messages for marketers ("string", "int", "timestamp"…).
    public var kindName: String {
        switch self {
        case .timestamp: "timestamp"
        case .duration: "duration"
        case .null: "null"
        default: typeName
        }
    }

    public var isError: Bool { if case .error = self { true } else { false } }

    /// `true` only for the boolean `true`.
    @inlinable public var isTrue: Bool { if case .bool(true) = self { true } else { false } }

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }

    /// Selects `key` from a map value (CEL field selection); an error when absent or not a map.
    public subscript(key: String) -> Value {
        switch self {
        case .map(let m): return m[string: key] ?? .error(.noSuchKey(key))
        case .error: return self
        default: return .error(EvalError("type '\(kindName)' does not support field selection"))
        }
    }
}

// Not ExpressibleByNilLiteral: `cond ? nil : value` must stay an Optional's nil, never `.null`.
extension Value: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: Value...) { self = .list(elements) }
}

// MARK: - Equality (CEL heterogeneous equality)

extension Value {
    /// CEL `==`: values of different kinds are unequal, except numbers, which compare by numeric value.
    /// Returns an error only when an operand is an error.
    public func celEquals(_ other: Value) -> Value {
        switch (self, other) {
        case (.error, _): return self
        case (_, .error): return other
        default: return .bool(Value.equal(self, other))
        }
    }

    /// Whether two strings have the same UTF-8 bytes (Swift's `==` would also equate canonically equivalent ones).
    @inline(__always) static func sameBytes(_ x: String, _ y: String) -> Bool { Bytes.equal(x, y) }

    /// CEL equality as a Swift `Bool` (errors are unequal to everything).
    public static func equal(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.string(let x), .string(let y)): return Value.sameBytes(x, y)  // no Unicode normalisation
        case (.bytes(let x), .bytes(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y
        case (.uint(let x), .uint(let y)): return x == y
        case (.int, .double), (.double, .int), (.int, .uint), (.uint, .int), (.uint, .double), (.double, .uint):
            return Numeric.compare(a, b) == .orderedSame
        case (.list(let x), .list(let y)):
            guard x.count == y.count else { return false }
            for i in x.indices where !equal(x[i], y[i]) { return false }
            return true
        case (.map(let x), .map(let y)):
            guard x.count == y.count else { return false }
            for (k, v) in x.entries {
                guard let w = y[k], equal(v, w) else { return false }
            }
            return true
        case (.timestamp(let x), .timestamp(let y)): return x == y
        case (.duration(let x), .duration(let y)): return x == y
        case (.type(let x), .type(let y)): return x == y
        default: return false
        }
    }
}

/// Exact comparison of CEL numbers across int, uint and double.
enum Numeric {
    enum Order { case orderedAscending, orderedSame, orderedDescending, unordered }

    static func compare(_ a: Value, _ b: Value) -> Order {
        switch (a, b) {
        case (.int(let x), .int(let y)): return cmp(x, y)
        case (.uint(let x), .uint(let y)): return cmp(x, y)
        case (.double(let x), .double(let y)): return cmp(x, y)
        case (.int(let x), .uint(let y)):
            if x < 0 { return .orderedAscending }
            let ux = UInt64(x)
            return cmp(ux, y)
        case (.uint, .int): return flip(compare(b, a))
        case (.int(let x), .double(let y)): return cmpIntDouble(x, y)
        case (.double, .int): return flip(compare(b, a))
        case (.uint(let x), .double(let y)): return cmpUIntDouble(x, y)
        case (.double, .uint): return flip(compare(b, a))
        default: return .unordered
        }
    }

    static func flip(_ o: Order) -> Order {
        switch o {
        case .orderedAscending: .orderedDescending
        case .orderedDescending: .orderedAscending
        default: o
        }
    }

    @inline(__always) static func cmp<T: BinaryInteger>(_ x: T, _ y: T) -> Order {
        x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
    }

    static func cmp(_ x: Double, _ y: Double) -> Order {
        if x.isNaN || y.isNaN { return .unordered }
        return x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
    }

    /// Ints and uints compare with doubles as doubles, as CEL implementations do (lossy beyond 2^53).
    static func cmpIntDouble(_ x: Int64, _ y: Double) -> Order { cmp(Double(x), y) }

    static func cmpUIntDouble(_ x: UInt64, _ y: Double) -> Order { cmp(Double(x), y) }
}

extension Value {
    /// CEL ordering for `<`, `<=`, `>`, `>=`: same kinds, or numbers of any kind. `nil` when there is no overload.
    static func order(_ a: Value, _ b: Value) -> Numeric.Order? {
        switch (a, b) {
        case (.int, _), (.uint, _), (.double, _):
            switch b {
            case .int, .uint, .double: return Numeric.compare(a, b)
            default: return nil
            }
        case (.string(let x), .string(let y)):
            if Value.sameBytes(x, y) { return .orderedSame }
            return x.unicodeScalars.lexicographicallyPrecedes(y.unicodeScalars, by: { $0.value < $1.value })
                ? .orderedAscending : .orderedDescending
        case (.bool(let x), .bool(let y)):
            return x == y ? .orderedSame : (!x ? .orderedAscending : .orderedDescending)
        case (.bytes(let x), .bytes(let y)):
            if x == y { return .orderedSame }
            return x.lexicographicallyPrecedes(y) ? .orderedAscending : .orderedDescending
        case (.timestamp(let x), .timestamp(let y)):
            return x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
        case (.duration(let x), .duration(let y)):
            return x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
        default: return nil
        }
    }
}

extension Value {
    var isNullValue: Bool { if case .null = self { true } else { false } }

    /// This value with the null members of its maps removed, at every depth (in maps inside lists too; a list keeps
    /// its own nulls).
    var withoutNulls: Value {
        guard holdsNull else { return self }  // (the common case: nothing to build again)
        switch self {
        case .map(let m):
            return .map(ValueMap(m.entries.filter { !$0.value.isNullValue }.map { ($0.key, $0.value.withoutNulls) }))
        case .list(let xs): return .list(xs.map(\.withoutNulls))
        default: return self
        }
    }

    /// Whether a map's value, here or in a map or list inside it, is null: what ``withoutNulls`` takes out.
    private var holdsNull: Bool {
        switch self {
        case .map(let m): m.entries.contains { $0.value.isNullValue || $0.value.holdsNull }
        case .list(let xs): xs.contains(where: \.holdsNull)
        default: false
        }
    }
}

extension Value {
    /// The value as a `Double`, when it is a number.
    var number: Double? {
        switch self {
        case .int(let n): Double(n)
        case .uint(let n): Double(n)
        case .double(let d): d
        default: nil
        }
    }
}
