import ArgumentParser
import BeckonCommands

// `beckon-bench`: the command line with the counting allocator linked in (BeckonAllocCount replaces malloc in the
// whole process), so that `beckon-bench bench` reports allocations per event. `beckon` itself does not link it.
BeckonCLI.main()
