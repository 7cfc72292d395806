import BeckonCommands
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
}
