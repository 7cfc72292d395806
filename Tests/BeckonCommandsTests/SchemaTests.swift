import BeckonYAML
import Foundation
import Testing

@testable import BeckonCore

/// `beckon schema`: the committed schema is the generated one, every shipped YAML file is valid against it, and it
/// rejects what the loader rejects (unknown keys, wrong types, a second key in an action).
struct SchemaTests {
    static let root = SeedRuleSetTests.root
    static let committed = root.appendingPathComponent("schema/beckon.schema.json")

    /// The schema's action keys are the action kinds a rule file can write, in the same order.
    @Test func actionKeysAreTheActionKinds() {
        #expect(DSL.actions.map(\.name) == ActionKind.written.map(\.rawValue))
    }

    static func schema() throws -> [String: Any] {
        let data = try Data(contentsOf: committed)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func committedSchemaIsGenerated() throws {
        let committed = try String(contentsOf: Self.committed, encoding: .utf8)
        #expect(
            committed == JSONWriter.pretty(JSONSchemaExport.schema()) + "\n", "run `beckon schema > schema/beckon.schema.json`")
    }

    static var shippedFiles: [String] {
        var out: [String] = []
        for dir in ["rules", "campaigns", "examples"] {
            let base = root.appendingPathComponent(dir)
            let e = FileManager.default.enumerator(atPath: base.path)
            while let rel = e?.nextObject() as? String {
                if rel.hasSuffix(".yaml") || rel.hasSuffix(".yml") { out.append(dir + "/" + rel) }
            }
        }
        return out.sorted()
    }

