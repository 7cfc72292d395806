import BeckonCore
import Foundation

/// `beckon conformance cel FILE...`: runs cel-spec simple-test files (protobuf text format) through Beckon's
/// expression language. Tests that use features outside Beckon's subset (protobuf messages, enums, optional
/// types, custom type environments…) are counted as skipped, with the reason; every other test must pass.
public enum ConformanceRunner {
    public struct Result: Sendable {
        public var passed = 0
        public var failed = 0
        public var skipped = 0
        public var skipReasons: [String: Int] = [:]
        public var failures: [String] = []
    }

    public static func run(files: [String], verbose: Bool, console: any Console) -> Int32 {
        var total = Result()
        for f in files {
            guard let data = FileManager.default.contents(atPath: f), let text = String(data: data, encoding: .utf8) else {
                console.err("error: cannot read \(f)\n")
                return 1
            }
            let r: Result
            do { r = try run(text: text) } catch {
                console.err("\(f): \(error)\n")
                return 1
            }
            console.out("\((f as NSString).lastPathComponent): passed=\(r.passed) failed=\(r.failed) skipped=\(r.skipped)\n")
            if verbose {
                for fail in r.failures { console.out("  FAIL \(fail)\n") }
                for (reason, n) in r.skipReasons.sorted(by: { $0.value > $1.value }) {
                    console.out("  skipped \(n): \(reason)\n")
                }
            }
            total.passed += r.passed
            total.failed += r.failed
            total.skipped += r.skipped
            for (k, v) in r.skipReasons { total.skipReasons[k, default: 0] += v }
            total.failures += r.failures
        }
        console.out("passed=\(total.passed) failed=\(total.failed) skipped=\(total.skipped)\n")
        return total.failed == 0 ? 0 : 1
    }

    package static func run(text: String) throws -> Result {
        let file = try TextProto.parse(text)
        var r = Result()
        for case .message(let section) in file.all("section") {
            let sectionName = section.string("name") ?? "?"
            for case .message(let test) in section.all("test") {
                let name = "\(sectionName)/\(test.string("name") ?? "?")"
                switch runTest(test) {
                case .passed: r.passed += 1
                case .skipped(let why):
                    r.skipped += 1
                    r.skipReasons[why, default: 0] += 1
                case .failed(let why):
                    r.failed += 1
                    r.failures.append("\(name): \(why)")
                }
            }
        }
        return r
    }

    enum Outcome { case passed, skipped(String), failed(String) }

    struct OutOfSubset: Error { var reason: String }

    static func runTest(_ t: TextProto) -> Outcome {
        guard let expr = t.string("expr") else { return .skipped("no expression") }
        if let c = t.string("container"), !c.isEmpty { return .skipped("container (protobuf message types)") }
        if t.bool("disable_macros") { return .skipped("macros disabled") }
        if t.bool("check_only") { return .skipped("type-check only") }
        if let reason = exprOutOfSubset(expr) { return .skipped(reason) }

        // Expected result.
        enum Expect { case value(Value), error }
        let expect: Expect
        do {
            if let v = t.message("value") {
                expect = .value(try value(v))
            } else if let tr = t.message("typed_result"), let v = tr.message("result") {
                expect = .value(try value(v))
            } else if t.message("eval_error") != nil {
                expect = .error
            } else if t["any_eval_errors"] != nil || t["unknown"] != nil || t["any_unknowns"] != nil {
                return .skipped("unknowns and error sets")
            } else {
                expect = .value(.bool(true))  // cel-spec: an omitted result means `true`
            }
        } catch let e as OutOfSubset {
            return .skipped(e.reason)
        } catch {
            return .failed("bad test: \(error)")
        }

        // Variables.
        var declared: [String: CELType] = [:]
        var bindings: [String: Value] = [:]
        do {
            for case .message(let decl) in t.all("type_env") {
                guard let name = decl.string("name") else { continue }
                if decl["function"] != nil { return .skipped("custom function declarations") }
                if let ident = decl.message("ident"), let ty = ident.message("type") {
                    declared[name] = try type(ty)
                } else {
                    declared[name] = .dyn
                }
            }
            for case .message(let b) in t.all("bindings") {
                guard let key = b.string("key"), let ev = b.message("value") else { continue }
                guard let v = ev.message("value") else { return .skipped("binding is not a plain value") }
                bindings[key] = try value(v)
                if declared[key] == nil { declared[key] = .dyn }
            }
        } catch let e as OutOfSubset {
            return .skipped(e.reason)
        } catch {
            return .failed("bad test: \(error)")
        }

        let env = ConformanceEnvironment(declared: declared)
        let compiler = ExprCompiler(environment: env, tracing: false, checkTypes: !t.bool("disable_check"))
        guard let compiled = compiler.compile(expr) else {
            let problems = compiler.problems.map(\.message).joined(separator: "; ")
            // A parse error of a test that expects an evaluation error still counts as an error.
            return .failed("did not compile: \(problems)")
        }
        let scope = EvalScope()
        scope.bindings = bindings
        let got = compiled.evaluate(scope)
        switch expect {
        case .error:
            if case .error = got { return .passed }
            return .failed("expected an error, got \(JSONWriter.encode(got)) (\(got.kindName))")
        case .value(let want):
            if case .error(let e) = got { return .failed("expected \(describe(want)), got error: \(e.message)") }
            return strictEqual(got, want) ? .passed : .failed("expected \(describe(want)), got \(describe(got))")
        }
    }

