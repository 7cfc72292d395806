import ArgumentParser
import BeckonCommands
import BeckonCore
import BeckonTools
import Foundation
import Testing

struct ValidateTests {
    /// `beckon --version` says the release (the one `beckon_build_info` and the contract's `info.version` say).
    @Test func versionIsTheRelease() {
        do {
            _ = try BeckonCLI.parseAsRoot(["--version"])
            Issue.record("--version was not understood")
        } catch {
            #expect(BeckonCLI.message(for: error) == BeckonRelease.version)
        }
    }

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

    /// Every analysis warning has a fixture that provokes it (with variants that must not), and rules that silence it.
    @Test(arguments: DiagnosticID.analysis.map(\.rawValue))
    func everyAnalysisWarningIsReported(_ id: String) throws {
        let dir = Snapshot.fixtures.appendingPathComponent("analysis")
        let yaml = dir.appendingPathComponent(id + ".yaml")
        let path = FileManager.default.fileExists(atPath: yaml.path) ? yaml.path : dir.appendingPathComponent(id).path
        try #require(FileManager.default.fileExists(atPath: path), "no fixture for \(id)")
        let console = StringConsole()
        let status = ValidateRunner.run(paths: [path], console: console)
        #expect(status == 0, "warnings do not fail validate")
        #expect(console.stderr.contains("warning: "))
        #expect(console.stderr.contains("[\(id)]"), "output lacks [\(id)]:\n\(console.stderr)")
        // The rule named `silenced` silences this warning.
        let silenced = console.stderr.components(separatedBy: "\n").filter { $0.contains("'silenced'") && $0.contains("[\(id)]") }
        #expect(silenced.isEmpty, "silenced warning reported: \(silenced)")
        Snapshot.assert(Snapshot.relative(console.stderr + console.stdout), named: "analysis/\(id).txt")
    }

    /// Validates one rule file `welcome.yaml` with this text, written to a fresh folder.
    func validate(_ yaml: String) throws -> (status: Int32, console: StringConsole) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-validate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try yaml.write(to: dir.appendingPathComponent("welcome.yaml"), atomically: true, encoding: .utf8)
        let console = StringConsole()
        return (ValidateRunner.run(paths: [dir.path], console: console), console)
    }

    static let greet = """
        version: 1
        campaign: welcome
        rules:
          - id: greet
            on: Signed In
            do:
              - message: { surface: launch, title: Hi }
        """

    @Test func silencingAnUnknownWarningIsAnError() throws {
        let (status, console) = try validate(
            Self.greet.replacingOccurrences(of: "    do:", with: "    silence: [shadowed_rules]\n    do:"))
        #expect(status == 1)
        #expect(console.stderr.contains("'shadowed_rules' is not an analysis warning; did you mean 'shadowed_rule'?"))
    }

    @Test func cleanFilesPass() throws {
        let (status, console) = try validate(Self.greet)
        #expect(status == 0)
        #expect(console.stdout == "1 file, 1 rule: 0 errors, 0 warnings\n")
    }

    /// All problems of a file are reported in one run.
    @Test func reportsEveryProblemAtOnce() {
        let console = StringConsole()
        _ = ValidateRunner.run(paths: [Self.diagnosticsDir.appendingPathComponent("wrong_type.yaml").path], console: console)
        #expect(console.stderr.components(separatedBy: "[wrong_type]").count - 1 == 2)
    }
}
