import Crypto
import Foundation

/// Reads a ``SourceNode`` tree into the rule-file model, checking it against ``DSL``'s schema.
/// Reports every problem it finds (unknown keys with "did you mean", wrong types, bad durations…) and goes on.
public struct FileParser {
    public internal(set) var diagnostics = DiagnosticBag()
    let file: String

    /// Whether files a rule file names (a destination's key, certificate and service account files) are read and
    /// checked; off for text that is not a rule set on disk (the console's playground), whose file names are names.
    var readsNamedFiles = true

    public init(file: String, readsNamedFiles: Bool = true) {
        self.file = file
        self.readsNamedFiles = readsNamedFiles
    }

    /// Parses one document. Returns `nil` when it is not even recognisable as a Beckon file.
    public mutating func parse(_ root: SourceNode) -> ParsedFile? {
        guard case .mapping(let pairs, _) = root else {
            diagnostics.error(
                .wrongType, "a Beckon file is a map that starts with `version: 1`, found \(root.kindDescription)",
                at: root.location, suggestion: "start the file with `version: 1`")
            return nil
        }
        if let v = root["version"] {
            if let first = pairs.first, first.key.text != "version" {
                diagnostics.warning(.missingKey, "`version` should be the first key of the file", at: v.location)
            }
        }
        if root["settings"] != nil { return settingsFile(root).map(ParsedFile.settings) }
        if root["tracking_plan"] != nil { return trackingPlan(root).map(ParsedFile.trackingPlan) }
        if root["tests"] != nil { return testSuite(root).map(ParsedFile.tests) }
        return ruleFile(root).map(ParsedFile.rules)
    }

    // MARK: Object reading

    /// Checks a mapping's keys against a schema: duplicates, unknown keys (with the nearest known one) and
    /// missing required keys. Returns the pairs by key.
    mutating func keys(
        of node: SourceNode, _ schema: ObjectSchema, context: String
    ) -> [String: (key: ScalarNode, value: SourceNode)]? {
        guard case .mapping(let pairs, _) = node else {
            let known = DSL.rule.keys.first { if case .object(let o) = $0.type { o === schema } else { false } }?.example
            let name = context.contains(" ") ? context : "'\(context)'"
            diagnostics.error(
                .wrongType, "\(name) expects a map\(known.map { " like \($0)" } ?? ""), found \(node.kindDescription)",
                at: node.location)
            return nil
        }
        var out: [String: (key: ScalarNode, value: SourceNode)] = [:]
        for (k, v) in pairs {
            if out[k.text] != nil {
                diagnostics.error(
                    .duplicateKey, "'\(k.text)' appears twice in \(context)", at: k.location,
                    suggestion: "remove one of them")
                continue
            }
            if schema.key(k.text) == nil {
                let hint = Suggest.nearest(k.text, in: schema.keys.map(\.name))
                diagnostics.error(
                    .unknownKey, "unknown key '\(k.text)' in \(context)" + (hint.map { "; did you mean '\($0)'?" } ?? ""),
                    at: k.location,
                    suggestion: hint.map { "replace it with '\($0)'" }
                        ?? "known keys: " + schema.keys.map(\.name).joined(separator: ", "))
                continue
            }
            out[k.text] = (k, v)
        }
        for key in schema.keys where key.required && out[key.name] == nil {
            // A key that was misspelled was already reported as unknown with a suggestion.
            let misspelled = pairs.contains {
                Suggest.nearest($0.key.text, in: [key.name]) != nil && schema.key($0.key.text) == nil
            }
            if !misspelled {
                diagnostics.error(
                    .missingKey, "\(context) needs '\(key.name)' (\(key.type.expectation))", at: node.location,
                    suggestion: key.example.map { "add `\(key.name): \($0)`" })
            }
        }
        return out
    }

    mutating func scalar(_ node: SourceNode, _ key: String, _ expect: ValueSchema) -> ScalarNode? {
        guard case .scalar(let s) = node, !s.isNull else {
            diagnostics.error(
                .wrongType, "'\(key)' expects \(expect.expectation), found \(node.kindDescription)", at: node.location)
            return nil
        }
        return s
    }

    mutating func string(_ node: SourceNode, _ key: String) -> Located<String>? {
        guard let s = scalar(node, key, .text) else { return nil }
        return Located(s.text, s.location)
    }

    mutating func identifier(_ node: SourceNode, _ key: String) -> Located<String>? {
        guard let s = scalar(node, key, .identifier) else { return nil }
        guard FileParser.isIdentifier(s.text) else {
            let fixed = FileParser.snakeCase(s.text)
            diagnostics.error(
                .invalidIdentifier, "'\(key)' must be snake_case (a-z, 0-9, _), found '\(s.text)'", at: s.location,
                suggestion: fixed.isEmpty ? nil : "use '\(fixed)'")
            return nil
        }
        return Located(s.text, s.location)
    }

    static func isIdentifier(_ s: String) -> Bool {
        guard let f = s.unicodeScalars.first, f >= "a" && f <= "z" else { return false }
        return s.unicodeScalars.allSatisfy { ($0 >= "a" && $0 <= "z") || ($0 >= "0" && $0 <= "9") || $0 == "_" }
    }

    static func snakeCase(_ s: String) -> String {
        var out = ""
        var prevLower = false
        for c in s.unicodeScalars {
            if c >= "A" && c <= "Z" {
                if prevLower { out += "_" }
                out.unicodeScalars.append(Unicode.Scalar(c.value + 32)!)
                prevLower = false
            } else if (c >= "a" && c <= "z") || (c >= "0" && c <= "9") {
                out.unicodeScalars.append(c)
                prevLower = true
            } else {
                if !out.hasSuffix("_") && !out.isEmpty { out += "_" }
                prevLower = false
            }
        }
        while out.hasSuffix("_") { out.removeLast() }
        while let f = out.unicodeScalars.first, !(f >= "a" && f <= "z") { out.removeFirst() }
        return out
    }

    mutating func integer(_ node: SourceNode, _ key: String, min: Int) -> Located<Int>? {
        guard let s = scalar(node, key, .integer(min: min)) else { return nil }
        guard s.style == .plain, let v = Int(s.text) else {
            diagnostics.error(
                .wrongType, "'\(key)' expects \(ValueSchema.integer(min: min).expectation), found '\(s.text)'",
                at: s.location)
            return nil
        }
        guard v >= min else {
            diagnostics.error(.invalidValue, "'\(key)' must be at least \(min), found \(v)", at: s.location)
            return nil
        }
        return Located(v, s.location)
    }

    mutating func boolean(_ node: SourceNode, _ key: String) -> Located<Bool>? {
        guard let s = scalar(node, key, .boolean) else { return nil }
        switch s.text {
        case "true", "True", "TRUE": return Located(true, s.location)
        case "false", "False", "FALSE": return Located(false, s.location)
        default:
            diagnostics.error(.wrongType, "'\(key)' expects true or false, found '\(s.text)'", at: s.location)
            return nil
        }
    }

    mutating func duration(_ node: SourceNode, _ key: String) -> Located<Int64>? {
        guard let s = scalar(node, key, .duration) else { return nil }
        if DSLDuration.read(s.text) == .tooLong {
            diagnostics.error(
                .invalidDuration,
                "'\(key)' expects a duration of at most 100 years (\(DSLDuration.format(DSLDuration.maxMilliseconds))), "
                    + "found '\(s.text)'", at: s.location, suggestion: "use a shorter duration")
            return nil
        }
        guard let ms = DSLDuration.parse(s.text) else {
            var hint = "write it as a number and a unit: ms, s, m, h, d or w (7d, 24h, 1h30m)"
            if s.text.contains("mo") || s.text.contains("month") { hint = "months vary in length; use days (30d) or `per_month`" }
            diagnostics.error(
                .invalidDuration, "'\(key)' expects a duration like 7d, found '\(s.text)'", at: s.location,
                suggestion: hint)
            return nil
        }
        return Located(ms, s.location)
    }

    mutating func timestamp(_ node: SourceNode, _ key: String) -> Located<Timestamp>? {
        guard let s = scalar(node, key, .timestamp) else { return nil }
        guard let t = Timestamp.parse(s.text) else {
            if let why = Timestamp.offsetProblem(s.text) {
                diagnostics.error(
                    .invalidTimestamp, "'\(key)' expects a timestamp: \(why)", at: s.location,
                    suggestion: "write the offset as +HH:MM from -23:59 to +23:59, or use Z for UTC")
                return nil
            }
            var hint = "use RFC 3339 with a zone, like 2026-01-01T00:00:00Z or 2026-01-01T09:00:00+01:00"
            if Timestamp.parse(s.text + "T00:00:00Z") != nil { hint = "add a time and zone: \(s.text)T00:00:00Z" }
            diagnostics.error(
                .invalidTimestamp, "'\(key)' expects a timestamp, found '\(s.text)'", at: s.location, suggestion: hint)
            return nil
        }
        return Located(t, s.location)
    }

    /// A timestamp; without an offset it is read in `zone` (for `user`, as UTC wall-clock time, compared per user).
    mutating func localTimestamp(_ node: SourceNode, _ key: String, _ zone: ZoneSpec?) -> Located<Timestamp>? {
        guard let zone, let s = scalar(node, key, .timestamp), Timestamp.parse(s.text) == nil,
            let wall = Timestamp.parse(s.text + "Z")
        else { return timestamp(node, key) }
        switch zone {
        case .user: return Located(wall, s.location)
        case .fixed(let z):
            let utc = z.utc(fromLocal: wall.seconds)
            return (try? Timestamp(seconds: utc, nanos: wall.nanos)).map { Located($0, s.location) }
        }
    }

    mutating func expression(_ node: SourceNode, _ key: String) -> ExpressionSource? {
        guard let s = scalar(node, key, .expression) else { return nil }
        if s.text.trimmingWhitespace().isEmpty {
            diagnostics.error(.expressionSyntax, "'\(key)' is empty", at: s.location)
            return nil
        }
        return ExpressionSource(text: s.text, scalar: s)
    }

    /// A name (of an event, a screen, an attribute, an id): text, and not empty, which names nothing (`on: ''` was a
    /// rule no event could fire).
    mutating func named(_ node: SourceNode, _ key: String) -> Located<String>? {
        string(node, key).flatMap { nonEmpty($0, key) }
    }

