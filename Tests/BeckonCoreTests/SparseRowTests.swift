import Testing

@testable import BeckonCore

/// A profile's sparse row against a model of it (a dictionary by slot): every read after every write, in sparse rows
/// and in the dense rows of 255 slots or more, and the memory a few values take in a row of many slots.
struct SparseRowTests {
    /// The values written: plain ones, strings long enough to live on the heap, lists (counted payloads that a wrong
    /// move would free twice or leak).
    static func value(_ r: UInt64) -> Value {
        let k = r >> 16
        return switch r % 6 {
        case 0: .int(Int64(k))
        case 1: .bool(k % 2 == 0)
        case 2: .double(Double(k) / 4)
        case 3: .string("a string long enough for the heap #\(k)")
        case 4: .string("s\(k % 10)")
        default: .list([.int(Int64(k)), .string("a member long enough for the heap #\(k)")])
        }
    }

    @Test(arguments: [1, 2, 13, 64, 254, 255, 300])
    func everyReadAgreesWithAModel(count: Int) {
        var mix = MessageIDWindowTests.Mix(state: UInt64(count))
        var row = SparseRow(count: count)
        var model: [Int: Value] = [:]
        for step in 0..<4_000 {
            let slot = Int(mix.next() % UInt64(count))
            let r = mix.next()
            if r % 3 == 0 {
                row[slot] = nil
                model[slot] = nil
            } else {
                row[slot] = SparseRowTests.value(r)
                model[slot] = SparseRowTests.value(r)
            }
            if step % 500 == 499 {
                row.removeAll()
                model.removeAll()
            }
            for s in 0..<count {
                let want = model[s]
                #expect(row[s].map(JSONWriter.encode) == want.map(JSONWriter.encode), "slot \(s) at step \(step)")
                switch (row.peek(s), want) {
                case (.missing, nil), (.string, .string?), (.other, .list?): break
                case (.int(let a), .int(let b)?): #expect(a == b)
                case (.bool(let a), .bool(let b)?): #expect(a == b)
                case (.double(let a), .double(let b)?): #expect(a == b)
                case (let got, _): Issue.record("slot \(s) peeks \(got), the model holds \(String(describing: want))")
                }
                if case .string(let w)? = want { #expect(row.withString(s) { $0 } == w) }
            }
        }
        #expect(row.values.count == count)
    }

    /// Three values in a row of 13 slots (bossup's attributes) take 16 bytes of places and room for three values,
    /// not 13 values; an empty row takes nothing; a row that fills up turns dense and takes no more than a value a
    /// slot, as does a row of 255 slots.
    @Test func aFewValuesTakeTheirOwnRoom() {
        let stride = MemoryLayout<Value?>.stride
        var row = SparseRow(count: 13)
        #expect(row.byteCount == 0)
        row[3] = .string("facebook")
        row[7] = .int(1)
        row[12] = .bool(true)
        #expect(row.byteCount == 16 + 3 * stride)
        row[7] = nil
        #expect(row[12] != nil && row[3] != nil && row[7] == nil)
        #expect(row.byteCount == 16 + 3 * stride)
        row.removeAll()
        #expect(row.byteCount == 0 && row[3] == nil)
        var full = SparseRow(count: 7)
        for s in 0..<7 { full[s] = .string("value number \(s) of the seven") }
        #expect(full.byteCount == 7 * stride)
        #expect((0..<7).allSatisfy { s in full.withString(s) { $0 } == "value number \(s) of the seven" })
        full[2] = nil
        #expect(full[2] == nil && full[3] != nil && full.byteCount == 7 * stride)
        var dense = SparseRow(count: 255)
        dense[0] = .int(1)
        #expect(dense.byteCount == 255 * stride)
    }

    /// A profile's attributes and context, in sparse rows, read the same through the rules' predicates as they were
    /// written: set, changed, cleared, and a context field kept from an earlier event.
    @Test func aProfilesSlotsReadAsWritten() throws {
        let rs = try load(
            """
            version: 1
            ruleset: r
            rules:
              - id: pro
                on: Go
                if: user.plan == "pro" && user.seats > 3
                do: [{ deep_link: app://pro }]
              - id: german
                on: Go
                if: context.locale == "de"
                do: [{ deep_link: app://de }]
            """)
        let engine = Engine(ruleSet: rs)
        func fires(_ at: String) -> [String] {
            engine.process(track("Go", at: at)).actions.map(\.rule).sorted()
        }
        _ = engine.process(identify(at: "2026-01-05T09:00:00Z", [("plan", .string("pro")), ("seats", .int(5))]))
        _ = engine.process(track("Hello", at: "2026-01-05T09:00:01Z", context: [("locale", .string("de"))]))
        #expect(fires("2026-01-05T09:00:02Z") == ["german", "pro"])
        _ = engine.process(identify(at: "2026-01-05T09:00:03Z", [("seats", .int(2))]))
        #expect(fires("2026-01-05T09:00:04Z") == ["german"])
        _ = engine.process(identify(at: "2026-01-05T09:00:05Z", [("plan", .null), ("seats", .int(9))]))
        let p = try #require(engine.profile(of: "u1"))
        #expect(p.attributes[rs.attributeSlots["plan"]!] == nil)
        if case .int(9) = p.attributes.peek(rs.attributeSlots["seats"]!) {} else { Issue.record("seats is not 9") }
        #expect(fires("2026-01-05T09:00:06Z") == ["german"])
    }

    /// A batch of writes grows the row once, for the values that may follow, and `trim` gives back the room they did
    /// not fill; `replace` hands back what the slot held.
    @Test func aBatchGrowsOnceAndGivesBackWhatItDidNotFill() {
        let stride = MemoryLayout<Value?>.stride
        var row = SparseRow(count: 13)
        let batch: [Value?] = [.string("a"), nil, .int(2), nil, .bool(true)]
        for (k, v) in batch.enumerated() { _ = row.replace(k, with: v, roomForMore: batch.count - k - 1) }
        #expect(row.byteCount == 16 + 5 * stride)
        row.trim()
        #expect(row.byteCount == 16 + 3 * stride)
        #expect(row.withString(0) { $0 } == "a" && row[1] == nil && row[4] != nil)
        if case .int(2)? = row.replace(2, with: .int(3)) {} else { Issue.record("replace did not hand back 2") }
        if case .int(3) = row.peek(2) {} else { Issue.record("slot 2 is not 3") }
        #expect(row.replace(9, with: nil) == nil && row.byteCount == 16 + 3 * stride)
    }

    /// The engine's batches of attribute writes (a `set` action, an identify call's traits) leave a user's row holding
    /// room for the values it holds, not for every attribute written.
    @Test func theEnginesBatchesLeaveExactRoom() throws {
        let rs = try load(
            """
            version: 1
            ruleset: r
            rules:
              - id: s
                on: Opened
                do:
                  - set: { a: "${event.properties.a}", b: null, c: 3, d: null, e: null, f: "${event.name}" }
              - id: reads
                on: Never
                if: has(user.g) || has(user.h) || has(user.i) || has(user.j) || has(user.k) || has(user.l)
                do: [{ deep_link: x }]
            """)
        let stride = MemoryLayout<Value?>.stride
        let engine = Engine(ruleSet: rs)
        _ = engine.process(track("Opened", at: "2026-01-05T09:00:00Z", props: [("a", .string("x"))]))
        let p = try #require(engine.profile(of: "u1"))
        #expect(rs.attributeNames.count == 12)
        #expect(p.attributes.byteCount == 16 + 3 * stride)
        _ = engine.process(identify(at: "2026-01-05T09:00:01Z", [("g", .int(1)), ("zz", .int(2)), ("h", .null)]))
        #expect(p.attributes.byteCount == 16 + 4 * stride)
        #expect(p.attributes[rs.attributeSlots["g"]!] != nil && p.attributes[rs.attributeSlots["c"]!] != nil)
        // A restored state (a restart, a reload, a merge) is one batch too.
        let restored = Engine(ruleSet: rs)
        try restored.restore(engine.state(of: p))
        let q = try #require(restored.profile(of: "u1"))
        #expect(q.attributes.byteCount == 16 + 4 * stride)
        #expect(q.attributes.values.map { $0.map(JSONWriter.encode) } == p.attributes.values.map { $0.map(JSONWriter.encode) })
    }
}
