import BeckonCore
import BeckonTools

/// What a user's state costs as bytes (docs/state.md): encoded sizes, and the time to take and encode every user's
/// state, and to decode and restore it into a new engine.
struct StateCost {
    var medianBytes = 0
    var p99Bytes = 0
    /// Taking a user's state from the engine and encoding it, per user.
    var encodeMicros = 0.0
    /// Decoding a user's bytes and restoring them into a new engine, per user.
    var decodeMicros = 0.0

    static func measure(_ engine: Engine) -> StateCost {
        var c = StateCost()
        let profiles = engine.store.allProfiles()
        guard !profiles.isEmpty else { return c }
        let t0 = BenchRunner.now()
        let encoded = profiles.map { engine.state(of: $0).encoded() }
        let t1 = BenchRunner.now()
        let next = Engine(ruleSet: engine.ruleSet)
        for bytes in encoded {
            // Bytes this engine just wrote: a failure here is a bug, and the benchmark stops on it.
            guard let s = try? UserState(decoding: bytes), (try? next.restore(s)) != nil else {
                preconditionFailure("a user's state did not decode and restore")
            }
        }
        let t2 = BenchRunner.now()
        let sizes = encoded.map(\.count).sorted()
        c.medianBytes = sizes[sizes.count / 2]
        c.p99Bytes = sizes[min(sizes.count - 1, sizes.count * 99 / 100)]
        c.encodeMicros = (t1 - t0) * 1e6 / Double(profiles.count)
        c.decodeMicros = (t2 - t1) * 1e6 / Double(profiles.count)
        return c
    }
}
