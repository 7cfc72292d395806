import Testing

@testable import BeckonCore

/// The message-id window against a model of it: every id within the window is caught, every id that left it is not,
/// across the switch between scanning and the index at 32 ids.
struct MessageIDWindowTests {
    /// A deterministic generator (SplitMix64), so that a failure repeats.
    struct Mix {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test func theWindowForgetsWhatLeftItAndCatchesEveryIdInIt() {
        var mix = Mix(state: 9)
        let window = MessageIDWindow()
        var seen: [UInt64: Int64] = [:]
        var time: Int64 = 0
        for _ in 0..<5_000 {
            time += Int64(mix.next() % 100)
            let h = mix.next() % 400
            let horizon = time - 2_000
            seen = seen.filter { $0.value > horizon }
            let fresh = window.insert(h, at: time, forgettingUpTo: horizon)
            #expect(fresh == (seen[h] == nil))
            if fresh { seen[h] = time }
            #expect(window.count == seen.count)
        }
    }
}
