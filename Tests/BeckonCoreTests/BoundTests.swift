import Synchronization
import Testing

@testable import BeckonCore

/// The bounds of docs/reference/limits.md that no other suite exercises at their edge: each holds exactly at its
/// value and says what happened beyond it.
struct BoundTests {
    /// `retrigger: add` keeps at most 16 pending actions of one rule per user; a 17th trigger is `pending`.
    @Test func pendingActionsPerRuleStopAtSixteen() throws {
        let rs = try rule("on: A\nwait: 1d\nretrigger: add\ndo: [ { deep_link: x } ]")
        let engine = Engine(ruleSet: rs, options: .init(recordVerdicts: true))
        var verdicts: [String] = []
        for minute in 0..<20 {
            let out = engine.process(track("A", at: "2026-03-01T10:\(minute < 10 ? "0" : "")\(minute):00Z"))
            verdicts += out.verdicts.map(\.verdict.code)
        }
        #expect(verdicts.filter { $0 == "scheduled" }.count == 16, "\(verdicts)")
        #expect(verdicts.filter { $0 == "pending" }.count == 4, "\(verdicts)")
        #expect(engine.advance(to: t("2026-03-03T00:00:00Z")).actions.count == 16)
    }

    /// An inbox holds 200 items: a `notify` without an `id` adds one each time, and past the bound the oldest read
    /// item goes first, then the oldest. (Unbounded, each fire cost the inbox's length: 160,000 events of one user ran
    /// for minutes.)
    @Test func anInboxKeepsTwoHundredItemsDroppingTheOldestReadFirst() throws {
        let rs = try rule("on: A\ndo: [ { notify: { message: hi } } ]")
        let engine = Engine(ruleSet: rs)
        let base = t("2026-03-01T00:00:00Z")
        func at(_ k: Int) -> String { Timestamp(milliseconds: base + Int64(k) * 60_000).description }
        for k in 0..<Engine.maxInboxItems { _ = engine.process(track("A", at: at(k))) }
        var profile = try #require(engine.profile(of: "u1"))
        #expect(profile.inbox.count == 200)
        let third = profile.inbox[2].id
        #expect(engine.markRead(userID: "u1", itemID: third, at: base) == true)
        _ = engine.process(track("A", at: at(200)))
        profile = try #require(engine.profile(of: "u1"))
        #expect(profile.inbox.count == 200)
        #expect(!profile.inbox.contains { $0.id == third }, "the item read went first")
        #expect(profile.inbox.first?.createdAt == base)
        #expect(profile.unreadCount == 200)
        _ = engine.process(track("A", at: at(201)))
        profile = try #require(engine.profile(of: "u1"))
        #expect(profile.inbox.count == 200)
        #expect(profile.inbox.first?.createdAt == base + 60_000, "then the oldest went")
        #expect(profile.inbox.last?.createdAt == base + 201 * 60_000)
    }

    /// A sequence rule follows at most 32 correlation keys per user: the 33rd forgets the stalest, whose completion
    /// then fires nothing, while every other key still completes.
    @Test func sequenceKeysPerUserStopAtThirtyTwo() throws {
        let rs = try rule("sequence: [Added, Bought]\nwithin: 1d\ncorrelate: cart\ndo: [ { deep_link: x } ]")
        func run(keys: Int) -> [String] {
            let engine = Engine(ruleSet: rs)
            for k in 0..<keys {
                _ = engine.process(
                    track("Added", at: "2026-03-01T10:\(k < 10 ? "0" : "")\(k):00Z", props: [("cart", .string("c\(k)"))]))
            }
            return (0..<keys).compactMap { k in
                engine.process(track("Bought", at: "2026-03-01T11:00:00Z", props: [("cart", .string("c\(k)"))])).actions
                    .isEmpty ? nil : "c\(k)"
            }
        }
        #expect(run(keys: 32).count == 32)
        #expect(run(keys: 33) == (1..<33).map { "c\($0)" })
    }

    /// All of a pattern's distinct character classes hold at most 100,000 scalar ranges together: beyond, the pattern
    /// is refused when compiled (a pattern from event data can be that long: a line holds 1 MiB).
    @Test func regexClassRangesHaveALimit() throws {
        // Scalars two apart, so that no two ranges merge.
        func pattern(ranges: Int) -> String {
            var s = "["
            for k in 0..<ranges { s.unicodeScalars.append(Unicode.Scalar(0x1_0000 + 2 * k)!) }
            return s + "]"
        }
        let within = try RegexProgram(pattern(ranges: RegexLimits.maxClassRanges))
        #expect(within.matches("\u{10000}"))
        #expect(!within.matches("\u{10001}"))
        do {
            _ = try RegexProgram(pattern(ranges: RegexLimits.maxClassRanges + 1))
            Issue.record("compiled")
        } catch {
            #expect(error.message.contains("100000"), "\(error.message)")
        }
    }

