import Foundation
import Synchronization

/// One declared way to call a function, for the checker. `receiver` is the type of `x` in `x.f(…)`.
struct Signature: Sendable {
    var receiver: CELType?
    var params: [CELType]
    var result: CELType

    init(_ params: [CELType], _ result: CELType, receiver: CELType? = nil) {
        self.params = params
        self.result = result
        self.receiver = receiver
    }
}

/// A function of the expression language: its signatures and its implementation over values.
/// For a receiver call `x.f(a)` the implementation sees `[x, a]`.
struct FunctionDecl: Sendable {
    enum Impl: Sendable {
        case unary(@Sendable (Value) -> Value)
        case binary(@Sendable (Value, Value) -> Value)
        case nary(@Sendable ([Value]) -> Value)
    }
    var name: String
    var signatures: [Signature]
    var impl: Impl
    /// Pure functions of constant arguments are folded at load time.
    var pure = true
    /// Whether a call's work grows with its arguments' lengths, and is charged to the event's step budget
    /// (``ValueLimits/maxSteps``); `size` and indexing take the same time whatever the length.
    var chargesWork = true
    /// One line for the reference documentation.
    var doc: String = ""
}

private func noOverload() -> Value { .error(.noSuchOverload) }

/// Propagates the first error among the arguments, as CEL calls do.
@inline(__always) private func firstError(_ a: Value, _ b: Value) -> Value? {
    if case .error = a { return a }
    if case .error = b { return b }
    return nil
}

enum Arithmetic {
    static func add(_ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case (.int(let x), .int(let y)):
            let (r, o) = x.addingReportingOverflow(y)
            return o ? .error(.overflow) : .int(r)
        case (.double(let x), .double(let y)): return .double(x + y)
        case (.uint(let x), .uint(let y)):
            let (r, o) = x.addingReportingOverflow(y)
            return o ? .error(.overflow) : .uint(r)
        case (.string(let x), .string(let y)):
            if x.utf8.count + y.utf8.count > ValueLimits.maxBuiltBytes { return .error(ValueLimits.builtTooLarge) }
            return .string(x + y)
        case (.bytes(let x), .bytes(let y)):
            if x.count + y.count > ValueLimits.maxBuiltBytes { return .error(ValueLimits.builtTooLarge) }
            return .bytes(x + y)
        case (.list(let x), .list(let y)):
            if x.count + y.count > ValueLimits.maxBuiltListMembers { return .error(ValueLimits.builtListTooLong) }
            return .list(x + y)
        case (.timestamp(let t), .duration(let d)), (.duration(let d), .timestamp(let t)):
            do { return .timestamp(try Timestamp(seconds: t.seconds &+ d.seconds, nanos: t.nanos &+ d.nanos)) } catch {
                return .error(EvalError("timestamp out of range"))
            }
        case (.duration(let x), .duration(let y)):
            do { return .duration(try TimeDuration(seconds: x.seconds &+ y.seconds, nanos: x.nanos &+ y.nanos)) } catch {
                return .error(EvalError("duration out of range"))
            }
        default: return firstError(a, b) ?? noOverload()
        }
    }

    static func subtract(_ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case (.int(let x), .int(let y)):
            let (r, o) = x.subtractingReportingOverflow(y)
            return o ? .error(.overflow) : .int(r)
        case (.double(let x), .double(let y)): return .double(x - y)
        case (.uint(let x), .uint(let y)):
            let (r, o) = x.subtractingReportingOverflow(y)
            return o ? .error(.overflow) : .uint(r)
        case (.timestamp(let x), .timestamp(let y)):
            do { return .duration(try TimeDuration(seconds: x.seconds - y.seconds, nanos: x.nanos - y.nanos)) } catch {
                return .error(EvalError("duration out of range"))
            }
        case (.timestamp(let t), .duration(let d)):
            do { return .timestamp(try Timestamp(seconds: t.seconds &- d.seconds, nanos: t.nanos &- d.nanos)) } catch {
                return .error(EvalError("timestamp out of range"))
            }
        case (.duration(let x), .duration(let y)):
            do { return .duration(try TimeDuration(seconds: x.seconds &- y.seconds, nanos: x.nanos &- y.nanos)) } catch {
                return .error(EvalError("duration out of range"))
            }
        default: return firstError(a, b) ?? noOverload()
        }
    }

    static func multiply(_ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case (.int(let x), .int(let y)):
            let (r, o) = x.multipliedReportingOverflow(by: y)
            return o ? .error(.overflow) : .int(r)
        case (.double(let x), .double(let y)): return .double(x * y)
        case (.uint(let x), .uint(let y)):
            let (r, o) = x.multipliedReportingOverflow(by: y)
            return o ? .error(.overflow) : .uint(r)
        default: return firstError(a, b) ?? noOverload()
        }
    }

    static func divide(_ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case (.int(let x), .int(let y)):
            if y == 0 { return .error(.divideByZero) }
            let (r, o) = x.dividedReportingOverflow(by: y)
            return o ? .error(.overflow) : .int(r)
        case (.double(let x), .double(let y)): return .double(x / y)
        case (.uint(let x), .uint(let y)):
            if y == 0 { return .error(.divideByZero) }
            return .uint(x / y)
        default: return firstError(a, b) ?? noOverload()
        }
    }

    static func modulo(_ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case (.int(let x), .int(let y)):
            if y == 0 { return .error(.modulusByZero) }
            let (r, o) = x.remainderReportingOverflow(dividingBy: y)
            return o ? .error(.overflow) : .int(r)
        case (.uint(let x), .uint(let y)):
            if y == 0 { return .error(.modulusByZero) }
            return .uint(x % y)
        default: return firstError(a, b) ?? noOverload()
        }
    }

    static func negate(_ a: Value) -> Value {
        switch a {
        case .int(let x):
            return x == .min ? .error(.overflow) : .int(-x)
        case .double(let x): return .double(-x)
        case .error: return a
        default: return noOverload()
        }
    }
}

