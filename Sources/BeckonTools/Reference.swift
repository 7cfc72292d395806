import BeckonCore
import Foundation

/// The reference pages under docs/reference, generated from the code (`beckon reference dsl|functions`).
/// A test keeps the committed pages equal to this output.
public enum ReferenceDocs {
    public static func dsl() -> String {
        var out = """
            # DSL reference (version 1)

            Generated from the code by `beckon reference dsl`; a test fails when this page and the code disagree.
            The guide (`docs/guide.md`) explains how the pieces fit together; this page lists every key.

            Values written `${…}` are expressions evaluated when the action fires. Durations are written `500ms`,
            `90s`, `30m`, `24h`, `7d`, `2w` or combined (`1h30m`), at most 100 years (`36525d`). Timestamps are
            RFC 3339 with a zone (`2026-01-01T00:00:00Z`, or an offset from `-23:59` to `+23:59`). Names of rules,
            campaigns, rule sets and segments are snake_case. Files are plain YAML: no anchors (`&name`), aliases
            (`*name`), merge keys (`<<`) or tags (`!name`); a value that starts with `!` is quoted.


            """
        var seen = Set<String>()
        func section(_ o: ObjectSchema, _ title: String) {
            guard seen.insert(o.name).inserted else { return }
            out += "## \(title)\n\n\(o.doc)\n\n| key | value | required | meaning |\n|---|---|---|---|\n"
            for k in o.keys {
                var meaning = k.doc
                if let ex = k.example { meaning += " — e.g. `\(ex)`" }
                out +=
                    "| `\(k.name)` | \(k.type.expectation) | \(k.required ? "yes" : "") | \(meaning.replacingOccurrences(of: "|", with: "\\|")) |\n"
            }
            out += "\n"
        }
        section(DSL.ruleFile, "Rule file (`campaign:` or `ruleset:`)")
        section(DSL.rule, "Rule (an item of `rules:`)")
        if case .object(let d)? = DSL.ruleFile.key("defaults")?.type { section(d, "`defaults:`") }
        section(DSL.limits, "`limit:`")
        out +=
            "## Actions (items of `do:`)\n\nEach action is a map with one key, the action's kind.\n\n| action | value | meaning |\n|---|---|---|\n"
        for a in DSL.actions {
            var meaning = a.doc
            if let ex = a.example { meaning += " — e.g. `\(ex)`" }
            out += "| `\(a.name)` | \(a.type.expectation) | \(meaning) |\n"
        }
        out += "\n"
        for a in DSL.actions {
            switch a.type {
            case .object(let o): section(o, "`\(a.name):`")
            case .either(let vs): for case .object(let o) in vs { section(o, "`\(a.name):` (long form)") }
            default: break
            }
        }
        if case .object(let m)? = DSL.actions.first?.type, case .list(.object(let b))? = m.key("buttons")?.type {
            section(b, "Button (an item of `message.buttons`)")
        }
        section(DSL.settingsFile, "Settings file (`settings:`)")
        section(DSL.trackingPlanFile, "Tracking plan file (`tracking_plan:`)")
        section(DSL.testFile, "Test file (`tests:`)")
        // Every other map reachable from the file kinds, in the order they are first met.
        for file in DSL.files {
            for o in nestedObjects(file) { section(o, "`\(o.name)`") }
        }
        return out
    }

    /// The object schemas under `o`, depth first, each once.
    static func nestedObjects(_ o: ObjectSchema) -> [ObjectSchema] {
        var out: [ObjectSchema] = []
        var seen = Set<ObjectIdentifier>()
        func visit(_ v: ValueSchema) {
            switch v {
            case .object(let x):
                guard seen.insert(ObjectIdentifier(x)).inserted else { return }
                out.append(x)
                for k in x.keys { visit(k.type) }
            case .oneOrMany(let x), .list(let x): visit(x)
            case .map(_, let x): visit(x)
            case .variant(let ks): for k in ks { visit(k.type) }
            case .either(let xs): for x in xs { visit(x) }
            default: break
            }
        }
        for k in o.keys { visit(k.type) }
        return out
    }

    public static func functions() -> String {
        var out = """
            # Expression reference

            Generated from the code by `beckon reference functions`; a test fails when this page and the code disagree.

            Expressions are a subset of Google's CEL (https://github.com/google/cel-spec): literals (`1`, `2.5`, `"text"`,
            `'text'`, `true`, `null`, `[1, 2]`, `{"k": 1}`), field selection (`user.plan`, `user["Is Default Browser"]`),
            `has(user.plan)`, `in`, `&&` `||` `!` (errors are absorbed when the other side decides, as in CEL), `==` `!=`
            `<` `<=` `>` `>=`, `+` `-` `*` `/` `%`, `a ? b : c`, indexing `list[0]`, and the macros `all`, `exists`,
            `exists_one`, `map`, `filter`. Expressions are type-checked when rules load.

            ## Variables

            | name | what it is |
            |---|---|
            | `event` | the triggering event: `event.name`, `event.type`, `event.timestamp`, `event.messageId`, `event.properties.X`, `event.traits.X` |
            | `user` | the user's attributes (identify traits and `set` actions): `user.plan`, `user["Is Default Browser"]`; `user.id` is the user id |
            | `context` | the device context of the event (`context.locale`, `context.os.name`, `context.timezone`, `context.app.version`); when an event lacks a field, the last value seen for the user |
            | `now` | the time of evaluation (the user's clock) as a timestamp |
            | `change` | in `on_change` rules: `change.attribute`, `change.from`, `change.to` |
            | `inbox` | the user's inbox: `inbox.unread`, `inbox.total`, `inbox.ids`, `inbox.unread_ids` |
            | segment names | the file's named conditions |

            ## Event history

            The triggering event is already counted when a rule is evaluated. Event names are the `event` of track
            calls; screen views are named `screen:NAME`.

            | function | returns |
            |---|---|

            """
        for (name, doc) in ExpressionLibrary.history { out += "| `\(name)` | \(doc) |\n" }
        out += "\nWindows: \(DSL.windowDoc).\n\n## Functions\n\n| function | what it does |\n|---|---|\n"
        for (name, doc) in ExpressionLibrary.functions.sorted(by: { $0.name < $1.name }) { out += "| `\(name)` | \(doc) |\n" }
        return out
    }
}
