import CBeckon

/// Hints that ask the CPU for memory a few steps before the engine reads it (the engine's batch look-ahead). A hint
/// reads nothing that could change a result, and fetching past the end of an object is harmless (a prefetch never
/// faults), so an object's hint names whole cache lines from its start rather than its exact size.
enum Prefetch {
    /// The cache lines holding `bytes` bytes from `start`, at most `maxLines` of them.
    @inline(__always) static func range(_ start: UnsafeRawPointer?, bytes: Int, maxLines: Int) {
        guard let start else { return }
        beckon_prefetch_range(start, bytes, maxLines)
    }
}