    static func describe(_ v: Value) -> String { "\(JSONWriter.encode(v)) (\(v.kindName))" }

    /// Syntax and names outside Beckon's subset.
    static func exprOutOfSubset(_ e: String) -> String? {
        if e.contains("?.") || e.contains(".?") || e.contains("[?") || e.contains("optional.") { return "optional types" }
        let outside = [
            "TestAllTypes", "NestedTestAllTypes", "GlobalEnum", "proto2", "proto3", "google.protobuf.Any",
            "google.protobuf.Value", "google.protobuf.Struct", "google.protobuf.ListValue", "Wrapper", "Value{",
            "google.protobuf.NullValue", "google.protobuf.Int", "google.protobuf.UInt", "google.protobuf.Bool",
            "google.protobuf.String", "google.protobuf.Bytes", "google.protobuf.Double", "google.protobuf.Float",
            "google.protobuf.FieldMask", "google.protobuf.Empty", "cel.", "math.", "strings.", "enum",
        ]
        for o in outside where e.contains(o) { return "protobuf messages, enums and extensions" }
        // Message literals: an identifier followed by '{'.
        let scalars = Array(e.unicodeScalars)
        var inString: Unicode.Scalar?
        var escaped = false
        func isWordScalar(_ c: Unicode.Scalar) -> Bool { c.properties.isAlphabetic || c == "_" || ("0"..."9").contains(c) }
        for (i, c) in scalars.enumerated() {
            if let q = inString {
                if escaped {
                    escaped = false
                } else if c == "\\" {
                    escaped = true
                } else if c == q {
                    inString = nil
                }
                continue
            }
            if c == "\"" || c == "'" { inString = c; continue }
            if c == "{" {
                var j = i - 1
                while j >= 0 && scalars[j] == " " { j -= 1 }
                if j >= 0, isWordScalar(scalars[j]) {
                    // `in {`, `? {` and `: {` are maps, not messages.
                    var k = j
                    while k >= 0 && (isWordScalar(scalars[k]) || scalars[k] == ".") { k -= 1 }
                    let word = String(String.UnicodeScalarView(scalars[(k + 1)...j]))
                    if word != "in" && !word.allSatisfy(\.isNumber) { return "protobuf message literals" }
                }
            }
        }
        return nil
    }

    static func type(_ t: TextProto) throws -> CELType {
        if case .scalar(let p)? = t["primitive"] {
            switch p {
            case "BOOL": return .bool
            case "INT64": return .int
            case "UINT64": return .uint
            case "DOUBLE": return .double
            case "STRING": return .string
            case "BYTES": return .bytes
            default: throw OutOfSubset(reason: "primitive type \(p)")
            }
        }
        if let l = t.message("list_type") { return .list(try l.message("elem_type").map(type) ?? .dyn) }
        if let m = t.message("map_type") {
            return .map(try m.message("key_type").map(type) ?? .dyn, try m.message("value_type").map(type) ?? .dyn)
        }
        if case .scalar(let w)? = t["well_known"] {
            switch w {
            case "TIMESTAMP": return .timestamp
            case "DURATION": return .duration
            default: throw OutOfSubset(reason: "well-known type \(w)")
            }
        }
        if let name = t.string("message_type") {
            switch name {
            case "google.protobuf.Timestamp": return .timestamp
            case "google.protobuf.Duration": return .duration
            default: throw OutOfSubset(reason: "protobuf messages, enums and extensions")
            }
        }
        if t["dyn"] != nil { return .dyn }
        if t["null"] != nil { return .null }
        if t["type"] != nil { return .type }
        if t["abstract_type"] != nil { throw OutOfSubset(reason: "abstract types") }
        if t["wrapper"] != nil { throw OutOfSubset(reason: "protobuf messages, enums and extensions") }
        throw OutOfSubset(reason: "type \(t.fields.first?.name ?? "?")")
    }