    mutating func nonEmpty(_ name: Located<String>, _ key: String) -> Located<String>? {
        guard name.value.isEmpty else { return name }
        diagnostics.error(.invalidValue, "'\(key)' holds an empty name", at: name.location, suggestion: "write the name")
        return nil
    }

    /// One name or a list of names (events, screens, attributes, ids, schemes).
    mutating func oneOrMany(_ node: SourceNode, _ key: String) -> [Located<String>]? {
        switch node {
        case .scalar(let s) where !s.isNull: return nonEmpty(Located(s.text, s.location), key).map { [$0] } ?? []
        case .sequence(let items, _):
            var out: [Located<String>] = []
            for item in items { if let v = named(item, key) { out.append(v) } }
            if items.isEmpty { diagnostics.error(.invalidValue, "'\(key)' is an empty list", at: node.location) }
            return out
        default:
            diagnostics.error(
                .wrongType, "'\(key)' expects a name or a list of names, found \(node.kindDescription)", at: node.location)
            return nil
        }
    }

    // MARK: Templates and values

    /// Splits `text ${expr} text` into parts. `$${` writes a literal `${`.
    mutating func template(_ s: ScalarNode) -> TemplateSource {
        let scalars = Array(s.text.unicodeScalars)
        var parts: [TemplateSource.Part] = []
        var text = String.UnicodeScalarView()
        var i = 0
        while i < scalars.count {
            if scalars[i] == "$" && i + 2 < scalars.count && scalars[i + 1] == "$" && scalars[i + 2] == "{" {
                text.append(contentsOf: "${".unicodeScalars)
                i += 3
                continue
            }
            if scalars[i] == "$" && i + 1 < scalars.count && scalars[i + 1] == "{" {
                // Find the matching '}', skipping string literals and nested braces.
                var j = i + 2
                var depth = 0
                var quote: Unicode.Scalar?
                var end: Int?
                while j < scalars.count {
                    let c = scalars[j]
                    if let q = quote {
                        if c == "\\" { j += 1 } else if c == q { quote = nil }
                    } else if c == "'" || c == "\"" {
                        quote = c
                    } else if c == "{" {
                        depth += 1
                    } else if c == "}" {
                        if depth == 0 {
                            end = j
                            break
                        }
                        depth -= 1
                    }
                    j += 1
                }
                guard let end else {
                    diagnostics.error(
                        .expressionSyntax, "'${' has no closing '}'", at: s.location(of: SourceSpan(i, i + 2)),
                        suggestion: "close the expression with '}', or write '$${' for a literal '${'")
                    text.append(contentsOf: scalars[i...])
                    break
                }
                if !text.isEmpty {
                    parts.append(.text(String(text)))
                    text = String.UnicodeScalarView()
                }
                let exprText = String(String.UnicodeScalarView(scalars[(i + 2)..<end]))
                if exprText.trimmingWhitespace().isEmpty {
                    diagnostics.error(.expressionSyntax, "'${}' is empty", at: s.location(of: SourceSpan(i, end + 1)))
                } else {
                    parts.append(.expression(ExpressionSource(text: exprText, scalar: s, offset: i + 2)))
                }
                i = end + 1
                continue
            }
            text.append(scalars[i])
            i += 1
        }
        if !text.isEmpty { parts.append(.text(String(text))) }
        return TemplateSource(parts: parts, location: s.location)
    }

    mutating func templateValue(_ node: SourceNode, _ key: String) -> TemplateSource? {
        guard let s = scalar(node, key, .template) else { return nil }
        return template(s)
    }

    /// A YAML value with the core schema's plain-scalar types (YAML 1.2: `yes`/`on` stay strings).
    mutating func value(_ node: SourceNode) -> ValueSource {
        switch node {
        case .scalar(let s):
            if s.style == .plain, let v = FileParser.plainValue(s) { return .literal(v) }
            let t = template(s)
            if let lit = t.literal { return .literal(.string(lit)) }
            return .template(t)
        case .sequence(let items, _):
            return .list(items.map { value($0) })
        case .mapping(let pairs, _):
            var seen = Set<String>()
            var out: [(key: String, value: ValueSource)] = []
            for (k, v) in pairs {
                if !seen.insert(k.text).inserted {
                    diagnostics.error(.duplicateKey, "'\(k.text)' appears twice in this map", at: k.location)
                    continue
                }
                out.append((k.text, value(v)))
            }
            return .map(out)
        }
    }

    /// A literal of the YAML 1.2 core schema, or nil for strings (which may be templates).
    static func plainValue(_ s: ScalarNode) -> Value? {
        let t = s.text
        if s.isNull { return .null }
        switch t {
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        case ".inf", ".Inf", ".INF", "+.inf": return .double(.infinity)
        case "-.inf", "-.Inf", "-.INF": return .double(-.infinity)
        case ".nan", ".NaN", ".NAN": return .double(.nan)
        default: break
        }
        if let i = Int64(t) { return .int(i) }
        if t.hasPrefix("0x"), let i = Int64(t.dropFirst(2), radix: 16) { return .int(i) }
        if t.hasPrefix("0o"), let i = Int64(t.dropFirst(2), radix: 8) { return .int(i) }
        if t.contains(where: { $0.isNumber }), t.allSatisfy({ $0.isNumber || "+-.eE".contains($0) }), let d = Double(t) {
            return .double(d)
        }
        return nil
    }

    mutating func valueMap(_ node: SourceNode, _ key: String) -> [(key: String, value: ValueSource)] {
        guard case .map(let pairs) = value(node) else {
            diagnostics.error(.wrongType, "'\(key)' expects a map, found \(node.kindDescription)", at: node.location)
            return []
        }
        return pairs
    }

    // MARK: Rule files

    mutating func version(_ k: [String: (key: ScalarNode, value: SourceNode)]) {
        guard let v = k["version"], let n = integer(v.value, "version", min: 0) else { return }
        if n.value != 1 {
            diagnostics.error(
                .unsupportedVersion, "version \(n.value) is not supported; this Beckon reads version 1",
                at: n.location, suggestion: "write `version: 1`")
        }
    }

    mutating func ruleFile(_ root: SourceNode) -> RuleFileSpec? {
        guard let k = keys(of: root, DSL.ruleFile, context: "the file") else { return nil }
        version(k)
        var kind = UnitKind.campaign
        var name: Located<String>?
        switch (k["campaign"], k["ruleset"]) {
        case (let c?, nil):
            name = identifier(c.value, "campaign")
        case (nil, let r?):
            kind = .ruleset
            name = identifier(r.value, "ruleset")
        case (let c?, let r?):
            // Reported, and the rest of the file is still read (as a campaign), so that all its problems show.
            diagnostics.error(
                .invalidValue, "a file is either a campaign or a rule set, not both", at: r.key.location,
                suggestion: "keep `campaign:` or `ruleset:`")
            name = identifier(c.value, "campaign")
        case (nil, nil):
            diagnostics.error(
                .missingKey, "the file needs `campaign: NAME` (in campaigns/) or `ruleset: NAME` (in rules/)",
                at: root.location, suggestion: "add `campaign: my_campaign` after `version: 1`")
        }
        var spec = RuleFileSpec(
            path: file, kind: kind, name: name ?? Located("unnamed", root.location), description: nil,
            enabled: true, start: nil, end: nil, audience: nil, segments: [], defaultPriority: nil,
            defaultLimits: LimitSpec(), defaultQuietHours: nil, timezone: nil, rules: [])
        if let d = k["description"] { spec.description = string(d.value, "description")?.value }
        if let e = k["enabled"] { spec.enabled = boolean(e.value, "enabled")?.value ?? true }
        if let z = k["timezone"], let s = scalar(z.value, "timezone", .zone) {
            if s.text == "user" {
                spec.timezone = Located(.user, s.location)
            } else if let zone = Zone(s.text) {
                spec.timezone = Located(.fixed(zone), s.location)
            } else {
                diagnostics.error(
                    .invalidValue, "unknown time zone '\(s.text)'", at: s.location,
                    suggestion: "use an IANA name like Europe/Berlin, an offset like +02:00, or user")
            }
        }
        if let s = k["start"] { spec.start = localTimestamp(s.value, "start", spec.timezone?.value) }
        if let e = k["end"] { spec.end = localTimestamp(e.value, "end", spec.timezone?.value) }
        if let a = k["audience"] { spec.audience = expression(a.value, "audience") }
        if let s = k["segments"] {
            if case .mapping(let pairs, _) = s.value {
                var names = Set<String>()
                for (key, v) in pairs {
                    guard let n = identifier(.scalar(key), "segment name") else { continue }
                    if !names.insert(n.value).inserted {
                        diagnostics.error(.duplicateName, "segment '\(n.value)' is defined twice", at: key.location)
                        continue
                    }
                    if let e = expression(v, "segment '\(n.value)'") { spec.segments.append((n, e)) }
                }
            } else {
                diagnostics.error(
                    .wrongType, "'segments' expects a map of names to expressions, found \(s.value.kindDescription)",
                    at: s.value.location)
            }
        }
        if let d = k["defaults"], let dk = keys(of: d.value, DSL.defaults, context: "defaults") {
            if let p = dk["priority"] { spec.defaultPriority = integer(p.value, "priority", min: 0)?.value }
            if let l = dk["limit"] { spec.defaultLimits = limits(l.value, context: "defaults.limit") }
            if let q = dk["quiet_hours"] { spec.defaultQuietHours = quietHours(q.value) }
        }
        if let g = k["goals"] { spec.goals = goals(g.value) }
        if let h = k["holdout"], let s = scalar(h.value, "holdout", .text) {
            let text = s.text.trimmingWhitespace()
            let share = text.hasSuffix("%") ? Double(text.dropLast()).map { $0 / 100 } : Double(text)
            if let share, share >= 0, share < 1 {
                spec.holdout = Located(share, s.location)
            } else {
                diagnostics.error(
                    .invalidValue, "'holdout' expects a share like 10% or 0.1 (less than all users), found '\(s.text)'",
                    at: s.location)
            }
        }
        if let v = k["variants"] {
            spec.variants = variants(v.value, ofRule: false)
            if let h = spec.holdout, !spec.variants.isEmpty {
                diagnostics.error(
                    .invalidValue, "a file with variants has its control group among them, not a holdout", at: h.location,
                    suggestion: "remove `holdout`, and add a variant with `control: true`")
            }
        }
        if let f = k["flows"] { spec.flows = flows(f.value) }
        if let c = k["conversion_values"] { spec.conversionValues = conversionValues(c.value) }
        spec.silence = k["silence"].flatMap { silence($0.value) } ?? []
        if let r = k["rules"] {
            guard case .sequence(let items, _) = r.value else {
                diagnostics.error(
                    .wrongType, "'rules' expects a list of rules (each starting with `- id:`), found \(r.value.kindDescription)",
                    at: r.value.location)
                return spec
            }
            // The written rules, then those the conversion-value tables compile to; each id once.
            var ids: [String: SourceLocation] = [:]
            let written = items.compactMap { rule($0) }
            for (rule, generated) in written.map({ ($0, false) })
                + spec.conversionValues.flatMap(conversionRules).map({ ($0, true) })
            {
                if let first = ids[rule.id.value] {
                    diagnostics.error(
                        .duplicateRuleID,
                        generated
                            ? "conversion value rule '\(rule.id.value)' has the id of the rule at line \(first.position.line)"
                            : "rule id '\(rule.id.value)' is already used at line \(first.position.line)",
                        at: rule.id.location,
                        suggestion: generated
                            ? "rename that rule, or the conversion values' id" : "give each rule of a file its own id")
                    continue
                }
                ids[rule.id.value] = rule.id.location
                spec.rules.append(rule)
            }
        }
        return spec
    }

