import BeckonCommands
import BeckonTools
import Foundation
import Testing

struct DryRunTests {
    static let cases = ["default_browser", "bad_lines", "arbitration", "timers", "skipped", "off_plan"]

    func run(_ name: String, _ format: DryRunRunner.Format) -> (Int32, StringConsole) {
        let dir = Snapshot.fixtures.appendingPathComponent("dryrun/\(name)")
        let console = StringConsole()
        // A fixture may let time run on after its events (`--until`).
        let until = (try? String(contentsOf: dir.appendingPathComponent("until.txt"), encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        // (A fixture may have a tracking plan beside its rules.)
        let plan = dir.appendingPathComponent("plan.yaml").path
        let status = DryRunRunner.run(
            .init(
                paths: [dir.appendingPathComponent("rules.yaml").path]
                    + (FileManager.default.fileExists(atPath: plan) ? [plan] : []),
                events: dir.appendingPathComponent("events.jsonl").path, format: format, until: until),
            console: console)
        return (status, console)
    }

    @Test(arguments: cases)
    func table(_ name: String) {
        let (status, console) = run(name, .table)
        #expect(status == 0)
        Snapshot.assert(
            Snapshot.relative(console.stdout + (console.stderr.isEmpty ? "" : "--- stderr\n" + console.stderr)),
            named: "dryrun/\(name).table.txt")
    }

    @Test(arguments: cases)
    func jsonl(_ name: String) {
        let (status, console) = run(name, .jsonl)
        #expect(status == 0)
        Snapshot.assert(console.stdout, named: "dryrun/\(name).jsonl")
        for line in console.stdout.split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line)")
        }
    }

    @Test func stopsAtTheFirstBadLineWhenStrict() {
        let dir = Snapshot.fixtures.appendingPathComponent("dryrun/bad_lines")
        let console = StringConsole()
        let status = DryRunRunner.run(
            .init(
                paths: [dir.appendingPathComponent("rules.yaml").path], events: dir.appendingPathComponent("events.jsonl").path,
                badLines: .strict),
            console: console)
        #expect(status == 1)
        #expect(
            Snapshot.relative(console.stderr).contains(
                "dryrun/bad_lines/events.jsonl:3:1: bad event: missing 'userId' (or 'anonymousId')"))
    }
}

/// The progress line: only on a terminal, with rate, share and time left, cleared at the end.
struct ProgressTests {
    final class FakeClock: @unchecked Sendable {
        var now: UInt64 = 0
    }

    @Test func showsRateShareAndTimeLeftOnATerminal() {
        let console = StringConsole(errIsTerminal: true)
        let clock = FakeClock()
        let progress = Progress(console: console, total: 1000, clock: { clock.now })
        clock.now = 2_000_000_000
        progress.tick(events: 4095, bytes: 100)  // not a 4096th event: no look at the clock
        #expect(console.stderr.isEmpty)
        progress.tick(events: 4096, bytes: 250)
        #expect(console.stderr.contains("4096 events, 2048 events/s, 25%, ETA 6s"))
        progress.finish()
        #expect(console.stderr.hasSuffix("\r"))
    }

    @Test func silentWhenNotATerminal() {
        let console = StringConsole()
        let progress = Progress(console: console, total: 1000, clock: { 5_000_000_000 })
        progress.tick(events: 4096, bytes: 250)
        progress.finish()
        #expect(console.stderr.isEmpty)
    }
}
