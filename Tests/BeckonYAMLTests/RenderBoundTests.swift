import BeckonCore
import BeckonYAML
import Foundation
import Testing

/// A rule file with thousands of mistakes on one line is reported in bounded time and memory: each diagnostic shows
/// its line around the caret, and at most ``DiagnosticRenderer/maxRendered`` are written out. (Before, 8,000 unknown
/// keys on one 79 KB line took 27 s and 3.1 GB, each diagnostic printing the whole line and a caret line as long.)
struct RenderBoundTests {
    @Test func aLongLineIsShownAroundTheCaretAndManyProblemsAreCounted() {
        let keys = (0..<2_000).map { "k\($0): 1" }.joined(separator: ", ")
        let yaml = "version: 1\nruleset: t\nrules:\n  - { id: a, on: Signed In, do: [ { deep_link: x } ], \(keys) }\n"
        let result = RuleLoader.load(texts: [("rules.yaml", yaml)])
        #expect(result.errorCount == 2_000)
        let text = result.rendered()
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.allSatisfy { $0.unicodeScalars.count <= DiagnosticRenderer.excerptColumns + 2 || $0.hasPrefix("help:") })
        #expect(text.components(separatedBy: "[unknown_key]").count - 1 == DiagnosticRenderer.maxRendered)
        #expect(text.hasSuffix("… and 1800 more (1800 of them errors), not shown: fix these first\n"), "\(text.suffix(200))")
        // The caret stays under its key: `k1000` is past the first window, and the excerpt is cut before it.
        let one = DiagnosticRenderer(sources: ["rules.yaml": yaml]).render(
            result.diagnostics.first { $0.message.contains("'k1000'") }!)
        let shown = one.split(separator: "\n")
        #expect(shown[1].hasPrefix("…") && shown[1].hasSuffix("…"))
        let caret = shown[2].firstIndex(of: "^")!
        let column = shown[2].distance(from: shown[2].startIndex, to: caret)
        #expect(Array(shown[1].unicodeScalars)[column...].starts(with: "k1000: 1".unicodeScalars), "\(one)")
    }
}

/// A key or a name of the file quoted in a message or a help line is shown safe: an escape sequence in a quoted key
/// drove the terminal of whoever ran `beckon validate` on the file, and a newline forged a line of the report.
struct RenderSafetyTests {
    @Test func controlCharactersOfTheFileAreShownAsTheirCodes() {
        let yaml =
            "version: 1\nruleset: t\nrules:\n  - { id: a, on: Opened, do: [ { deep_link: x } ], \"\\e[2Jk\\nx.yaml:1:1: ok\": 1 }\n"
        let result = RuleLoader.load(texts: [("rules.yaml", yaml)])
        #expect(result.errorCount == 1)
        let text = result.rendered()
        #expect(!text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(text.debugDescription)")
        #expect(text.contains("\\u{1B}[2Jk\\u{A}x.yaml:1:1: ok"), "\(text)")
        #expect(text.split(separator: "\n").filter { $0.hasPrefix("x.yaml") }.isEmpty)
    }

    /// The source line under a problem shows a bidirectional override or a zero-width character as `�`, one for one
    /// (the override showed the rest of the line reversed; the caret stays under its character), and a message
    /// quoting a 1 MB name is cut.
    @Test func bidiControlsInTheSourceLineAndLongNames() {
        let yaml =
            "version: 1\nruleset: t\nrules:\n  - { id: a, on: Opened, title: \"a\u{202E}b\u{200B}c\", bogus: 1, do: [ { deep_link: x } ] }\n"
        let result = RuleLoader.load(texts: [("rules.yaml", yaml)])
        let text = result.rendered()
        #expect(!text.unicodeScalars.contains { $0.value == 0x202E || $0.value == 0x200B }, "\(text)")
        let lines = text.split(separator: "\n")
        let caret = lines.lastIndex { $0.contains("^") }
        #expect(caret != nil, "\(text)")
        if let caret {
            let column = Array(lines[caret].unicodeScalars).firstIndex(of: "^")!
            #expect(Array(lines[caret - 1].unicodeScalars)[column...].starts(with: "bogus".unicodeScalars), "\(text)")
        }
        let long = String(repeating: "R", count: 1_000_000)
        let big = RuleLoader.load(texts: [
            ("rules.yaml", "version: 1\nruleset: t\nrules:\n  - { id: \(long), on: X, do: [ { deep_link: x } ] }\n")
        ])
        #expect(big.errorCount == 1)
        #expect(big.rendered().utf8.count < 4 * Diagnostic.maxMessageCharacters, "\(big.rendered().utf8.count)")
    }
}

/// An empty name (`on: ''`, `on_screen: [""]`, `unless: ''`, a step of a sequence, `on_change: ''`) is an error
/// where it is: a rule on the empty event was one no event could fire, and validate passed it.
struct EmptyNameTests {
    @Test func anEmptyNameIsAnErrorAtIt() {
        for (trigger, column) in [("on: ''", 18), ("on: [Opened, \"\"]", 27), ("on_screen: \"\"", 25)] {
            let yaml = "version: 1\nruleset: t\nrules:\n  - { id: a, \(trigger), do: [ { deep_link: x } ] }\n"
            let result = RuleLoader.load(texts: [("rules.yaml", yaml)])
            let empty = result.diagnostics.filter { $0.message.contains("holds an empty name") }
            #expect(empty.count == 1, "\(trigger): \(result.rendered())")
            #expect(empty.first?.location.position.line == 4)
            #expect(empty.first?.location.position.column == column, "\(trigger): \(result.rendered())")
            #expect(result.ruleSet == nil)
        }
        // And wherever else an event or an attribute is named.
        for trigger in [
            "on: X, wait: 1h, unless: ''", "on: X, wait: 1h, unless: { event: '' }", "sequence: ['', Y], within: 1h",
            "on_change: ''",
        ] {
            let yaml = "version: 1\nruleset: t\nrules:\n  - { id: a, \(trigger), do: [ { deep_link: x } ] }\n"
            let result = RuleLoader.load(texts: [("rules.yaml", yaml)])
            #expect(
                result.diagnostics.contains { $0.message.contains("holds an empty name") }, "\(trigger): \(result.rendered())")
        }
    }
}

/// A named pipe called `*.yaml` in a rules folder is reported, not opened: opening it waited for a writer for ever.
struct SpecialFileTests {
    @Test func aNamedPipeInAFolderIsAnErrorNotAHang() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-fifo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let rules = "version: 1\nruleset: t\nrules:\n  - { id: a, on: Opened, do: [ { deep_link: x } ] }\n"
        try rules.write(to: dir.appendingPathComponent("rules.yaml"), atomically: true, encoding: .utf8)
        let pipe = dir.appendingPathComponent("pipe.yaml").path
        try #require(mkfifo(pipe, 0o600) == 0)
        let result = RuleLoader.load(paths: [dir.path])
        #expect(result.ruleSet == nil)
        #expect(result.diagnostics.map(\.id) == [.unreadableFile])
        #expect(result.diagnostics.first?.location.file == pipe)
        #expect(result.files.count == 1)
    }
}
