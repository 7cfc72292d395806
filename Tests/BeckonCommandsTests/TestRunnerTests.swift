import BeckonCommands
import BeckonTools
import Foundation
import Testing

/// `beckon test`: the shipped campaign tests pass, and a failing test says what was expected, what came and why.
struct TestRunnerTests {
    func run(_ paths: [String], filter: String? = nil) -> (Int32, String) {
        let console = StringConsole()
        let status = TestRunner.run(paths: paths, filter: filter, console: console)
        return (status, Snapshot.relative(console.stdout + console.stderr))
    }

    @Test(arguments: ["rules/bossup", "rules/stampbook", "rules/ops", "campaigns/firefox", "examples/stampbook_reminder"])
    func shippedTestsPass(_ folder: String) {
        let (status, out) = run([SeedRuleSetTests.root.appendingPathComponent(folder).path])
        #expect(status == 0, "\(out)")
        #expect(out.contains(" 0 failed"))
        #expect(!out.contains(" 0 cases"))
    }

    @Test func failingFixtureReportsEachKindOfFailure() {
        let (status, out) = run([Snapshot.fixtures.appendingPathComponent("tests/failing.test.yaml").path])
        #expect(status == 1)
        #expect(out.contains("5 cases: 1 passed, 4 failed"))
        Snapshot.assert(out, named: "tests/failing.txt")
    }

    @Test func mistakesInEventsAndExpectationsPointAtTheirPlace() {
        let (status, out) = run([Snapshot.fixtures.appendingPathComponent("tests/broken_cases.test.yaml").path])
        #expect(status == 1)
        Snapshot.assert(out, named: "tests/broken_cases.txt")
    }

    @Test func schemaErrorsStopBeforeAnythingRuns() {
        let (status, out) = run([Snapshot.fixtures.appendingPathComponent("tests/schema_error").path])
        #expect(status == 1)
        #expect(out.contains("bad.test.yaml:7:5: error: unknown key 'expcet' in test case; did you mean 'expect'?"))
        #expect(out.contains("test case 'no events' has no events"))
        #expect(out.contains("nothing was run"))
    }

    @Test func filterRunsOnlyMatchingCases() {
        let (status, out) = run([Snapshot.fixtures.appendingPathComponent("tests/failing.test.yaml").path], filter: "PASSES")
        #expect(status == 0)
        #expect(out.contains("1 case: 1 passed, 0 failed"))
        let (none, _) = run([Snapshot.fixtures.appendingPathComponent("tests/failing.test.yaml").path], filter: "no such case")
        #expect(none == 1)
    }

    @Test func foldersWithoutTestsAreAnError() {
        let (status, out) = run([Snapshot.fixtures.appendingPathComponent("dryrun/timers").path])
        #expect(status == 1)
        #expect(out.contains("no test files"))
    }

    /// Writes a rule set and a test file to a temporary folder and runs the test.
    func runInline(rules: String, test: String) throws -> (Int32, String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try rules.write(to: dir.appendingPathComponent("rules.yaml"), atomically: true, encoding: .utf8)
        try test.write(to: dir.appendingPathComponent("rules.test.yaml"), atomically: true, encoding: .utf8)
        let console = StringConsole()
        let status = TestRunner.run(paths: [dir.path], console: console)
        return (status, console.stdout + console.stderr)
    }

    static let rules = """
        version: 1
        ruleset: shop
        rules:
          - id: thanks
            on: Order Completed
            where: event.properties.total >= 100
            do:
              - message: { surface: banner, title: Thanks, buttons: [{ label: A }, { label: B }, { label: C }] }
          - id: welcome
            on: Signed Up
            do:
              - notify: { id: hi, message: Hello }
        """

