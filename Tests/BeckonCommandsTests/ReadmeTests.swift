import BeckonCommands
import BeckonTools
import BeckonYAML
import Foundation
import Testing

/// The README's transcripts are real: each `$ beckon …` command runs, and every line shown (other than `…`)
/// appears in its output.
struct ReadmeTests {
    static let root = Snapshot.testsDirectory.deletingLastPathComponent().deletingLastPathComponent()

    struct Transcript: CustomStringConvertible, Sendable {
        var command: [String]
        var lines: [String]
        var description: String { command.joined(separator: " ") }
    }

    static func transcripts(in file: String) -> [Transcript] {
        let text = (try? String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)) ?? ""
        var out: [Transcript] = []
        var current: Transcript?
        for line in text.components(separatedBy: "\n") {
            if line.hasPrefix("$ beckon ") {
                current = Transcript(command: line.dropFirst("$ beckon ".count).split(separator: " ").map(String.init), lines: [])
            } else if line.hasPrefix("```"), let c = current {
                out.append(c)
                current = nil
            } else if current != nil, line != "…", !line.isEmpty {
                current!.lines.append(line)
            }
        }
        return out
    }

    @Test(arguments: transcripts(in: "README.md") + transcripts(in: "docs/guide.md").filter { !$0.lines.isEmpty })
    func transcriptIsTrue(_ t: Transcript) {
        #expect(!t.lines.isEmpty)
        // Relative paths are relative to the repository root.
        let args = t.command.map { a in
            FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(a).path)
                ? Self.root.appendingPathComponent(a).path : a
        }
        let console = StringConsole()
        _ = BeckonCLI.run(args, console: console)
        let output = (console.stdout + console.stderr).replacingOccurrences(of: Self.root.path + "/", with: "")
        let produced = Set(output.components(separatedBy: "\n"))
        for line in t.lines {
            let found = produced.contains(line)
            #expect(found, "README line not in the output of `beckon \(t)`:\n\(line)")
        }
    }

    @Test func readmeHasTranscripts() { #expect(Self.transcripts(in: "README.md").count >= 2) }
}

/// Every complete YAML example in the docs (a block that starts with `version: 1`) loads without problems.
struct DocExampleTests {
    static func examples() -> [String] {
        var out: [String] = []
        for doc in ["README.md", "docs/guide.md", "docs/semantics.md", "docs/events.md", "docs/time.md"] {
            let text = (try? String(contentsOf: ReadmeTests.root.appendingPathComponent(doc), encoding: .utf8)) ?? ""
            var block: [String]?
            for line in text.components(separatedBy: "\n") {
                if line == "```yaml" {
                    block = []
                } else if line.hasPrefix("```"), let b = block {
                    if b.first == "version: 1" { out.append(b.joined(separator: "\n")) }
                    block = nil
                } else if block != nil {
                    block!.append(line)
                }
            }
        }
        return out
    }

    @Test func thereAreExamples() { #expect(Self.examples().count >= 6) }

    @Test(arguments: examples())
    func exampleLoads(_ yaml: String) {
        let r = RuleLoader.load(texts: [("example.yaml", yaml)])
        #expect(r.diagnostics.isEmpty, "\(r.rendered())\n\(yaml)")
    }
}