    // MARK: Conversion values

    mutating func conversionValues(_ node: SourceNode) -> [ConversionValueSpec] {
        guard case .sequence(let items, _) = node else {
            diagnostics.error(
                .wrongType, "'conversion_values' expects a list, found \(node.kindDescription)", at: node.location)
            return []
        }
        var out: [ConversionValueSpec] = []
        for item in items {
            guard let k = keys(of: item, DSL.conversionValue, context: "conversion values"),
                let id = k["id"].flatMap({ identifier($0.value, "id") }),
                let start = k["starts_on"].flatMap({ string($0.value, "starts_on") }),
                let window = k["window"].flatMap({ duration($0.value, "window") }),
                let emit = k["emit"].flatMap({ string($0.value, "emit") }), let valuesNode = k["values"]
            else { continue }
            if window.value <= 0 {
                diagnostics.error(.invalidValue, "a window of 0 never opens", at: window.location)
                continue
            }
            guard case .sequence(let rows, _) = valuesNode.value, !rows.isEmpty else {
                diagnostics.error(
                    .wrongType, "'values' expects a list of `{ event, value }` rows", at: valuesNode.value.location,
                    suggestion: "write `values: [ { event: Order Completed, value: 63 } ]`")
                continue
            }
            var values: [ConversionValueSpec.Row] = []
            for row in rows {
                guard let rk = keys(of: row, DSL.conversionValueEntry, context: "conversion value"),
                    let event = rk["event"].flatMap({ named($0.value, "event") }),
                    let value = rk["value"].flatMap({ integer($0.value, "value", min: 0) })
                else { continue }
                if value.value > 63 {
                    diagnostics.error(
                        .invalidValue, "a conversion value is 0 to 63 (six bits), not \(value.value)", at: value.location)
                    continue
                }
                if let same = values.first(where: { $0.event.value == event.value }) {
                    diagnostics.error(
                        .duplicateName, "'\(event.value)' is in the table twice (line \(same.event.location.position.line))",
                        at: event.location, suggestion: "give each event one value; use `where` on a separate event to split it")
                    continue
                }
                if let same = values.first(where: { $0.value.value == value.value }) {
                    diagnostics.error(
                        .duplicateName, "value \(value.value) is also '\(same.event.value)''s: each row needs its own priority",
                        at: value.location)
                    continue
                }
                values.append(
                    .init(event: event, value: value, whereClause: rk["where"].flatMap { expression($0.value, "where") }))
            }
            out.append(
                ConversionValueSpec(
                    id: id, description: k["description"].flatMap { string($0.value, "description")?.value }, startsOn: start,
                    windowMs: window, values: values, emit: emit))
        }
        return out
    }

    /// The rules a conversion-value table compiles to, one per row: on the row's event (and its `where`), if the value
    /// rises and the window from the first `starts_on` is open, emit the update, then keep the value in the attribute.
    func conversionRules(_ c: ConversionValueSpec) -> [RuleSpec] {
        func quoted(_ s: String) -> String {
            var out = "\""
            for ch in s {
                if ch == "\\" || ch == "\"" { out.append("\\") }
                out.append(ch)
            }
            return out + "\""
        }
        // Generated text has no place of its own in the file: problems in it point at the row.
        func source(_ text: String, at location: SourceLocation) -> ExpressionSource {
            ExpressionSource(text: text, scalar: ScalarNode(text: text, style: .plain, location: location))
        }
        let attr = c.id.value
        let start = quoted(c.startsOn.value)
        let window = quoted("\(c.windowMs.value)ms")  // (CEL durations have no days)
        return c.values.map { row in
            let at = row.event.location
            let condition =
                "default(user.\(attr), -1) < \(row.value.value) && first_seen(\(start)) != null"
                + " && event.timestamp - first_seen(\(start)) < duration(\(window))"
            let previous = TemplateSource(
                parts: [.expression(source("default(user.\(attr), null)", at: at))], location: at)
            let emit = ActionSpec.emit(
                event: c.emit.value,
                payload: [
                    ("conversion_value", .literal(.int(Int64(row.value.value)))), ("previous_value", .template(previous)),
                    ("event", .literal(.string(row.event.value))),
                ])
            let set = ActionSpec.set([(Located(attr, c.id.location), .literal(.int(Int64(row.value.value))))])
            return RuleSpec(
                id: Located("\(attr)_\(row.value.value)", at),
                description: "\(row.event.value) → conversion value \(row.value.value) (\(c.id.value))", enabled: true,
                trigger: .events([row.event]), whereClause: row.whereClause, ifClause: source(condition, at: at),
                limits: LimitSpec(), priority: nil, actions: [Located(emit, at), Located(set, at)], location: at)
        }
    }

    mutating func rule(_ node: SourceNode) -> RuleSpec? {
        let context = node["id"]?.scalar.map { "rule '\($0.text)'" } ?? "a rule"
        guard let k = keys(of: node, DSL.rule, context: context) else { return nil }
        // A missing or malformed id is reported (by `keys` or `identifier`), and the rest of the rule is still read
        // and compiled under the text written, so that every problem of the rule shows in the same run.
        let id: Located<String>
        if let idNode = k["id"] {
            id =
                identifier(idNode.value, "id")
                ?? Located(idNode.value.scalar?.text ?? "rule at line \(node.location.position.line)", idNode.value.location)
        } else {
            id = Located("rule at line \(node.location.position.line)", node.location)
        }

        var triggers: [TriggerSpec] = []
        var triggerKeys: [ScalarNode] = []
        if let on = k["on"], let names = oneOrMany(on.value, "on") {
            triggers.append(.events(names))
            triggerKeys.append(on.key)
        }
        if let on = k["on_screen"], let names = oneOrMany(on.value, "on_screen") {
            triggers.append(.screens(names))
            triggerKeys.append(on.key)
        }
        if let ch = k["on_change"], let attr = named(ch.value, "on_change") {
            func values(_ key: String) -> [Located<Value>]? {
                guard let n = k[key]?.value else { return nil }
                let items: [SourceNode]
                if case .sequence(let xs, _) = n { items = xs } else { items = [n] }
                var out: [Located<Value>] = []
                for item in items {
                    if case .literal(let v) = value(item) {
                        out.append(Located(v, item.location))
                    } else {
                        diagnostics.error(
                            .invalidTrigger, "'\(key)' takes plain values to compare with, not expressions",
                            at: item.location)
                    }
                }
                return out
            }
            triggers.append(.change(attribute: attr, from: values("from"), to: values("to")))
            triggerKeys.append(ch.key)
        } else {
            for key in ["from", "to"] {
                if let n = k[key] {
                    diagnostics.error(
                        .invalidTrigger, "'\(key)' only goes with `on_change`", at: n.key.location,
                        suggestion: "add `on_change: ATTRIBUTE`, or use `where:` to test the event")
                }
            }
        }
        // Timed triggers: no event to test with `where`, their own time instead of `wait`/`at`/`unless`.
        func timed(_ name: String, _ why: String) {
            for key in ["where", "wait", "at", "unless", "retrigger"] {
                if let n = k[key] {
                    diagnostics.error(
                        .invalidTrigger, "'\(key)' does not go with `\(name)`: \(why)", at: n.key.location,
                        suggestion: key == "where" ? "test the user with `if:`" : "remove '\(key)'")
                }
            }
        }
        if let inactive = k["inactive_for"], let d = duration(inactive.value, "inactive_for") {
            triggerKeys.append(inactive.key)
            if d.value <= 0 {
                diagnostics.error(.invalidTrigger, "inactive for 0 is every moment: give a duration like 7d", at: d.location)
            } else {
                triggers.append(.inactive(d))
            }
            timed("inactive_for", "it fires when nothing has happened, at the end of the wait")
        }
        if let sched = k["schedule"], let text = scalar(sched.value, "schedule", .text) {
            triggerKeys.append(sched.key)
            if let spec = ScheduleSpec.parse(text.text) {
                triggers.append(.schedule(Located(spec, text.location)))
            } else {
                diagnostics.error(
                    .invalidTrigger,
                    "'schedule' expects a time like 2026-03-05T10:00:00Z or every monday 10:00, found '\(text.text)'",
                    at: text.location,
                    suggestion: ScheduleSpec.suggestion(for: text.text)
                        ?? "write an RFC 3339 instant, or `every [day|weekday|weekend|monday…] HH:MM`")
            }
            timed("schedule", "it runs at its time, not on an event")
        }
        if let seq = k["sequence"] {
            triggerKeys.append(seq.key)
            if let t = sequence(seq.value, k, context: context) { triggers.append(t) }
        } else {
            for key in ["within", "correlate"] {
                if let n = k[key] {
                    diagnostics.error(
                        .invalidTrigger, "'\(key)' only goes with `sequence`", at: n.key.location,
                        suggestion: "add `sequence: [FIRST EVENT, NEXT EVENT]`, or remove '\(key)'")
                }
            }
        }
        if triggers.isEmpty {
            if k["on"] == nil && k["on_screen"] == nil && k["on_change"] == nil && k["sequence"] == nil
                && k["inactive_for"] == nil && k["schedule"] == nil
            {
                diagnostics.error(
                    .missingKey, "\(context) has no trigger", at: id.location,
                    suggestion:
                        "add `on: EVENT`, `on_screen: SCREEN`, `on_change: ATTRIBUTE`, `sequence: [A, B]`, `inactive_for: 7d` or `schedule: …`"
                )
            }
            // Read and compile the rest under no event, so that its problems are reported too.
            triggers.append(.events([]))
        }
        if triggers.count > 1 {
            diagnostics.error(
                .invalidTrigger, "\(context) has more than one kind of trigger", at: triggerKeys[1].location,
                suggestion: "split it into one rule per trigger kind")
        }
        var actions: [Located<ActionSpec>] = []
        if let d = k["do"] {
            if case .sequence(let items, _) = d.value {
                if items.isEmpty {
                    diagnostics.error(.invalidAction, "\(context) does nothing: 'do' is empty", at: d.value.location)
                }
                for item in items { if let a = action(item) { actions.append(a) } }
            } else {
                diagnostics.error(
                    .wrongType, "'do' expects a list of actions (each starting with '- '), found \(d.value.kindDescription)",
                    at: d.value.location, suggestion: "write `do:` then `  - message: {…}` on the next line")
            }
        }
        var spec = RuleSpec(
            id: id,
            description: k["description"].flatMap { string($0.value, "description")?.value },
            enabled: k["enabled"].flatMap { boolean($0.value, "enabled")?.value } ?? true,
            trigger: triggers[0],
            whereClause: k["where"].flatMap { expression($0.value, "where") },
            ifClause: k["if"].flatMap { expression($0.value, "if") },
            limits: k["limit"].map { limits($0.value, context: "limit") } ?? LimitSpec(),
            priority: k["priority"].flatMap { integer($0.value, "priority", min: 0) },
            actions: actions,
            location: id.location)
        timing(&spec, k)
        spec.silence = k["silence"].flatMap { silence($0.value) } ?? []
        if let v = k["variants"] { spec.variants = variants(v.value, ofRule: true) }
        spec.transactional = k["transactional"].flatMap { boolean($0.value, "transactional")?.value } ?? false
        if let r = k["rate"], let s = scalar(r.value, "rate", .text) {
            if case .schedule = spec.trigger {
                if let rate = SendRate.parse(s.text) {
                    spec.rate = Located(rate, s.location)
                } else {
                    diagnostics.error(
                        .invalidValue, "'rate' expects a count per second, minute, hour or day, found '\(s.text)'",
                        at: s.location, suggestion: "write it like 10000/min (or 50/s, 100000/h, 1000000/day)")
                }
            } else {
                diagnostics.error(
                    .invalidTrigger, "'rate' paces a `schedule`'s runs, and this rule has no `schedule`",
                    at: r.key.location,
                    suggestion: "remove 'rate'; to cap how often one user gets this rule, use `limit:`")
            }
        }
        return spec
    }

