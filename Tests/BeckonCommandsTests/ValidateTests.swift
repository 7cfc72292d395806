import BeckonCommands
import BeckonCore
import Foundation
import Testing

struct ValidateTests {
    static let diagnosticsDir = Snapshot.fixtures.appendingPathComponent("diagnostics")

    /// Every class of problem `validate` reports has a fixture that provokes it, with golden output.
    @Test(arguments: DiagnosticID.all.map(\.rawValue))
    func everyErrorClassIsReported(_ id: String) throws {
        let yaml = Self.diagnosticsDir.appendingPathComponent(id + ".yaml")
        let folder = Self.diagnosticsDir.appendingPathComponent(id)
        let path = FileManager.default.fileExists(atPath: yaml.path) ? yaml.path : folder.path
        try #require(FileManager.default.fileExists(atPath: path), "no fixture for \(id)")
        let console = StringConsole()
        let status = ValidateRunner.run(paths: [path], console: console)
        #expect(status == 1)
        #expect(console.stderr.contains("[\(id)]"), "output lacks [\(id)]:\n\(console.stderr)")
        Snapshot.assert(Snapshot.relative(console.stderr), named: "diagnostics/\(id).txt")
    }

    @Test func cleanFilesPass() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-clean-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try """
        version: 1
        campaign: welcome
        rules:
          - id: greet
            on: Signed In
            do:
              - message: { surface: launch, title: Hi }
        """.write(to: dir.appendingPathComponent("welcome.yaml"), atomically: true, encoding: .utf8)
        let console = StringConsole()
        #expect(ValidateRunner.run(paths: [dir.path], console: console) == 0)
        #expect(console.stdout == "1 file, 1 rule: 0 errors, 0 warnings\n")
    }

    /// All problems of a file are reported in one run.
    @Test func reportsEveryProblemAtOnce() {
        let console = StringConsole()
        _ = ValidateRunner.run(paths: [Self.diagnosticsDir.appendingPathComponent("wrong_type.yaml").path], console: console)
        #expect(console.stderr.components(separatedBy: "[wrong_type]").count - 1 == 2)
    }
}
