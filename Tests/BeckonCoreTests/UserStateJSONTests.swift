import BeckonYAML
import Foundation
import PropertyBased
import Testing

@testable import BeckonCore

/// A user's state as JSON (the GDPR export): read back, it is the same state, byte for byte of ``UserState/encoded()``;
/// anything else is an error, never a crash.
struct UserStateJSONTests {
    /// StateTests' rules, a delayed `on_change` rule (its delayed actions keep the attribute change) and a rule that
    /// reads the context (so that users keep it).
    static let rules =
        StateTests.rules + """

              - id: bonjour
                on: Opened
                if: 'context.locale == "fr_FR"'
                limit: { per_user: 1 }
                do: [ { screen: bonjour } ]

              - id: plan_followup
                on_change: plan
                wait: 2h
                do: [ { notify: { id: "followup_${change.to}", message: "Still on ${change.to}?" } } ]
            """

    /// The round-trip law.
    static func roundTrips(_ s: UserState, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws {
        let json = s.json
        let back = try UserState(json: Array(json.utf8))
        #expect(back.encoded() == s.encoded(), "\(json)", sourceLocation: sourceLocation)
        #expect(back.json == json, sourceLocation: sourceLocation)
    }

    /// Users' states taken every 20 events (and at the end) of StateTests' random streams over ``rules``.
    static func streamStates() throws -> [UserState] {
        let rs = try StateTests.ruleSet(rules)
        var states: [UserState] = []
        for seed in 0..<3 {
            var g = SplitMix(seed: UInt64(seed))
            let events = StateTests.stream((0..<140).map { _ in Int(g.next() % 100_000) })
            let engine = Engine(ruleSet: rs)
            for (i, e) in events.enumerated() {
                engine.process(e)
                if i % 20 == 19 || i == events.count - 1 { states += engine.states() }
            }
        }
        return states
    }

    /// The fixture holds every part of a state, so that the law is tested on each and cannot pass on empty states.
    static func expectEveryPart(_ states: [UserState]) {
        let pending = states.flatMap(\.pending)
        let inbox = states.flatMap(\.inbox)
        let series = states.flatMap(\.series)
        #expect(states.contains { !$0.attributes.isEmpty }, "attributes")
        #expect(states.contains { !$0.context.isEmpty }, "context")
        #expect(states.contains { !$0.records.isEmpty }, "fire records")
        #expect(states.contains { $0.messages != nil }, "the global cap's record")
        #expect(series.contains { !$0.times.isEmpty }, "history times")
        #expect(series.contains { !$0.values.isEmpty }, "history values")
        #expect(series.contains { $0.lifetime != nil }, "lifetime facts")
        #expect(states.contains { !$0.messageIDs.isEmpty }, "the messageId window")
        #expect(inbox.contains { $0.read } && inbox.contains { !$0.read }, "inbox items read and unread")
        #expect(pending.contains { $0.event != nil }, "a delayed action with its event")
        #expect(pending.contains { $0.change != nil }, "a delayed action with an attribute change")
        #expect(pending.contains { $0.held } && pending.contains { !$0.held }, "held and delayed actions")
        #expect(states.contains { !$0.sequences.isEmpty }, "partial sequences")
    }

    @Test func statesFromStreamsRoundTripExactly() throws {
        let states = try UserStateJSONTests.streamStates()
        UserStateJSONTests.expectEveryPart(states)
        for s in states { try UserStateJSONTests.roundTrips(s) }
    }

    /// A state from the streams with every part, then given every kind of value and the edges of every field.
    static func edgeState() throws -> UserState {
        let states = try streamStates()
        let rich = states.filter { !$0.pending.isEmpty && !$0.inbox.isEmpty && !$0.series.isEmpty && !$0.records.isEmpty }
        var s = try #require(rich.max { $0.pending.count < $1.pending.count })
        let change = try #require(states.flatMap(\.pending).first { $0.change != nil })
        let values: [(String, Value)] = [
            ("uint", .uint(UInt64.max)), ("uint_small", .uint(7)), ("int_min", .int(Int64.min)), ("int_max", .int(Int64.max)),
            ("int_2_53", .int(1 << 53)), ("int_past_2_53", .int(-(1 << 53) - 1)), ("zero", .int(0)),
            ("neg_zero", .double(-0.0)), ("nan", .double(.nan)), ("nan_bits", .double(Double(bitPattern: 0x7ff8_0000_0000_0001))),
            ("neg_nan", .double(-Double.nan)), ("inf", .double(.infinity)), ("neg_inf", .double(-.infinity)),
            ("tiny", .double(.leastNonzeroMagnitude)), ("huge", .double(.greatestFiniteMagnitude)), ("e15", .double(1e15)),
            ("whole", .double(42)), ("pi", .double(.pi)), ("neg", .double(-0.1)),
            ("bytes", .bytes([0, 1, 2, 255])), ("bytes0", .bytes([])), ("bytes1", .bytes([7])), ("bytes2", .bytes([7, 8])),
            ("ts", .timestamp(try Timestamp(seconds: 1_234_567_890, nanos: 123_456_789))),
            ("ts_min", .timestamp(try Timestamp(seconds: Timestamp.minSeconds))),
            ("ts_max", .timestamp(try Timestamp(seconds: Timestamp.maxSeconds, nanos: 999_999_999))),
            ("dur", .duration(try TimeDuration(seconds: -1, nanos: -500_000_000))),
            ("dur_min", .duration(try TimeDuration(seconds: -TimeDuration.maxSeconds, nanos: -854_775_808))),
            ("dur_tiny", .duration(try TimeDuration(seconds: 0, nanos: -1))),
            ("dur_zero", .duration(try TimeDuration(seconds: 0))),
            ("type", .type("google.protobuf.Timestamp")), ("error", .error(EvalError("no such key"))),
            ("text", .string("\" \\ / \n \r \t \u{0} \u{1f} \u{7f} é e\u{301} 🙂 \u{2028} $x")), ("empty", .string("")),
            (
                "keys",
                .map(
                    ValueMap([
                        (.int(1), "a"), (.uint(UInt64.max), "b"), (.bool(true), "c"), (.string("$x"), "d"), (.int(-1 << 60), "e"),
                    ]))
            ),
            ("tag_like", .map(ValueMap([("$int", "5")]))), ("plain", .map(ValueMap([("a", 1), ("é", [true, .null])]))),
            ("nested", .list([.list([]), .map(ValueMap()), .null, .list([.bytes([1])])])),
            ("$name", .string("a name starting with $")), ("e\u{301}", "decomposed"), ("é", "composed"),
        ]
        s.attributes += values
        s.context.append(("os", .uint(3)))
        // The deepest value a state keeps: 64 levels, maps with int keys (each a `$map`, three levels of JSON) and lists.
        var deep: Value = .uint(1)
        for i in 0..<63 { deep = i % 2 == 0 ? .map(ValueMap([(.int(Int64(i)), deep)])) : .list([deep]) }
        var event = Event(
            kind: .alias, name: "naïve \"name\"", userID: "someone else", timestamp: -1, messageID: nil,
            properties: ValueMap(values.map { (.string($0.0), $0.1) }), traits: ValueMap([(.int(3), deep)]),
            context: ValueMap([("$map", "not a tag here")]))
        event.properties[string: "deep"] = deep
        s.pending.append(
            UserState.Pending(
                id: UInt64.max, rule: "gone/rule", due: 300_000_000_000_000, scheduledAt: -62_135_596_800_001, held: true,
                keyMessageID: "", keyEventCount: UInt32.max, keySuffix: "|x", trigger: "", event: event,
                change: AttributeChange(attribute: "plan", from: .uint(1), to: .map(ValueMap([(.int(2), .double(-0.0))])))))
        s.pending.append(change)
        s.messageIDs = [(0, -1), (UInt64.max, 0), ((1 << 53) + 1, s.clock)]
        s.records[0].lastFire = Int64.min
        s.records[0].sessionFires = UInt16.max
        s.messages = UserState.Record(rule: "", occurrences: 0, fires: UInt32.max, sessionFires: 0, sessionID: 0, lastFire: 1)
        s.session.lastActivity = Int64.min
        s.inbox[0].readAt = nil
        s.inbox[0].sender = "ops \"team\""
        s.inbox[0].link = "app://x?y=1&z=\u{1}"
        s.series.append(
            UserState.Series(
                key: "e:X|sum:v", times: [0, 0, (1 << 44) - 1], lifetime: (UInt32.max, Int64.min, -1),
                values: [(0, -0.0), (1, .nan), (2, .infinity), (2, 1e300), (3, Double(bitPattern: 0xfff8_0000_0000_0001))]))
        s.sequences.append(UserState.Sequence(rule: "r", key: "", best: [Int64.min, -1, 1 << 53, -(1 << 53)]))
        s.eventCount = UInt32.max
        return s
    }

    @Test func everyValueAndEveryEdgeRoundTrips() throws {
        let s = try UserStateJSONTests.edgeState()
        // The bytes' decoder takes it: the law is about a state Beckon can keep.
        _ = try UserState(decoding: s.encoded())
        try UserStateJSONTests.roundTrips(s)
        let json = s.json
        // The encodings the documentation promises.
        for part in [
            #""uint":{"$uint":"18446744073709551615"}"#, #""int_min":{"$int":"-9223372036854775808"}"#,
            #""int_2_53":9007199254740992"#, #""int_past_2_53":{"$int":"-9007199254740993"}"#,
            #""neg_zero":{"$double":"-0.0"}"#, #""nan":{"$double":"NaN"}"#, #""nan_bits":{"$double":"0x7ff8000000000001"}"#,
            #""inf":{"$double":"Infinity"}"#, #""neg_inf":{"$double":"-Infinity"}"#, #""whole":42.0"#,
            #""e15":1000000000000000.0"#, #""huge":1.7976931348623157e+308"#,
            #""bytes":{"$bytes":"AAEC/w=="}"#, #""ts":{"$timestamp":"2009-02-13T23:31:30.123456789Z"}"#,
            #""dur":{"$duration":"-1.5s"}"#, #""type":{"$type":"google.protobuf.Timestamp"}"#, #""error":null"#,
            #""keys":{"$map":[[1,"a"],[{"$uint":"18446744073709551615"},"b"],[true,"c"],["$x","d"],"#
                + #"[{"$int":"-1152921504606846976"},"e"]]}"#,
            #""tag_like":{"$map":[["$int","5"]]}"#, #""plain":{"a":1,"é":[true,null]}"#,
            #""id":"18446744073709551615""#, #""hash":"18446744073709551615""#, #""due":300000000000000"#,
            #""scheduledAt":-62135596800001"#, #""timestamp":"1969-12-31T23:59:59.999Z""#, #""lastActivity":null"#,
            #""best":[null,"1969-12-31T23:59:59.999Z",9007199254740992,-9007199254740992]"#,
        ] {
            #expect(json.contains(part), "\(part)")
        }
        // The event's userId is not written: it is the state's.
        #expect(!json.contains("someone else"))
    }

    /// A repeated attribute name (no engine keeps one) is not lost: the attributes are written as pairs.
    @Test func repeatedNamesArePairs() throws {
        var s = try #require(try UserStateJSONTests.streamStates().first { !$0.attributes.isEmpty })
        s.attributes = [("plan", "pro"), ("plan", "gold")]
        s.context = [("locale", "fr"), ("locale", "en")]
        #expect(s.json.contains(#""attributes":[["plan","pro"],["plan","gold"]]"#))
        try UserStateJSONTests.roundTrips(s)
        // Written as an object, the repeat is an error.
        let json = s.json.replacingOccurrences(
            of: #""attributes":[["plan","pro"],["plan","gold"]]"#, with: #""attributes":{"plan":"pro","plan":"gold"}"#)
        #expect(throws: StateDecodingError.self) { try UserState(json: Array(json.utf8)) }
    }

    // MARK: Bad input

    @Test func everyTruncationIsAnError() throws {
        let states = try UserStateJSONTests.streamStates()
        let small = try #require(
            states.filter { !$0.pending.isEmpty && !$0.inbox.isEmpty }.min { $0.json.utf8.count < $1.json.utf8.count })
        for s in [small, try UserStateJSONTests.edgeState()] {
            let json = Array(s.json.utf8)
            for n in 0..<json.count {
                #expect(throws: StateDecodingError.self) { try UserState(json: json[..<n]) }
            }
            // And the whole of it reads, with white space around it.
            _ = try UserState(json: Array(" \n".utf8) + json + Array("\r\n\t".utf8))
        }
    }

    /// A valid export with one value in it, `"PROBE"`, to be replaced by something wrong.
    static func probe() throws -> String {
        let states = try UserStateJSONTests.streamStates()
        var s = try #require(
            states.first { s in
                s.pending.contains { $0.event != nil } && !s.series.isEmpty && !s.inbox.isEmpty && !s.records.isEmpty
                    && !s.messageIDs.isEmpty
            })
        s.attributes.append(("probe", "PROBE"))
        return s.json
    }

