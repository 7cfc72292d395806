import BeckonCore
import BeckonYAML
import Testing

/// A "did you mean" that rewrites a condition corrects only what is wrong: the misspelt name among the names of the
/// span, or the whole run of an operator. (It used to replace the whole span: `event.nam` became `name`, a method's
/// receiver was dropped, `===` became `====`.)
struct SuggestionTests {
    @Test(arguments: [
        (#"event.nam == "x""#, #"event.name == "x""#),
        ("event.propertes.x == 1", "event.properties.x == 1"),
        (#"user.id == "a" && event.propertes.source == "x""#, #"user.id == "a" && event.properties.source == "x""#),
        ("has(event.propertes.x)", "has(event.properties.x)"),
        (#"event.properties.url.startswth("x")"#, #"event.properties.url.startsWith("x")"#),
        (#"user.plan === "pro""#, #"user.plan == "pro""#),
        (#"user.plan = "pro""#, #"user.plan == "pro""#),
        (#"cuont("Signed In", "7d") == 1"#, #"count("Signed In", "7d") == 1"#),
    ])
    func theRewriteCorrectsOnlyTheMistake(_ condition: String, _ fixed: String) {
        let yaml = """
            version: 1
            ruleset: t
            rules:
              - id: a
                on: Opened
                if: '\(condition)'
                do: [ { deep_link: x } ]

            """
        let result = RuleLoader.load(texts: [("rules.yaml", yaml)])
        #expect(result.diagnostics.first?.suggestion == "did you mean `\(fixed)`?", "\(result.rendered())")
    }
}

/// A key indented past the map of a list item (`- id: a`, then `   on:` one space further) is told as indentation,
/// not as a value to quote.
struct IndentationHintTests {
    @Test func aKeyPastAListItemsMapIsAnIndentationMistake() {
        let yaml = "version: 1\nruleset: t\nrules:\n  - id: a\n     on: Signed In\n    do: [ { deep_link: x } ]\n"
        let result = RuleLoader.load(texts: [("rules.yaml", yaml)])
        let d = result.diagnostics.first
        #expect(d?.id == .yamlSyntax)
        #expect(d?.suggestion == "this line is indented 5 spaces and the key above 4; keys of the same map must line up")
    }
}
