import Foundation
import Testing

@testable import BeckonCommands
@testable import BeckonTools

struct ConformanceTests {
    /// Every in-subset test of the cel-spec files passes; everything skipped is a protobuf feature.
    @Test func celSpecSubsetPasses() throws {
        let dir = Snapshot.testsDirectory.deletingLastPathComponent().appendingPathComponent("Conformance/cel-spec")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".textproto") }.sorted()
        #expect(files.count == 11)
        let console = StringConsole()
        let status = ConformanceRunner.run(
            files: files.map { dir.appendingPathComponent($0).path }, verbose: true, console: console)
        #expect(status == 0, "\(console.stdout)")
        let last = console.stdout.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.hasPrefix("passed=") && last.contains(" failed=0 "), "\(last)")
        for line in console.stdout.split(separator: "\n") where line.contains("skipped") && line.hasPrefix("  ") {
            #expect(line.contains("protobuf"), "unexpected skip reason: \(line)")
        }
    }

    /// Messages nest at most `TextProto.maxDepth` (64) levels: deeper is a parse error, not a stack overflow.
    @Test func textProtoNestingHasALimit() throws {
        func nested(_ n: Int) -> String { String(repeating: "a { ", count: n) + String(repeating: "} ", count: n) }
        #expect(throws: Never.self) { try TextProto.parse(nested(TextProto.maxDepth)) }
        #expect(throws: TextProto.ParseError.self) { try TextProto.parse(nested(TextProto.maxDepth + 1)) }
        #expect(throws: TextProto.ParseError.self) { try TextProto.parse(nested(100_000)) }
    }
}