    @Test func matchingIsAnOrderedSubsetOfFields() throws {
        let test = """
            version: 1
            tests: shop
            cases:
              - name: lists match as ordered subsequences, numbers by value, maps by key
                events:
                  - { user: u, event: Signed Up, at: 2026-01-01T00:00:00Z }
                  - { user: u, event: Order Completed, after: 1h, properties: { total: 120.0 } }
                  - { user: u, event: Order Completed, after: 1h, properties: { total: 99 } }
                expect:
                  - { rule: welcome, notification: { id: hi } }
                  - { rule: thanks, at: 2026-01-01T01:00:00Z, message: { buttons: [{ label: A }, { label: C }] } }
                expect_none:
                  - { rule: thanks, at: 2026-01-01T02:00:00Z }
                exact: true
              - name: out of order fails
                events:
                  - { user: u, event: Signed Up, at: 2026-01-01T00:00:00Z }
                  - { user: u, event: Order Completed, after: 1h, properties: { total: 100 } }
                expect:
                  - { rule: thanks }
                  - { rule: welcome }
              - name: list items out of order fail
                events:
                  - { user: u, event: Order Completed, at: 2026-01-01T00:00:00Z, properties: { total: 100 } }
                expect:
                  - { rule: thanks, message: { buttons: [{ label: C }, { label: A }] } }
            """
        let (status, out) = try runInline(rules: Self.rules, test: test)
        #expect(status == 1)
        #expect(out.contains("✓ lists match as ordered subsequences"))
        #expect(out.contains("✗ out of order fails"))
        #expect(out.contains("2 ✗ { rule: welcome }  did not come"))
        #expect(out.contains("✗ list items out of order fail"))
        #expect(out.contains("message is {"))
        #expect(out.contains("3 cases: 1 passed, 2 failed"))
    }

