import BeckonCommands

BeckonCLI.runMain()
