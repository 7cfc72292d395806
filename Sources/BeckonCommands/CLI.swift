import ArgumentParser
import BeckonCore
import BeckonTools

/// The `beckon` command line. Each subcommand is a thin shell over a runner that tests call directly.
public struct BeckonCLI: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "beckon",
        abstract: "Rule-based marketing automation: check campaigns and see what they would fire.",
        version: BeckonRelease.version,
        subcommands: [
            Validate.self, DryRun.self, Explain.self, Test.self, ReportCommand.self, Schema.self, Bench.self, Conformance.self,
            Reference.self,
        ])

    public init() {}
}

/// A command that writes to a ``Console`` and returns an exit status, so that tests can run it in-process.
protocol ConsoleCommand: ParsableCommand {
    func run(console: any Console) -> Int32
}

extension ConsoleCommand {
    func run() throws {
        let console = StandardConsole()
        let status = run(console: console)
        console.flush()
        if let failure = console.writeFailure {
            // (Standard error may be where it failed: then this is lost too, and the status says it.)
            console.err("error: the output could not be written (\(failure)); what was not written is lost\n")
            throw ExitCode(BeckonCLI.writeFailed)
        }
        if status != 0 { throw ExitCode(status) }
    }
}

extension BeckonCLI {
    /// The exit status when the output could not be written (EX_IOERR of sysexits.h).
    static let writeFailed: Int32 = 74

    /// Parses `arguments` (without the program name) and runs the command against `console`.
    /// Returns the exit status: 0 clean, 1 problems found, 64 usage error (and, run as a process, 74 when its output
    /// could not be written: ``writeFailed``).
    public static func run(_ arguments: [String], console: any Console) -> Int32 {
        do {
            let command = try parseAsRoot(arguments)
            guard let c = command as? any ConsoleCommand else {
                console.err("not a runnable command: \(arguments.joined(separator: " "))\n")
                return 64
            }
            return c.run(console: console)
        } catch {
            console.err(fullMessage(for: error) + "\n")
            return exitCode(for: error).rawValue
        }
    }
}

struct Validate: ConsoleCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check rule files and report every problem with file:line:column.",
        discussion: """
            Exit status: 0 when there are no errors, 1 when there are, 64 on a usage error, 74 when standard output \
            could not be written.
            """)

    @Argument(help: "Rule files or folders (searched for .yaml and .yml).")
    var paths: [String]

    func run(console: any Console) -> Int32 { ValidateRunner.run(paths: paths, console: console) }
}

/// The rule files and the event stream of `dry-run`, `explain` and `report`, with what to do at a bad line.
struct StreamOptions: ParsableArguments {
    @Argument(help: "Rule files or folders.")
    var paths: [String]

    @Option(name: .long, help: "Newline-delimited JSON events, or - for standard input.")
    var events: String

    @OptionGroup var badLines: BadLineOptions
}

/// `--strict`: the one switch of the bad-line policy (``BadLinePolicy``).
struct BadLineOptions: ParsableArguments {
    @Flag(
        name: .long,
        help: """
            Stop at the first bad event line (exit status 1). Without it, each bad line is counted and skipped, \
            the first \(BadLinePolicy.reportedLines) reported with file:line:column.
            """)
    var strict = false

    var policy: BadLinePolicy { strict ? .strict : .goOn }
}

/// `--until`, for the commands that run a stream and can let time run on after it.
struct UntilOption: ParsableArguments {
    @Option(
        name: .long,
        help:
            "After the stream, let time run to this instant (RFC 3339, or +7d after the last event) so delayed actions come due.")
    var until: String?

    /// A value that is no time at all is refused before the stream runs (exit 64), not after its output.
    func validate() throws {
        if let until, let why = DryRunRunner.untilFormProblem(until) { throw ValidationError("--until: \(why)") }
    }
}

extension DryRunRunner.Format: ExpressibleByArgument {}
extension ExplainRunner.Format: ExpressibleByArgument {}
extension ReportRunner.Format: ExpressibleByArgument {}
extension BenchRunner.Format: ExpressibleByArgument {}

struct DryRun: ConsoleCommand {
    static let configuration = CommandConfiguration(
        commandName: "dry-run",
        abstract: "Run an event stream (Segment-spec JSON lines) through the rules and show what fires and why not.")

    @OptionGroup var stream: StreamOptions

    @Option(name: .long, help: "table (readable) or jsonl (one JSON object per fired action).")
    var format: DryRunRunner.Format = .table

    /// Bad lines are skipped by default now; the flag is kept so that scripts that pass it still run.
    @Flag(name: .long, help: .hidden)
    var keepGoing = false

    @Flag(name: .long, help: "Show only fired actions, not the rules that matched but did not fire.")
    var firedOnly = false

    @OptionGroup var until: UntilOption

    func run(console: any Console) -> Int32 {
        DryRunRunner.run(
            DryRunRunner.Options(
                paths: stream.paths, events: stream.events, format: format, badLines: stream.badLines.policy,
                firedOnly: firedOnly, until: until.until),
            console: console)
    }
}