enum Relations {
    @inline(__always) static func compare(_ a: Value, _ b: Value, _ accept: (Numeric.Order) -> Bool) -> Value {
        if let e = firstError(a, b) { return e }
        guard let o = Value.order(a, b) else { return noOverload() }
        return .bool(accept(o))
    }
    static func less(_ a: Value, _ b: Value) -> Value { compare(a, b) { $0 == .orderedAscending } }
    static func lessEq(_ a: Value, _ b: Value) -> Value {
        compare(a, b) { $0 == .orderedAscending || $0 == .orderedSame }
    }
    static func greater(_ a: Value, _ b: Value) -> Value { compare(a, b) { $0 == .orderedDescending } }
    static func greaterEq(_ a: Value, _ b: Value) -> Value {
        compare(a, b) { $0 == .orderedDescending || $0 == .orderedSame }
    }
    static func equal(_ a: Value, _ b: Value) -> Value { a.celEquals(b) }
    static func notEqual(_ a: Value, _ b: Value) -> Value {
        if let e = firstError(a, b) { return e }
        return .bool(!Value.equal(a, b))
    }

    static func contains(element: Value, in container: Value) -> Value {
        switch container {
        case .list(let xs):
            if case .error = element { return element }
            for x in xs where Value.equal(x, element) { return .bool(true) }
            return .bool(false)
        case .map(let m):
            if case .error = element { return element }
            return .bool(m.contains(element))
        case .error: return container
        default: return firstError(element, container) ?? noOverload()
        }
    }