    /// `matches` is charged its bound of work (instructions × characters ÷ 64) to the event's step budget before it
    /// runs: a large pattern over a long text is an error, not seconds of matching.
    @Test func matchesIsChargedToTheStepBudget() {
        let long = Value.string(String(repeating: "a", count: 1 << 20))
        guard case .error(let e) = eval("s.matches('[a-z]{1000}b')", ["s": long]) else {
            Issue.record("a 1,000-instruction pattern over 1 MiB ran")
            return
        }
        #expect(e.message.contains("steps"), "\(e.message)")
        guard case .bool(false) = eval("s.matches('[a-z]{1000}b')", ["s": .string("abc")]),
            case .bool(false) = eval("s.matches('ab')", ["s": long])
        else {
            Issue.record("a short text, or a literal pattern over a long one, was refused")
            return
        }
    }

    /// A list `+` builds has at most `ValueLimits.maxBuiltListMembers` members.
    @Test func builtListsHaveALimit() {
        let xs = Value.list(Array(repeating: .int(1), count: ValueLimits.maxBuiltListMembers / 2 + 1))
        guard case .error(let e) = eval("xs + xs", ["xs": xs]) else {
            Issue.record("built")
            return
        }
        #expect(e.message.contains("members"), "\(e.message)")
        guard case .list(let ys) = eval("xs + [1]", ["xs": xs]) else {
            Issue.record("refused below the limit")
            return
        }
        #expect(ys.count == ValueLimits.maxBuiltListMembers / 2 + 2)
    }

    /// Compiled patterns are kept up to a count and a size: large patterns (from event data, say) never hold more
    /// than `RegexLimits.cacheBytes`; the cache is emptied instead.
    @Test func theRegexCacheIsBoundedInBytes() throws {
        var emptied = false
        var last = 0
        for p in 0..<60 {
            // Distinct patterns of 80,000 ranges each (scalars two apart): over 600 KB compiled.
            var s = "["
            for k in 0..<80_000 { s.unicodeScalars.append(Unicode.Scalar(0x1_0000 + 2 * k + p)!) }
            _ = RegexBox.compile(s + "]")
            let (count, bytes) = RegexBox.cache.withLock { c in
                (
                    c.boxes.count,
                    c.bytes == c.boxes.reduce(0) { $0 + $1.value.program.byteCost + $1.key.utf8.count } ? c.bytes : -1
                )
            }
            #expect(bytes >= 0, "the cache's byte count is off")
            #expect(count <= RegexLimits.cacheEntries && bytes <= RegexLimits.cacheBytes)
            if count < last { emptied = true }
            last = count
        }
        #expect(emptied)
    }

    /// An expression is at most 16,384 characters: one longer is refused as `limit_exceeded`, before it is parsed.
    @Test func expressionsHaveALengthLimit() throws {
        let terms = (0..<3_000).map { "x == \($0)" }
        var text = ""
        for t in terms where text.count + t.count + 4 <= Parser.maxLength { text += text.isEmpty ? t : " || " + t }
        #expect(text.count <= Parser.maxLength)
        let long = text + String(repeating: " ", count: Parser.maxLength - text.count) + "|| x == 0"
        #expect(long.count > Parser.maxLength)
        do {
            _ = try Parser.parse(long)
            Issue.record("an expression of \(long.count) characters parsed")
        } catch {
            #expect(error.id == .limitExceeded)
            #expect(error.message.contains("16384"), "\(error.message)")
        }
    }

    /// Names longer than 256 characters get no "did you mean": the comparison would cost their length squared.
    @Test func suggestionsAreForNamesUpTo256Characters() {
        let near = String(repeating: "a", count: 200)
        #expect(Suggest.nearest(near + "b", in: [near + "c"]) == near + "c")
        let far = String(repeating: "a", count: 300)
        #expect(Suggest.nearest(far + "b", in: [far + "c"]) == nil)
    }
}