    /// A failing case's report quotes the events' ids and values, which may hold any character: an escape sequence, a
    /// bidirectional override or a line break in a user id, a property or the case's name is shown as its code, never
    /// written raw to the terminal.
    @Test func aFailingCaseShowsTheEventsDataSafe() throws {
        let test = #"""
            version: 1
            tests: shop
            cases:
              - name: "x\e[2Jname\u202E"
                events:
                  - { user: "u\e[1m\n✓ forged", event: Signed Up, at: 2026-01-01T00:00:00Z }
                expect:
                  - { rule: thanks }
            """#
        let (status, out) = try runInline(rules: Self.rules, test: test)
        #expect(status == 1)
        #expect(!out.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || $0.value == 0x202E }, "\(out.debugDescription)")
        #expect(out.contains("✗ x\\u{1B}[2Jname\\u{202E}"), "\(out)")
        #expect(!out.split(separator: "\n").contains { $0.hasPrefix("✓ forged") }, "\(out)")
    }

    /// An expectation that can never match is an error, not a pass of `expect_none`: an unknown action kind, a kind the
    /// rule does not fire, a field no such action has, a key its map does not have; each with the nearest name.
    @Test func expectationsNameKindsAndFieldsThatCanCome() throws {
        func errors(_ expectation: String) throws -> String {
            let test = """
                version: 1
                tests: shop
                cases:
                  - name: one
                    events:
                      - { user: u, event: Signed Up, at: 2026-01-01T00:00:00Z }
                    expect_none:
                      - \(expectation)
                """
            let (status, out) = try runInline(rules: Self.rules, test: test)
            return status == 0 ? "" : out
        }
        #expect(try errors("{ rule: welcome, action: notfy }").contains("no action kind 'notfy'"))
        #expect(try errors("{ rule: welcome, action: notfy }").contains("help: did you mean 'notify'?"))
        #expect(
            try errors("{ rule: thanks, action: push }").contains(
                "rule 'thanks' fires no 'push' action; it fires held_back, message"))
        #expect(try errors("{ rule: welcome, notification: { idd: hi } }").contains("'notification' has no key 'idd'"))
        #expect(
            try errors("{ rule: welcome, notificaton: { id: hi } }").contains(
                "'notificaton' is not a field of an action of rule 'welcome'"))
        #expect(try errors("{ rule: welcome, notificaton: { id: hi } }").contains("did you mean 'notification'?"))
        #expect(try errors("{ action: push, push: { titel: Hi } }").contains("'push' has no key 'titel'"))
        // What can come passes when it does not.
        #expect(try errors("{ rule: thanks, action: message, message: { title: Nope } }") == "")
        #expect(try errors("{ rule: welcome, action: notify, notification: { id: bye }, unread: 1 }") == "")
    }

    @Test func repeatAfterAndSegmentEventsBuildTheStream() throws {
        let test = """
            version: 1
            tests: shop
            cases:
              - name: repeat spaces events by every; after counts from the last of them; Segment objects pass through
                users: { u: {} }
                events:
                  - { event: Order Completed, at: 2026-01-01T00:00:00Z, repeat: 3, every: 1d, properties: { total: 100 } }
                  - { event: Order Completed, after: 2h, properties: { total: 100 } }
                  - { type: track, userId: u, event: Signed Up, timestamp: "2026-01-10T00:00:00Z" }
                expect:
                  - { rule: thanks, at: 2026-01-01T00:00:00Z }
                  - { rule: thanks, at: 2026-01-02T00:00:00Z }
                  - { rule: thanks, at: 2026-01-03T00:00:00Z }
                  - { rule: thanks, at: 2026-01-03T02:00:00Z }
                  - { rule: welcome, at: 2026-01-10T00:00:00Z }
                exact: true
            """
        let (status, out) = try runInline(rules: Self.rules, test: test)
        #expect(status == 0, "\(out)")
    }

    /// One `repeat:` line expands to at most `TestRunner.maxRepeat` events: more is an error at the value, before
    /// anything is built.
    @Test func repeatHasALimit() throws {
        func test(_ n: Int) -> String {
            """
            version: 1
            tests: shop
            cases:
              - name: many
                users: { u: {} }
                events:
                  - { event: Order Completed, at: 2026-01-01T00:00:00Z, repeat: \(n), every: 1s }
                expect: []
            """
        }
        let (status, out) = try runInline(rules: Self.rules, test: test(TestRunner.maxRepeat + 1))
        #expect(status != 0)
        #expect(out.contains(":7:69: error: 'repeat' is a whole number from 1 to 100000"), "\(out)")

        // Lines within their own bound that together pass the case's: an error at the line that passes it, and the
        // lines after it are not expanded (a 100 KB property repeated 16,000 times was 1.6 GB in memory).
        let blob = String(repeating: "a", count: 100_000)
        let big = """
            version: 1
            tests: shop
            cases:
              - name: big
                users: { u: {} }
                events:
                  - { event: Order Completed, at: 2026-01-01T00:00:00Z, repeat: 400, every: 1s, properties: { blob: \(blob) } }
                  - { event: Order Completed, at: 2026-01-02T00:00:00Z, repeat: 400, every: 1s, properties: { blob: \(blob) } }
                expect: []
            """
        let (bigStatus, bigOut) = try runInline(rules: Self.rules, test: big)
        #expect(bigStatus != 0)
        #expect(bigOut.contains(":8:9: error: the case's events come to more than 64 MiB"), "\(bigOut.prefix(2000))")
        #expect(!bigOut.contains(":7:9: error"), "\(bigOut.prefix(2000))")
    }

    /// `every` present with a value that is no duration is that value's mistake, at it (it was "'repeat' needs
    /// `every:`" at `repeat`); `every` missing is still `repeat`'s.
    @Test(arguments: ["banana", "0s", "500us"])
    func aBadEveryIsShownAtItsValue(_ every: String) throws {
        let test = """
            version: 1
            tests: shop
            cases:
              - name: bad every
                users: { u: {} }
                events:
                  - { event: Order Completed, at: 2026-01-01T00:00:00Z, repeat: 3, every: \(every) }
                expect: []
            """
        let (status, out) = try runInline(rules: Self.rules, test: test)
        #expect(status != 0)
        #expect(out.contains(":7:79: error: 'every' is '\(every)': it needs a duration longer than 0"), "\(out)")
        let missing = test.replacingOccurrences(of: ", every: \(every)", with: "")
        #expect(try runInline(rules: Self.rules, test: missing).1.contains("'repeat' needs `every:`"))
    }
}