    static func index(_ container: Value, _ key: Value) -> Value {
        switch container {
        case .list(let xs):
            let i: Int64
            switch key {
            case .int(let v): i = v
            case .uint(let v): i = v > UInt64(Int64.max) ? -1 : Int64(v)
            case .double(let d):
                guard d == d.rounded(), d.isFinite, abs(d) < 9e18 else {
                    return .error(EvalError("unsupported index value"))
                }
                i = Int64(d)
            case .error: return key
            default: return noOverload()
            }
            guard i >= 0 && i < Int64(xs.count) else {
                return .error(EvalError("index out of range: \(i)"))
            }
            return xs[Int(i)]
        case .map(let m):
            if case .error = key { return key }
            if let v = m[key] { return v }
            if case .string(let s) = key { return .error(.noSuchKey(s)) }
            return .error(.noSuchKeyPlain)
        case .error: return container
        default: return firstError(container, key) ?? noOverload()
        }
    }
}

/// A cache of time zones shared by all evaluations.
enum ZoneCache {
    static let cache = Mutex<[String: Zone]>([:])
    static func zone(_ name: String) -> Zone? {
        if let z = cache.withLock({ $0[name] }) { return z }
        guard let z = Zone(name) ?? Zone("+" + name) else { return nil }
        cache.withLock { c in
            if c.count > 1024 { c.removeAll() }
            c[name] = z
        }
        return z
    }
}

enum StringFunctions {
    static func size(_ v: Value) -> Value {
        switch v {
        case .string(let s): .int(Int64(s.unicodeScalars.count))
        case .bytes(let b): .int(Int64(b.count))
        case .list(let l): .int(Int64(l.count))
        case .map(let m): .int(Int64(m.count))
        case .error: v
        default: noOverload()
        }
    }

    static func stringPair(_ a: Value, _ b: Value, _ f: (String, String) -> Value) -> Value {
        if case .string(let x) = a, case .string(let y) = b { return f(x, y) }
        return firstError(a, b) ?? noOverload()
    }

    /// Substring search on Unicode scalars (CEL compares code points, not grapheme clusters).
    static func contains(_ s: String, _ t: String) -> Bool {
        if t.isEmpty { return true }
        let a = Array(s.utf8)
        let b = Array(t.utf8)
        guard b.count <= a.count else { return false }
        var i = 0
        while i + b.count <= a.count {
            if a[i] == b[0] && a[i..<(i + b.count)].elementsEqual(b) { return true }
            i += 1
        }
        return false
    }

    static func lowerAscii(_ s: String) -> String {
        String(
            String.UnicodeScalarView(
                s.unicodeScalars.map { c in
                    c >= "A" && c <= "Z" ? Unicode.Scalar(c.value + 32)! : c
                }))
    }

    static func upperAscii(_ s: String) -> String {
        String(
            String.UnicodeScalarView(
                s.unicodeScalars.map { c in
                    c >= "a" && c <= "z" ? Unicode.Scalar(c.value - 32)! : c
                }))
    }

    static func trim(_ s: String) -> String {
        let scalars = Array(s.unicodeScalars)
        var lo = 0
        var hi = scalars.count
        while lo < hi && scalars[lo].properties.isWhitespace { lo += 1 }
        while hi > lo && scalars[hi - 1].properties.isWhitespace { hi -= 1 }
        return String(String.UnicodeScalarView(scalars[lo..<hi]))
    }
}

enum Conversions {
    static func toInt(_ v: Value) -> Value {
        switch v {
        case .int: return v
        case .uint(let u): return u > UInt64(Int64.max) ? .error(EvalError("range error converting \(u) to int")) : .int(Int64(u))
        case .double(let d):
            guard d.isFinite, d > -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0 else {
                return .error(EvalError("range error converting \(d) to int"))
            }
            return .int(Int64(d.rounded(.towardZero)))
        case .string(let s):
            guard let i = Int64(s) else { return .error(EvalError("cannot convert '\(s)' to int")) }
            return .int(i)
        case .timestamp(let t): return .int(t.seconds)
        case .bool(let b): return .int(b ? 1 : 0)
        case .error: return v
        default: return noOverload()
        }
    }

