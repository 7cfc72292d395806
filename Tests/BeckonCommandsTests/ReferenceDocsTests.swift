import BeckonCommands
import BeckonTools
import Foundation
import Testing

/// docs/reference is generated from the code; these tests keep the committed pages equal to it.
/// Regenerate with `BECKON_RECORD=1 swift test --filter ReferenceDocsTests`.
struct ReferenceDocsTests {
    static let docs = Snapshot.testsDirectory.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/reference")

    func check(_ generated: String, _ page: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let url = Self.docs.appendingPathComponent(page)
        if ProcessInfo.processInfo.environment["BECKON_RECORD"] == "1" {
            try? generated.write(to: url, atomically: true, encoding: .utf8)
            Issue.record("rewrote \(page)", sourceLocation: sourceLocation)
            return
        }
        let committed = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        #expect(
            committed == generated,
            "docs/reference/\(page) is out of date: run BECKON_RECORD=1 swift test --filter ReferenceDocsTests",
            sourceLocation: sourceLocation)
    }

    @Test func dslPage() { check(ReferenceDocs.dsl(), "dsl.md") }
    @Test func functionsPage() { check(ReferenceDocs.functions(), "functions.md") }
    @Test func limitsPage() { check(ReferenceDocs.limits(), "limits.md") }

    /// Every test the limits page names exists (as `func name(` inside `struct Suite`), so a bound cannot lose its
    /// test without the page saying so.
    @Test func everyLimitNamesATestThatExists() throws {
        let tests = Snapshot.testsDirectory.deletingLastPathComponent()
        var sources: [String: String] = [:]
        for dir in ["BeckonCoreTests", "BeckonYAMLTests", "BeckonCommandsTests", "BeckonServerTests"] {
            let folder = tests.appendingPathComponent(dir)
            for f in try FileManager.default.contentsOfDirectory(atPath: folder.path) where f.hasSuffix(".swift") {
                let text = try String(contentsOf: folder.appendingPathComponent(f), encoding: .utf8)
                for part in text.components(separatedBy: "\nstruct ").dropFirst() {
                    sources[String(part.prefix { $0 != " " && $0 != ":" && $0 != "{" }), default: ""] += part
                }
            }
        }
        let named = ReferenceDocs.limitTests()
        #expect(named.count >= 30)
        for name in named {
            let parts = name.split(separator: ".")
            if parts[0].hasSuffix("_test") {
                // A test of the service as a process: `def name(` in Tests/Service/FILE.py.
                let file = tests.appendingPathComponent("Service/\(parts[0]).py")
                let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
                #expect(text.contains("def \(parts[1])("), "docs/reference/limits.md names \(name), which does not exist")
                continue
            }
            let body = sources[String(parts[0])] ?? ""
            #expect(body.contains("func \(parts[1])("), "docs/reference/limits.md names \(name), which does not exist")
        }
    }
}
