import BeckonCore
import BeckonYAML
import Testing

/// Rule files that try to make the loader run out of memory or time, and YAML errors that must point at the
/// character that causes them.
struct YAMLInputTests {
    func diagnostics(_ yaml: String) -> [Diagnostic] {
        RuleLoader.load(texts: [("f.yaml", yaml)]).diagnostics
    }

    func errors(_ yaml: String) -> [Diagnostic] { diagnostics(yaml).filter { $0.severity == .error } }

    /// `levels` lists, each of nine aliases of the one before: 9^levels strings once expanded.
    static func aliasBomb(levels: Int) -> String {
        var yaml = "version: 1\na: &a [x,x,x,x,x,x,x,x,x]\n"
        var previous = "a"
        for name in "bcdefghijklm".prefix(levels - 1).map(String.init) {
            yaml += "\(name): &\(name) [" + Array(repeating: "*" + previous, count: 9).joined(separator: ",") + "]\n"
            previous = name
        }
        return yaml
    }

    /// An alias is refused at its position and never expanded, however many levels of aliases of aliases.
    @Test(arguments: [3, 9, 12])
    func aliasesAreRefusedWithoutExpandingThem(_ levels: Int) throws {
        let yaml = Self.aliasBomb(levels: levels)
        if levels == 9 { #expect(yaml.utf8.count < 400) }
        let (node, problems) = YAMLLoader.parse(yaml, path: "bomb.yaml")
        #expect(node == nil)
        let alias = try #require(problems.first { $0.message.contains("aliases (*a)") })
        #expect(alias.id == .yamlSyntax)
        #expect(alias.location.position == SourcePosition(line: 3, column: 8))
        #expect(alias.suggestion?.contains("write the value out") == true)
        // Every alias is reported, each where it is: nine per line after the first.
        #expect(problems.count { $0.message.contains("aliases") } == 9 * (levels - 1))
    }

    @Test func mergeKeysAreRefusedAtTheAlias() throws {
        let yaml = """
            version: 1
            campaign: c
            defaults: &d { priority: 1 }
            rules:
              - id: r
                on: Opened
                <<: *d
                do: [ { deep_link: "app://x" } ]
            """
        let merge = try #require(errors(yaml).first { $0.message.contains("merge keys") })
        #expect(merge.location.position == SourcePosition(line: 7, column: 9))
        #expect(merge.message.contains("<<: *d"))
    }

    @Test func yamlNestedTooDeepIsRefusedBeforeBuildingIt() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        let problems = errors("version: 1\nx: " + deep + "\n")
        let d = try #require(problems.first)
        #expect(d.id == .limitExceeded)
        // The 65th list is the first one too deep (the root map is level 0).
        #expect(d.location.position == SourcePosition(line: 2, column: 4 + 64))
        #expect(problems.count == 1)
    }