    static func toUInt(_ v: Value) -> Value {
        switch v {
        case .uint: return v
        case .int(let i): return i < 0 ? .error(EvalError("range error converting \(i) to uint")) : .uint(UInt64(i))
        case .double(let d):
            guard d.isFinite, d > -1, d < 18_446_744_073_709_551_616.0 else {
                return .error(EvalError("range error converting \(d) to uint"))
            }
            return .uint(UInt64(d.rounded(.towardZero)))
        case .string(let s):
            guard let u = UInt64(s) else { return .error(EvalError("cannot convert '\(s)' to uint")) }
            return .uint(u)
        case .error: return v
        default: return noOverload()
        }
    }

    static func toDouble(_ v: Value) -> Value {
        switch v {
        case .double: return v
        case .int(let i): return .double(Double(i))
        case .uint(let u): return .double(Double(u))
        case .string(let s):
            let t = s.trimmingCharacters(in: .whitespaces)
            if let d = Double(t) { return .double(d) }
            switch t.lowercased() {
            case "nan": return .double(.nan)
            case "inf", "+inf", "infinity": return .double(.infinity)
            case "-inf", "-infinity": return .double(-.infinity)
            default: return .error(EvalError("cannot convert '\(s)' to double"))
            }
        case .error: return v
        default: return noOverload()
        }
    }

    static func formatDouble(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
        if d == d.rounded() && abs(d) < 1e15 { return String(Int64(d)) }
        return "\(d)"
    }

    static func toString(_ v: Value) -> Value {
        switch v {
        case .string: return v
        case .int(let i): return .string(String(i))
        case .uint(let u): return .string(String(u))
        case .double(let d): return .string(formatDouble(d))
        case .bool(let b): return .string(b ? "true" : "false")
        case .bytes(let b):
            guard let s = String(validating: b, as: UTF8.self) else { return .error(EvalError("invalid UTF-8 in bytes")) }
            return .string(s)
        case .timestamp(let t): return .string(t.description)
        case .duration(let d): return .string(d.description)
        case .null: return .string("null")
        case .error: return v
        default: return noOverload()
        }
    }

    static func toBool(_ v: Value) -> Value {
        switch v {
        case .bool: return v
        case .string(let s):
            switch s {
            case "1", "t", "true", "TRUE", "True": return .bool(true)
            case "0", "f", "false", "FALSE", "False": return .bool(false)
            default: return .error(EvalError("cannot convert '\(s)' to bool"))
            }
        case .error: return v
        default: return noOverload()
        }
    }

    static func toBytes(_ v: Value) -> Value {
        switch v {
        case .bytes: return v
        case .string(let s): return .bytes(Array(s.utf8))
        case .error: return v
        default: return noOverload()
        }
    }

    static func toTimestamp(_ v: Value) -> Value {
        switch v {
        case .timestamp: return v
        case .string(let s):
            guard let t = Timestamp.parse(s) else { return .error(EvalError("timestamp '\(s)' is invalid or out of range")) }
            return .timestamp(t)
        case .int(let i):
            do { return .timestamp(try Timestamp(seconds: i)) } catch { return .error(EvalError("timestamp out of range")) }
        case .error: return v
        default: return noOverload()
        }
    }

    static func toDuration(_ v: Value) -> Value {
        switch v {
        case .duration: return v
        case .string(let s):
            guard let d = TimeDuration.parse(s) else { return .error(EvalError("duration '\(s)' is invalid or out of range")) }
            return .duration(d)
        case .int(let i):
            do { return .duration(try TimeDuration(seconds: i)) } catch { return .error(EvalError("duration out of range")) }
        case .error: return v
        default: return noOverload()
        }
    }
}

enum TimeFunctions {
    enum Field { case fullYear, month, dayOfYear, dayOfMonth, date, dayOfWeek, hours, minutes, seconds, milliseconds }

