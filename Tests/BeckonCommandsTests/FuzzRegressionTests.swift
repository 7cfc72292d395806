import BeckonCommands
import Foundation
import Testing

/// Every input a fuzzer once crashed on (Fuzz/regressions/TARGET/) runs through its target's body: a fix that comes
/// undone fails here, without a fuzzing run.
struct FuzzRegressionTests {
    static let root = Snapshot.testsDirectory.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/regressions")

    static var inputs: [String] {
        FuzzEntry.targets.flatMap { target in
            ((try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(target.name).path)) ?? [])
                .sorted().map { "\(target.name)/\($0)" }
        }
    }

    @Test func thereAreRegressions() { #expect(!Self.inputs.isEmpty) }

    @Test(arguments: inputs)
    func runsWithoutCrashing(_ input: String) throws {
        let name = String(input.prefix { $0 != "/" })
        let target = try #require(FuzzEntry.targets.first { $0.name == name })
        let data = try Data(contentsOf: Self.root.appendingPathComponent(input))
        data.withUnsafeBytes { target.run($0.bindMemory(to: UInt8.self)) }
    }

    /// The shipped files, as the fuzzers' seeds, run through every target.
    @Test func seedsRun() throws {
        let rules = try String(
            contentsOf: Self.root.appendingPathComponent("../../rules/stampbook/welcome.yaml"), encoding: .utf8)
        for t in FuzzEntry.targets { Array(rules.utf8).withUnsafeBufferPointer { t.run($0) } }
    }
}
