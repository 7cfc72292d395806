import BeckonCore
import BeckonYAML
import Testing

struct LoaderTests {
    func errors(_ yaml: String) -> [Diagnostic] {
        RuleLoader.load(texts: [("f.yaml", yaml)]).diagnostics.filter { $0.severity == .error }
    }

    func rules(_ condition: String) -> String {
        """
        version: 1
        campaign: c
        rules:
          - id: r
            on: Opened
        \(condition)
            do: [ { deep_link: "app://x" } ]
        """
    }

    /// A problem inside an expression points at its column in the file, whatever quoting the scalar uses and however
    /// its lines fold (each case after the first seven was off before 1df2090 and d88841a).
    @Test(arguments: [
        ("    if: user.plan = 1", 6, 19),
        ("    if: 'user.plan = 1'", 6, 20),
        ("    if: \"user.plan = 1\"", 6, 20),
        ("    if: \"user.\\u0070lan = 1\"", 6, 25),
        ("    if: |\n      user.plan == 1 &&\n        user.age = 2", 8, 18),
        ("    if: >\n      user.plan == 1 &&\n      user.age = 2", 8, 16),
        ("    if: user.plan == 1 &&\n      user.age = 2", 7, 16),
        // However the lines fold: spaces that end a line, blank lines between, an escaped line break in double quotes.
        ("    if: user.x == 1 &&   \n      user.plan = 1", 7, 17),
        ("    if: user.x == 1 &&\n\n   \n      user.plan = 1", 9, 17),
        ("    if: \"user.x == 1 &&   \n      user.plan = 1\"", 7, 17),
        ("    if: \"user.x == 1 && user.\\\n      plan = 1\"", 7, 12),
        ("    if: 'user.x == 1 &&\t\n\n      user.plan = 1'", 8, 17),
        ("    if: \"user.x == 1 && \\\n\n      user.plan = 1\"", 8, 17),
        ("    if: \"user.x == 1 &&\\ \n      user.plan = 1\"", 7, 17),
        // Block scalars: an indentation indicator, blank lines in a folded one, a more-indented line.
        ("    if: |1\n       1 === 3", 7, 12),
        ("    if: >2\n        1 === 3", 7, 13),
        ("    if: |2-\n        true &&\n        1 === 3", 8, 13),
        ("    if: >\n      true &&\n\n      1 === 3", 9, 11),
        ("    if: |\n      true &&\n\n      1 === 3", 9, 11),
        ("    if: >\n      true &&\n\n        1 === 3", 9, 13),
    ])
    func expressionPositions(_ condition: String, _ line: Int, _ column: Int) throws {
        let d = try #require(errors(rules(condition)).first)
        #expect(d.id == .expressionSyntax)
        #expect(d.location.position == SourcePosition(line: line, column: column), "\(d)")
    }

    @Test func templatePositionsPointInsideTheBraces() throws {
        let yaml = """
            version: 1
            campaign: c
            rules:
              - id: r
                on: Opened
                do:
                  - message: { surface: s, title: "Hi ${user.name = 1}" }
            """
        let d = try #require(errors(yaml).first)
        #expect(d.location.position == SourcePosition(line: 7, column: 55))
    }

    @Test func yesAndOnStayStrings() throws {
        // YAML 1.2: `on` as a key and `yes` as a value are strings, not booleans.
        let r = RuleLoader.load(texts: [
            (
                "f.yaml",
                """
                version: 1
                campaign: c
                rules:
                  - id: r
                    on: yes
                    do: [ { set: { answer: no } } ]
                """
            )
        ])
        let rs = try #require(r.ruleSet)
        #expect(rs.eventIDs["yes"] != nil)
    }

    @Test func syntaxErrorsHaveAPosition() throws {
        let d = try #require(errors("version: 1\ncampaign: c\nrules:\n  - id: r\n\ton: x\n").first)
        #expect(d.id == .yamlSyntax)
        #expect(d.location.position.line == 5)
    }

    @Test func everyProblemOfEveryFileIsReported() {
        let r = RuleLoader.load(texts: [
            ("a.yaml", "version: 1\ncampaign: a\nrules:\n  - id: r\n    on: x\n    if: nope(\n    do: [ { prompt: atx } ]\n"),
            (
                "b.yaml",
                "version: 1\ncampaign: b\nrules:\n  - id: r\n    on: x\n    limit: { per_dya: 1 }\n    do: [ { prompt: att } ]\n"
            ),
        ])
        #expect(Set(r.diagnostics.map(\.location.file)) == ["a.yaml", "b.yaml"])
        #expect(r.diagnostics.map(\.id.rawValue).sorted() == ["expression_syntax", "invalid_action", "unknown_key"])
    }
}