    @Test func thereAreShippedFiles() { #expect(Self.shippedFiles.count >= 15) }

    @Test(arguments: shippedFiles)
    func shippedFileIsValid(_ file: String) throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8)
        let errors = try Self.validate(text)
        #expect(errors.isEmpty, "\(file): \(errors)")
    }

    @Test(arguments: [
        ("version: 1\ncampaign: a\nrules:\n  - id: x\n    on: E\n    prioirty: 3\n    do: [ { set: { a: 1 } } ]\n", "prioirty"),
        (
            "version: 1\ncampaign: a\nrules:\n  - id: x\n    on: E\n    limit: { per_user: many }\n    do: [ { set: { a: 1 } } ]\n",
            "per_user"
        ),
        ("version: 1\ncampaign: a\nrules:\n  - id: x\n    on: E\n    do: [ { set: { a: 1 }, unset: b } ]\n", "do"),
        ("version: 1\ncampaign: Not_Snake\nrules: []\n", "campaign"),
        ("version: 1\nsettings: s\nsessions: { timeout: soon }\n", "timeout"),
        ("version: 1\ntests: t\ncases: [ { name: a, events: [], expcet: [] } ]\n", "expcet"),
        ("version: 1\ntracking_plan: p\nevents: { A: { properties: { x: { type: decimal } } } }\n", "type"),
    ])
    func invalidFilesAreRejected(_ text: String, _ where_: String) throws {
        let errors = try Self.validate(text)
        #expect(!errors.isEmpty, "accepted:\n\(text)")
        #expect(errors.contains { $0.contains(where_) }, "\(errors)")
    }

    // MARK: A JSON Schema (draft-07) validator, for the keywords the schema uses

    static func validate(_ yaml: String) throws -> [String] {
        let (node, problems) = YAMLLoader.parse(yaml, path: "test.yaml")
        let tree = try #require(node, "\(problems)")
        let schema = try Self.schema()
        var errors: [String] = []
        check(value(tree), schema, root: schema, path: "", errors: &errors)
        return errors
    }

    /// YAML as JSON sees it (YAML 1.2 core: plain `true`, `12`, `null` are typed; everything else is a string).
    static func value(_ n: SourceNode) -> Value {
        switch n {
        case .scalar(let s): return s.style == .plain ? FileParser.plainValue(s) ?? .string(s.text) : .string(s.text)
        case .sequence(let xs, _): return .list(xs.map(value))
        case .mapping(let pairs, _): return .map(ValueMap(pairs.map { ($0.key.text, value($0.value)) }))
        }
    }

    static func resolve(_ s: [String: Any], root: [String: Any]) -> [String: Any] {
        guard let ref = s["$ref"] as? String, ref.hasPrefix("#/definitions/"),
            let defs = root["definitions"] as? [String: Any], let d = defs[String(ref.dropFirst(14))] as? [String: Any]
        else { return s }
        return d
    }

    static func check(_ v: Value, _ schema: [String: Any], root: [String: Any], path: String, errors: inout [String]) {
        let s = resolve(schema, root: root)
        func fail(_ why: String) { errors.append("\(path.isEmpty ? "/" : path): \(why)") }
        if let t = s["type"] {
            let types = (t as? [String]) ?? [(t as? String) ?? ""]
            if !types.contains(where: { isType(v, $0) }) { return fail("not \(types)") }
        }
        if let e = s["enum"] as? [String] {
            guard case .string(let x) = v, e.contains(x) else { return fail("not one of \(e)") }
        }
        if case .string(let x) = v {
            if let p = s["pattern"] as? String, x.range(of: p, options: .regularExpression) == nil {
                fail("'\(x)' does not match \(p)")
            }
            if let m = s["minLength"] as? Int, x.count < m { fail("shorter than \(m)") }
        }
        if case .int(let n) = v, let m = s["minimum"] as? Int, n < m { fail("below \(m)") }
        if case .list(let xs) = v, let items = s["items"] as? [String: Any] {
            for (i, x) in xs.enumerated() { check(x, items, root: root, path: "\(path)/\(i)", errors: &errors) }
        }
        if case .map(let m) = v {
            let keys = m.entries.compactMap { if case .string(let k) = $0.key { k } else { nil } }
            let properties = s["properties"] as? [String: Any] ?? [:]
            for k in s["required"] as? [String] ?? [] where !keys.contains(k) { fail("missing \(k)") }
            if let n = s["minProperties"] as? Int, keys.count < n { fail("fewer than \(n) keys") }
            if let n = s["maxProperties"] as? Int, keys.count > n { fail("more than \(n) keys") }
            for (k, x) in zip(keys, m.entries.map(\.value)) {
                if let p = properties[k] as? [String: Any] {
                    check(x, p, root: root, path: "\(path)/\(k)", errors: &errors)
                } else if let extra = s["additionalProperties"] as? [String: Any] {
                    check(x, extra, root: root, path: "\(path)/\(k)", errors: &errors)
                } else if s["additionalProperties"] as? Bool == false {
                    fail("unknown key \(k)")
                }
                if let names = s["propertyNames"] as? [String: Any] {
                    check(.string(k), names, root: root, path: "\(path)/\(k)", errors: &errors)
                }
            }
        }
        if let any = s["anyOf"] as? [[String: Any]] {
            var best: [String]?
            for option in any {
                var e: [String] = []
                check(v, option, root: root, path: path, errors: &e)
                if e.isEmpty { best = nil; break }
                if best == nil || e.count < best!.count { best = e }
            }
            if let best { errors += best }
        }
        if let not = s["not"] as? [String: Any] {
            var e: [String] = []
            check(v, not, root: root, path: path, errors: &e)
            if e.isEmpty { fail("matches a schema it must not") }
        }
        for sub in s["allOf"] as? [[String: Any]] ?? [] { check(v, sub, root: root, path: path, errors: &errors) }
        if let cond = s["if"] as? [String: Any], let then = s["then"] as? [String: Any] {
            var e: [String] = []
            check(v, cond, root: root, path: path, errors: &e)
            if e.isEmpty { check(v, then, root: root, path: path, errors: &errors) }
        }
    }

    static func isType(_ v: Value, _ t: String) -> Bool {
        switch (v, t) {
        case (.string, "string"), (.bool, "boolean"), (.null, "null"), (.list, "array"), (.map, "object"): true
        case (.int, "integer"), (.int, "number"), (.uint, "integer"), (.uint, "number"), (.double, "number"): true
        default: false
        }
    }
}
