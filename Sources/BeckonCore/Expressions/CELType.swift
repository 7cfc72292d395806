/// A static type, as the checker infers it. `dyn` is "known only when evaluated".
public indirect enum CELType: Hashable, Sendable, CustomStringConvertible {
    case dyn
    case null
    case bool
    case int
    case uint
    case double
    /// An int, a uint or a double, not known which: a tracking plan's `number`. It goes wherever a number does and
    /// nowhere else (`amount == "10"` is a type error), and what an operation on it yields is left to evaluation.
    case number
    case string
    case bytes
    case timestamp
    case duration
    case type
    case list(CELType)
    case map(CELType, CELType)
    /// A type parameter in a function declaration.
    case param(String)
    /// The type of a sub-expression that already failed to check; unifies with anything, reports nothing more.
    case error

    public var description: String {
        switch self {
        case .dyn: "dyn"
        case .null: "null"
        case .bool: "bool"
        case .int: "int"
        case .uint: "uint"
        case .double: "double"
        case .number: "number"
        case .string: "string"
        case .bytes: "bytes"
        case .timestamp: "timestamp"
        case .duration: "duration"
        case .type: "type"
        case .list(let e): "list(\(e))"
        case .map(let k, let v): "map(\(k), \(v))"
        case .param(let p): p
        case .error: "error"
        }
    }

    var isDynLike: Bool {
        switch self {
        case .dyn, .error: true
        default: false
        }
    }

    var isNumeric: Bool {
        switch self {
        case .int, .uint, .double, .number: true
        default: false
        }
    }

    /// The static type of a constant.
    static func of(_ v: Value) -> CELType {
        switch v {
        case .null: .null
        case .bool: .bool
        case .int: .int
        case .uint: .uint
        case .double: .double
        case .string: .string
        case .bytes: .bytes
        case .timestamp: .timestamp
        case .duration: .duration
        case .type: .type
        case .list(let xs): .list(CELType.join(xs.map(CELType.of)))
        case .map(let m):
            .map(CELType.join(m.entries.map { CELType.of($0.key) }), CELType.join(m.entries.map { CELType.of($0.value) }))
        case .error: .error
        }
    }

    /// The most specific type that covers all of `types` (`dyn` when they differ).
    static func join(_ types: [CELType]) -> CELType {
        guard var t = types.first else { return .dyn }
        for u in types.dropFirst() where u != t {
            if u == .error || t == .error {
                t = .error
            } else {
                return .dyn
            }
        }
        return t
    }
}

/// Unification of declared parameter types with argument types, binding type parameters.
struct TypeBindings {
    var bound: [String: CELType] = [:]

    mutating func assign(_ param: CELType, _ arg: CELType) -> Bool {
        // null goes wherever a value may be missing (CEL's nullable types): it binds nothing.
        if arg == .null, case .param = param { return true }
        switch (param, arg) {
        case (.dyn, _), (.error, _), (_, .error), (_, .dyn):
            if case .param(let p) = param, bound[p] == nil { bound[p] = .dyn }
            return true
        case (.param(let p), _):
            if let b = bound[p] {
                if b == .dyn { return true }
                if assignLoose(b, arg) { return true }
                return false
            }
            bound[p] = arg
            return true
        case (.list(let a), .list(let b)): return assign(a, b)
        case (.map(let k1, let v1), .map(let k2, let v2)): return assign(k1, k2) && assign(v1, v2)
        // A number may be any of the three numeric types at run time.
        case (.int, .number), (.uint, .number), (.double, .number): return true
        default: return param == arg
        }
    }

    private mutating func assignLoose(_ a: CELType, _ b: CELType) -> Bool {
        if a == b || a.isDynLike || b.isDynLike { return true }
        if (a == .number && b.isNumeric) || (b == .number && a.isNumeric) { return true }
        switch (a, b) {
        case (.list(let x), .list(let y)): return assignLoose(x, y)
        case (.map(let k1, let v1), .map(let k2, let v2)): return assignLoose(k1, k2) && assignLoose(v1, v2)
        default: return false
        }
    }

    func substitute(_ t: CELType) -> CELType {
        switch t {
        case .param(let p): return bound[p] ?? .dyn
        case .list(let e): return .list(substitute(e))
        case .map(let k, let v): return .map(substitute(k), substitute(v))
        default: return t
        }
    }
}

extension PlanType {
    /// The static type expressions see.
    public var celType: CELType {
        switch self {
        case .string, .timestamp: .string
        case .int: .int
        case .bool: .bool
        case .object: .map(.string, .dyn)
        case .list: .list(.dyn)
        case .number: .number
        case .any: .dyn
        }
    }
}
