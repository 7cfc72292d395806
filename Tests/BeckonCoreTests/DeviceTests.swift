import BeckonCore
import BeckonStore
import BeckonYAML
import Crypto
import Foundation
import Testing

/// Users' push devices (docs/push.md): registered, updated, bounded, removed, carried by a merge and by the state's
/// bytes and JSON.
struct DeviceTests {
    static let rules = """
        version: 1
        campaign: app
        rules:
          - id: hello
            on: Opened
            do:
              - message: { surface: home, title: Hi }
        """

    func device(_ token: String, at time: Int64, platform: Device.Platform = .ios, enabled: Bool = true) -> Device {
        Device(token: token, platform: platform, app: "com.example", firstSeen: time, lastSeen: time, pushEnabled: enabled)
    }

    @Test func aTokenRegisteredAgainIsUpdatedAndTheOldestGoesBeyondTheLimit() throws {
        let engine = Engine(ruleSet: try load(Self.rules))
        engine.report(device("t0", at: 1_000), for: "ann")
        engine.report(device("t0", at: 5_000, enabled: false), for: "ann")
        var ann = try #require(engine.state(of: "ann"))
        #expect(ann.devices.count == 1)
        #expect(ann.devices[0].firstSeen == 1_000 && ann.devices[0].lastSeen == 5_000 && !ann.devices[0].pushEnabled)
        for i in 1...Device.maxPerUser { engine.report(device("t\(i)", at: 10_000 + Int64(i)), for: "ann") }
        ann = try #require(engine.state(of: "ann"))
        #expect(ann.devices.count == Device.maxPerUser)
        #expect(!ann.devices.contains { $0.token == "t0" }, "the device reported least recently went")
        #expect(engine.removeDevice(token: "t3", of: "ann"))
        #expect(!engine.removeDevice(token: "t3", of: "ann"))
        #expect(try #require(engine.state(of: "ann")).devices.count == Device.maxPerUser - 1)
    }