    static func get(_ field: Field, _ args: [Value]) -> Value {
        for a in args { if case .error = a { return a } }
        switch args[0] {
        case .timestamp(let t):
            var zone = Zone.utc
            if args.count == 2 {
                guard case .string(let name) = args[1] else { return noOverload() }
                guard let z = ZoneCache.zone(name) else { return .error(EvalError("unknown time zone '\(name)'")) }
                zone = z
            }
            let local = zone.local(fromUTC: t.seconds)
            let (days, secs) = Civil.floorDivMod(local, 86_400)
            let (y, m, d) = Civil.civil(fromDays: days)
            switch field {
            case .fullYear: return .int(Int64(y))
            case .month: return .int(Int64(m - 1))
            case .dayOfYear: return .int(days - Civil.days(fromCivil: y, 1, 1))
            case .dayOfMonth: return .int(Int64(d - 1))
            case .date: return .int(Int64(d))
            case .dayOfWeek: return .int(Int64(Civil.weekday(fromDays: days)))
            case .hours: return .int(secs / 3600)
            case .minutes: return .int(secs % 3600 / 60)
            case .seconds: return .int(secs % 60)
            case .milliseconds: return .int(Int64(t.nanos / 1_000_000))
            }
        case .duration(let d):
            guard args.count == 1 else { return noOverload() }
            switch field {
            case .hours: return .int(d.seconds / 3600)
            case .minutes: return .int(d.seconds / 60)
            case .seconds: return .int(d.seconds)
            case .milliseconds: return .int(Int64(d.nanos / 1_000_000))
            default: return noOverload()
            }
        default: return noOverload()
        }
    }
}