    /// A file's or a rule's `variants:`: at least two, ids once, at most one control (with no actions of its own),
    /// positive weights. (Weights that do not add up to 100 are a warning of the analysis, not an error.)
    mutating func variants(_ node: SourceNode, ofRule: Bool) -> [VariantSpec] {
        guard case .sequence(let items, let loc) = node else {
            diagnostics.error(
                .wrongType, "'variants' expects a list of variants, found \(node.kindDescription)", at: node.location)
            return []
        }
        var out: [VariantSpec] = []
        for item in items {
            guard let k = keys(of: item, DSL.variant, context: "variant"),
                let id = k["id"].flatMap({ identifier($0.value, "id") }),
                let w = k["weight"].flatMap({ scalar($0.value, "weight", .text) })
            else { continue }
            let text = w.text.trimmingWhitespace()
            guard let weight = Double(text.hasSuffix("%") ? String(text.dropLast()) : text), weight > 0, weight <= 100 else {
                diagnostics.error(
                    .invalidValue, "'weight' is a share of users in percent (more than 0, at most 100), not '\(w.text)'",
                    at: w.location)
                continue
            }
            let control = k["control"].flatMap { boolean($0.value, "control")?.value } ?? false
            var actions: [Located<ActionSpec>]?
            if let d = k["do"] {
                if !ofRule {
                    diagnostics.error(
                        .invalidAction, "a file's variant has no actions of its own: they are its rules'", at: d.key.location,
                        suggestion: "put the variants on the rule whose actions differ")
                } else if control {
                    diagnostics.error(.invalidAction, "the control variant sends nothing: it has no `do`", at: d.key.location)
                } else if case .sequence(let xs, _) = d.value, !xs.isEmpty {
                    actions = xs.compactMap { action($0) }
                } else {
                    diagnostics.error(.wrongType, "'do' expects a list of actions", at: d.value.location)
                }
            }
            if out.contains(where: { $0.id.value == id.value }) {
                diagnostics.error(.duplicateName, "variant '\(id.value)' is defined twice", at: id.location)
                continue
            }
            if control, let other = out.first(where: \.control) {
                diagnostics.error(
                    .invalidValue, "'\(other.id.value)' is the control already: a test has one control", at: id.location)
                continue
            }
            out.append(
                VariantSpec(
                    id: id, weight: Located(weight, w.location), control: control, actions: actions, location: item.location))
        }
        if out.count == 1 {
            diagnostics.error(
                .invalidValue, "one variant is no test: give at least two (one may be `control: true`)", at: loc,
                suggestion: "add a variant, or remove `variants`")
            return []
        }
        return out
    }

    /// `silence: [ids]`: each must be the id of an analysis warning.
    mutating func silence(_ node: SourceNode) -> [Located<String>]? {
        guard let ids = oneOrMany(node, "silence") else { return nil }
        for id in ids where !(DiagnosticID(rawValue: id.value).map(DiagnosticID.analysis.contains) ?? false) {
            let names = DiagnosticID.analysis.map(\.rawValue)
            diagnostics.error(
                .invalidValue,
                "'\(id.value)' is not an analysis warning"
                    + (Suggest.nearest(id.value, in: names).map { "; did you mean '\($0)'?" } ?? ""),
                at: id.location, suggestion: "the warnings that can be silenced: " + names.joined(separator: ", "))
        }
        return ids
    }

    /// `wait`, `at`, `unless`, `retrigger`, `recheck`, `quiet_hours`, `reprompt`.
    mutating func timing(_ spec: inout RuleSpec, _ k: [String: (key: ScalarNode, value: SourceNode)]) {
        spec.waitMs = k["wait"].flatMap { duration($0.value, "wait") }
        if let a = k["at"], let s = scalar(a.value, "at", .text) {
            if let at = AtSpec.parse(s.text) {
                spec.at = Located(at, s.location)
            } else {
                diagnostics.error(
                    .invalidValue, "'at' expects a local time like 10:00, weekday 10:00 or monday 09:30, found '\(s.text)'",
                    at: s.location,
                    suggestion: AtSpec.nearest(s.text, keeping: ["next"]).map { "did you mean '\($0)'?" }
                        ?? "write the time as HH:MM (24-hour), optionally after a day or 'weekday'")
            }
        }
        let delayed = spec.waitMs != nil || spec.at != nil
        if let u = k["unless"] {
            let items: [SourceNode]
            if case .sequence(let xs, _) = u.value { items = xs } else { items = [u.value] }
            for item in items {
                if let step = eventStep(item, "unless") {
                    spec.unless.append(UnlessSpec(event: step.event, whereClause: step.whereClause))
                }
            }
        }
        if let r = k["retrigger"], let s = scalar(r.value, "retrigger", .text) {
            if let p = RetriggerPolicy(rawValue: s.text) {
                spec.retrigger = p
            } else {
                diagnostics.error(.invalidValue, "'retrigger' is keep, restart or add, not '\(s.text)'", at: s.location)
            }
        }
        spec.recheck = k["recheck"].flatMap { boolean($0.value, "recheck")?.value } ?? false
        if case .scalar(let s)? = k["quiet_hours"]?.value, s.text == "none" {
            spec.quietHoursOff = true
        } else {
            spec.quietHours = k["quiet_hours"].flatMap { quietHours($0.value) }
        }
        let holds = spec.quietHours?.hold == true
        for key in ["unless", "retrigger", "recheck"] where k[key] != nil && !delayed && !(key == "unless" && holds) {
            diagnostics.error(
                .invalidTrigger, "'\(key)' applies to delayed actions, and this rule has no `wait` or `at`",
                at: k[key]!.key.location,
                suggestion: "add `wait: 24h` (or `at: \"10:00\"`), or remove '\(key)'")
        }
        if let r = k["reprompt"], let rk = keys(of: r.value, DSL.reprompt, context: "reprompt"),
            let after = rk["after"].flatMap({ string($0.value, "after") }),
            let wait = rk["wait"].flatMap({ duration($0.value, "wait") })
        {
            let times = rk["times"].flatMap { integer($0.value, "times", min: 1) }
            var when: [(key: String, value: Value)] = []
            for pair in rk["when"].map({ valueMap($0.value, "when") }) ?? [] {
                if case .literal(let lit) = pair.value {
                    when.append((pair.key, lit))
                } else {
                    diagnostics.error(.invalidValue, "'when' takes plain values, not expressions", at: rk["when"]!.value.location)
                }
            }
            if let p = spec.limits.perUser, let times {
                diagnostics.error(
                    .invalidLimit, "'reprompt' already limits the rule to \(times.value) fires; remove limit.per_user",
                    at: p.location)
            }
            spec.reprompt = RepromptSpec(
                after: after, when: when, waitMs: wait.value, times: times?.value, location: r.key.location)
        }
    }

    /// A sequence trigger: `sequence: [A, B]` with `within` and optional `correlate`.
    mutating func sequence(
        _ node: SourceNode, _ k: [String: (key: ScalarNode, value: SourceNode)], context: String
    ) -> TriggerSpec? {
        guard case .sequence(let items, let loc) = node else {
            diagnostics.error(
                .wrongType, "'sequence' expects a list of events, found \(node.kindDescription)", at: node.location,
                suggestion: "write `sequence: [Added To Cart, Checkout Started]`")
            return nil
        }
        let steps = items.compactMap { eventStep($0, "sequence") }
        guard steps.count == items.count else { return nil }
        if steps.count < 2 {
            diagnostics.error(
                .invalidTrigger, "a sequence needs at least two steps", at: loc, suggestion: "for a single event, use `on:`")
        }
        guard let within = k["within"].flatMap({ duration($0.value, "within") }) else {
            if k["within"] == nil {
                diagnostics.error(
                    .missingKey, "\(context) has a `sequence` but no `within`", at: loc,
                    suggestion: "add `within: 1h`: the most time from the first step to the last")
            }
            return nil
        }
        let correlate = k["correlate"].flatMap { string($0.value, "correlate") }
        return .sequence(steps: steps, withinMs: within.value, correlate: correlate)
    }

