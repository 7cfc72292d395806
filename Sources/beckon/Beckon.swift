import ArgumentParser
import BeckonCommands
import BeckonCore
import Foundation

/// The root command: the commands of ``BeckonCLI`` and `serve` (kept here so that only the executable links the
/// server stack, not the fuzz harnesses that link BeckonCommands).
@main
struct Beckon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beckon",
        abstract: BeckonCLI.configuration.abstract, version: BeckonRelease.version,
        subcommands: BeckonCLI.configuration.subcommands + [
            Serve.self, Outbox.self, User.self, Audience.self, Fleet.self,
        ])
}

/// Writes `error: MESSAGE` to standard error and gives the exit status 1, for `throw fail(…)`: the commands kept
/// here (serve, outbox, user, fleet) say what went wrong in one line, never with a trace.
func fail(_ message: String) -> ExitCode {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    return ExitCode(1)
}
