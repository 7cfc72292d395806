/// A JSON Schema (draft-07, which YAML editors understand) of every kind of Beckon file, made from ``DSL``'s
/// declarations — the same ones the loader checks against — so that editors complete keys, show their docs and
/// flag unknown keys and wrong types while a marketer types. `beckon schema` prints it.
///
/// The file kind is chosen as the loader chooses it: `settings:`, `tracking_plan:` or `tests:` at the top, and
/// otherwise a rule file. Expressions, durations and templates are checked only as text here; `beckon validate`
/// checks what they mean.
public enum JSONSchemaExport {
    public static func schema() -> Value {
        var definitions: [(String, Value)] = []
        var names: [ObjectIdentifier: String] = [:]
        var taken = Set<String>()

        func name(of o: ObjectSchema) -> String {
            if let n = names[ObjectIdentifier(o)] { return n }
            var n = String(o.name.map { $0 == " " ? "_" : $0 })
            while taken.contains(n) { n += "_" }
            taken.insert(n)
            names[ObjectIdentifier(o)] = n
            definitions.append((n, .null))  // reserve the place, so definitions come in the order met
            let i = definitions.count - 1
            definitions[i].1 = object(o)
            return n
        }

        func object(_ o: ObjectSchema) -> Value {
            var properties = ValueMap()
            for k in o.keys { properties[string: k.name] = described(value(k.type), k) }
            var m = ValueMap([("type", .string("object")), ("description", .string(o.doc))])
            m[string: "properties"] = .map(properties)
            let required = o.keys.filter(\.required).map { Value.string($0.name) }
            if !required.isEmpty { m[string: "required"] = .list(required) }
            m[string: "additionalProperties"] = .bool(false)
            return .map(m)
        }

        func described(_ v: Value, _ k: KeySchema) -> Value {
            guard case .map(var m) = v else { return v }
            m[string: "description"] = .string(k.doc + (k.example.map { " — e.g. `\($0)`" } ?? ""))
            return .map(m)
        }

        func value(_ v: ValueSchema) -> Value {
            switch v {
            case .text, .template, .timestamp, .zone:
                return .map(ValueMap([("type", .list([.string("string"), .string("number"), .string("boolean")]))]))
            case .expression:
                return .map(ValueMap([("type", .list([.string("string"), .string("boolean")]))]))
            case .identifier:
                return .map(ValueMap([("type", .string("string")), ("pattern", .string("^[a-z][a-z0-9_]*$"))]))
            case .integer(let min):
                return .map(ValueMap([("type", .string("integer")), ("minimum", .int(Int64(min)))]))
            case .boolean: return .map(ValueMap([("type", .string("boolean"))]))
            case .duration:
                return .map(
                    ValueMap([("type", .string("string")), ("pattern", .string("^\\s*([0-9]{1,12}(ms|s|m|h|d|w))+\\s*$"))]))
            case .anyValue: return .map(ValueMap())
            case .eventName, .attributeName: return .map(ValueMap([("type", .string("string")), ("minLength", .int(1))]))
            case .enumeration(let xs): return .map(ValueMap([("enum", .list(xs.map { .string($0) }))]))
            case .oneOrMany(let x):
                let one = value(x)
                return .map(ValueMap([("anyOf", .list([one, .map(ValueMap([("type", .string("array")), ("items", one)]))]))]))
            case .list(let x): return .map(ValueMap([("type", .string("array")), ("items", value(x))]))
            case .object(let o): return .map(ValueMap([("$ref", .string("#/definitions/" + name(of: o)))]))
            case .map(let key, let x):
                var m = ValueMap([("type", .string("object")), ("additionalProperties", value(x))])
                if case .identifier = key { m[string: "propertyNames"] = value(key) }
                return .map(m)
            case .variant(let keys):
                var properties = ValueMap()
                for k in keys { properties[string: k.name] = described(value(k.type), k) }
                return .map(
                    ValueMap([
                        ("type", .string("object")), ("minProperties", .int(1)), ("maxProperties", .int(1)),
                        ("properties", .map(properties)), ("additionalProperties", .bool(false)),
                    ]))
            case .either(let xs): return .map(ValueMap([("anyOf", .list(xs.map(value)))]))
            }
        }

        func ref(_ o: ObjectSchema) -> Value { .map(ValueMap([("$ref", .string("#/definitions/" + name(of: o)))])) }
        func has(_ key: String) -> Value { .map(ValueMap([("required", .list([.string(key)]))])) }
        let kinds: [(String, ObjectSchema)] = [
            ("settings", DSL.settingsFile), ("tracking_plan", DSL.trackingPlanFile), ("tests", DSL.testFile),
        ]
        var branches: [Value] = kinds.map { key, o in .map(ValueMap([("if", has(key)), ("then", ref(o))])) }
        branches.append(
            .map(
                ValueMap([
                    ("if", .map(ValueMap([("not", .map(ValueMap([("anyOf", .list(kinds.map { has($0.0) }))])))]))),
                    ("then", ref(DSL.ruleFile)),
                ])))
        return .map(
            ValueMap([
                ("$schema", .string("http://json-schema.org/draft-07/schema#")),
                ("title", .string("Beckon file")),
                (
                    "description",
                    .string(
                        "A Beckon rule file (campaign: or ruleset:), settings file, tracking plan or campaign test file. "
                            + "Generated by `beckon schema`.")
                ),
                ("type", .string("object")),
                ("allOf", .list(branches)),
                ("definitions", .map(ValueMap(definitions.map { ($0.0, $0.1) }))),
            ]))
    }
}