    /// An event name, or `{ event: NAME, where: EXPR }`.
    mutating func eventStep(_ node: SourceNode, _ key: String) -> StepSpec? {
        switch node {
        case .scalar(let s) where !s.isNull:
            return nonEmpty(Located(s.text, s.location), key).map { StepSpec(event: $0, whereClause: nil) }
        case .mapping:
            guard let k = keys(of: node, DSL.eventStep, context: key), let ev = k["event"].flatMap({ named($0.value, "event") })
            else { return nil }
            return StepSpec(event: ev, whereClause: k["where"].flatMap { expression($0.value, "where") })
        default:
            diagnostics.error(
                .wrongType, "'\(key)' expects an event name or { event: NAME, where: CONDITION }, found \(node.kindDescription)",
                at: node.location)
            return nil
        }
    }

    mutating func quietHours(_ node: SourceNode) -> QuietHoursSpec? {
        guard let k = keys(of: node, DSL.quietHours, context: "quiet_hours") else { return nil }
        func minute(_ key: String) -> Int? {
            guard let n = k[key], let s = scalar(n.value, key, .text) else { return nil }
            let hm = s.text.split(separator: ":")
            if hm.count == 2, hm[1].count == 2, let h = Int(hm[0]), let m = Int(hm[1]), (0...24).contains(h),
                (0...59).contains(m),
                h * 60 + m <= 1440
            {
                return h * 60 + m
            }
            diagnostics.error(.invalidValue, "'\(key)' expects a local time like 22:00, found '\(s.text)'", at: s.location)
            return nil
        }
        guard let from = minute("from"), let to = minute("to") else { return nil }
        var hold = true
        if let t = k["then"], let s = scalar(t.value, "then", .text) {
            switch s.text {
            case "hold": hold = true
            case "drop": hold = false
            default: diagnostics.error(.invalidValue, "'then' is hold or drop, not '\(s.text)'", at: s.location)
            }
        }
        if from == to {
            diagnostics.error(
                .invalidValue, "quiet hours from \(k["from"]!.value.scalar!.text) to the same time are empty", at: node.location)
            return nil
        }
        return QuietHoursSpec(from: from % 1440, to: to % 1440, hold: hold, location: node.location)
    }

    mutating func limits(_ node: SourceNode, context: String, schema: ObjectSchema = DSL.limits) -> LimitSpec {
        var spec = LimitSpec()
        guard let k = keys(of: node, schema, context: context) else { return spec }
        spec.perUser = k["per_user"].flatMap { integer($0.value, "per_user", min: 1) }
        spec.perSession = k["per_session"].flatMap { integer($0.value, "per_session", min: 1) }
        for kind in LimitKind.rolling {
            if let n = k[kind.key].flatMap({ integer($0.value, kind.key, min: 1) }) { spec.rolling.append((kind, n)) }
        }
        spec.cooldown = k["cooldown"].flatMap { duration($0.value, "cooldown") }
        if let c = spec.cooldown, c.value == 0 {
            diagnostics.error(
                .invalidLimit, "a cooldown of 0 never binds", at: c.location, suggestion: "remove it, or give a duration like 1h")
        }
        spec.onOccurrence = k["on_occurrence"].flatMap { integer($0.value, "on_occurrence", min: 1) }
        spec.everyOccurrence = k["every_occurrence"].flatMap { integer($0.value, "every_occurrence", min: 1) }
        if let a = spec.onOccurrence, spec.everyOccurrence != nil {
            diagnostics.error(
                .invalidLimit, "'on_occurrence' and 'every_occurrence' cannot be combined", at: a.location,
                suggestion: "keep one of them")
        }
        return spec
    }

    // MARK: Actions

    mutating func action(_ node: SourceNode) -> Located<ActionSpec>? {
        guard case .mapping(let pairs, let loc) = node else {
            let known = DSL.actions.map(\.name)
            if case .scalar(let s) = node,
                let hint = Suggest.nearest(s.text, in: known) ?? (known.contains(s.text) ? s.text : nil)
            {
                diagnostics.error(.wrongType, "an action is a map like `- \(hint): …`, found '\(s.text)'", at: node.location)
            } else {
                diagnostics.error(
                    .wrongType, "an action is a map like `- message: {…}`, found \(node.kindDescription)",
                    at: node.location, suggestion: "actions: " + known.joined(separator: ", "))
            }
            return nil
        }
        guard pairs.count == 1 else {
            let where_ = pairs.count > 1 ? pairs[1].key.location : loc
            diagnostics.error(
                .invalidAction, "each action is a map with exactly one key (the action's kind); found \(pairs.count)",
                at: where_, suggestion: "start a new list item ('- ') for each action")
            return nil
        }
        let (key, value) = pairs[0]
        switch ActionKind(rawValue: key.text) {
        case .message: return message(value).map { Located(.message($0), key.location) }
        case .screen:
            if case .scalar = value {
                return templateValue(value, "screen").map { Located(.screen(id: $0, params: []), key.location) }
            }
            guard let k = keys(of: value, DSL.screen, context: "screen"),
                let id = k["id"].flatMap({ templateValue($0.value, "id") })
            else { return nil }
            return Located(.screen(id: id, params: k["params"].map { valueMap($0.value, "params") } ?? []), key.location)
        case .deepLink: return templateValue(value, "deep_link").map { Located(.deepLink($0), key.location) }
        case .markRead: return templateValue(value, "mark_read").map { Located(.markRead($0), key.location) }
        case .prompt:
            guard let s = scalar(value, "prompt", DSL.action(.prompt).type) else { return nil }
            let allowed = ["att", "notifications", "location"]
            guard allowed.contains(s.text) else {
                let hint = Suggest.nearest(s.text, in: allowed)
                diagnostics.error(
                    .invalidAction, "unknown permission '\(s.text)'" + (hint.map { "; did you mean '\($0)'?" } ?? ""),
                    at: s.location, suggestion: "one of: " + allowed.joined(separator: ", "))
                return nil
            }
            return Located(.prompt(s.text), key.location)
        case .notify:
            guard let k = keys(of: value, DSL.notify, context: "notify"),
                let msg = k["message"].flatMap({ templateValue($0.value, "message") })
            else { return nil }
            return Located(
                .notify(
                    NotifySpec(
                        id: k["id"].flatMap { templateValue($0.value, "id") },
                        sender: k["sender"].flatMap { templateValue($0.value, "sender") },
                        message: msg,
                        link: k["link"].flatMap { templateValue($0.value, "link") },
                        data: k["data"].map { valueMap($0.value, "data") } ?? [])), key.location)
        case .push:
            guard let k = keys(of: value, DSL.push, context: "push"),
                let body = k["body"].flatMap({ templateValue($0.value, "body") })
            else { return nil }
            let image = k["image"].flatMap { templateValue($0.value, "image") }
            if let i = image, let url = i.literal, !(url.hasPrefix("https://") || url.hasPrefix("http://")) {
                diagnostics.error(
                    .invalidAction, "a push image is a web address the device downloads, not '\(url)'", at: i.location,
                    suggestion: "write the image's https:// URL")
            }
            return Located(
                .push(
                    PushSpec(
                        title: k["title"].flatMap { templateValue($0.value, "title") }, body: body,
                        deepLink: k["deep_link"].flatMap { templateValue($0.value, "deep_link") }, image: image,
                        data: k["data"].map { valueMap($0.value, "data") } ?? [],
                        to: k["to"].flatMap { address($0.value, email: false) })), key.location)
        case .email:
            guard let k = keys(of: value, DSL.email, context: "email"),
                let template = k["template"].flatMap({ templateValue($0.value, "template") }),
                let to = k["to"].flatMap({ address($0.value, email: true) })
            else { return nil }
            return Located(
                .email(
                    EmailSpec(
                        template: template, to: to, subject: k["subject"].flatMap { templateValue($0.value, "subject") },
                        data: k["data"].map { valueMap($0.value, "data") } ?? [])), key.location)
        case .emit:
            guard let k = keys(of: value, DSL.emit, context: "emit"), let ev = k["event"].flatMap({ named($0.value, "event") })
            else { return nil }
            return Located(
                .emit(event: ev.value, payload: k["payload"].map { valueMap($0.value, "payload") } ?? []), key.location)
        case .set:
            guard case .mapping(let attrs, _) = value, !attrs.isEmpty else {
                diagnostics.error(
                    .wrongType, "'set' expects a map of attribute names to values, found \(value.kindDescription)",
                    at: value.location, suggestion: "write `set: { plan: pro }`")
                return nil
            }
            var out: [(attribute: Located<String>, value: ValueSource)] = []
            for (k, v) in attrs {
                if out.contains(where: { $0.attribute.value == k.text }) {
                    diagnostics.error(.duplicateKey, "'\(k.text)' is set twice", at: k.location)
                    continue
                }
                if let bad = FileParser.reservedAttribute(k.text) {
                    diagnostics.error(.invalidAction, bad, at: k.location)
                    continue
                }
                out.append((Located(k.text, k.location), self.value(v)))
            }
            return Located(.set(out), key.location)
        case .unset:
            guard let names = oneOrMany(value, "unset") else { return nil }
            for n in names {
                if let bad = FileParser.reservedAttribute(n.value) { diagnostics.error(.invalidAction, bad, at: n.location) }
            }
            return Located(.unset(names), key.location)
        case .flow:
            guard let k = keys(of: value, DSL.flowAction, context: "flow") else { return nil }
            let verbs = ["start", "resume", "complete"].filter { k[$0] != nil }
            guard verbs.count == 1, let verb = FlowActionSpec.Verb(rawValue: verbs[0]),
                let flow = templateValue(k[verbs[0]]!.value, verbs[0])
            else {
                diagnostics.error(
                    .invalidAction, "a flow action needs exactly one of start, resume or complete", at: key.location,
                    suggestion: "write `flow: { resume: my_flow }`")
                return nil
            }
            let step = k["step"].flatMap { templateValue($0.value, "step") }
            if verb == .complete && step == nil {
                diagnostics.error(
                    .missingKey, "`complete` needs the `step` that was completed", at: key.location,
                    suggestion: "add `step: \"${event.properties.step}\"`")
                return nil
            }
            if verb != .complete, let st = k["step"] {
                diagnostics.error(.invalidAction, "`step` only goes with `complete`", at: st.key.location)
            }
            return Located(.flow(FlowActionSpec(verb: verb, flow: flow, step: step)), key.location)
        default:
            let hint = Suggest.nearest(key.text, in: DSL.actions.map(\.name))
            diagnostics.error(
                .invalidAction, "unknown action '\(key.text)'" + (hint.map { "; did you mean '\($0)'?" } ?? ""),
                at: key.location, suggestion: "actions: " + DSL.actions.map(\.name).joined(separator: ", "))
            return nil
        }
    }