    /// A condition that starts with `!` is a YAML tag unless it is quoted: say so, not "found nothing".
    @Test func aValueThatStartsWithABangIsATag() throws {
        let d = try #require(
            errors(
                "version: 1\ncampaign: c\nrules:\n  - id: r\n    on: x\n    if: !user.pro\n    do: [ { deep_link: \"a://x\" } ]\n"
            )
            .first)
        #expect(d.message.contains("'!user.pro' reads as a YAML tag"))
        #expect(d.location.position == SourcePosition(line: 6, column: 9))
        #expect(d.suggestion == "quote the value: \"!user.pro\"")
    }

    @Test func duplicateKeysInAFlowMapPointAtTheSecond() throws {
        let d = try #require(errors("version: 1\ncampaign: c\nx: { a: 1, b: 2, a: 3 }\n").first { $0.id == .duplicateKey })
        #expect(d.location.position == SourcePosition(line: 3, column: 18))
    }

    // MARK: Errors that point right

    /// An unterminated quote is reported at the opening quote, not at the end of the file; an escape a double-quoted
    /// value cannot hold, as what it is, at its backslash (for `\u`, at the digits libyaml could not read), not as a
    /// quote never closed.
    @Test(arguments: [
        (
            "      - message: { surface: s, title: \"Welcome }\n      - message: { surface: s, title: Hi }\n", 7, 39,
            "close the quote"
        ),
        (
            "      - message:\n          surface: s\n          title: \"Welcome\n          body: \"Hi\"\n", 9, 18,
            "close the quote"
        ),
        ("      - message:\n          surface: s\n          title: 'Welcome\n", 9, 18, "close the quote"),
        ("      - set: { a: \"x \\uZZZZ\" }\n", 7, 24, "quote the value with '"),
        ("      - set: { a: \"r\\q\" }\n", 7, 21, "quote the value with '"),
        ("      - set: { a: \"r\\ud800\" }\n", 7, 23, "quote the value with '"),
    ])
    func quoteMistakesPointWhereTheyAre(_ actions: String, _ line: Int, _ column: Int, _ fix: String) throws {
        let yaml = "version: 1\ncampaign: c\nrules:\n  - id: r\n    on: x\n    do:\n" + actions
        let d = try #require(errors(yaml).first)
        #expect(d.id == .yamlSyntax)
        #expect(d.location.position == SourcePosition(line: line, column: column), "\(d)")
        #expect(d.suggestion?.contains(fix) == true, "\(d)")
        #expect(d.message.contains("not an escape") == fix.hasPrefix("quote the value"), "\(d)")
    }

    /// A tab in the indentation is named, and pointed at.
    @Test(arguments: [
        ("version: 1\ncampaign: c\nrules:\n  - id: r\n\ton: x\n", 5, 1),
        ("version: 1\ncampaign: c\nrules:\n\t- id: r\n    on: x\n", 4, 1),
        ("version: 1\ncampaign: c\nrules:\n  - id: r\n    on: x\n  \t  do: [ { deep_link: \"a://x\" } ]\n", 6, 3),
        ("version: 1\ncampaign: c\nrules:\n  - id: r\n    on: x\n    do:\n      - message:\n\t\t  title: x\n", 8, 1),
    ])
    func tabsInTheIndentationAreNamed(_ yaml: String, _ line: Int, _ column: Int) throws {
        let d = try #require(errors(yaml).first)
        #expect(d.message.contains("tab"), "\(d)")
        #expect(d.location.position == SourcePosition(line: line, column: column), "\(d)")
        #expect(d.suggestion == "replace the tab with spaces")
    }

    /// U+2028, U+2029 and U+0085 are characters of a line, not line breaks (YAML 1.2, editors): the diagnostics
    /// after them keep their lines, and the source line shown is the right one.
    @Test(arguments: ["\u{2028}", "\u{2029}", "\u{85}", "\u{2028}\u{2029}\u{85}"])
    func unicodeLineSeparatorsDoNotShiftLines(_ separator: String) throws {
        let yaml = """
            version: 1
            campaign: c
            rules:
              - id: r
                on: x
                description: "a\(separator)b"
                if: user.plan = 1
                do: [ { deep_link: "app://x" } ]
            """
        let r = RuleLoader.load(texts: [("f.yaml", yaml)])
        let d = try #require(r.diagnostics.first)
        #expect(d.location.position == SourcePosition(line: 7, column: 19), "\(d)")
        #expect(r.rendered().contains("\n    if: user.plan = 1\n                  ^\n"), "\(r.rendered())")
    }

    /// CR LF and lone CR line ends: positions count them as line breaks, and the source line is shown.
    @Test(arguments: ["\r\n", "\r"])
    func carriageReturnLineEndsShowTheirLine(_ newline: String) throws {
        let yaml = ["version: 1", "campaign: c", "rules:", "  - id: r", "    on: x", "    if: user.plan = 1", "    do: []"]
            .joined(separator: newline)
        let r = RuleLoader.load(texts: [("f.yaml", yaml)])
        let d = try #require(r.diagnostics.first { $0.id == .expressionSyntax })
        #expect(d.location.position == SourcePosition(line: 6, column: 19))
        #expect(r.rendered().contains("\n    if: user.plan = 1\n                  ^\n"), "\(r.rendered())")
    }

    /// NUL and other characters YAML refuses are reported where they are, by name.
    @Test(arguments: [
        ("    on: x\u{0}y\n", "a NUL byte", 5, 10),
        ("    on: x\u{7}\n", "the control character U+0007", 5, 10),
        ("    on: \u{E9}\u{9F}\n", "the control character U+009F", 5, 10),
        ("    on: x\u{FFFE}\n", "the character U+FFFE", 5, 10),
    ])
    func forbiddenCharactersArePointedAt(_ line5: String, _ what: String, _ line: Int, _ column: Int) throws {
        let r = RuleLoader.load(texts: [("f.yaml", "version: 1\ncampaign: c\nrules:\n  - id: r\n" + line5)])
        let d = try #require(r.diagnostics.first)
        #expect(d.message.contains(what), "\(d)")
        #expect(d.location.position == SourcePosition(line: line, column: column), "\(d)")
        // The line is shown with the character made visible, not written raw to the terminal.
        #expect(!r.rendered().unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
    }

    @Test func aByteOrderMarkIsNotAColumn() throws {
        let d = try #require(errors("\u{FEFF}version: 1\ncampaign: c\nrules: 3\n").first)
        #expect(d.location.position == SourcePosition(line: 3, column: 8))
        let first = try #require(errors("\u{FEFF}version: [\n").first)
        #expect(first.location.position.line == 2)
    }

    /// A rule file holds one document.
    @Test func aSecondDocumentIsAnError() throws {
        let d = try #require(errors("version: 1\ncampaign: c\n---\nversion: 1\n").first)
        #expect(d.location.position == SourcePosition(line: 3, column: 1))
    }
}
