import BeckonCore
import PropertyBased
import Testing

/// Laws that must hold for any input.
struct PropertyTests {
    /// A rolling-window count from the compact log equals counting the raw events, late ones included.
    @Test func rollingCountEqualsBruteForce() async {
        let offsets = Gen.int(in: 0...200_000).array(of: 1...60)
        let windows = Gen.int(in: 1...100_000)
        await propertyCheck(count: 300, input: offsets, windows) { raw, window in
            let base: Int64 = 1_767_225_600_000
            var log = HistoryLog()
            var clock = Int64.min
            var seen: [Int64] = []
            for o in raw {
                let at = base + Int64(o)
                clock = max(clock, at)
                log.record(series: 3, at: at, now: clock, retentionMs: Int64(window), keepsLifetime: true)
                seen.append(at)
                let from = clock - Int64(window) + 1
                let expected = seen.filter { $0 >= from && $0 <= clock }.count
                #expect(log.count(series: 3, from: from, to: clock) == expected)
            }
            #expect(log.lifetimeStat(series: 3)?.count == UInt32(raw.count))
            #expect(log.lifetimeStat(series: 3)?.first == seen.min())
        }
    }

    /// Several series with their own retentions, interleaved and late: the log holds exactly what a plain model keeps
    /// (every occurrence of a series newer than its last recording's cutoff), in order.
    @Test func logKeepsWhatEachSeriesRetentionKeeps() async {
        let steps = Gen.int(in: 0...999).array(of: 1...120)
        await propertyCheck(count: 300, input: steps) { steps in
            let base: Int64 = 1_767_225_600_000
            let retention: [Int64] = [5_000, 60_000, 1_000, 20_000]
            var log = HistoryLog()
            var model: [[Int64]] = Array(repeating: [], count: retention.count)
            var clock = base
            for x in steps {
                let series = x % retention.count
                clock += Int64(x % 7) * 300
                // Every fifth one late, some beyond their series' reach.
                let at = x % 5 == 0 ? clock - Int64(x) * 40 : clock
                log.record(series: Int32(series), at: at, now: clock, retentionMs: retention[series], keepsLifetime: false)
                model[series].append(at)
                model[series] = model[series].filter { $0 > clock - retention[series] }
                let expected = model.enumerated().flatMap { s, times in times.map { UInt64(s) << 44 | UInt64($0) } }.sorted()
                #expect(log.entries == expected)
            }
        }
    }

    /// Whatever the stream, fires never exceed a rule's rolling cap, cooldown or lifetime cap.
    @Test func capsAreNeverExceeded() async throws {
        let rs = try load(campaign(limit: "{ per_user: 7, per_hour: 2, cooldown: 10m }"))
        let gaps = Gen.int(in: 0...1_800).array(of: 1...120)
        await propertyCheck(count: 200, input: gaps) { gaps in
            var at = t("2026-01-05T00:00:00Z")
            var events: [Event] = []
            for g in gaps {
                at += Int64(g) * 1000
                events.append(track("Opened", at: Timestamp(milliseconds: at).description))
            }
            let times = fired(rs, events).map(\.time)
            #expect(times.count <= 7)
            for (i, x) in times.enumerated() {
                #expect(times.filter { $0 > x - 3_600_000 && $0 <= x }.count <= 2)
                if i > 0 { #expect(x - times[i - 1] >= 600_000) }
            }
        }
    }

    /// The order in which rules are written does not change who wins arbitration, only ties.
    @Test func arbitrationDependsOnPriorityNotOrder() async throws {
        let priorities = Gen.int(in: 0...5).array(of: 2...5)
        await propertyCheck(count: 100, input: priorities) { ps in
            var yaml = "version: 1\ncampaign: c\nrules:\n"
            for (i, p) in ps.enumerated() {
                yaml += "  - id: r\(i)\n    on: Opened\n    priority: \(p)\n    do: [ { message: { surface: s, title: T } } ]\n"
            }
            guard let rs = try? load(yaml) else { return }
            let winner = fired(rs, [track("Opened", at: "2026-01-05T09:00:00Z")]).map(\.rule)
            let best = ps.max()!
            #expect(winner == ["r\(ps.firstIndex(of: best)!)"])
        }
    }
}