extension FunctionDecl {
    /// CEL's standard functions in Beckon's subset. Operators are listed under their internal names.
    static let standard: [String: FunctionDecl] = {
        var out: [String: FunctionDecl] = [:]
        func add(_ d: FunctionDecl) { out[d.name] = d }
        let numeric: [CELType] = [.int, .uint, .double]
        let comparable: [CELType] = [.int, .uint, .double, .string, .bytes, .bool, .timestamp, .duration]

        func relation(_ name: String, _ f: @escaping @Sendable (Value, Value) -> Value) -> FunctionDecl {
            var sigs: [Signature] = []
            for a in comparable {
                if a.isNumeric {
                    for b in numeric { sigs.append(Signature([a, b], .bool)) }
                } else {
                    sigs.append(Signature([a, a], .bool))
                }
            }
            return FunctionDecl(name: name, signatures: sigs, impl: .binary(f))
        }
        add(relation("_<_", Relations.less))
        add(relation("_<=_", Relations.lessEq))
        add(relation("_>_", Relations.greater))
        add(relation("_>=_", Relations.greaterEq))
        // Equality is checked separately (any two types whose values could be equal).
        add(
            FunctionDecl(
                name: "_==_", signatures: [Signature([.param("A"), .param("A")], .bool)], impl: .binary(Relations.equal)))
        add(
            FunctionDecl(
                name: "_!=_", signatures: [Signature([.param("A"), .param("A")], .bool)], impl: .binary(Relations.notEqual)))

        add(
            FunctionDecl(
                name: "_+_",
                signatures: [
                    Signature([.int, .int], .int), Signature([.uint, .uint], .uint), Signature([.double, .double], .double),
                    Signature([.string, .string], .string), Signature([.bytes, .bytes], .bytes),
                    Signature([.list(.param("A")), .list(.param("A"))], .list(.param("A"))),
                    Signature([.timestamp, .duration], .timestamp), Signature([.duration, .timestamp], .timestamp),
                    Signature([.duration, .duration], .duration),
                ], impl: .binary(Arithmetic.add)))
        add(
            FunctionDecl(
                name: "_-_",
                signatures: [
                    Signature([.int, .int], .int), Signature([.uint, .uint], .uint), Signature([.double, .double], .double),
                    Signature([.timestamp, .timestamp], .duration), Signature([.timestamp, .duration], .timestamp),
                    Signature([.duration, .duration], .duration),
                ], impl: .binary(Arithmetic.subtract)))
        let arith: [Signature] = [
            Signature([.int, .int], .int), Signature([.uint, .uint], .uint), Signature([.double, .double], .double),
        ]
        add(FunctionDecl(name: "_*_", signatures: arith, impl: .binary(Arithmetic.multiply)))
        add(FunctionDecl(name: "_/_", signatures: arith, impl: .binary(Arithmetic.divide)))
        add(
            FunctionDecl(
                name: "_%_", signatures: [Signature([.int, .int], .int), Signature([.uint, .uint], .uint)],
                impl: .binary(Arithmetic.modulo)))
        add(
            FunctionDecl(
                name: "-_", signatures: [Signature([.int], .int), Signature([.double], .double)],
                impl: .unary(Arithmetic.negate)))
        add(
            FunctionDecl(
                name: "@in",
                signatures: [
                    Signature([.param("A"), .list(.param("A"))], .bool),
                    Signature([.param("K"), .map(.param("K"), .param("V"))], .bool),
                ], impl: .binary { Relations.contains(element: $0, in: $1) }))
        add(
            FunctionDecl(
                name: "_[_]",
                signatures: [
                    Signature([.list(.param("A")), .int], .param("A")), Signature([.list(.param("A")), .uint], .param("A")),
                    Signature([.list(.param("A")), .double], .param("A")),
                    Signature([.map(.param("K"), .param("V")), .param("K")], .param("V")),
                ], impl: .binary(Relations.index), chargesWork: false))

        let sizeSigs: [CELType] = [.string, .bytes, .list(.param("A")), .map(.param("K"), .param("V"))]
        add(
            FunctionDecl(
                name: "size",
                signatures: sizeSigs.map { Signature([$0], .int) } + sizeSigs.map { Signature([], .int, receiver: $0) },
                impl: .unary(StringFunctions.size), chargesWork: false,
                doc: "number of characters, bytes, list items or map entries"))
        add(
            FunctionDecl(
                name: "contains", signatures: [Signature([.string], .bool, receiver: .string)],
                impl: .binary { a, b in StringFunctions.stringPair(a, b) { .bool(StringFunctions.contains($0, $1)) } },
                doc: "`s.contains(t)`: whether `t` occurs in `s`"))
        add(
            FunctionDecl(
                name: "startsWith", signatures: [Signature([.string], .bool, receiver: .string)],
                impl: .binary { a, b in StringFunctions.stringPair(a, b) { .bool($0.utf8.starts(with: $1.utf8)) } },
                doc: "`s.startsWith(prefix)`"))
        add(
            FunctionDecl(
                name: "endsWith", signatures: [Signature([.string], .bool, receiver: .string)],
                impl: .binary { a, b in
                    StringFunctions.stringPair(a, b) { .bool($0.utf8.reversed().starts(with: $1.utf8.reversed())) }
                },
                doc: "`s.endsWith(suffix)`"))
        add(
            FunctionDecl(
                name: "matches",
                signatures: [Signature([.string], .bool, receiver: .string), Signature([.string, .string], .bool)],
                impl: .binary { a, b in
                    StringFunctions.stringPair(a, b) { s, pattern in
                        switch RegexBox.compile(pattern) {
                        case .success(let r): .bool(r.matches(s))
                        case .failure(let e): .error(e)
                        }
                    }
                }, doc: "`s.matches(regex)`: whether the RE2 regular expression matches anywhere in `s`, in linear time"))
        add(
            FunctionDecl(
                name: "lowerAscii", signatures: [Signature([], .string, receiver: .string)],
                impl: .unary { v in
                    if case .string(let s) = v { return .string(StringFunctions.lowerAscii(s)) }
                    return v.isError ? v : noOverload()
                }, doc: "`s.lowerAscii()`: ASCII letters in lower case"))
        add(
            FunctionDecl(
                name: "upperAscii", signatures: [Signature([], .string, receiver: .string)],
                impl: .unary { v in
                    if case .string(let s) = v { return .string(StringFunctions.upperAscii(s)) }
                    return v.isError ? v : noOverload()
                }, doc: "`s.upperAscii()`: ASCII letters in upper case"))
        add(
            FunctionDecl(
                name: "trim", signatures: [Signature([], .string, receiver: .string)],
                impl: .unary { v in
                    if case .string(let s) = v { return .string(StringFunctions.trim(s)) }
                    return v.isError ? v : noOverload()
                }, doc: "`s.trim()`: without leading and trailing white space"))
        add(
            FunctionDecl(
                name: "replace", signatures: [Signature([.string, .string], .string, receiver: .string)],
                impl: .nary { a in
                    guard case .string(let s) = a[0], case .string(let x) = a[1], case .string(let y) = a[2] else {
                        return a.first(where: \.isError) ?? noOverload()
                    }
                    if x.isEmpty { return .string(s) }
                    // The result's size is known before it is built: refuse one past the limit.
                    if y.utf8.count > x.utf8.count {
                        let n = s.components(separatedBy: x).count - 1
                        if s.utf8.count + n * (y.utf8.count - x.utf8.count) > ValueLimits.maxBuiltBytes {
                            return .error(ValueLimits.builtTooLarge)
                        }
                    }
                    return .string(s.replacingOccurrences(of: x, with: y))
                }, doc: "`s.replace(old, new)`: every occurrence replaced"))
        add(
            FunctionDecl(
                name: "split", signatures: [Signature([.string], .list(.string), receiver: .string)],
                impl: .binary { a, b in
                    StringFunctions.stringPair(a, b) { s, sep in
                        if sep.isEmpty { return .list(s.unicodeScalars.map { .string(String($0)) }) }
                        return .list(s.components(separatedBy: sep).map { .string($0) })
                    }
                }, doc: "`s.split(separator)`: the parts between separators"))
        add(
            FunctionDecl(
                name: "join",
                signatures: [
                    Signature([], .string, receiver: .list(.string)), Signature([.string], .string, receiver: .list(.string)),
                ],
                impl: .nary { a in
                    guard case .list(let xs) = a[0] else { return a[0].isError ? a[0] : noOverload() }
                    var sep = ""
                    if a.count == 2 {
                        guard case .string(let s) = a[1] else { return noOverload() }
                        sep = s
                    }
                    var parts: [String] = []
                    var size = 0
                    for x in xs {
                        guard case .string(let s) = x else { return noOverload() }
                        parts.append(s)
                        size += s.utf8.count + sep.utf8.count
                        if size > ValueLimits.maxBuiltBytes { return .error(ValueLimits.builtTooLarge) }
                    }
                    return .string(parts.joined(separator: sep))
                }, doc: "`list.join(separator)`: strings joined"))
        add(
            FunctionDecl(
                name: "substring",
                signatures: [
                    Signature([.int], .string, receiver: .string), Signature([.int, .int], .string, receiver: .string),
                ],
                impl: .nary { a in
                    guard case .string(let s) = a[0], case .int(let from) = a[1] else {
                        return a.first(where: \.isError) ?? noOverload()
                    }
                    let scalars = Array(s.unicodeScalars)
                    var to = Int64(scalars.count)
                    if a.count == 3 {
                        guard case .int(let t) = a[2] else { return noOverload() }
                        to = t
                    }
                    guard from >= 0, to >= from, to <= scalars.count else {
                        return .error(
                            EvalError("substring range [\(from), \(to)) is out of bounds for a string of \(scalars.count)"))
                    }
                    return .string(String(String.UnicodeScalarView(scalars[Int(from)..<Int(to)])))
                }, doc: "`s.substring(start[, end])`, counted in characters"))
        add(
            FunctionDecl(
                name: "indexOf", signatures: [Signature([.string], .int, receiver: .string)],
                impl: .binary { a, b in
                    StringFunctions.stringPair(a, b) { s, t in
                        if t.isEmpty { return .int(0) }
                        guard let r = s.range(of: t) else { return .int(-1) }
                        return .int(Int64(s.unicodeScalars.distance(from: s.startIndex, to: r.lowerBound)))
                    }
                }, doc: "`s.indexOf(t)`: position of the first `t`, or -1"))

        add(
            FunctionDecl(
                name: "int", signatures: [.int, .uint, .double, .string, .timestamp, .bool].map { Signature([$0], .int) },
                impl: .unary(Conversions.toInt), doc: "conversion to int (doubles truncate; errors out of range)"))
        add(
            FunctionDecl(
                name: "uint", signatures: [.int, .uint, .double, .string].map { Signature([$0], .uint) },
                impl: .unary(Conversions.toUInt), doc: "conversion to uint"))
        add(
            FunctionDecl(
                name: "double", signatures: [.int, .uint, .double, .string].map { Signature([$0], .double) },
                impl: .unary(Conversions.toDouble), doc: "conversion to double"))
        add(
            FunctionDecl(
                name: "string",
                signatures: [.int, .uint, .double, .string, .bool, .bytes, .timestamp, .duration, .null].map {
                    Signature([$0], .string)
                },
                impl: .unary(Conversions.toString), doc: "conversion to string"))
        add(
            FunctionDecl(
                name: "bool", signatures: [Signature([.bool], .bool), Signature([.string], .bool)],
                impl: .unary(Conversions.toBool), doc: "conversion to bool (`\"true\"`, `\"false\"`, `\"1\"`, `\"0\"`…)"))
        add(
            FunctionDecl(
                name: "bytes", signatures: [Signature([.bytes], .bytes), Signature([.string], .bytes)],
                impl: .unary(Conversions.toBytes), doc: "conversion to bytes (UTF-8)"))
        add(
            FunctionDecl(
                name: "dyn", signatures: [Signature([.param("A")], .dyn)], impl: .unary { $0 },
                doc: "the same value, with its type known only when evaluated"))
        add(
            FunctionDecl(
                name: "type", signatures: [Signature([.param("A")], .type)],
                impl: .unary { v in v.isError ? v : .type(v.typeName) }, doc: "the type of a value"))
        add(
            FunctionDecl(
                name: "timestamp",
                signatures: [
                    Signature([.string], .timestamp), Signature([.int], .timestamp), Signature([.timestamp], .timestamp),
                ],
                impl: .unary(Conversions.toTimestamp), doc: "an RFC 3339 string or seconds since 1970 as a timestamp"))
        add(
            FunctionDecl(
                name: "duration",
                signatures: [Signature([.string], .duration), Signature([.duration], .duration), Signature([.int], .duration)],
                impl: .unary(Conversions.toDuration), doc: "`duration(\"1h30m\")`: units h, m, s, ms, us, ns"))

        let tsFields: [(String, TimeFunctions.Field, Bool, String)] = [
            ("getFullYear", .fullYear, false, "the year"), ("getMonth", .month, false, "the month, 0 = January"),
            ("getDayOfYear", .dayOfYear, false, "the day of the year, 0-based"),
            ("getDayOfMonth", .dayOfMonth, false, "the day of the month, 0-based"),
            ("getDate", .date, false, "the day of the month, 1-based"),
            ("getDayOfWeek", .dayOfWeek, false, "the weekday, 0 = Sunday"),
            ("getHours", .hours, true, "the hour, 0–23 (of a duration: whole hours)"),
            ("getMinutes", .minutes, true, "the minute (of a duration: whole minutes)"),
            ("getSeconds", .seconds, true, "the second (of a duration: whole seconds)"),
            ("getMilliseconds", .milliseconds, true, "the millisecond of the second"),
        ]
        for (name, field, onDuration, what) in tsFields {
            var sigs = [Signature([], .int, receiver: .timestamp), Signature([.string], .int, receiver: .timestamp)]
            if onDuration { sigs.append(Signature([], .int, receiver: .duration)) }
            add(
                FunctionDecl(
                    name: name, signatures: sigs, impl: .nary { TimeFunctions.get(field, $0) },
                    doc: "`t.\(name)()`, `t.\(name)('Europe/Berlin')`: \(what), in UTC or the given zone"))
        }
        return out
    }()
}
