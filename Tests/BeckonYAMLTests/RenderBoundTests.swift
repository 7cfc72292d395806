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