struct Conformance: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run conformance suites against Beckon's expression language.",
        subcommands: [CEL.self])

    struct CEL: ConsoleCommand {
        static let configuration = CommandConfiguration(
            commandName: "cel",
            abstract: "Run cel-spec simple-test files (protobuf text format); ends with passed=N failed=M skipped=K.")

        @Argument(help: "cel-spec .textproto files.")
        var files: [String]

        @Flag(name: .shortAndLong, help: "List every failure and the reasons tests were skipped.")
        var verbose = false

        func run(console: any Console) -> Int32 { ConformanceRunner.run(files: files, verbose: verbose, console: console) }
    }
}

extension BeckonCLI {
    /// Parses the process arguments and runs the command (the `beckon` executable's whole `main`).
    public static func runMain() { main() }
}

struct Reference: ConsoleCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a reference page generated from the code (docs/reference/*.md).", shouldDisplay: false)

    enum Page: String, CaseIterable, ExpressibleByArgument {
        case dsl, functions, limits

        var text: String {
            switch self {
            case .dsl: ReferenceDocs.dsl()
            case .functions: ReferenceDocs.functions()
            case .limits: ReferenceDocs.limits()
            }
        }
    }

    @Argument(help: "The page.")
    var page: Page

    func run(console: any Console) -> Int32 {
        console.out(page.text)
        return 0
    }
}

struct Explain: ConsoleCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show, for each of one user's events, why each rule fired or did not, with the values it saw.")

    @OptionGroup var stream: StreamOptions

    @Option(name: .long, help: "The user (userId or anonymousId).")
    var user: String

    @Option(name: .long, help: "Only this rule (its id, or campaign/id); also lists the events that do not trigger it.")
    var rule: String?

    @Option(name: .long, help: "text or json.")
    var format: ExplainRunner.Format = .text

    @OptionGroup var until: UntilOption

    func run(console: any Console) -> Int32 {
        ExplainRunner.run(
            .init(
                paths: stream.paths, events: stream.events, user: user, rule: rule, format: format, until: until.until,
                badLines: stream.badLines.policy),
            console: console)
    }
}

struct Test: ConsoleCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the campaign tests (files with `tests:`) found under the paths.",
        discussion: """
            Exit status: 0 when every case passes, 1 when one fails or a test file has errors, 74 when standard \
            output could not be written.
            """)

    @Argument(help: "Test files, or folders searched for them.")
    var paths: [String]

    @Option(name: .long, help: "Only the cases whose name contains this text.")
    var filter: String?

    @OptionGroup var badLines: BadLineOptions

    func run(console: any Console) -> Int32 {
        TestRunner.run(paths: paths, filter: filter, badLines: badLines.policy, console: console)
    }
}

struct ReportCommand: ConsoleCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Measure a stream: per rule what its triggers came to; per campaign exposure, goals, treatment against holdout."
    )

    @OptionGroup var stream: StreamOptions

    @Option(name: .long, help: "text or json.")
    var format: ReportRunner.Format = .text

    @Option(name: .long, help: "Also write a self-contained HTML page with charts to this file.")
    var html: String?

    @OptionGroup var until: UntilOption

    func run(console: any Console) -> Int32 {
        ReportRunner.run(
            .init(
                paths: stream.paths, events: stream.events, format: format, html: html, until: until.until,
                badLines: stream.badLines.policy),
            console: console)
    }
}

struct Schema: ConsoleCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the JSON Schema of Beckon's YAML files, for editors (yaml-language-server and others).",
        discussion: "The repository ships it as schema/beckon.schema.json; see docs/guide.md, \"Editor support\".")

    func run(console: any Console) -> Int32 {
        console.out(JSONWriter.pretty(JSONSchemaExport.schema()) + "\n")
        return 0
    }
}

struct Bench: ConsoleCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure the engine on the shared benchmark workload (users.ndjson, events.ndjson, rules.json).",
        discussion: """
            Translates rules.json to Beckon YAML and loads it through the normal loader, feeds users as identify and \
            events as track, and reports events/s in process, end to end and decoding alone, peak RSS, state bytes per user, \
            allocations per event, the cost of 5,000 rules against 50, 10,000 rules' compile time, and fires per rule. \
            With $BENCH_RESULTS/results/ref.json present (or --reference), exits 1 unless every rule's fires equal it.
            """)

    @Option(name: .long, help: "The workload directory (../shared/bench/gen_workload.py --out).")
    var workload: String

    @Option(name: .long, help: "text or json.")
    var format: BenchRunner.Format = .text

    @Option(name: .long, help: "The reference result to compare fires with (bench.py ref writes results/ref.json).")
    var reference: String?

    @Option(name: .long, help: "Rules in the scaling run (0 to skip).")
    var scaleRules = 5000

    @Option(name: .long, help: "Rules in the compile-time run (0 to skip).")
    var compileRules = 10_000

    @Option(name: .long, help: "In-process runs to take the best of.")
    var repeats = 3

    @Flag(name: .long, help: .hidden)
    var noEndToEnd = false

    @Option(name: .long, help: .hidden)
    var export: String?

    func run(console: any Console) -> Int32 {
        var o = BenchRunner.Options(workload: workload, format: format, reference: reference)
        o.scaleRules = scaleRules
        o.compileRules = compileRules
        o.repeats = repeats
        o.endToEnd = !noEndToEnd
        o.export = export
        return BenchRunner.run(o, console: console)
    }
}