    /// Each report of a token is a claim of it (collected for a service's store): the latest report of each token
    /// since the last take, under the id the user's events resolve to; a merge claims the merged id's tokens for the
    /// user. A removal `seenBy` a time leaves a token the user reported after it.
    @Test func reportsClaimTokensAndAMovedTokenIsRemovedUnlessReportedSince() throws {
        let engine = Engine(ruleSet: try load(Self.rules))
        engine.report(device("phone", at: 1_000), for: "ann")
        #expect(engine.takeDeviceClaims().isEmpty, "claims are collected only when asked for")
        engine.collectsDeviceClaims = true
        engine.report(device("phone", at: 1_000), for: "ann")
        engine.report(device("phone", at: 2_000), for: "bob")
        engine.report(device("pad", at: 3_000), for: "ann")
        engine.report(device("pad", at: 2_500), for: "cy")  // (a late event: ann's later report holds)
        #expect(
            engine.takeDeviceClaims()
                == [DeviceClaim(token: "pad", userID: "ann", at: 3_000), DeviceClaim(token: "phone", userID: "bob", at: 2_000)])
        #expect(engine.takeDeviceClaims().isEmpty)
        // bob took the phone at 2,000: ann's is removed only if she did not report it after.
        #expect(!engine.removeDevice(token: "phone", of: "ann", seenBy: 999))
        #expect(engine.removeDevice(token: "phone", of: "ann", seenBy: 2_000))
        #expect(try #require(engine.state(of: "ann")).devices.map(\.token) == ["pad"])
        // A merge: the anonymous id's tablet is the known user's now.
        engine.report(device("tablet", at: 4_000), for: "anon-1")
        _ = engine.takeDeviceClaims()
        engine.process(Event(kind: .identify, userID: "dee", timestamp: t("2026-01-01T10:00:00Z"), previousID: "anon-1"))
        #expect(engine.takeDeviceClaims() == [DeviceClaim(token: "tablet", userID: "dee", at: 4_000)])
        engine.report(device("tablet", at: 5_000), for: "anon-1")
        #expect(engine.takeDeviceClaims() == [DeviceClaim(token: "tablet", userID: "dee", at: 5_000)])
    }

    @Test func aTokenOverTheLimitOrEmptyIsRefused() throws {
        let engine = Engine(ruleSet: try load(Self.rules))
        #expect(throws: Engine.DeviceRefusal.emptyToken) { try Engine.check(device("", at: 1)) }
        let long = String(repeating: "a", count: Device.maxTokenBytes + 1)
        #expect(throws: Engine.DeviceRefusal.tokenTooLong(Device.maxTokenBytes + 1)) { try Engine.check(device(long, at: 1)) }
        engine.report(device(long, at: 1), for: "ann")
        #expect(engine.state(of: "ann") == nil)
        // A control character (a NUL from a JSON escape) is refused, in a registration and in an event's context.
        for token in ["a\u{0}b", "a\nb", "a\u{7F}"] {
            #expect(throws: Engine.DeviceRefusal.controlCharacter) { try Engine.check(device(token, at: 1)) }
            engine.report(device(token, at: 1), for: "ann")
        }
        #expect(engine.state(of: "ann") == nil)
    }

    @Test func aMergeCarriesTheAnonymousDevicesAndAMergedIDsRegistrationIsTheUsers() throws {
        let engine = Engine(ruleSet: try load(Self.rules))
        engine.report(device("phone", at: 1_000), for: "anon-1")
        engine.report(device("tablet", at: 2_000, platform: .android), for: "ann")
        engine.report(device("phone", at: 500), for: "ann")
        engine.process(Event(kind: .identify, userID: "ann", timestamp: t("2026-01-01T10:00:00Z"), previousID: "anon-1"))
        var ann = try #require(engine.state(of: "ann"))
        #expect(ann.devices.map(\.token).sorted() == ["phone", "tablet"])
        #expect(ann.devices.first { $0.token == "phone" }?.lastSeen == 1_000, "the later report of a token wins")
        engine.report(device("watch", at: 3_000), for: "anon-1")
        ann = try #require(engine.state(of: "ann"))
        #expect(ann.devices.map(\.token).sorted() == ["phone", "tablet", "watch"])
        #expect(try #require(engine.state(of: "anon-1")).devices.isEmpty)
    }

    /// With a push destination, an event's `context.device.token` registers the device (platform from
    /// `device.type` or `os.name`, `app.namespace`, `device.pushEnabled`); without one, nothing is read.
    @Test func anEventsContextReportsItsDeviceWhenTheRulesPush() throws {
        let lines = [
            #"{"type":"track","event":"Opened","userId":"ann","timestamp":"2026-03-02T09:00:00Z","#
                + #""context":{"device":{"token":"tok-1","type":"ios"},"app":{"namespace":"com.example"}}}"#,
            #"{"type":"track","event":"Opened","userId":"ann","timestamp":"2026-03-02T10:00:00Z","#
                + #""context":{"device":{"token":"tok-2","pushEnabled":false},"os":{"name":"Android"}}}"#,
            #"{"type":"track","event":"Opened","userId":"ann","timestamp":"2026-03-02T11:00:00Z","#
                + #""context":{"device":{"token":"tok-3"},"os":{"name":"Windows"}}}"#,
            #"{"type":"track","event":"Opened","userId":"ann","timestamp":"2026-03-02T12:00:00Z","#
                + #""context":{"device":{"token":"tok-1","type":"ios"},"locale":"de"}}"#,
        ]
        for (withPush, expected) in [(true, ["tok-1 ios com.example true", "tok-2 android - false"]), (false, [])] {
            let rs = try load(Self.rules, settings: withPush ? pushSettings : nil)
            let decoder = SegmentDecoder(ruleSet: rs)
            let engine = Engine(ruleSet: rs)
            for line in lines { engine.process(try decoder.decode(line)) }
            let devices = engine.state(of: "ann")?.devices ?? []
            #expect(devices.map { "\($0.token) \($0.platform) \($0.app ?? "-") \($0.pushEnabled)" } == expected)
            if withPush {
                #expect(devices.first?.firstSeen == t("2026-03-02T09:00:00Z"))
                #expect(devices.first?.lastSeen == t("2026-03-02T12:00:00Z"))
            }
        }
    }

    @Test func devicesSurviveBytesJSONAndARestore() throws {
        let rs = try load(Self.rules)
        let engine = Engine(ruleSet: rs, store: SavedStateStore(backend: MemoryStateBackend()))
        engine.report(device("phone", at: 1_000), for: "ann")
        engine.report(device("tablet", at: 2_000, platform: .android, enabled: false), for: "ann")
        let s = try #require(engine.state(of: "ann"))
        #expect(try UserState(decoding: s.encoded()).devices == s.devices)
        #expect(try UserState(json: Array(s.json.utf8)).devices == s.devices)
        let other = Engine(ruleSet: rs)
        try other.restore(try UserState(decoding: s.encoded()))
        #expect(other.state(of: "ann")?.devices == s.devices)
    }
}