    static func value(_ v: TextProto) throws -> Value {
        guard let (name, raw) = v.fields.first else { throw OutOfSubset(reason: "empty value") }
        func scalar() -> String {
            switch raw {
            case .scalar(let s): return s
            case .string(let b): return String(decoding: b, as: UTF8.self)
            case .message: return ""
            }
        }
        switch name {
        case "null_value": return .null
        case "bool_value": return .bool(scalar() == "true")
        case "int64_value":
            guard let i = Int64(scalar()) else { throw OutOfSubset(reason: "bad int") }
            return .int(i)
        case "uint64_value":
            guard let u = UInt64(scalar()) else { throw OutOfSubset(reason: "bad uint") }
            return .uint(u)
        case "double_value":
            let s = scalar().lowercased()
            switch s {
            case "inf", "infinity": return .double(.infinity)
            case "-inf", "-infinity": return .double(-.infinity)
            case "nan": return .double(.nan)
            default:
                guard let d = Double(s) else { throw OutOfSubset(reason: "bad double") }
                return .double(d)
            }
        case "string_value":
            if case .string(let b) = raw { return .string(String(decoding: b, as: UTF8.self)) }
            return .string(scalar())
        case "bytes_value":
            if case .string(let b) = raw { return .bytes(b) }
            return .bytes(Array(scalar().utf8))
        case "type_value": return .type(scalar())
        case "list_value":
            guard case .message(let l) = raw else { return .list([]) }
            return .list(
                try l.all("values").map { x in
                    guard case .message(let m) = x else { throw OutOfSubset(reason: "bad list") }
                    return try value(m)
                })
        case "map_value":
            guard case .message(let m) = raw else { return .map(ValueMap()) }
            var pairs: [(Value, Value)] = []
            for case .message(let e) in m.all("entries") {
                guard let k = e.message("key"), let val = e.message("value") else { continue }
                pairs.append((try value(k), try value(val)))
            }
            return .map(ValueMap(pairs))
        case "object_value":
            guard case .message(let any) = raw, let (typeURL, body) = any.fields.first, case .message(let fields) = body else {
                throw OutOfSubset(reason: "protobuf messages, enums and extensions")
            }
            let seconds = Int64(fields.string("seconds") ?? "0") ?? 0
            let nanos = Int32(fields.string("nanos") ?? "0") ?? 0
            if typeURL.hasSuffix("google.protobuf.Duration]") {
                return .duration(try TimeDuration(seconds: seconds, nanos: nanos))
            }
            if typeURL.hasSuffix("google.protobuf.Timestamp]") {
                return .timestamp(try Timestamp(seconds: seconds, nanos: nanos))
            }
            throw OutOfSubset(reason: "protobuf messages, enums and extensions")
        case "enum_value": throw OutOfSubset(reason: "protobuf messages, enums and extensions")
        default: throw OutOfSubset(reason: "value kind \(name)")
        }
    }

    /// Equality that also requires the same kinds (1 and 1.0 differ), with NaN equal to NaN.
    static func strictEqual(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.double(let x), .double(let y)): return x == y || (x.isNaN && y.isNaN)
        case (.list(let x), .list(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { strictEqual($0, $1) }
        case (.map(let x), .map(let y)):
            guard x.count == y.count else { return false }
            for (k, v) in x.entries {
                guard let w = y.entries.first(where: { strictEqual($0.key, k) })?.value, strictEqual(v, w) else { return false }
            }
            return true
        default:
            return a.kindName == b.kindName && Value.equal(a, b)
        }
    }
}

/// Variables declared by a test's type environment and bindings; no Beckon functions.
final class ConformanceEnvironment: ExpressionEnvironment {
    let declared: [String: CELType]
    init(declared: [String: CELType]) { self.declared = declared }
    func variable(_ name: String) -> VariableBinding? { declared[name].map { VariableBinding.binding(name, type: $0) } }
    func function(_ name: String) -> CustomFunction? { nil }
    var variableNames: [String] { Array(declared.keys) }
    var functionNames: [String] { [] }
}