    /// A push's or email's `to`: a template; written out, it is not empty, and an email address has an `@`.
    mutating func address(_ node: SourceNode, email: Bool) -> TemplateSource? {
        guard let t = templateValue(node, "to") else { return nil }
        if let text = t.literal, text.isEmpty || (email && !text.contains("@")) {
            diagnostics.error(
                .invalidValue, "'\(text)' is not an address", at: t.location,
                suggestion: email ? "write the user's address as an expression: `to: \"${user.email}\"`" : nil)
        }
        return t
    }

    static func reservedAttribute(_ name: String) -> String? {
        name == "id" ? "'user.id' is the user's id and cannot be set" : nil
    }

    mutating func message(_ node: SourceNode) -> MessageSpec? {
        guard let k = keys(of: node, DSL.message, context: "message"),
            let surface = k["surface"].flatMap({ identifier($0.value, "surface") })
        else { return nil }
        var buttons: [ButtonSpec] = []
        if let b = k["buttons"] {
            if case .sequence(let items, _) = b.value {
                for item in items {
                    guard let bk = keys(of: item, DSL.button, context: "button"),
                        let label = bk["label"].flatMap({ templateValue($0.value, "label") })
                    else { continue }
                    let link = bk["deep_link"].flatMap { templateValue($0.value, "deep_link") }
                    let act = bk["action"].flatMap { templateValue($0.value, "action") }
                    if link != nil && act != nil {
                        diagnostics.error(
                            .invalidAction, "a button has either a 'deep_link' or an 'action', not both",
                            at: bk["action"]!.key.location)
                    }
                    buttons.append(ButtonSpec(label: label, deepLink: link, action: act))
                }
            } else {
                diagnostics.error(
                    .wrongType, "'buttons' expects a list of buttons, found \(b.value.kindDescription)", at: b.value.location)
            }
        }
        let spec = MessageSpec(
            surface: surface.value,
            template: k["template"].flatMap { identifier($0.value, "template")?.value },
            title: k["title"].flatMap { templateValue($0.value, "title") },
            body: k["body"].flatMap { templateValue($0.value, "body") },
            image: k["image"].flatMap { templateValue($0.value, "image") },
            buttons: buttons,
            data: k["data"].map { valueMap($0.value, "data") } ?? [])
        if spec.title == nil && spec.body == nil && spec.image == nil && spec.template == nil {
            diagnostics.error(
                .invalidAction, "this message shows nothing: give it a title, body, image or template",
                at: node.location)
        }
        return spec
    }

    // MARK: Settings

    mutating func settingsFile(_ root: SourceNode) -> SettingsSpec? {
        guard let k = keys(of: root, DSL.settingsFile, context: "the settings file") else { return nil }
        version(k)
        guard let name = k["settings"].flatMap({ identifier($0.value, "settings") }) else { return nil }
        var spec = SettingsSpec(path: file, name: name)
        if let s = k["sessions"], let sk = keys(of: s.value, DSL.sessions, context: "sessions") {
            spec.sessionStartEvents = sk["start_on"].flatMap { oneOrMany($0.value, "start_on") } ?? []
            if let t = sk["timeout"].flatMap({ duration($0.value, "timeout") }) {
                if t.value == 0 {
                    diagnostics.error(.invalidValue, "a session timeout of 0 makes every event a new session", at: t.location)
                } else {
                    spec.sessionTimeoutMs = t.value
                }
            }
        }
        if let g = k["global_limit"] {
            spec.globalLimits = limits(g.value, context: "global_limit")
            spec.globalLimitsLocation = g.key.location
            for key in ["on_occurrence", "every_occurrence"] {
                if let n = g.value[key] {
                    diagnostics.error(.invalidLimit, "'\(key)' belongs to a rule, not to the global limit", at: n.location)
                }
            }
        }
        if let c = k["channel_limits"] { spec.channelLimits = channelLimits(c.value) }
        spec.dedupWindowMs = k["dedup_window"].flatMap { duration($0.value, "dedup_window")?.value }
        spec.clockSkewMs = k["clock_skew"].flatMap { duration($0.value, "clock_skew")?.value }
        spec.deepLinkSchemes = k["deep_link_schemes"].flatMap { oneOrMany($0.value, "deep_link_schemes") }
        if let d = k["destinations"] {
            guard case .sequence(let items, _) = d.value else {
                diagnostics.error(
                    .wrongType, "'destinations' expects a list of destinations, found \(d.value.kindDescription)",
                    at: d.value.location)
                return spec
            }
            for item in items {
                guard let dest = destination(item) else { continue }
                if spec.destinations.contains(where: { $0.name == dest.name }) {
                    diagnostics.error(.duplicateName, "destination '\(dest.name)' is defined twice", at: item.location)
                    continue
                }
                spec.destinations.append(dest)
            }
        }
        return spec
    }

    /// `channel_limits: { push: { per_calendar_day: 2 }, message: { per_session: 1 } }`: caps per channel, counted from
    /// the channel's fires' history (windows, the session's, the lifetime count), not a fire record per channel.
    mutating func channelLimits(_ node: SourceNode) -> [(channel: Located<ActionKind>, limits: LimitSpec)] {
        guard let k = keys(of: node, DSL.channelLimits, context: "channel_limits") else { return [] }
        var out: [(channel: Located<ActionKind>, limits: LimitSpec)] = []
        for channel in ActionKind.channels {
            guard let (key, value) = k[channel.rawValue] else { continue }
            let spec = limits(value, context: "channel_limits." + key.text, schema: DSL.windowLimits)
            if !spec.isEmpty { out.append((Located(channel, key.location), spec)) }
        }
        return out
    }

