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
        var window = MessageIDWindow()
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

    /// The index of a window of many ids against the model: thousands of ids coming and going, ids whose low bits
    /// are all alike (every one probing from the same slot, so that removals shift long runs back), and ids spread
    /// over 64 bits. Every id the model holds is caught, and every one it does not is not.
    @Test(arguments: [0, 12, 40])
    func theIndexOfManyIdsAgreesWithTheModel(shift: Int) {
        var mix = Mix(state: UInt64(shift) + 1)
        var window = MessageIDWindow()
        var seen: [UInt64: Int64] = [:]
        var time: Int64 = 0
        var horizon: Int64 = -1
        for step in 0..<20_000 {
            time += Int64(mix.next() % 3)
            // The window's span moves from wide to narrow and back, so the live ids grow past 1,000 and shrink.
            let span: Int64 = (step / 4_000) % 2 == 0 ? 3_000 : 50
            horizon = max(horizon, time - span)
            let h = (mix.next() % 5_000) << UInt64(shift)
            seen = seen.filter { $0.value > horizon }
            let fresh = window.insert(h, at: time, forgettingUpTo: horizon)
            #expect(fresh == (seen[h] == nil), "step \(step)")
            if fresh { seen[h] = time }
            if step % 97 == 0 {
                #expect(window.count == seen.count)
                for _ in 0..<20 {
                    let probe = (mix.next() % 5_000) << UInt64(shift)
                    #expect(window.contains(probe) == (seen[probe] != nil))
                }
            }
        }
    }

    /// A burst's memory goes once its ids leave the window, and what is kept survives a snapshot and a restore: the
    /// same ids, each still caught, none of the forgotten ones.
    @Test func aBurstsMemoryGoesAndTheWindowRestores() {
        var window = MessageIDWindow()
        var fresh = 0
        for i in 0..<1_000 where window.insert(UInt64(i), at: Int64(i), forgettingUpTo: -1) { fresh += 1 }
        let burst = window.bytes
        #expect(fresh == 1_000 && burst >= 1_000 * 16)
        // Past the window: each insert forgets, and the storage shrinks to what is left.
        for i in 1_000..<1_010 where window.insert(UInt64(i), at: 10_000 + Int64(i), forgettingUpTo: 9_999) { fresh += 1 }
        let (count, bytes) = (window.count, window.bytes)
        let (old, new) = (window.contains(5), window.contains(1_005))
        #expect(fresh == 1_010 && count == 10 && bytes < burst / 8 && !old && new)
        let restored = MessageIDWindow(restoring: window.snapshot)
        let hashes = restored.snapshot.map(\.hash)
        let (kept, gone) = (restored.contains(1_009), restored.contains(999))
        #expect(hashes == Array(1_000..<1_010).map(UInt64.init) && kept && !gone)
        // Past the index threshold, restored with its index.
        var many = MessageIDWindow()
        for i in 0..<100 { _ = many.insert(UInt64(i), at: 0, forgettingUpTo: -1) }
        var again = MessageIDWindow(restoring: many.snapshot)
        let duplicate = !again.insert(42, at: 1, forgettingUpTo: -1)
        let added = again.insert(100, at: 1, forgettingUpTo: -1)
        let total = again.count
        #expect(duplicate && added && total == 101)
    }
}
