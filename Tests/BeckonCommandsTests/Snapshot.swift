import Foundation
import Testing

/// Golden files under Snapshots/. A missing file is recorded, and so is every file when BECKON_RECORD=1 is set;
/// a recording run fails, so that nobody records by accident.
enum Snapshot {
    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let fixtures = testsDirectory.appendingPathComponent("Fixtures")
    static let directory = testsDirectory.appendingPathComponent("Snapshots")

    static func assert(_ actual: String, named name: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let url = directory.appendingPathComponent(name)
        let record = ProcessInfo.processInfo.environment["BECKON_RECORD"] == "1"
        if record || !FileManager.default.fileExists(atPath: url.path) {
            try? FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try? actual.write(to: url, atomically: true, encoding: .utf8)
            Issue.record(
                "recorded snapshot \(name); check it, then run again without BECKON_RECORD", sourceLocation: sourceLocation)
            return
        }
        let expected = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        if expected != actual {
            Issue.record(
                "snapshot \(name) differs.\n--- expected\n\(expected)\n--- actual\n\(actual)", sourceLocation: sourceLocation)
        }
    }

    /// Replaces absolute fixture paths so snapshots do not depend on where the repository is.
    static func relative(_ s: String) -> String {
        s.replacingOccurrences(of: fixtures.path + "/", with: "")
    }
}
