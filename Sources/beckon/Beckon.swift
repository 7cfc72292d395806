import ArgumentParser
import BeckonCommands

/// The root command: the commands of ``BeckonCLI`` and `serve` (kept here so that only the executable links the
/// server stack, not the fuzz harnesses that link BeckonCommands).
@main
struct Beckon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beckon",
        abstract: BeckonCLI.configuration.abstract,
        subcommands: BeckonCLI.configuration.subcommands + [Serve.self, Outbox.self, User.self, Fleet.self])
}
