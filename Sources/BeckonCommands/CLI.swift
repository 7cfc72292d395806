import ArgumentParser
import BeckonCore

/// The `beckon` command line. Each subcommand is a thin shell over a runner that tests call directly.
public struct BeckonCLI: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "beckon",
        abstract: "Rule-based marketing automation: check campaigns and see what they would fire.",
        subcommands: [Validate.self, DryRun.self, Conformance.self, Reference.self])

    public init() {}
}

/// Exits with a runner's status (0 clean, 1 problems found).
func finish(_ status: Int32) throws {
    if status != 0 { throw ExitCode(status) }
}

struct Validate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check rule files and report every problem with file:line:column.",
        discussion: "Exit status: 0 when there are no errors, 1 when there are, 64 on a usage error.")

    @Argument(help: "Rule files or folders (searched for .yaml and .yml).")
    var paths: [String]

    func run() throws {
        let console = StandardConsole()
        let status = ValidateRunner.run(paths: paths, console: console)
        console.flush()
        try finish(status)
    }
}

struct DryRun: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dry-run",
        abstract: "Run an event stream (Segment-spec JSON lines) through the rules and show what fires and why not.")

    @Argument(help: "Rule files or folders.")
    var paths: [String]

    @Option(name: .long, help: "Newline-delimited JSON events, or - for standard input.")
    var events: String

    @Option(name: .long, help: "table (readable) or jsonl (one JSON object per fired action).")
    var format: String = "table"

    @Flag(name: .long, help: "Skip bad event lines (each reported on standard error) instead of stopping.")
    var keepGoing = false

    @Flag(name: .long, help: "Show only fired actions, not the rules that matched but did not fire.")
    var firedOnly = false

    func validate() throws {
        guard DryRunRunner.Format(rawValue: format) != nil else {
            throw ValidationError("--format must be table or jsonl, not '\(format)'")
        }
    }

    func run() throws {
        let console = StandardConsole()
        let status = DryRunRunner.run(
            DryRunRunner.Options(
                paths: paths, events: events, format: DryRunRunner.Format(rawValue: format)!,
                keepGoing: keepGoing, firedOnly: firedOnly), console: console)
        console.flush()
        try finish(status)
    }
}

struct Conformance: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run conformance suites against Beckon's expression language.",
        subcommands: [CEL.self])

    struct CEL: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cel",
            abstract: "Run cel-spec simple-test files (protobuf text format); ends with passed=N failed=M skipped=K.")

        @Argument(help: "cel-spec .textproto files.")
        var files: [String]

        @Flag(name: .shortAndLong, help: "List every failure and the reasons tests were skipped.")
        var verbose = false

        func run() throws {
            let console = StandardConsole()
            let status = ConformanceRunner.run(files: files, verbose: verbose, console: console)
            console.flush()
            try finish(status)
        }
    }
}

extension BeckonCLI {
    /// Parses the process arguments and runs the command (the `beckon` executable's whole `main`).
    public static func runMain() { main() }
}

struct Reference: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a reference page generated from the code (docs/reference/*.md).", shouldDisplay: false)

    @Argument(help: "dsl or functions")
    var page: String

    func run() throws {
        let console = StandardConsole()
        switch page {
        case "dsl": console.out(ReferenceDocs.dsl())
        case "functions": console.out(ReferenceDocs.functions())
        default: throw ValidationError("unknown page '\(page)'; pages: dsl, functions")
        }
        console.flush()
    }
}
