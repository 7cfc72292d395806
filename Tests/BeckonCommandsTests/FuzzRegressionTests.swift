import BeckonCommands
import BeckonCore
import BeckonTools
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

    /// The fuzzers' seeds of each kind (scripts/fuzz.sh): every shipped rule file through the rules target, every
    /// sample stream through the events target, every cel-spec file through the textproto target; and one rule file
    /// through all four, as input of the wrong kind.
    @Test func seedsRun() throws {
        let repo = Self.root.deletingLastPathComponent().deletingLastPathComponent()
        func files(_ dir: String, _ ext: String) -> [URL] {
            let base = repo.appendingPathComponent(dir)
            let all = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil)?.allObjects as? [URL] ?? []
            return all.filter { $0.pathExtension == ext }.sorted { $0.path < $1.path }
        }
        let kinds: [(String, [URL])] = [
            ("rules", files("rules", "yaml") + files("campaigns", "yaml")), ("events", files("samples", "jsonl")),
            ("textproto", files("Tests/Conformance/cel-spec", "textproto")),
        ]
        for (name, urls) in kinds {
            let target = try #require(FuzzEntry.targets.first { $0.name == name })
            #expect(urls.count >= 5, "\(name): \(urls.count) seeds")
            for url in urls {
                let data = try Data(contentsOf: url)
                data.withUnsafeBytes { target.run($0.bindMemory(to: UInt8.self)) }
            }
        }
        let state = try #require(FuzzEntry.targets.first { $0.name == "state" })
        let stateSeeds = FuzzEntry.stateSeeds()
        #expect(stateSeeds.count == 4)
        for seed in stateSeeds {
            #expect((try? UserState(decoding: seed)) != nil)
            seed.withUnsafeBufferPointer { state.run($0) }
        }
        let rules = try Data(contentsOf: files("rules", "yaml")[0])
        for t in FuzzEntry.targets { rules.withUnsafeBytes { t.run($0.bindMemory(to: UInt8.self)) } }
    }
}