/// An `apns` destination's credentials are checked when the rules load (`beckon validate`), at the line that names
/// them.
struct APNsDestinationTests {
    static let rules = DeviceTests.rules

    func settings(_ apns: String) -> String {
        """
        version: 1
        settings: push
        destinations:
          - name: ios
            url: https://api.push.apple.com
            apns:
              topic: com.example.app
              team_id: TEAM123456
              key_id: KEY7654321
        \(apns)
        """
    }

    func errors(_ apns: String) -> [String] {
        diagnostics(Self.rules, settings: settings(apns)).filter { $0.severity == .error }.map {
            "\($0.location.position.line): \($0.message)"
        }
    }

    @Test func aKeyFileThatIsMissingOrNotAKeyIsAnErrorAtItsLine() throws {
        #expect(
            errors("      key_file: /nonexistent/AuthKey.p8") == [
                "10: 'key_file' names /nonexistent/AuthKey.p8, which cannot be read"
            ])
        let notAKey = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-not-a-key-\(getpid()).p8")
        try "hello".write(to: notAKey, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: notAKey) }
        #expect(
            errors("      key_file: \(notAKey.path)") == [
                "10: \(notAKey.path) holds no '-----BEGIN PRIVATE KEY-----' block"
            ])
        // A PEM block that is not a P-256 key (an RSA key, a damaged .p8): serving would refuse it, so validate does.
        let rsaLike = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-rsa-\(getpid()).p8")
        try "-----BEGIN PRIVATE KEY-----\nMIIBVgIBADANBgkqhkiG9w0BAQEFAASCAUAwggE8AgEAAkEA\n-----END PRIVATE KEY-----\n".write(
            to: rsaLike, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: rsaLike) }
        #expect(
            errors("      key_file: \(rsaLike.path)") == [
                "10: \(rsaLike.path) is not a P-256 private key in PEM (the .p8 file Apple gives)"
            ])
        let good = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-p256-\(getpid()).p8")
        try P256.Signing.PrivateKey().pemRepresentation.write(to: good, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: good) }
        #expect(errors("      key_file: \(good.path)").isEmpty)
        #expect(errors("      push_type: alert").count == 1, "neither key_file nor key_env")
        #expect(errors("      key_env: APNS_KEY").isEmpty)
    }

    @Test func aServiceAccountFileThatIsMissingOrNotOneIsAnErrorAtItsLine() throws {
        func fcm(_ body: String) -> [String] {
            let settings = """
                version: 1
                settings: push
                destinations:
                  - name: android
                    url: https://fcm.googleapis.com
                    fcm:
                \(body)
                """
            return diagnostics(Self.rules, settings: settings).filter { $0.severity == .error }.map {
                "\($0.location.position.line): \($0.message)"
            }
        }
        #expect(
            fcm("      service_account_file: /nonexistent/sa.json") == [
                "7: 'service_account_file' names /nonexistent/sa.json, which cannot be read"
            ])
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("beckon-sa-\(getpid()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try #"{"client_email": "a@b", "token_uri": "https://oauth2.googleapis.com/token"}"#.write(
            to: file, atomically: true, encoding: .utf8)
        #expect(
            fcm("      service_account_file: \(file.path)") == [
                "7: \(file.path) has no 'private_key': it is not a service account key file"
            ])
        #expect(fcm("      service_account_env: FCM_SA").isEmpty)
        #expect(fcm("      project_id: p").count == 1, "neither the file nor the variable")
    }

    /// An email destination's `body` template: placeholders it knows, `{{data}}` alone, the unsubscribe link
    /// required, a path and a header name; each mistake at its line, with a suggestion for a near name.
    @Test func anEmailBodyTemplateIsCheckedWhereItIsWritten() throws {
        func settings(_ body: String) -> String {
            """
            version: 1
            settings: mail
            destinations:
              - name: postmark
                url: https://api.postmarkapp.com
                email:
                  from: hi@example.com
                  api_key_env: POSTMARK_TOKEN
                  link_secret_env: LINK_SECRET
                  links_base_url: https://beckon.example.com
            \(body)
            """
        }
        func email(_ body: String) -> [String] {
            diagnostics(Self.rules, settings: settings(body)).filter { $0.severity == .error }.map {
                "\($0.location.position.line): \($0.message)" + ($0.suggestion.map { " (\($0))" } ?? "")
            }
        }
        let good = """
                  path: /email/withTemplate
                  api_key_header: X-Postmark-Server-Token
                  body:
                    From: "{{ from }}"
                    To: "{{to}}"
                    TemplateAlias: "{{template}}"
                    TemplateModel: "{{data}}"
                    Headers: [{ Name: List-Unsubscribe, Value: "<{{unsubscribe_url}}>" }]
                    TrackOpens: false
            """
        #expect(email(good).isEmpty)
        let loaded = RuleLoader.load(texts: [("rules.yaml", Self.rules), ("settings.yaml", settings(good))])
        let spec = try #require(loaded.ruleSet?.settings.destinations.first?.email)
        #expect(spec.path == "/email/withTemplate" && spec.apiKeyHeader == "X-Postmark-Server-Token")
        #expect(spec.bodyTemplate?.contains(#""TrackOpens":false"#) == true)
        #expect(
            email("      body: { To: \"{{too}}\", U: \"{{unsubscribe_url}}\" }") == [
                "11: unknown placeholder '{{too}}' in 'body'; it may use {{to}}, {{from}}, {{from_name}}, {{subject}}, "
                    + "{{template}}, {{unsubscribe_url}}, {{action_id}}, {{data}} (did you mean '{{to}}'?)"
            ])
        #expect(
            email("      body: { Model: \"x {{data}}\", U: \"{{unsubscribe_url}}\" }") == [
                "11: '{{data}}' is the merge data object: it must be a whole value, not in a text "
                    + "(write the value as \"{{data}}\" alone)"
            ])
        #expect(email("      body: { To: \"{{to}}\" }").first?.hasPrefix("11: 'body' must carry '{{unsubscribe_url}}'") == true)
        #expect(email("      body: [1]") == ["11: 'body' must be a map (the JSON object to send), found a list"])
        #expect(email("      body: { U: \"{{unsubscribe_url\" }").first?.hasPrefix("11: '{{' without its '}}'") == true)
        #expect(email("      path: email?x=1") == ["11: 'path' must start with '/' and hold no query, found 'email?x=1'"])
        #expect(email("      api_key_header: \"X Token\"") == ["11: 'api_key_header' must be a header name, found 'X Token'"])
    }

    @Test func aRateIsACountPerSecondMinuteOrHour() throws {
        func rate(_ text: String) -> (perSecond: Double?, errors: [String]) {
            let settings = """
                version: 1
                settings: push
                destinations:
                  - name: hook
                    url: https://example.com/push
                    rate: \(text)
                """
            let r = RuleLoader.load(texts: [("rules.yaml", Self.rules), ("settings.yaml", settings)])
            return (
                r.ruleSet?.settings.destinations.first?.ratePerSecond,
                r.diagnostics.filter { $0.severity == .error }.map { "\($0.location.position.line): \($0.message)" }
            )
        }
        #expect(rate("500/s").perSecond == 500)
        #expect(rate("30/m").perSecond == 0.5)
        #expect(rate("3600/h").perSecond == 1)
        #expect(rate("fast").errors == ["6: 'rate' must be a count per second, minute or hour, like 500/s, found 'fast'"])
        #expect(rate("0/s").errors.count == 1)
    }
}
