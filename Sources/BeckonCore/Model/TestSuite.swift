/// A file of campaign tests (`tests: NAME`): streams of events and the actions they must (or must not) produce.
public struct TestSuiteSpec: Sendable {
    public var path: String
    public var name: Located<String>
    public var description: String?
    /// Rule files or folders, relative to the test file (default: the test file's folder).
    public var rules: [Located<String>]
    /// Context added to every shorthand event (`locale`, `os`…).
    public var context: Value?
    public var cases: [TestCaseSpec]
}

public struct TestCaseSpec: Sendable {
    public var name: Located<String>
    /// Traits each user starts with (sent as `identify` before the events).
    public var users: [(user: String, traits: Value)]
    /// Events, each in the shorthand form (`{ user, event, at, properties }`) or the Segment form (`{ type, userId, … }`).
    public var events: [TestItem]
    public var eventsFile: Located<String>?
    public var context: Value?
    public var until: Located<String>?
    /// Actions that must come, in this order (others may come between unless `exact`).
    public var expect: [TestItem]
    /// Actions that must not come.
    public var expectNone: [TestItem]
    public var exact: Bool
    public var location: SourceLocation
}

/// An event or an expectation of a test case: its value, and where it and each of its keys are written.
public struct TestItem: Sendable {
    public var value: Value
    public var location: SourceLocation
    var keys: [String: (key: SourceLocation, value: SourceLocation)] = [:]

    /// Where `key` is written (the item itself when it has no such key).
    public func keyLocation(_ key: String) -> SourceLocation { keys[key]?.key ?? location }
    /// Where `key`'s value is written.
    public func valueLocation(_ key: String) -> SourceLocation { keys[key]?.value ?? location }
}

extension DSL {
    static let testCase = ObjectSchema(
        "test case", doc: "One scenario: a stream of events and what it must produce.",
        keys: [
            KeySchema("name", .text, required: true, doc: "what it checks", example: "heavy users get the nudge"),
            KeySchema("description", .text, doc: "more words"),
            KeySchema(
                "users", .map(key: .text, value: .anyValue), doc: "traits each user starts with",
                example: "{ alice: { plan: pro } }"),
            KeySchema(
                "events", .list(.anyValue),
                doc: """
                    the stream: shorthand `{ user, event | screen | identify, at | after, properties, context, id, repeat, every }` \
                    or Segment objects
                    """, example: "[ { user: alice, event: E_Opened_App, at: \"2026-03-01T09:00:00Z\" } ]"),
            KeySchema("events_file", .text, doc: "a JSON-lines stream, relative to the test file (before `events`)"),
            KeySchema("context", .map(key: .text, value: .anyValue), doc: "context added to every shorthand event of the case"),
            KeySchema("until", .text, doc: "let time run to this instant after the stream (RFC 3339 or +7d)"),
            KeySchema(
                "expect", .list(.anyValue),
                doc: "actions that must come, in this order; each matches an action whose fields include these",
                example: "[ { user: alice, rule: prompt_default_browser, action: message } ]"),
            KeySchema(
                "expect_none", .list(.anyValue), doc: "actions that must not come", example: "[ { rule: sync_bookmarks } ]"),
            KeySchema("exact", .boolean, doc: "`true`: no action other than the expected ones may come"),
        ])

    public static let testFile = ObjectSchema(
        "test file", doc: "Campaign tests, next to the rules they test; `beckon test` runs them.",
        keys: [
            KeySchema("version", .integer(min: 1), required: true, doc: "the DSL version; must be 1", example: "1"),
            KeySchema("tests", .identifier, required: true, doc: "a name for the suite", example: "firefox_default_browser"),
            KeySchema("description", .text, doc: "what it covers"),
            KeySchema("rules", .oneOrMany(.text), doc: "the rule files or folders, relative to this file (default: its folder)"),
            KeySchema("context", .map(key: .text, value: .anyValue), doc: "context added to every shorthand event"),
            KeySchema("cases", .list(.object(testCase)), required: true, doc: "the scenarios"),
        ])
}

extension FileParser {
    /// A YAML value as a plain value: `${…}` stays text (test data is not evaluated).
    mutating func plain(_ node: SourceNode) -> Value {
        switch node {
        case .scalar(let s):
            if s.style == .plain, let v = FileParser.plainValue(s) { return v }
            return .string(s.text)
        case .sequence(let items, _): return .list(items.map { plain($0) })
        case .mapping(let pairs, _): return .map(ValueMap(pairs.map { ($0.key.text, plain($0.value)) }))
        }
    }

    mutating func testSuite(_ root: SourceNode) -> TestSuiteSpec? {
        guard let k = keys(of: root, DSL.testFile, context: "the test file") else { return nil }
        version(k)
        guard let name = k["tests"].flatMap({ identifier($0.value, "tests") }) else { return nil }
        var suite = TestSuiteSpec(
            path: file, name: name, description: k["description"].flatMap { string($0.value, "description")?.value },
            rules: k["rules"].flatMap { oneOrMany($0.value, "rules") } ?? [], context: k["context"].map { plain($0.value) },
            cases: [])
        guard case .sequence(let items, _)? = k["cases"]?.value else {
            if let c = k["cases"] { diagnostics.error(.wrongType, "'cases' expects a list of test cases", at: c.value.location) }
            return suite
        }
        for item in items {
            guard let ck = keys(of: item, DSL.testCase, context: "test case"),
                let caseName = ck["name"].flatMap({ string($0.value, "name") })
            else { continue }
            func list(_ key: String) -> [TestItem] {
                guard let n = ck[key] else { return [] }
                guard case .sequence(let xs, _) = n.value else {
                    diagnostics.error(.wrongType, "'\(key)' expects a list", at: n.value.location)
                    return []
                }
                return xs.map { x in
                    var item = TestItem(value: plain(x), location: x.location)
                    if case .mapping(let pairs, _) = x {
                        for (k, v) in pairs { item.keys[k.text] = (k.location, v.location) }
                    }
                    return item
                }
            }
            var users: [(user: String, traits: Value)] = []
            if case .mapping(let pairs, _)? = ck["users"]?.value {
                for (u, t) in pairs { users.append((u.text, plain(t))) }
            }
            let events = list("events")
            let eventsFile = ck["events_file"].flatMap { string($0.value, "events_file") }
            if events.isEmpty && eventsFile == nil {
                diagnostics.error(
                    .missingKey, "test case '\(caseName.value)' has no events", at: caseName.location,
                    suggestion: "add `events:` or `events_file:`")
            }
            suite.cases.append(
                TestCaseSpec(
                    name: caseName, users: users, events: events, eventsFile: eventsFile,
                    context: ck["context"].map { plain($0.value) },
                    until: ck["until"].flatMap { string($0.value, "until") }, expect: list("expect"),
                    expectNone: list("expect_none"),
                    exact: ck["exact"].flatMap { boolean($0.value, "exact")?.value } ?? false, location: caseName.location))
        }
        return suite
    }
}