    /// `json` with the value of the first member named `member` (after the first `after`, if given) replaced by
    /// `replacement`.
    static func replacing(
        _ member: String, after anchor: String? = nil, with replacement: String, in json: String
    ) throws -> String {
        let b = Array(json.utf8)
        let from = try anchor.map { try #require(b.firstRange(of: Array($0.utf8))).upperBound } ?? 0
        let start = try #require(b[from...].firstRange(of: Array("\"\(member)\":".utf8))).upperBound
        // The end of the value: a string, an object or array closed, or a scalar's `,` or `}`.
        var i = start
        var depth = 0
        var inString = false
        scan: while i < b.count {
            switch (inString, b[i]) {
            case (true, UInt8(ascii: "\\")): i += 1
            case (true, UInt8(ascii: "\"")):
                inString = false
                if depth == 0 {
                    i += 1
                    break scan
                }
            case (true, _): break
            case (false, UInt8(ascii: "\"")): inString = true
            case (false, UInt8(ascii: "{")), (false, UInt8(ascii: "[")): depth += 1
            case (false, UInt8(ascii: "}")), (false, UInt8(ascii: "]")):
                if depth == 0 { break scan }
                depth -= 1
                if depth == 0 {
                    i += 1
                    break scan
                }
            case (false, UInt8(ascii: ",")) where depth == 0: break scan
            default: break
            }
            i += 1
        }
        return String(decoding: b[..<start] + Array(replacement.utf8) + b[i...], as: UTF8.self)
    }

    /// A member's value replaced by one of the wrong type, out of range, or not strict JSON: an error.
    @Test(arguments: [
        // Values.
        ("probe", #"{"$uint":"-1"}"#), ("probe", #"{"$uint":"01"}"#), ("probe", #"{"$uint":"+1"}"#),
        ("probe", #"{"$uint":"18446744073709551616"}"#), ("probe", #"{"$uint":7}"#), ("probe", #"{"$int":"1.5"}"#),
        ("probe", #"{"$int":"9223372036854775808"}"#), ("probe", "9223372036854775808"), ("probe", "1e400"),
        ("probe", "-1e400"), ("probe", #"{"$double":"nan"}"#), ("probe", #"{"$double":"0x3ff0000000000000"}"#),
        ("probe", #"{"$double":"0x7FF8000000000001"}"#), ("probe", #"{"$double":1}"#), ("probe", #"{"$bytes":"QR=="}"#),
        ("probe", #"{"$bytes":"Q==="}"#), ("probe", #"{"$bytes":"QQ"}"#), ("probe", #"{"$bytes":"QQ=a"}"#),
        ("probe", #"{"$timestamp":"10000-01-01T00:00:00Z"}"#), ("probe", #"{"$timestamp":"2026-02-30T00:00:00Z"}"#),
        ("probe", #"{"$duration":"1e3s"}"#), ("probe", #"{"$duration":"9223372037s"}"#),
        ("probe", #"{"$duration":"1.0000000001s"}"#), ("probe", #"{"$duration":"1.50s"}"#), ("probe", #"{"$duration":"-0s"}"#),
        ("probe", #"{"$type":null}"#), ("probe", #"{"$what":"1"}"#), ("probe", #"{"$int":"5","b":1}"#),
        ("probe", #"{"a":1,"$int":"5"}"#), ("probe", #"{"$map":[[1,"a"],[1,"b"]]}"#),
        ("probe", #"{"$map":[[1,"a"],[{"$uint":"1"},"b"]]}"#), ("probe", #"{"$map":[[1.5,"a"]]}"#),
        ("probe", #"{"$map":[[null,"a"]]}"#), ("probe", #"{"$map":[[1]]}"#), ("probe", #"{"$map":{}}"#),
        ("probe", "\"" + String(repeating: "x", count: 70_000) + "\""),
        ("probe", String(repeating: "[", count: 65) + String(repeating: "]", count: 65)),
        // Not strict JSON.
        ("probe", "NaN"), ("probe", "Infinity"), ("probe", "01"), ("probe", "1."), ("probe", ".5"), ("probe", "-"),
        ("probe", "1e"), ("probe", "+1"), ("probe", "[1,]"), ("probe", #"{"a":1,}"#), ("probe", "'PROBE'"), ("probe", "nul"),
        ("probe", "True"), ("probe", #""\ud800""#), ("probe", #""\x41""#), ("probe", "\"a\u{1}b\""), ("probe", #"{"a" 1}"#),
        ("probe", "{1:2}"), ("probe", #"{"a":1,"a":2}"#), ("probe", "[1 2]"), ("probe", ""),
        ("probe", String(repeating: "[", count: 300) + String(repeating: "]", count: 300)),
        ("probe", String(repeating: "[", count: 100_000)),
        ("probe", String(repeating: #"{"a":"#, count: 250) + "1" + String(repeating: "}", count: 250)),
        ("probe", String(repeating: #"{"$map":[[1,"#, count: 90) + "1" + String(repeating: "]]}", count: 90)),
        ("probe", String(repeating: #"{"a":"#, count: 100_000)),
        // Members.
        ("version", "6"), ("version", #""1""#), ("version", "1.0"), ("userId", "5"), ("userId", "null"),
        ("eventCount", "1e3"), ("eventCount", "99999999999999999999999"), ("eventCount", "-1"), ("eventCount", "4294967296"),
        ("eventCount", "2.0"), ("eventCount", "null"), ("session", "{}"), ("session", "[]"),
        ("attributes", "7"), ("attributes", #"[["a"]]"#), ("attributes", "[[1,2]]"), ("attributes", "null"),
        ("records", "{}"), ("records", "[null]"), ("sessionFires", "65536"), ("lastFire", "true"),
        ("messageIds", #"[{"hash":"1"}]"#), ("messageIds", #"[{"hash":1,"time":null}]"#),
        ("messageIds", #"[{"hash":"1","time":"2026-01-02T00:00:00Z"},{"hash":"1","time":"2026-01-01T00:00:00Z"}]"#),
        ("series", #"[{"key":"k","times":["2026-01-02T00:00:00Z","2026-01-01T00:00:00Z"],"lifetime":null,"values":[]}]"#),
        ("series", #"[{"key":"k","times":["1969-01-01T00:00:00Z"],"lifetime":null,"values":[]}]"#),
        ("series", #"[{"key":"k","times":["2600-01-01T00:00:00Z"],"lifetime":null,"values":[]}]"#),
        ("series", #"[{"key":"k","times":[],"lifetime":null,"values":[{"time":0,"value":"1"}]}]"#),
        ("series", #"[{"key":"k","times":[],"lifetime":null,"values":[{"time":1,"value":1.0},{"time":0,"value":1.0}]}]"#),
        ("series", #"[{"key":"k","times":[],"lifetime":{"count":1},"values":[]}]"#),
        ("sequences", #"[{"rule":"r","key":"k","best":[true]}]"#), ("inbox", #"[{"id":"x"}]"#),
        ("readAt", "false"), ("createdAt", #""soon""#),
        // Times.
        ("clock", #""2026-03-02T09:07:00.0001Z""#), ("clock", #""yesterday""#), ("clock", "9007199254740993"),
        ("clock", "1e3"), ("clock", #""2026-03-02T24:00:00Z""#), ("clock", "{}"), ("clock", #""2026-03-02""#),
        // Fields that do not go together: the clock "never" with times after it.
        ("clock", "null"),
        // Delayed actions.
        ("due", "null"), ("scheduledAt", "null"), ("held", "0"), ("type", #""bogus""#), ("type", #""TRACK""#),
        ("properties", "[]"), ("properties", #"{"$x":1}"#), ("properties", "null"), ("keyEventCount", "-1"),
        ("keyMessageId", "1"), ("change", #"{"attribute":"a","from":1}"#), ("event", "{}"), ("event", "[]"),
    ])
    func aWrongValueIsAnError(member: String, replacement: String) throws {
        let bad = try UserStateJSONTests.replacing(member, with: replacement, in: try UserStateJSONTests.probe())
        #expect(throws: StateDecodingError.self) { try UserState(json: Array(bad.utf8)) }
    }

    /// The probe itself, and values like the wrong ones above that are right: the test above fails for its reason.
    @Test(arguments: [
        ("probe", #""PROBE""#), ("probe", #"{"$uint":"1"}"#), ("probe", "9223372036854775807"), ("probe", "1e300"),
        ("probe", #"{"$double":"0x7ff8000000000001"}"#), ("probe", #"{"$bytes":"QQ=="}"#),
        ("probe", #"{"$duration":"1.5s"}"#), ("probe", #"{"$map":[[1,"a"]]}"#), ("probe", #""\ud83d\ude42""#),
        ("probe", String(repeating: "[", count: 64) + String(repeating: "]", count: 64)), ("eventCount", "4294967295"),
        ("clock", #""2026-03-02T09:07:00.001+01:00""#), ("clock", "1"), ("series", "[]"), ("due", #""2026-03-02T10:00:00Z""#),
    ])
    func aRightValueReads(member: String, replacement: String) throws {
        let good = try UserStateJSONTests.replacing(member, with: replacement, in: try UserStateJSONTests.probe())
        _ = try UserState(json: Array(good.utf8))
    }

    /// Members missing, unknown or repeated.
    @Test func membersAreExactlyTheDocumentedOnes() throws {
        let valid = try UserStateJSONTests.probe()
        #expect(valid.hasPrefix(#"{"version":5,"userId":"#))
        for bad in [
            valid.replacingOccurrences(of: #"{"version":5,"#, with: "{"),
            valid.replacingOccurrences(of: #"{"version":5,"#, with: #"{"version":5,"extra":1,"#),
            valid.replacingOccurrences(of: #"{"version":5,"#, with: #"{"version":5,"version":5,"#),
            // Version 1 has no `mergedInto`, version 2 no `devices`, version 3 no `expiredMessageIds`, version 4 no
            // `known`; version 5 must have all four.
            valid.replacingOccurrences(of: #"{"version":5,"#, with: #"{"version":1,"#),
            valid.replacingOccurrences(of: #"{"version":5,"#, with: #"{"version":2,"#),
            valid.replacingOccurrences(of: #"{"version":5,"#, with: #"{"version":3,"#),
            valid.replacingOccurrences(of: #"{"version":5,"#, with: #"{"version":4,"#),
            valid.replacingOccurrences(of: #","expiredMessageIds":[],"#, with: ","),
            valid.replacingOccurrences(of: #","known":false}"#, with: "}"),
            valid.replacingOccurrences(of: #","known":false}"#, with: #","known":null}"#),
            // An expired id is older than every id in the window.
            valid.replacingOccurrences(
                of: #""expiredMessageIds":[]"#, with: #""expiredMessageIds":[{"hash":"1","time":"2026-03-30T00:00:00Z"}]"#),
            valid.replacingOccurrences(of: #","mergedInto":null,"#, with: ","),
            valid.replacingOccurrences(of: #","devices":[],"#, with: ","),
            valid.replacingOccurrences(
                of: #""devices":[]"#,
                with: #""devices":[{"token":"t","platform":"web","app":null,"firstSeen":"2026-03-02T09:00:00Z","#
                    + #""lastSeen":"2026-03-02T09:00:00Z","pushEnabled":true}]"#),
            try UserStateJSONTests.replacing("id", after: #""pending":"#, with: #""1","x":null"#, in: valid),
            try UserStateJSONTests.replacing("id", after: #""pending":"#, with: "1", in: valid),
            try UserStateJSONTests.replacing("id", after: #""pending":"#, with: #""01""#, in: valid),
            try UserStateJSONTests.replacing("id", after: #""pending":"#, with: #""18446744073709551616""#, in: valid),
            try UserStateJSONTests.replacing("rule", after: #""records":"#, with: #""r","rule":"r""#, in: valid),
        ] {
            #expect(bad != valid)
            #expect(throws: StateDecodingError.self) { try UserState(json: Array(bad.utf8)) }
        }
    }

    /// Bytes that are not JSON text at all.
    @Test func bytesThatAreNotJSON() throws {
        let valid = Array(try UserStateJSONTests.probe().utf8)
        for bad: [UInt8] in [
            [], Array("null".utf8), Array("[]".utf8), Array("\"{}\"".utf8), [0xEF, 0xBB, 0xBF] + valid, valid + [0],
            valid + Array("{}".utf8), Array(valid.dropLast()) + Array(",}".utf8),
            Array(String(decoding: valid, as: UTF8.self).replacingOccurrences(of: "PROBE", with: "PR\u{FFFD}BE").utf8)
                .map { $0 == 0xEF ? 0xFF : $0 },
        ] {
            #expect(throws: StateDecodingError.self) { try UserState(json: bad) }
        }
    }

    /// An error names the member and points at its byte.
    @Test func errorsSayWhereAndWhat() throws {
        let valid = try UserStateJSONTests.probe()
        let bad = valid.replacingOccurrences(of: #""PROBE""#, with: #"{"$uint":"-1"}"#)
        let offset = try #require(bad.utf8.firstRange(of: #""-1""#.utf8)).lowerBound
        let error = try #require(throws: StateDecodingError.self) { try UserState(json: Array(bad.utf8)) }
        #expect(error.reason.hasPrefix("attributes.probe.$uint must be a decimal integer"))
        #expect(error.offset == bad.utf8.distance(from: bad.utf8.startIndex, to: offset))
        let late = try UserStateJSONTests.replacing("due", with: #""2026-03-02T10:00:00Z","x":null"#, in: valid)
        let lateError = try #require(throws: StateDecodingError.self) { try UserState(json: Array(late.utf8)) }
        #expect(lateError.reason == "pending[0].x is not a member Beckon knows", "\(lateError)")
        let never = try UserStateJSONTests.replacing("clock", with: "null", in: valid)
        let neverError = try #require(throws: StateDecodingError.self) { try UserState(json: Array(never.utf8)) }
        #expect(neverError.reason.hasPrefix("the state is not one Beckon keeps: "), "\(neverError)")
        let notJSON = try #require(throws: StateDecodingError.self) { try UserState(json: Array("{\"version\":01}".utf8)) }
        #expect(notJSON.offset == 11, "\(notJSON)")
    }

    /// Random bytes changed in a valid export: an error, or a state that itself round-trips.
    @Test func randomDamageIsAnErrorOrAState() async throws {
        let good = try UserStateJSONTests.streamStates().filter { !$0.pending.isEmpty }.prefix(8).map { Array($0.json.utf8) }
        #expect(!good.isEmpty)
        let flips = Gen.int(in: 0...10_000_000).array(of: 1...4)
        await propertyCheck(count: 300, input: flips) { flips in
            var b = good[flips[0] % good.count]
            for f in flips { b[f % b.count] = UInt8(truncatingIfNeeded: f >> 8) }
            guard let s = try? UserState(json: b) else { return }
            #expect((try? UserState(json: Array(s.json.utf8)))?.encoded() == s.encoded())
        }
    }

    // MARK: Strict JSON, for a person and for any reader

    @Test func foundationReadsItAsStrictJSON() throws {
        for s in [try UserStateJSONTests.edgeState()] + (try UserStateJSONTests.streamStates().prefix(20)) {
            let json = s.json
            #expect(json.utf8.first == UInt8(ascii: "{") && json.utf8.last == UInt8(ascii: "}"))
            #expect(!json.contains("\n"))
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            #expect(
                Set(object.keys) == [
                    "version", "userId", "clock", "eventCount", "session", "attributes", "context", "records", "messages",
                    "series", "messageIds", "expiredMessageIds", "inbox", "pending", "sequences", "mergedInto", "devices",
                    "known",
                ])
            #expect(object["userId"] as? String == s.userID)
            #expect(object["clock"] as? String == Timestamp(milliseconds: s.clock).description)
        }
    }

    // MARK: The shape, pinned

    /// The export of a fixed user (StateTests' version-one user): a change of the JSON form shows here. Recorded when
    /// missing or when BECKON_UPDATE_GOLDEN is set, and a recording run fails, so that nobody records by accident.
    @Test func theShapeIsStable() throws {
        let rs = try StateTests.ruleSet()
        let engine = Engine(ruleSet: rs)
        for e in StateTests.pinnedUserEvents { engine.process(e) }
        engine.report(StateTests.pinnedDevice, for: "ada")
        let s = try #require(engine.state(of: "ada"))
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
        let url = fixtures.appendingPathComponent("user-state-v5.json")
        if ProcessInfo.processInfo.environment["BECKON_UPDATE_GOLDEN"] != nil || !FileManager.default.fileExists(atPath: url.path)
        {
            try (s.json + "\n").write(to: url, atomically: true, encoding: .utf8)
            Issue.record("recorded \(url.path): check it and run again")
            return
        }
        let golden = try String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(s.json == golden)
        // The golden JSON reads as the golden bytes of the same user.
        let hex = try String(contentsOf: fixtures.appendingPathComponent("user-state-v5.hex"), encoding: .utf8)
        let bytes = try UserState(json: Array(golden.utf8)).encoded()
        #expect(bytes.map { String(format: "%02x", $0) }.joined() == hex.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Version-1 JSON (before `mergedInto`) still reads, as the same user.
    @Test func versionOneJSONStillReads() throws {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
        let v1 = try String(contentsOf: fixtures.appendingPathComponent("user-state-v1.json"), encoding: .utf8)
        #expect(v1.hasPrefix(#"{"version":1,"#))
        let v2 = try String(contentsOf: fixtures.appendingPathComponent("user-state-v2.json"), encoding: .utf8)
        #expect(v2.hasPrefix(#"{"version":2,"#))
        // Versions 1 and 2 read as the same user, with no devices (version 3 adds them).
        let one = try UserState(json: Array(v1.utf8))
        let two = try UserState(json: Array(v2.utf8))
        #expect(one.json == two.json)
        #expect(two.devices.isEmpty && two.json.hasSuffix(#","devices":[],"known":false}"#))
        // Version 3 (before `expiredMessageIds`) reads as that user with a device, as today's pinned JSON.
        let v3 = try String(contentsOf: fixtures.appendingPathComponent("user-state-v3.json"), encoding: .utf8)
        #expect(v3.hasPrefix(#"{"version":3,"#))
        let three = try UserState(json: Array(v3.utf8))
        #expect(three.expiredMessageIDs.isEmpty)
        // Version 4 (before `known`) reads as that user, not known, as today's pinned JSON.
        let v4 = try String(contentsOf: fixtures.appendingPathComponent("user-state-v4.json"), encoding: .utf8)
        let four = try UserState(json: Array(v4.utf8))
        #expect(!four.known && four.json == three.json)
        let v5 = try String(contentsOf: fixtures.appendingPathComponent("user-state-v5.json"), encoding: .utf8)
        #expect(three.json == v5.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