    mutating func destination(_ node: SourceNode) -> Destination? {
        guard let k = keys(of: node, DSL.destination, context: "destination"),
            let name = k["name"].flatMap({ identifier($0.value, "name") }),
            let url = k["url"].flatMap({ string($0.value, "url") })
        else { return nil }
        var ok = true
        let lower = url.value.lowercased()
        let rest = lower.hasPrefix("https://") ? lower.dropFirst(8) : lower.hasPrefix("http://") ? lower.dropFirst(7) : nil
        if rest.map({ $0.isEmpty || $0.hasPrefix("/") || $0.contains(where: \.isWhitespace) }) ?? true {
            diagnostics.error(
                .invalidValue, "a destination's url must be an http:// or https:// URL with a host, found '\(url.value)'",
                at: url.location)
            ok = false
        }
        var d = Destination(name: name.value, url: url.value)
        if let m = k["method"].flatMap({ string($0.value, "method") }) {
            if ["POST", "PUT", "PATCH"].contains(m.value) {
                d.method = m.value
            } else {
                diagnostics.error(.invalidValue, "'method' must be POST, PUT or PATCH, found '\(m.value)'", at: m.location)
                ok = false
            }
        }
        func headers(_ key: String, values: (String) -> Bool, expect: String) -> [Destination.Header] {
            guard let h = k[key] else { return [] }
            guard case .mapping(let pairs, _) = h.value else {
                diagnostics.error(.wrongType, "'\(key)' expects a map of header names to \(expect)", at: h.value.location)
                ok = false
                return []
            }
            var out: [Destination.Header] = []
            for (name, value) in pairs {
                let token =
                    !name.text.isEmpty
                    && name.text.unicodeScalars.allSatisfy { c in
                        c.isASCII
                            && (c.properties.isAlphabetic || ("0"..."9").contains(c)
                                || "!#$%&'*+-.^_`|~".unicodeScalars.contains(c))
                    }
                guard token else {
                    diagnostics.error(.invalidValue, "'\(name.text)' is not a valid HTTP header name", at: name.location)
                    ok = false
                    continue
                }
                guard let v = string(value, name.text), values(v.value) else {
                    diagnostics.error(.invalidValue, "'\(name.text)' in '\(key)' must be \(expect)", at: value.location)
                    ok = false
                    continue
                }
                out.append(.init(name: name.text, value: v.value))
            }
            return out
        }
        d.headers = headers("headers", values: { !$0.contains("\n") && !$0.contains("\r") }, expect: "text on one line")
        d.secretHeaders = headers(
            "secret_headers",
            values: { v in
                guard let f = v.unicodeScalars.first, f == "_" || ("A"..."Z").contains(f) else { return false }
                return v.unicodeScalars.allSatisfy { $0 == "_" || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
            }, expect: "the name of an environment variable (A-Z, 0-9, _)")
        if let kinds = k["kinds"].flatMap({ oneOrMany($0.value, "kinds") }) {
            for kind in kinds where ActionKind(rawValue: kind.value).map(ActionKind.written.contains) != true {
                let hint = Suggest.nearest(kind.value, in: ActionKind.written.map(\.rawValue))
                diagnostics.error(
                    .invalidValue, "'\(kind.value)' is not an action kind", at: kind.location,
                    suggestion: hint.map { "use '\($0)'" })
                ok = false
            }
            d.kinds = kinds.map(\.value)
        }
        d.events = k["events"].flatMap { oneOrMany($0.value, "events") }?.map(\.value)
        if let b = k["body"].flatMap({ string($0.value, "body") }) {
            if let body = Destination.Body(rawValue: b.value) {
                d.body = body
            } else {
                diagnostics.error(.invalidValue, "'body' must be 'action' or 'payload', found '\(b.value)'", at: b.location)
                ok = false
            }
        }
        d.envelope = k["envelope"].flatMap { string($0.value, "envelope")?.value }
        func positive(_ key: String) -> Int64? {
            guard let t = k[key].flatMap({ duration($0.value, key) }) else { return nil }
            guard t.value > 0 else {
                diagnostics.error(.invalidValue, "'\(key)' must be longer than 0", at: t.location)
                ok = false
                return nil
            }
            return t.value
        }
        if let t = positive("timeout") { d.timeoutMs = t }
        if let t = positive("backoff") { d.backoffMs = t }
        if let t = positive("max_backoff") { d.maxBackoffMs = t }
        if let n = k["max_attempts"].flatMap({ integer($0.value, "max_attempts", min: 1) }) { d.maxAttempts = n.value }
        if let r = k["rate"].flatMap({ string($0.value, "rate") }) {
            if let perSecond = Self.rate(r.value) {
                d.ratePerSecond = perSecond
            } else {
                diagnostics.error(
                    .invalidValue, "'rate' must be a count per second, minute or hour, like 500/s, found '\(r.value)'",
                    at: r.location, suggestion: "write 500/s, 30/m or 1000/h")
                ok = false
            }
        }
        if let e = k["email"] {
            if let email = email(e.value) {
                d.email = email
                if k["kinds"] == nil { d.kinds = [ActionKind.email.rawValue] }
            } else {
                ok = false
            }
        }
        if let f = k["fcm"] {
            if let fcm = fcm(f.value) {
                d.fcm = fcm
                if k["kinds"] == nil { d.kinds = [ActionKind.push.rawValue] }
            } else {
                ok = false
            }
            if k["apns"] != nil {
                diagnostics.error(.invalidValue, "a destination is 'apns' or 'fcm', not both", at: f.value.location)
                ok = false
            }
        }
        if let a = k["apns"] {
            if let apns = apns(a.value) {
                d.apns = apns
                if k["kinds"] == nil { d.kinds = [ActionKind.push.rawValue] }
            } else {
                ok = false
            }
        }
        if d.maxBackoffMs < d.backoffMs, let n = k["max_backoff"] {
            diagnostics.error(.invalidValue, "'max_backoff' is shorter than 'backoff'", at: n.value.location)
            ok = false
        }
        return ok ? d : nil
    }

    /// A destination's `apns:` block; its key file must exist and hold a PEM private key (checked here, so that
    /// `beckon validate` says so at the line that names it).
    mutating func apns(_ node: SourceNode) -> Destination.APNs? {
        guard let k = keys(of: node, DSL.apns, context: "apns"),
            let topic = k["topic"].flatMap({ string($0.value, "topic") }),
            let team = k["team_id"].flatMap({ string($0.value, "team_id") }),
            let key = k["key_id"].flatMap({ string($0.value, "key_id") })
        else { return nil }
        var ok = true
        var a = Destination.APNs(topic: topic.value, teamID: team.value, keyID: key.value)
        func readable(_ key: String) -> String? {
            guard let f = k[key].flatMap({ string($0.value, key) }) else { return nil }
            let path = Self.resolve(f.value, besides: file)
            guard readsNamedFiles else { return path }
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                diagnostics.error(
                    .invalidValue, "'\(key)' names \(path), which cannot be read", at: f.location,
                    suggestion: "give a path relative to this file, or an absolute one")
                ok = false
                return nil
            }
            let marker = key == "key_file" ? "-----BEGIN PRIVATE KEY-----" : "-----BEGIN CERTIFICATE-----"
            guard text.contains(marker) else {
                diagnostics.error(.invalidValue, "\(path) holds no '\(marker)' block", at: f.location)
                ok = false
                return nil
            }
            // (The key APNs tokens are signed with: what serving it would refuse, validate says, at this line.)
            if key == "key_file", (try? P256.Signing.PrivateKey(pemRepresentation: text)) == nil {
                diagnostics.error(
                    .invalidValue, "\(path) is not a P-256 private key in PEM (the .p8 file Apple gives)", at: f.location,
                    suggestion: "download the key again from Apple's developer account (Keys), or name the right file")
                ok = false
                return nil
            }
            return path
        }
        a.keyFile = readable("key_file")
        a.caFile = readable("ca_file")
        a.keyVariable = k["key_env"].flatMap { string($0.value, "key_env")?.value }
        if (k["key_file"] == nil) == (k["key_env"] == nil) {
            diagnostics.error(.invalidValue, "'apns' needs one of 'key_file' and 'key_env'", at: node.location)
            ok = false
        }
        if let p = k["push_type"].flatMap({ string($0.value, "push_type") }) { a.pushType = p.value }
        if let p = k["priority"].flatMap({ string($0.value, "priority") }) { a.priority = Int(p.value) ?? 10 }
        if let e = k["expiration"].flatMap({ duration($0.value, "expiration") }) { a.expirationSeconds = e.value / 1000 }
        return ok ? a : nil
    }

    /// A destination's `fcm:` block; its service account file must exist and be a service account key (checked here,
    /// so that `beckon validate` says so at the line that names it).
    mutating func fcm(_ node: SourceNode) -> Destination.FCM? {
        guard let k = keys(of: node, DSL.fcm, context: "fcm") else { return nil }
        var ok = true
        var f = Destination.FCM()
        if let file = k["service_account_file"].flatMap({ string($0.value, "service_account_file") }) {
            let path = Self.resolve(file.value, besides: self.file)
            if readsNamedFiles, let problem = Self.serviceAccountProblem(path) {
                diagnostics.error(.invalidValue, problem, at: file.location)
                ok = false
            } else {
                f.serviceAccountFile = path
            }
        }
        f.serviceAccountVariable = k["service_account_env"].flatMap { string($0.value, "service_account_env")?.value }
        if (k["service_account_file"] == nil) == (k["service_account_env"] == nil) {
            diagnostics.error(
                .invalidValue, "'fcm' needs one of 'service_account_file' and 'service_account_env'", at: node.location)
            ok = false
        }
        f.projectID = k["project_id"].flatMap { string($0.value, "project_id")?.value }
        if let ca = k["ca_file"].flatMap({ string($0.value, "ca_file") }) {
            f.caFile = certificateFile(ca)
            ok = ok && f.caFile != nil
        }
        return ok ? f : nil
    }

    /// A destination's `email:` block.
    mutating func email(_ node: SourceNode) -> Destination.Email? {
        guard let k = keys(of: node, DSL.emailDestination, context: "email"),
            let from = k["from"].flatMap({ string($0.value, "from") }),
            let key = k["api_key_env"].flatMap({ string($0.value, "api_key_env") }),
            let secret = k["link_secret_env"].flatMap({ string($0.value, "link_secret_env") }),
            let base = k["links_base_url"].flatMap({ string($0.value, "links_base_url") })
        else { return nil }
        var ok = true
        let lower = base.value.lowercased()
        if !(lower.hasPrefix("https://") || lower.hasPrefix("http://")) || base.value.hasSuffix("/") {
            diagnostics.error(
                .invalidValue, "'links_base_url' must be an http(s):// address without a trailing '/', found '\(base.value)'",
                at: base.location)
            ok = false
        }
        if !from.value.contains("@") {
            diagnostics.error(.invalidValue, "'from' must be an email address, found '\(from.value)'", at: from.location)
            ok = false
        }
        var e = Destination.Email(
            from: from.value, apiKeyVariable: key.value, linkSecretVariable: secret.value, linksBaseURL: base.value)
        e.fromName = k["from_name"].flatMap { string($0.value, "from_name")?.value }
        if let t = k["track_clicks"].flatMap({ boolean($0.value, "track_clicks") }) { e.trackClicks = t.value }
        if let ca = k["ca_file"].flatMap({ string($0.value, "ca_file") }) {
            e.caFile = certificateFile(ca)
            ok = ok && e.caFile != nil
        }
        if let body = k["body"] {
            e.bodyTemplate = emailBody(body.value)
            ok = ok && e.bodyTemplate != nil
        }
        if let path = k["path"].flatMap({ string($0.value, "path") }) {
            if !path.value.hasPrefix("/") || path.value.contains(where: { $0 == "?" || $0 == "#" || $0.isWhitespace }) {
                diagnostics.error(
                    .invalidValue, "'path' must start with '/' and hold no query, found '\(path.value)'", at: path.location)
                ok = false
            }
            e.path = path.value
        }
        if let header = k["api_key_header"].flatMap({ string($0.value, "api_key_header") }) {
            let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
            if header.value.isEmpty || !header.value.allSatisfy(token.contains) {
                diagnostics.error(
                    .invalidValue, "'api_key_header' must be a header name, found '\(header.value)'", at: header.location)
                ok = false
            }
            e.apiKeyHeader = header.value
        }
        return ok ? e : nil
    }

    /// An email destination's `body:`: the JSON object another email API takes, as written, with `{{name}}`
    /// placeholders in its strings (``Destination/Email/bodyPlaceholders``); `{{data}}` is the merge data object and
    /// stands alone. It must carry `{{unsubscribe_url}}`: every email has its unsubscribe link. Its JSON text, or nil
    /// after an error at the line at fault.
    mutating func emailBody(_ node: SourceNode) -> String? {
        guard case .mapping = node else {
            diagnostics.error(
                .invalidValue, "'body' must be a map (the JSON object to send), found \(node.kindDescription)",
                at: node.location)
            return nil
        }
        var ok = true
        var unsubscribe = false
        func walk(_ n: SourceNode) -> Value {
            switch n {
            case .scalar(let s):
                if s.style == .plain, let v = FileParser.plainValue(s) { return v }
                guard let parts = Destination.Email.parts(of: s.text) else {
                    diagnostics.error(.invalidValue, "'{{' without its '}}' in '\(s.text)'", at: s.location)
                    ok = false
                    return .string(s.text)
                }
                for case (_, let name?) in parts {
                    if !Destination.Email.bodyPlaceholders.contains(name) {
                        let near = Suggest.nearest(name, in: Destination.Email.bodyPlaceholders)
                        diagnostics.error(
                            .invalidValue,
                            "unknown placeholder '{{\(name)}}' in 'body'; it may use "
                                + Destination.Email.bodyPlaceholders.map { "{{\($0)}}" }.joined(separator: ", "),
                            at: s.location, suggestion: near.map { "did you mean '{{\($0)}}'?" })
                        ok = false
                    } else if name == "data" && !Destination.Email.isData(s.text) {
                        diagnostics.error(
                            .invalidValue, "'{{data}}' is the merge data object: it must be a whole value, not in a text",
                            at: s.location, suggestion: "write the value as \"{{data}}\" alone")
                        ok = false
                    }
                    if name == "unsubscribe_url" { unsubscribe = true }
                }
                return .string(s.text)
            case .sequence(let items, _):
                return .list(items.map(walk))
            case .mapping(let pairs, _):
                var m = ValueMap()
                for (k, v) in pairs { m[string: k.text] = walk(v) }
                return .map(m)
            }
        }
        let json = JSONWriter.encode(walk(node))
        if !unsubscribe {
            diagnostics.error(
                .invalidValue, "'body' must carry '{{unsubscribe_url}}': every email has its unsubscribe link",
                at: node.location, suggestion: "add the List-Unsubscribe header the API takes, with <{{unsubscribe_url}}>")
            ok = false
        }
        return ok ? json : nil
    }