/// Events a library user builds are held to the bounds event lines are: outside them an event is refused, not trapped
/// on, and changes nothing.
struct LibraryEventBoundTests {
    @Test func eventsOutsideTheBoundsAreRefused() throws {
        let rs = try rule("on: A\nwait: 1d\ndo: [ { deep_link: x } ]")
        let engine = Engine(ruleSet: rs)
        let long = String(repeating: "u", count: SegmentDecoder.maxIDBytes + 1)
        let big = Value.string(String(repeating: "x", count: ValueLimits.maxAttributeBytes + 1))
        let refused: [Event] = [
            Event(kind: .track, name: "A", userID: "u1", timestamp: Int64.max),
            Event(kind: .track, name: "A", userID: "u1", timestamp: Int64.min),
            Event(kind: .track, name: "A", userID: "u1", timestamp: -1),
            Event(kind: .track, name: "A", userID: "u1", timestamp: SegmentDecoder.maxTimeMs + 1),
            Event(kind: .track, name: "A", userID: long, timestamp: t("2026-03-01T09:00:00Z")),
            Event(kind: .track, name: long, userID: "u1", timestamp: t("2026-03-01T09:00:00Z")),
            Event(kind: .track, name: "A", userID: "u1", timestamp: t("2026-03-01T09:00:00Z"), messageID: long),
            Event(kind: .identify, userID: "u1", timestamp: t("2026-03-01T09:00:00Z"), traits: ValueMap([("bio", big)])),
            Event(kind: .identify, userID: "u1", timestamp: t("2026-03-01T09:00:00Z"), traits: ValueMap([(long, .int(1))])),
        ]
        for e in refused {
            #expect(engine.process(e).status == .refused)
            #expect(rs.bind(e).boundProblem != nil)
        }
        #expect(engine.stats.refused == refused.count)
        #expect(engine.profile(of: "u1") == nil)
        // (The last time limits.md gives is taken: 2527-06-23T06:20:44Z, to the millisecond.)
        let ok = engine.process(Event(kind: .track, name: "A", userID: "u1", timestamp: SegmentDecoder.maxTimeMs))
        #expect(ok.status == .processed)
        let d = SegmentDecoder(ruleSet: rs)
        for (field, ok) in [("2527-06-23T06:20:44Z", true), ("2527-06-23T06:20:44.001Z", false)] {
            let line = #"{"type":"track","event":"A","userId":"u2","timestamp":""# + field + #""}"#
            #expect(((try? d.decode(line)) != nil) == ok, "\(field)")
        }
    }

    /// A `set` whose value fails, or is too large, leaves the attribute as it was.
    @Test func aSetThatFailsLeavesTheAttribute() throws {
        let rs = try rule(
            "on: A\ndo: [ { set: { bio: \"${event.properties.p + event.properties.p}\", plan: \"${user.nope}\" } } ]")
        let engine = Engine(ruleSet: rs)
        engine.process(identify("u1", at: "2026-03-01T09:00:00Z", [("bio", "old"), ("plan", "pro")]))
        let half = Value.string(String(repeating: "x", count: ValueLimits.maxBuiltBytes / 2 + 1))
        let out = engine.process(track("A", "u1", at: "2026-03-01T09:01:00Z", props: [("p", half)]))
        let warnings = out.actions.flatMap(\.warnings)
        #expect(warnings.contains("'bio' not set: its value failed"), "\(warnings)")
        #expect(warnings.contains("'plan' not set: its value failed"), "\(warnings)")
        let profile = try #require(engine.profile(of: "u1"))
        #expect(profile.attributes[rs.attributeSlots["bio"]!].map(JSONWriter.encode) == #""old""#)
        #expect(profile.attributes[rs.attributeSlots["plan"]!].map(JSONWriter.encode) == #""pro""#)
    }

    /// A sequence keeps a long correlation value by its hash: state stays small whatever the events carry.
    @Test func longCorrelationValuesAreKeptByTheirHash() throws {
        let rs = try rule("sequence: [Added, Bought]\nwithin: 1d\ncorrelate: cart\ndo: [ { deep_link: x } ]")
        let engine = Engine(ruleSet: rs)
        let long = Value.string(String(repeating: "c", count: 100_000))
        engine.process(track("Added", at: "2026-03-01T10:00:00Z", props: [("cart", long)]))
        #expect(engine.profile(of: "u1")!.approximateBytes < 10_000)
        #expect(engine.process(track("Bought", at: "2026-03-01T10:05:00Z", props: [("cart", long)])).actions.count == 1)
    }
}
