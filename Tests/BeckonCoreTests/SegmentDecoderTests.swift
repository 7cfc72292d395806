import BeckonCore
import Foundation
import Testing

struct SegmentDecoderTests {
    let rs: CompiledRuleSet

    init() throws {
        rs = try load(
            campaign(
                on: "on: Order Completed",
                if: """
                    event.properties.total > 10 && context.os.name == "iOS" && context.locale == "de" && user.plan == "pro"
                    """))
    }

    @Test func readsARealSegmentTrackCall() throws {
        let line = #"""
            {"anonymousId":"507f191e","context":{"library":{"name":"analytics.js","version":"2.11.1"},"locale":"de","os":{"name":"iOS","version":"17.2"},"timezone":"Europe/Berlin","app":{"version":"3.2.0"}},"event":"Order Completed","integrations":{},"messageId":"ajs-f8ca1e4de5024d9430b3928bd8ac6b96","properties":{"total":30.5,"items":[{"sku":"a"}],"note":"caf\u00e9 \"quoted\""},"receivedAt":"2026-01-05T09:00:01.120Z","sentAt":"2026-01-05T09:00:00.999Z","timestamp":"2026-01-05T09:00:00.500+01:00","type":"track","userId":"97980cfea0067","originalTimestamp":"2026-01-05T09:00:00.400+01:00"}
            """#
        let e = try SegmentDecoder(ruleSet: rs).decode(line)
        #expect(e.kind == .track)
        #expect(e.name == "Order Completed")
        #expect(e.nameID == rs.eventIDs["Order Completed"])
        #expect(e.userID == "97980cfea0067")
        #expect(e.messageID == "ajs-f8ca1e4de5024d9430b3928bd8ac6b96")
        #expect(e.timestamp == t("2026-01-05T08:00:00.500Z"))
        #expect(e.properties[rs.propertySlots["total"]!].map { same($0, .double(30.5)) } == true)
        #expect(e.context[rs.contextSlots["locale"]!]?.stringValue == "de")
        if case .map(let os)? = e.context[rs.contextSlots["os"]!] {
            #expect(os[string: "name"]?.stringValue == "iOS")
        } else {
            Issue.record("context.os not decoded")
        }
    }

    /// Keys are matched by their bytes; a key written with escapes means the same key.
    @Test func escapedKeysMatchTheirText() throws {
        let e = try SegmentDecoder(ruleSet: rs).decode(
            #"{"t\u0079pe":"track","event":"Order Completed","userId":"u1","timestamp":"2026-01-05T09:00:00Z","properties":{"tot\u0061l":12,"totals":1,"tota":2}}"#
        )
        #expect(e.kind == .track)
        #expect(e.properties[rs.propertySlots["total"]!].map { same($0, .int(12)) } == true)
        #expect(e.properties.compactMap { $0 }.count == 1)
    }

    @Test func identifyTraitsAndAnonymousUsers() throws {
        let e = try SegmentDecoder(ruleSet: rs).decode(
            #"{"type":"identify","anonymousId":"anon-1","traits":{"plan":"pro","name":"Zoë","age":31,"tags":["a"]},"timestamp":"2026-01-05T09:00:00Z"}"#
        )
        #expect(e.kind == .identify)
        #expect(e.userID == "anon-1")
        #expect(e.traits.map(\.name) == ["plan", "name", "age", "tags"])
        let engine = Engine(ruleSet: rs)
        engine.process(e)
        #expect(engine.profile(of: "anon-1")?.attributes[rs.attributeSlots["plan"]!]?.stringValue == "pro")
        #expect(engine.profile(of: "anon-1")?.otherAttributes?[string: "name"]?.stringValue == "Zoë")
    }

    @Test func timestampFallsBackToOriginalTimestamp() throws {
        let e = try SegmentDecoder(ruleSet: rs).decode(
            #"{"type":"screen","name":"Home","userId":42,"originalTimestamp":"2026-01-05T09:00:00Z","sentAt":"2026-01-05T09:01:00Z"}"#
        )
        #expect(e.kind == .screen)
        #expect(e.userID == "42")
        #expect(e.timestamp == t("2026-01-05T09:00:00Z"))
    }

    /// An event name the rules know is read in place and takes the rule set's text; with escapes, unknown to the rules,
    /// a screen's (looked up among screens, kept without `screen:`), or given twice (the last of `event` and `name`
    /// counts), it is the same name either way; over the bound it is refused at its value.
    @Test func eventNamesWithAndWithoutEscapes() throws {
        let rs = try load(
            campaign(on: "on: Order Completed")
                + "  - id: s\n    on_screen: Home\n    do:\n      - message: { surface: launch, title: Hi }\n")
        let d = SegmentDecoder(ruleSet: rs)
        func decode(_ type: String, _ fields: String) throws -> BoundEvent {
            try d.decode(#"{"type":""# + type + #"","# + fields + #","userId":"u","timestamp":"2026-01-05T09:00:00Z"}"#)
        }
        let order = rs.eventIDs["Order Completed"]!
        for fields in [
            #""event":"Order Completed""#, #""event":"Order Complet\u0065d""#, #""event":"X","name":"Order Completed""#,
        ] {
            let e = try decode("track", fields)
            #expect(e.name == "Order Completed" && e.nameID == order, "\(fields)")
        }
        let unknown = try decode("track", #""event":"Zoë Opened""#)
        #expect(unknown.name == "Zoë Opened" && unknown.nameID == -1)
        for fields in [#""name":"Home""#, #""name":"H\u006fme""#] {
            let e = try decode("screen", fields)
            #expect(e.name == "Home" && e.nameID == rs.eventIDs["screen:Home"]!, "\(fields)")
        }
        // A track named like the screen is not the screen.
        #expect(try decode("track", #""event":"Home""#).nameID == -1)
        let long = String(repeating: "n", count: SegmentDecoder.maxIDBytes + 1)
        for name in [long, long + #"\u0041"#] {
            let line = #"{"type":"track","userId":"u","event":""# + name + #"","timestamp":"2026-01-05T09:00:00Z"}"#
            #expect(throws: DecodeError.self) { try d.decode(line) }
            do { _ = try d.decode(line) } catch {
                #expect(error.column == #"{"type":"track","userId":"u","event":"#.utf8.count + 1)
                #expect(error.message.contains("the limit is \(SegmentDecoder.maxIDBytes)"))
            }
        }
    }

    /// Each kind is its exact name; a name of the same length and first letter, another case, a prefix or a longer
    /// name is none.
    @Test func aKindIsItsExactName() {
        for kind in [Event.Kind.track, .identify, .screen, .page, .group, .alias] {
            #expect(Event.Kind(Array(kind.description.utf8)) == kind)
            #expect(Event.Kind(Array(kind.description.utf8).dropLast()) == nil)
            #expect(Event.Kind(Array((kind.description + "s").utf8)) == nil)
            #expect(Event.Kind(Array(kind.description.capitalized.utf8)) == nil)
        }
        for near in [
            "trick", "tracK", "idantify", "identifY", "scream", "pags", "pagE", "grape", "alien", "aliaz", "", "t", "track\u{0}",
            "\u{0}page", "identifyy",
        ] {
            #expect(Event.Kind(Array(near.utf8)) == nil, "\(near)")
        }
    }

    /// `type` is read in place when it is plain, and through the general string reader when it has escapes.
    @Test func typeIsReadWithOrWithoutEscapes() throws {
        let d = SegmentDecoder(ruleSet: rs)
        for (type, kind) in [("track", Event.Kind.track), (#"tr\u0061ck"#, .track), ("page", .page), (#"p\u0061ge"#, .page)] {
            let e = try d.decode(
                #"{"type":""# + type + #"","event":"E","name":"N","userId":"u","timestamp":"2026-01-05T09:00:00Z"}"#)
            #expect(e.kind == kind)
        }
    }

    @Test(arguments: [
        (#"{"type":"track","userId":"u","timestamp":"2026-01-05T09:00:00Z"}"#, "a track event needs a non-empty 'event' name"),
        (#"{"type":"trac","event":"E","userId":"u","timestamp":"2026-01-05T09:00:00Z"}"#, "unknown 'type' 'trac'"),
        (#"{"type":"tr\u0061cks","event":"E","userId":"u","timestamp":"2026-01-05T09:00:00Z"}"#, "unknown 'type' 'tracks'"),
        (#"{"type":"track","event":"E","timestamp":"2026-01-05T09:00:00Z"}"#, "missing 'userId'"),
        (#"{"type":"track","event":"E","userId":"u"}"#, "missing 'timestamp'"),
        (#"{"type":"track","event":"E","userId":"u","timestamp":"5 Jan"}"#, "not an ISO-8601 time"),
        (#"{"event":"E","userId":"u","timestamp":"2026-01-05T09:00:00Z"}"#, "missing 'type'"),
        (#"{"type":"click","event":"E","userId":"u","timestamp":"2026-01-05T09:00:00Z"}"#, "unknown 'type' 'click'"),
        (#"{"type":"track","event":"E","userId":"u","timestamp":"2026-01-05T09:00:00Z""#, "not closed"),
        (#"{"type":"track","event":"E","userId":"u","timestamp":"2026-01-05T09:00:00Z"} x"#, "unexpected text after"),
        (#"["type"]"#, "expected a JSON object"),
        (
            #"{"type":"track","event":"E","userId":"u","timestamp":"2026-01-05T09:00:00Z","properties":{"a":tru}}"#,
            "invalid literal"
        ),
        (#"{"type":"track","event":"E\q","userId":"u","timestamp":"2026-01-05T09:00:00Z"}"#, "invalid escape"),
    ])
    func badLinesSayWhatIsWrong(_ line: String, _ message: String) {
        do {
            _ = try SegmentDecoder(ruleSet: rs).decode(line)
            Issue.record("decoded a bad line: \(line)")
        } catch {
            #expect(error.message.contains(message), "\(error.message)")
        }
    }

    /// A number of half a million digits is a bad line whose report shows its start and its length, not all of it.
    @Test func aHugeNumberIsShownShort() {
        let digits = String(repeating: "9", count: 500_000)
        for number in [digits + "e9", "1e" + digits] {
            let line = #"{"type":"track","event":"E","userId":"u","properties":{"n":"# + number + "}}"
            do {
                _ = try SegmentDecoder(ruleSet: rs).decode(line)
                Issue.record("decoded a number beyond a 64-bit float's range")
            } catch {
                #expect(error.message.utf8.count < 200, "\(error.message.prefix(200))")
                #expect(error.message.contains("(\(number.utf8.count) bytes)"), "\(error.message.prefix(200))")
            }
        }
    }

    @Test func deepNestingIsRejected() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        let line = #"{"type":"track","event":"E","userId":"u","timestamp":"2026-01-05T09:00:00Z","traits":{"x":"# + deep + "}}"
        #expect(throws: DecodeError.self) { try SegmentDecoder(ruleSet: rs).decode(line) }
    }
}

/// Lines an attacker or a broken exporter sends: each is kept exactly or refused with its column.
struct HostileLineTests {
    let decoder: SegmentDecoder

    init() throws { decoder = SegmentDecoder(ruleSet: try load(campaign())) }

    func line(_ fields: String) -> String {
        #"{"type":"track","event":"Opened","timestamp":"2026-03-01T09:00:00Z","# + fields + "}"
    }

    @Test func numericIDsAreKeptAsTheirLiteralText() throws {
        let a = try decoder.decode(line(#""userId":12345678901234567890,"messageId":9007199254740993"#))
        let b = try decoder.decode(line(#""userId":12345678901234567891,"messageId":9007199254740992"#))
        #expect(a.userID == "12345678901234567890")
        #expect(b.userID == "12345678901234567891")
        #expect(a.messageID == "9007199254740993")
        #expect(b.messageID == "9007199254740992")
        #expect(try decoder.decode(line(#""userId":42"#)).userID == "42")
        #expect(try decoder.decode(line(#""userId":1.50"#)).userID == "1.50")
    }

    @Test func invalidUTF8IsABadLineAtItsByte() {
        let head = Array(line(#""userId":"a"#).dropLast().utf8)
        let bytes = head + [0xFF] + Array(#"nn"}"#.utf8)
        let error = bytes.withUnsafeBufferPointer { b -> DecodeError? in
            do throws(DecodeError) {
                _ = try decoder.decode(b)
                return nil
            } catch { return error }
        }
        #expect(error?.message.contains("UTF-8") == true)
        #expect(error?.column == head.count + 1)
    }

    /// Every kind of bad line says where: at the value that is wrong, or at the object for a field that is missing.
    @Test(arguments: [
        (#"{"event":"Opened","userId":"u","timestamp":"2026-03-01T09:00:00Z"}"#, "{"),
        (#"{"type":"tarck","event":"Opened","userId":"u","timestamp":"2026-03-01T09:00:00Z"}"#, #""tarck""#),
        (#"{"type":"track","event":"","userId":"u","timestamp":"2026-03-01T09:00:00Z"}"#, #""""#),
        (#"{"type":"track","userId":"u","timestamp":"2026-03-01T09:00:00Z"}"#, "{"),
        (#"{"type":"track","event":"Opened","userId":"","timestamp":"2026-03-01T09:00:00Z"}"#, #""""#),
        (#"{"type":"track","event":"Opened","timestamp":"2026-03-01T09:00:00Z"}"#, "{"),
        (#"  {"type":"track","event":"Opened","userId":"u"}"#, "{"),
        (#"{"type":"identify","timestamp":"2026-03-01T09:00:00Z","userId":{}}"#, "{}"),
        (#"{"type":"track","event":"Opened","userId":"u","timestamp":"2026-13-01T09:00:00Z"}"#, #""2026-13"#),
    ])
    func everyBadLineHasAColumn(_ text: String, _ marker: String) {
        let column = text.utf8.count - text.utf8[text.range(of: marker)!.lowerBound...].count + 1
        do {
            _ = try decoder.decode(text)
            Issue.record("decoded: \(text)")
        } catch {
            #expect(error.column == column, "\(error.message)")
        }
    }

    @Test func aLongLineIsRefusedAtTheLimit() {
        let long = line(
            #""userId":"u","properties":{"p":""# + String(repeating: "x", count: SegmentDecoder.maxLineBytes) + #""}"#)
        do {
            _ = try decoder.decode(long)
            Issue.record("decoded")
        } catch {
            #expect(error.column == SegmentDecoder.maxLineBytes + 1)
        }
    }

    @Test func idsAndNamesHaveALimit() {
        let id = String(repeating: "u", count: SegmentDecoder.maxIDBytes + 1)
        #expect(throws: DecodeError.self) { try decoder.decode(line(#""userId":"\#(id)""#)) }
        #expect(throws: DecodeError.self) { try decoder.decode(line(#""userId":"u","messageId":"\#(id)""#)) }
        #expect(throws: Never.self) { try decoder.decode(line(#""userId":"\#(id.dropLast())""#)) }
    }

    /// A key given twice among the event's own keys or in its traits is a bad line at the second value: JSON parsers
    /// differ on which value wins (RFC 8259 leaves it open), so a proxy and Beckon could read two users from one line.
    @Test func aKeyGivenTwiceIsABadLine() throws {
        let rs = try load(campaign(where: "event.properties.price > 10 && event.properties.item.size == \"L\""))
        let decoder = SegmentDecoder(ruleSet: rs)
        let base = #"{"type":"track","event":"Opened","timestamp":"2026-03-01T09:00:00Z","#
        let long = String(repeating: "e\u{301}", count: 100)
        let twice = [
            (#""userId":"u","userId":"victim"}"#, "'userId' is given twice"),
            (#""userId":"u","type":"identify"}"#, "'type' is given twice"),
            (#""userId":"u","user\u0049d":"victim"}"#, "'userId' is given twice"),
            (#""userId":"u","traits":{"plan":"free","plan":"pro"}}"#, "'plan' is given twice"),
            (#""userId":"u","traits":{"address":{"city":"A","city":"B"}}}"#, "'city' is given twice"),
            (#""userId":"u","properties":{},"properties":{"price":1000}}"#, "'properties' is given twice"),
            // A long key is shown by its start and its length (300 bytes here, one character).
            (#""userId":"u","traits":{"\#(long)":1,"\#(long)":2}}"#, "… (300 bytes)"),
        ]
        for (rest, message) in twice {
            let line = base + rest
            do {
                _ = try decoder.decode(line)
                Issue.record("decoded a repeated key: \(line)")
            } catch {
                #expect(error.message.contains(message), "\(error.message)")
                #expect(error.message.utf8.count < 200, "\(error.message)")
                // At the second value: past the first one.
                #expect(error.column.map { $0 > base.utf8.count + 12 } == true, "\(error.column ?? -1) in \(line)")
            }
        }
        // The same key in different objects, and keys that only look alike (é as one code point and as two), are not
        // repeats; nor are keys of an object Beckon does not read.
        let fine = [
            #""userId":"u","properties":{"price":1,"item":{"price":2}},"context":{"price":3}}"#,
            #""userId":"u","traits":{"caf\u00e9":1,"cafe\u0301":2}}"#,
            #""userId":"u","integrations":{"All":true,"All":false}}"#,
        ]
        for rest in fine { #expect(throws: Never.self) { try decoder.decode(base + rest) } }
    }

    /// Whether a line decodes does not depend on the rules (a service replays its log under later rules): a key given
    /// twice in `properties` or `context` is taken as most parsers take it, the last, whether a rule reads it or not.
    @Test func repeatedPropertyKeysDecodeAlikeUnderEveryRuleSet() throws {
        let line =
            #"{"type":"track","event":"Opened","userId":"u","timestamp":"2026-03-01T09:00:00Z","#
            + #""properties":{"price":1,"price":1000,"item":{"size":"S","size":"L"}},"context":{"ip":"a","ip":"b"}}"#
        let conditions = [
            nil, "event.properties.price > 10", "event.properties.item.size == \"L\"", "size(event.properties) == 2",
            "event.context.ip == \"b\"",
        ]
        for condition in conditions {
            let rs = try load(campaign(where: condition))
            #expect(throws: Never.self, "\(condition ?? "no condition")") { try SegmentDecoder(ruleSet: rs).decode(line) }
            // The last value: the rule fires.
            if let condition { #expect(try firedBy(rs, line) == 1, "\(condition)") }
        }
    }

    /// A property key written with escapes is matched to a rule's name by its bytes, as one written without: a
    /// decomposed `cafe\u0301` is not the rule's `café`, whichever way it is written.
    @Test func anEscapedKeyIsMatchedByItsBytes() throws {
        let rs = try load(campaign(where: "event.properties[\"caf\u{e9}\"] == 1"))
        let base = #"{"type":"track","event":"Opened","userId":"u","timestamp":"2026-03-01T09:00:00Z","properties":"#
        #expect(try firedBy(rs, base + #"{"caf\u00e9":1}}"#) == 1)
        #expect(try firedBy(rs, base + "{\"caf\u{e9}\":1}}") == 1)
        #expect(try firedBy(rs, base + #"{"cafe\u0301":1}}"#) == 0)
        #expect(try firedBy(rs, base + "{\"cafe\u{301}\":1}}") == 0)
    }

    /// The actions one decoded line fires.
    func firedBy(_ rs: CompiledRuleSet, _ line: String) throws -> Int {
        Engine(ruleSet: rs).process(try SegmentDecoder(ruleSet: rs).decode(line)).actions.count
    }

    /// An id holding U+0000 is a bad line at the id's column, whichever field it is: SQLite would store it cut at the
    /// NUL, the same as the id before it (two users merged), and PostgreSQL refuses it.
    @Test(arguments: ["userId", "anonymousId", "messageId"])
    func idsWithANulAreBadLines(_ key: String) throws {
        let others = ["userId": "u", "anonymousId": "a", "messageId": "m"].filter { $0.key != key }.sorted { $0.key < $1.key }
        let text =
            #"{"type":"track","event":"E","# + others.map { #""\#($0.key)":"\#($0.value)","# }.joined()
            + #""\#(key)":"victim\u0000x"}"#
        do {
            _ = try decoder.decode(text)
            Issue.record("decoded a NUL in \(key)")
        } catch {
            #expect(error.message == "'\(key)' holds U+0000 (NUL), which no id may hold", "\(error.message)")
            #expect(error.column == text.utf8.count - 15)
        }
        let alias = #"{"type":"alias","userId":"u","previousId":"p\u0000"}"#
        #expect(throws: DecodeError.self) { try decoder.decode(alias) }
        // Other control characters, escaped, are kept: only U+0000 is cut by a store.
        let other = #"{"type":"track","event":"E","userId":"victim\u0001x","timestamp":"2026-03-01T09:00:00Z"}"#
        #expect(try decoder.decode(other).userID == "victim\u{1}x")
    }

    /// Numbers are JSON's: a leading zero, a '.' or an exponent without digits, or a number beyond a double's range
    /// is a bad line at the number (the event is kept as it arrived, and an export gives it back: it must be JSON),
    /// in a property the rules read, in one they skip, and as an id.
    @Test(arguments: ["01", "-01", "00", "1.", "1.e5", "1e", "1e+", "-", "1e999", "-1e999"])
    func numbersThatAreNotJSONAreBadLines(_ number: String) {
        for field in [#""properties":{"x":\#(number)}"#, #""properties":{"unread":[\#(number)]}"#, #""messageId":\#(number)"#] {
            let text = #"{"type":"track","event":"E","userId":"u","timestamp":"2026-03-01T09:00:00Z",\#(field)}"#
            do {
                _ = try decoder.decode(text)
                Issue.record("decoded \(field)")
            } catch {
                #expect(error.message.contains("number"), "\(error.message)")
                // (The number ends the field, before its closing brackets.)
                let closing = field.hasSuffix("]}") ? 2 : field.hasSuffix("}") ? 1 : 0
                let numberEnd: Int = text.utf8.count - 1 - closing
                #expect(error.column == numberEnd - number.utf8.count + 1, "\(error)")
            }
        }
    }

    @Test(arguments: ["0", "-0", "0.5", "-0.0", "1e5", "1E+5", "2.5e-3", "10", "18446744073709551616", "1.7e308"])
    func jsonNumbersAreTaken(_ number: String) throws {
        let text = #"{"type":"track","event":"E","userId":"u","timestamp":"2026-03-01T09:00:00Z","properties":{"x":\#(number)}}"#
        #expect(throws: Never.self) { try decoder.decode(text) }
    }

    /// Event times run from 1970-01-01 to 2527 (the 44 bits of milliseconds a history entry keeps): a time outside is
    /// a bad line at the time's column, never clamped into range.
    @Test(arguments: ["1969-12-31T23:59:59Z", "2528-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])
    func timesOutsideTheRangeAreBadLines(_ time: String) {
        let text = #"{"type":"track","event":"E","userId":"u","timestamp":"\#(time)"}"#
        do {
            _ = try decoder.decode(text)
            Issue.record("decoded \(time)")
        } catch {
            #expect(error.message.contains("between 1970 and 2527"), "\(error.message)")
            #expect(error.column == 54)
        }
        let ok = #"{"type":"track","event":"E","userId":"u","timestamp":"2527-01-01T00:00:00Z"}"#
        #expect(throws: Never.self) { try decoder.decode(ok) }
    }

    @Test func aTraitOverTheAttributeLimitIsABadLine() {
        let big = String(repeating: "x", count: ValueLimits.maxAttributeBytes + 1)
        let text = #"{"type":"identify","userId":"u","timestamp":"2026-03-01T09:00:00Z","traits":{"bio":"\#(big)"}}"#
        #expect(throws: DecodeError.self) { try decoder.decode(text) }
    }

    /// Segment's correction of a device's clock: `time + (receivedAt − sentAt)`.
    @Test(arguments: [
        // A device a year ahead, corrected by the server's times.
        (
            #""timestamp":"2027-03-01T09:00:00Z","sentAt":"2027-03-01T09:00:05Z","receivedAt":"2026-03-01T09:00:06Z""#,
            "2026-03-01T09:00:01Z"
        ),
        (
            #""originalTimestamp":"2027-03-01T09:00:00Z","sentAt":"2027-03-01T09:00:05Z","receivedAt":"2026-03-01T09:00:06Z""#,
            "2026-03-01T09:00:01Z"
        ),
        // Segment's own corrected `timestamp` beside `originalTimestamp` is taken as it is.
        (
            #""timestamp":"2026-03-01T09:00:01Z","originalTimestamp":"2027-03-01T09:00:00Z","sentAt":"2027-03-01T09:00:05Z","receivedAt":"2026-03-01T09:00:06Z""#,
            "2026-03-01T09:00:01Z"
        ),
        // Without both sentAt and receivedAt, nothing to correct by.
        (#""timestamp":"2027-03-01T09:00:00Z","sentAt":"2027-03-01T09:00:05Z""#, "2027-03-01T09:00:00Z"),
        (#""receivedAt":"2026-03-01T09:00:06Z","sentAt":"2027-03-01T09:00:05Z""#, "2026-03-01T09:00:06Z"),
    ])
    func sentAtCorrectsTheDevicesClock(_ times: String, _ expected: String) throws {
        let e = try decoder.decode(#"{"type":"track","event":"Opened","userId":"u","# + times + "}")
        #expect(e.timestamp == t(expected))
    }
}

/// Whether a line decodes never depends on the rule set (issue: an event accepted under one rule set and decoded
/// again after a reload must decode under the next): every string is checked, read or skipped.
struct DecodingDoesNotDependOnRules {
    static let head = #"{"type":"track","event":"x","userId":"u","timestamp":"2026-01-05T09:00:00Z","#
    static func line(_ a: String, _ bytes: [UInt8] = [], _ b: String = "") -> [UInt8] {
        Array((head + a).utf8) + bytes + Array(b.utf8)
    }
    static let lines: [(String, [UInt8])] = [
        ("bytes that are not UTF-8 in a value", line(#""properties":{"zz":"a"#, [0xFF], #""}}"#)),
        ("bytes that are not UTF-8 in a key", line(#""properties":{"z"#, [0xFE], #"":1}}"#)),
        ("a lone high surrogate", line(#""properties":{"zz":"\ud800"}}"#)),
        ("a lone low surrogate", line(#""properties":{"zz":["\udc00"]}}"#)),
        ("a bad escape", line(#""context":{"zz":"\q"}}"#)),
        ("a control character", line(#""properties":{"zz":"a"#, [0x01], #""}}"#)),
    ]

    @Test(arguments: ["", #"event.properties.zz == "a""#, "size(event.properties) > 0", #"context.zz == "a""#])
    func everyRuleSetRefusesTheSameLines(rule: String) throws {
        let decoder = SegmentDecoder(ruleSet: try load(campaign(on: "on: x", if: rule.isEmpty ? nil : rule)))
        for (what, line) in Self.lines {
            #expect(throws: DecodeError.self, "\(what) under \(rule)") {
                try decoder.decode(line[...], arrival: Arrival(receivedAt: nil))
            }
        }
        // (A null `properties` decodes under every rule set too.)
        _ = try decoder.decode(
            #"{"type":"track","event":"x","userId":"u","timestamp":"2026-01-05T09:00:00Z","properties":null}"#)
    }

    /// A fleet's ingest decodes with ``SegmentDecoder/logging``, which keeps no property or context value: it must
    /// refuse what a rule set that reads them refuses, with the same message at the same column, and take the rest
    /// with the same ids, name and time. (The fuzz target `requests` checks the same on every body it makes.)
    @Test func theLoggingDecoderTakesWhatTheRulesTake() throws {
        // Reads every property (`size(event.properties)`), one by name, the context and (with push) the device.
        let rules = try load(
            campaign(on: "on: x", if: #"size(event.properties) > 0 && event.properties.zz == "a" && context.zz == "b""#),
            settings: pushSettings)
        let decoder = SegmentDecoder(ruleSet: rules)
        let more: [(String, [UInt8])] = [
            ("properties not an object", Self.line(#""properties":[1]}"#)),
            ("context not an object", Self.line(#""context":"x"}"#)),
            ("a bad number in a property", Self.line(#""properties":{"zz":01}}"#)),
            ("a bad literal in the context", Self.line(#""context":{"device":{"token":tru}}}"#)),
            ("nested too deep", Self.line(#""properties":{"a":"# + String(repeating: "[", count: 70))),
            ("a property object not closed", Self.line(#""properties":{"zz":"a""#)),
            ("a key given twice in the traits", Self.line(#""traits":{"a":1,"a":2}}"#)),
            // Keys the logging decoder skips without making them: refused as the rules' decoder refuses them.
            ("a property key with a control character", Self.line("\"properties\":{\"z\u{01}z\":1}}")),
            ("a context key with a bad escape", Self.line(#""context":{"os":{"n\qame":"iOS"}}}"#)),
            ("a context key with a lone surrogate", Self.line(#""context":{"os":{"\ud800":"iOS"}}}"#)),
            ("a context key not closed", Self.line(#""context":{"os":{"name"#)),
            ("a context key that is not a string", Self.line(#""context":{"os":{name:"iOS"}}}"#)),
            ("a context key's value missing", Self.line(#""context":{"os":{"name"}}}"#)),
            ("fine, escaped keys", Self.line(#""properties":{"z\u007a":"a"},"context":{"os":{"n\u00e9":"iOS"}}}"#)),
            (
                "fine",
                Self.line(
                    #""properties":{"zz":"a","n":[1,{"b":null}]},"#
                        + #""context":{"zz":"b","device":{"token":"t","type":"ios"}}}"#)
            ),
            ("fine, no properties", Self.line(#""messageId":"m1","anonymousId":"a"}"#)),
        ]
        let arrival = Arrival(receivedAt: 1_767_600_000_000, latest: 1_767_600_000_000)
        for (what, line) in Self.lines + more {
            let a = Result { () throws(DecodeError) in try decoder.decode(line[...], arrival: arrival) }
            let b = Result { () throws(DecodeError) in try SegmentDecoder.logging.decode(line[...], arrival: arrival) }
            switch (a, b) {
            case (.success(let e), .success(let f)):
                #expect(what.hasPrefix("fine"), "\(what) decoded")
                #expect(
                    [e.userID, e.name, e.messageID ?? "-", "\(e.timestamp)"]
                        == [f.userID, f.name, f.messageID ?? "-", "\(f.timestamp)"], "\(what)")
                if what == "fine" { #expect(e.device != nil, "the rules' decoder read no device") }
                #expect(f.properties.allSatisfy { $0 == nil } && f.device == nil, "\(what): the logging decoder kept a value")
            case (.failure(let e), .failure(let f)):
                #expect(!what.hasPrefix("fine"), "\(what): \(e)")
                #expect(e.description == f.description, "\(what)")
            default: Issue.record("\(what): \(a) under the rules, \(b) logging")
            }
        }
    }
}

/// The scanner tests a string's bytes eight at a time: a quote, a backslash, a control character or a byte that is not
/// ASCII must be found at every offset in and across those words, in every kind of string it reads — a value kept
/// (`event`, `userId`, a property a rule reads), a value skipped (a property no rule reads) and a key.
struct StringScanAtEveryOffset {
    let decoder: SegmentDecoder
    let readSlot: Int

    init() throws {
        let rs = try load(campaign(on: "on: x", if: #"event.properties.read == "a""#))
        decoder = SegmentDecoder(ruleSet: rs)
        readSlot = rs.propertySlots["read"]!
    }

    enum Place: CaseIterable { case event, userId, readValue, skippedValue, key }

    /// The line with `inner` (raw bytes between quotes) at `place`, and the column of `inner`'s first byte.
    func line(_ inner: [UInt8], at place: Place) -> ([UInt8], Int) {
        let (head, tail): (String, String)
        switch place {
        case .event: (head, tail) = (#"{"type":"track","userId":"u","event":""#, #"","timestamp":"2026-01-05T09:00:00Z"}"#)
        case .userId: (head, tail) = (#"{"type":"track","event":"x","userId":""#, #"","timestamp":"2026-01-05T09:00:00Z"}"#)
        case .readValue, .skippedValue, .key:
            let key = place == .readValue ? "read" : "other"
            head =
                #"{"type":"track","event":"x","userId":"u","timestamp":"2026-01-05T09:00:00Z","properties":{"#
                + (place == .key ? #"""# : #""\#(key)":""#)
            tail = place == .key ? #"":1}}"# : #""}}"#
        }
        return (Array(head.utf8) + inner + Array(tail.utf8), head.utf8.count + 1)
    }

    func decode(_ bytes: [UInt8]) -> Result<BoundEvent, DecodeError> {
        bytes.withUnsafeBufferPointer { b in
            do throws(DecodeError) { return .success(try decoder.decode(b)) } catch { return .failure(error) }
        }
    }

    @Test(arguments: Place.allCases)
    func everyStopIsFoundWhereItIs(_ place: Place) throws {
        for length in 1...20 {
            for at in 0..<length {
                var plain = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                // Valid text: an escaped quote and a two-byte letter, at `at`.
                plain.replaceSubrange(at..<at + 1, with: Array(#"\"é"#.utf8))
                let text = String(repeating: "a", count: at) + "\"é" + String(repeating: "a", count: length - at - 1)
                let (ok, _) = line(plain, at: place)
                switch decode(ok) {
                case .success(let e):
                    switch place {
                    case .event: #expect(e.name == text)
                    case .userId: #expect(e.userID == text)
                    case .readValue: #expect(e.properties[readSlot]?.stringValue == text)
                    case .skippedValue, .key: break
                    }
                case .failure(let error): Issue.record("\(place), \(length) bytes, at \(at): \(error)")
                }
                // A control character and a byte that is not UTF-8, each refused at its own column.
                for (bad, what) in [(UInt8(0x01), "control character"), (UInt8(0xFF), "UTF-8")] {
                    var inner = [UInt8](repeating: UInt8(ascii: "b"), count: length)
                    inner[at] = bad
                    let (bytes, column) = line(inner, at: place)
                    switch decode(bytes) {
                    case .success: Issue.record("\(place), \(length) bytes: byte \(bad) at \(at) decoded")
                    case .failure(let error):
                        #expect(error.message.contains(what), "\(place) \(length) \(at): \(error)")
                        #expect(error.column == column + at, "\(place) \(length) \(at): \(error)")
                    }
                }
            }
        }
    }
}