    /// A `ca_file`'s path, resolved against this file, when it holds a PEM certificate (else an error at its line).
    mutating func certificateFile(_ ca: Located<String>) -> String? {
        let path = Self.resolve(ca.value, besides: file)
        guard readsNamedFiles else { return path }
        guard (try? String(contentsOfFile: path, encoding: .utf8))?.contains("-----BEGIN CERTIFICATE-----") == true else {
            diagnostics.error(.invalidValue, "'ca_file' names \(path), which holds no certificate", at: ca.location)
            return nil
        }
        return path
    }

    /// What is wrong with a service account key file, `nil` when nothing is.
    static func serviceAccountProblem(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else {
            return "'service_account_file' names \(path), which cannot be read"
        }
        guard let o = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            return "\(path) is not JSON: a service account key file is (from the Firebase console)"
        }
        for key in ["client_email", "private_key", "token_uri"] where !(o[key] is String) {
            return "\(path) has no '\(key)': it is not a service account key file"
        }
        guard (o["private_key"] as? String)?.contains("-----BEGIN PRIVATE KEY-----") == true else {
            return "\(path)'s 'private_key' holds no '-----BEGIN PRIVATE KEY-----' block"
        }
        return nil
    }

    /// Requests a second of a `rate` (`500/s`, `30/m`, `1000/h`), `nil` when it is not one.
    static func rate(_ text: String) -> Double? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let n = Int(parts[0].trimmingCharacters(in: .whitespaces)), n > 0 else { return nil }
        switch parts[1].trimmingCharacters(in: .whitespaces) {
        case "s": return Double(n)
        case "m": return Double(n) / 60
        case "h": return Double(n) / 3600
        default: return nil
        }
    }

    /// `path` as written in `file`: an absolute path as is, a relative one from the file's folder.
    static func resolve(_ path: String, besides file: String) -> String {
        guard !path.hasPrefix("/"), let slash = file.lastIndex(of: "/") else { return path }
        return String(file[...slash]) + path
    }

    // MARK: Goals and flows

    mutating func goals(_ node: SourceNode) -> [GoalSpec] {
        guard case .sequence(let items, _) = node else {
            diagnostics.error(.wrongType, "'goals' expects a list of goals, found \(node.kindDescription)", at: node.location)
            return []
        }
        var out: [GoalSpec] = []
        for item in items {
            guard let k = keys(of: item, DSL.goal, context: "goal"), let id = k["id"].flatMap({ identifier($0.value, "id") }),
                let ev = k["event"].flatMap({ named($0.value, "event") }),
                let within = k["within"].flatMap({ duration($0.value, "within") })
            else { continue }
            if out.contains(where: { $0.id.value == id.value }) {
                diagnostics.error(.duplicateName, "goal '\(id.value)' is defined twice", at: id.location)
                continue
            }
            out.append(
                GoalSpec(
                    id: id, description: k["description"].flatMap { string($0.value, "description")?.value }, event: ev,
                    whereClause: k["where"].flatMap { expression($0.value, "where") }, withinMs: within,
                    exposure: k["exposure"].flatMap { identifier($0.value, "exposure") },
                    value: k["value"].flatMap { string($0.value, "value") }))
        }
        return out
    }

    mutating func flows(_ node: SourceNode) -> [FlowSpec] {
        guard case .sequence(let items, _) = node else {
            diagnostics.error(.wrongType, "'flows' expects a list of flows, found \(node.kindDescription)", at: node.location)
            return []
        }
        var out: [FlowSpec] = []
        for item in items {
            guard let k = keys(of: item, DSL.flow, context: "flow"), let id = k["id"].flatMap({ identifier($0.value, "id") }),
                let version = k["version"].flatMap({ integer($0.value, "version", min: 1) }), let stepsNode = k["steps"]
            else { continue }
            var steps: [FlowStepSpec] = []
            if case .sequence(let xs, _) = stepsNode.value {
                for x in xs {
                    if case .scalar = x {
                        if let sid = identifier(x, "step") {
                            steps.append(FlowStepSpec(id: sid, skipIf: nil, back: true, params: []))
                        }
                        continue
                    }
                    guard let sk = keys(of: x, DSL.flowStep, context: "flow step"),
                        let sid = sk["id"].flatMap({ identifier($0.value, "id") })
                    else { continue }
                    steps.append(
                        FlowStepSpec(
                            id: sid, skipIf: sk["skip_if"].flatMap { expression($0.value, "skip_if") },
                            back: sk["back"].flatMap { boolean($0.value, "back")?.value } ?? true,
                            params: sk["params"].map { valueMap($0.value, "params") } ?? []))
                }
            } else {
                diagnostics.error(
                    .wrongType, "'steps' expects a list of steps, found \(stepsNode.value.kindDescription)",
                    at: stepsNode.value.location)
            }
            var seen = Set<String>()
            for st in steps where !seen.insert(st.id.value).inserted {
                diagnostics.error(.duplicateName, "step '\(st.id.value)' appears twice in flow '\(id.value)'", at: st.id.location)
            }
            if steps.isEmpty { diagnostics.error(.invalidValue, "flow '\(id.value)' has no steps", at: stepsNode.key.location) }
            var migrations: [FlowMigrationSpec] = []
            if let m = k["migrate"] {
                if case .sequence(let ms, _) = m.value {
                    for mi in ms {
                        guard let mk = keys(of: mi, DSL.flowMigration, context: "flow migration"),
                            let from = mk["from"].flatMap({ integer($0.value, "from", min: 1) })
                        else { continue }
                        if from.value >= version.value {
                            diagnostics.error(
                                .invalidValue, "a migration is from a version older than \(version.value), not \(from.value)",
                                at: from.location)
                        }
                        var table: [(old: String, new: Located<String>)] = []
                        if case .mapping(let pairs, _)? = mk["steps"]?.value {
                            for (oldKey, newNode) in pairs {
                                if let n = identifier(newNode, oldKey.text) { table.append((oldKey.text, n)) }
                            }
                        }
                        migrations.append(
                            FlowMigrationSpec(
                                from: from, steps: table, otherwise: mk["otherwise"].flatMap { identifier($0.value, "otherwise") }
                            ))
                    }
                } else {
                    diagnostics.error(.wrongType, "'migrate' expects a list of migrations", at: m.value.location)
                }
            }
            out.append(
                FlowSpec(
                    id: id, version: version, description: k["description"].flatMap { string($0.value, "description")?.value },
                    params: k["params"].map { valueMap($0.value, "params") } ?? [], steps: steps,
                    finish: k["finish"].flatMap { identifier($0.value, "finish") }, migrations: migrations, location: id.location)
            )
        }
        return out
    }

    // MARK: Tracking plans

    mutating func trackingPlan(_ root: SourceNode) -> TrackingPlanSpec? {
        guard let k = keys(of: root, DSL.trackingPlanFile, context: "the tracking plan") else { return nil }
        version(k)
        guard let name = k["tracking_plan"].flatMap({ identifier($0.value, "tracking_plan") }) else { return nil }
        var plan = TrackingPlanSpec(path: file, name: name, events: [], screens: [], traits: [])
        if case .mapping(let pairs, _)? = k["events"]?.value {
            for (ek, ev) in pairs {
                var props: [PlanField] = []
                var description: String?
                if !(ev.scalar?.isNull ?? false), let evk = keys(of: ev, DSL.planEvent, context: "event '\(ek.text)'") {
                    description = evk["description"].flatMap { string($0.value, "description")?.value }
                    if case .mapping(let ps, _)? = evk["properties"]?.value {
                        for (pk, pv) in ps { if let f = planField(pk, pv) { props.append(f) } }
                    }
                }
                plan.events.append((Located(ek.text, ek.location), props, description))
            }
        }
        if let sc = k["screens"] { plan.screens = oneOrMany(sc.value, "screens") ?? [] }
        if case .mapping(let pairs, _)? = k["traits"]?.value {
            for (tk, tv) in pairs { if let f = planField(tk, tv) { plan.traits.append(f) } }
        }
        return plan
    }

    mutating func planField(_ key: ScalarNode, _ node: SourceNode) -> PlanField? {
        let typeHint = "types: " + PlanType.allCases.map(\.rawValue).joined(separator: ", ")
        if case .scalar(let s) = node {
            if s.isNull { return PlanField(name: Located(key.text, key.location), type: .any, values: nil, description: nil) }
            // Short form: `url: string`.
            guard let t = PlanType(rawValue: s.text) else {
                diagnostics.error(.invalidValue, "unknown type '\(s.text)'", at: s.location, suggestion: typeHint)
                return nil
            }
            return PlanField(name: Located(key.text, key.location), type: t, values: nil, description: nil)
        }
        guard let k = keys(of: node, DSL.planField, context: "'\(key.text)'") else { return nil }
        var type = PlanType.any
        if let tn = k["type"], let s = scalar(tn.value, "type", .text) {
            if let t = PlanType(rawValue: s.text) {
                type = t
            } else {
                diagnostics.error(.invalidValue, "unknown type '\(s.text)'", at: s.location, suggestion: typeHint)
            }
        }
        var values: [Value]?
        if let vn = k["values"], case .list(let vs) = value(vn.value) {
            values = vs.compactMap { if case .literal(let v) = $0 { v } else { nil } }
        }
        return PlanField(
            name: Located(key.text, key.location), type: type, values: values,
            description: k["description"].flatMap { string($0.value, "description")?.value })
    }
}
