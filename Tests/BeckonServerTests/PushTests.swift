import BeckonCore
import BeckonYAML
import Foundation
import Testing

@testable import BeckonServer

/// The push providers' pieces that need no network (docs/push.md): answers to outcomes, payloads, ids, the send
/// rate's bucket. The providers themselves are tested against doubles (Tests/Service/push_test.py).
struct PushTests {
    @Test func apnsAnswersBecomeOutcomes() {
        func outcome(_ status: Int, _ reason: String?, retryAfter: String? = nil) -> PushOutcome {
            APNsSender.outcome(
                status: status, body: reason.map { Array(#"{"reason":"\#($0)"}"#.utf8) } ?? [], retryAfter: retryAfter)
        }
        #expect(outcome(200, nil) == .accepted)
        #expect(outcome(410, "Unregistered") == .invalidToken("410 Unregistered"))
        #expect(outcome(400, "BadDeviceToken") == .invalidToken("400 BadDeviceToken"))
        #expect(outcome(400, "DeviceTokenNotForTopic") == .invalidToken("400 DeviceTokenNotForTopic"))
        #expect(outcome(400, "PayloadTooLarge") == .refused("400 PayloadTooLarge"))
        #expect(outcome(403, "ExpiredProviderToken") == .refused("403 ExpiredProviderToken"))
        #expect(outcome(429, "TooManyRequests", retryAfter: "3") == .retry("429 TooManyRequests", after: 3000))
        #expect(outcome(503, nil) == .retry("503 no reason given", after: nil))
    }

    /// A device token is one path segment of the APNs request: `#`, `/`, `?` and dots cannot end the path or reach
    /// another (a hostile-client run registered `d1d1d1d1#eve` and reached `d1d1d1d1`'s phone with it).
    @Test func aTokenStaysInItsPathSegment() {
        #expect(APNsSender.path(of: "a1B2c3d4e5f6") == "/3/device/a1B2c3d4e5f6")
        #expect(APNsSender.path(of: "d1d1d1d1#eve") == "/3/device/d1d1d1d1%23eve")
        #expect(APNsSender.path(of: "../../../2/evil?x=1") == "/3/device/%2E%2E%2F%2E%2E%2F%2E%2E%2F2%2Fevil%3Fx%3D1")
        #expect(APNsSender.path(of: "..") == "/3/device/%2E%2E")
        #expect(APNsSender.path(of: "é") == "/3/device/%C3%A9")
    }

    @Test func fcmAnswersBecomeOutcomes() {
        func outcome(_ status: Int, _ code: String?, message: String = "m") -> PushOutcome {
            let details = code.map { #"[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# }
            let body = #"{"error":{"code":\#(status),"message":"\#(message)","status":"S","details":\#(details ?? "[]")}}"#
            return FCMSender.outcome(status: status, body: Array(body.utf8), retryAfter: nil)
        }
        #expect(outcome(200, nil) == .accepted)
        #expect(outcome(404, "UNREGISTERED") == .invalidToken("404 UNREGISTERED: m"))
        #expect(outcome(403, "SENDER_ID_MISMATCH") == .invalidToken("403 SENDER_ID_MISMATCH: m"))
        #expect(
            outcome(400, "INVALID_ARGUMENT", message: "The registration token is not valid")
                == .invalidToken("400 INVALID_ARGUMENT: The registration token is not valid"))
        #expect(outcome(400, "INVALID_ARGUMENT", message: "bad payload") == .refused("400 INVALID_ARGUMENT: bad payload"))
        #expect(outcome(429, "QUOTA_EXCEEDED") == .retry("429 QUOTA_EXCEEDED: m", after: nil))
        #expect(outcome(503, "UNAVAILABLE") == .retry("503 UNAVAILABLE: m", after: nil))
        #expect(outcome(401, nil) == .refused("401 S: m"))
        // A provider's words are kept short and safe: 64 KB with line breaks went into every row and log line whole.
        let long = String(repeating: "x", count: 65_000)
        guard case .refused(let said) = outcome(400, "INVALID_ARGUMENT", message: "a\\nforged " + long) else {
            Issue.record("not refused")
            return
        }
        #expect(said.count < 300 && said.hasPrefix("400 INVALID_ARGUMENT: a\\u{A}forged xx") && said.hasSuffix("…"), "\(said)")
    }

    /// Whatever `expires_in` the token endpoint sends, the token is kept between 0 and 59 minutes.
    @Test func anAccessTokensLifeIsBounded() {
        #expect(FCMSender.kept(expiresIn: 3599) == .seconds(3539))
        #expect(FCMSender.kept(expiresIn: .max) == .seconds(3540))
        #expect(FCMSender.kept(expiresIn: .min) == .zero)
        #expect(FCMSender.kept(expiresIn: 30) == .zero)
    }

    @Test func payloadsCarryTheActionAndApnsIDsAreStableUUIDs() throws {
        let json = #"{"id":"a1","push":{"title":"T","body":"B","deep_link":"app://x","data":{"n":2,"s":"t"}}}"#
        let m = try #require(PushMessage(actionJSON: json))
        let apns = try JSONSerialization.jsonObject(with: Data(try #require(APNsSender.payload(m)))) as? [String: Any]
        #expect((apns?["aps"] as? [String: Any])?["alert"] as? [String: String] == ["title": "T", "body": "B"])
        #expect(apns?["deep_link"] as? String == "app://x" && apns?["beckon_action_id"] as? String == "a1")
        let fcm = try JSONSerialization.jsonObject(with: Data(try #require(FCMSender.payload(m, to: "tok"))))
        let message = (fcm as? [String: Any])?["message"] as? [String: Any]
        #expect(message?["token"] as? String == "tok")
        #expect(message?["data"] as? [String: String] == ["beckon_action_id": "a1", "deep_link": "app://x", "n": "2", "s": "t"])
        #expect(PushMessage(actionJSON: #"{"id":"a2","message":{"title":"x"}}"#) == nil, "not a push")
        let id = APNsSender.apnsID(action: "a1", device: "tok")
        #expect(id == APNsSender.apnsID(action: "a1", device: "tok") && id != APNsSender.apnsID(action: "a1", device: "t2"))
        let uuid = #"^[0-9A-F]{8}-[0-9A-F]{4}-5[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$"#
        #expect(id.range(of: uuid, options: .regularExpression) != nil)
        // (The id of a retry after an upgrade is the same: SHA-256 of "a1\0tok", as Python's hashlib makes it.)
        #expect(id == "F44C6AD4-82EE-5726-9F26-5D546F04647A")
    }

    @Test func theSendRateIsATokenBucketASecondDeep() {
        let t0 = ContinuousClock.now
        let rate = SendRate(perSecond: 2, now: t0)
        #expect(rate.take(now: t0) == .zero)
        #expect(rate.take(now: t0) == .zero)
        #expect(rate.take(now: t0) == .milliseconds(500))
        #expect(rate.take(now: t0) == .milliseconds(1000))
        // Two seconds later the two spoken for are paid and the bucket is full again (a second's worth at most).
        #expect(rate.take(now: t0 + .seconds(3)) == .zero)
        #expect(rate.take(now: t0 + .seconds(3)) == .zero)
        #expect(rate.take(now: t0 + .seconds(3)) == .milliseconds(500))
        let slow = SendRate(perSecond: 0.5, now: t0)
        #expect(slow.take(now: t0) == .zero)
        #expect(slow.take(now: t0) == .milliseconds(2000))
    }

    /// What may start within a horizon: the bucket's tokens, less those spoken for, and what it gains meanwhile.
    @Test func theRoomOfASendRateCountsWhatItGainsAndWhatIsSpokenFor() {
        let t0 = ContinuousClock.now
        let rate = SendRate(perSecond: 2, now: t0)
        #expect(rate.room(within: .seconds(1), now: t0) == 4)
        #expect(rate.room(within: .zero, now: t0) == 2)
        for _ in 0..<5 { _ = rate.take(now: t0) }
        #expect(rate.room(within: .seconds(1), now: t0) == 0)  // (−3 + 2)
        #expect(rate.room(within: .seconds(1), now: t0 + .seconds(2)) == 3)  // (−3 + 4, then 2 more)
        let slow = SendRate(perSecond: 0.5, now: t0)
        #expect(slow.room(within: .seconds(1), now: t0) == 1)
        _ = slow.take(now: t0)
        #expect(slow.room(within: .seconds(1), now: t0) == 0)
        #expect(slow.room(within: .seconds(1), now: t0 + .seconds(1)) == 1)
    }

    @Test func emailLinksAreSignedAndTheBodyCarriesThemAndTheHeaders() throws {
        let links = EmailLinks(destination: "mail", base: "https://b.example", secret: "s")
        let signature = links.signature("click", ["ann", "a1", "c/r", "https://shop.example/x"])
        #expect(links.verify("click", ["ann", "a1", "c/r", "https://shop.example/x"], signature: signature))
        #expect(!links.verify("click", ["ann", "a1", "c/r", "https://evil.example/x"], signature: signature))
        #expect(!links.verify("click", ["ann", "a1", "c/other", "https://shop.example/x"], signature: signature))
        #expect(!links.verify("unsubscribe", ["ann", "a1", "c/r", "https://shop.example/x"], signature: signature))
        #expect(
            !EmailLinks(destination: "mail", base: "https://b.example", secret: "t").verify(
                "click", ["ann", "a1", "c/r", "https://shop.example/x"], signature: signature))
        #expect(
            links.unsubscribe(user: "a b&c", action: "a1", rule: "c/r").hasPrefix(
                "https://b.example/v1/unsubscribe?d=mail&u=a%20b%26c&a=a1&r=c%2Fr&s="))

        var spec = Destination.Email(
            from: "hi@example.com", apiKeyVariable: "K", linkSecretVariable: "S", linksBaseURL: "https://b.example")
        spec.fromName = "Shop"
        let sender = try EmailSender(spec, destination: "mail", apiKey: "key", linkSecret: "s")
        let action =
            #"{"id":"a1","campaign":"c","rule":"r","email":{"template":"d-1","to":"ann@example.com","#
            + #""data":{"shop":"https://shop.example/x","n":1}}}"#
        let email = try #require(EmailSender.Action(json: action))
        let (body, unsubscribe) = try #require(sender.body(of: email, user: "ann"))
        let m = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let headers = m["headers"] as? [String: String]
        #expect(headers?["List-Unsubscribe"] == "<\(unsubscribe)>")
        #expect(headers?["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click")
        let p = (m["personalizations"] as? [[String: Any]])?.first
        let data = p?["dynamic_template_data"] as? [String: Any]
        #expect(
            (data?["shop"] as? String)?.hasPrefix(
                "https://b.example/v1/click?d=mail&u=ann&a=a1&r=c%2Fr&url=https%3A%2F%2Fshop.example%2Fx&s=") == true)
        #expect(data?["n"] as? Int == 1 && data?["unsubscribe_url"] as? String == unsubscribe)
        let noAddress = try #require(EmailSender.Action(json: #"{"id":"a2","email":{"template":"d-1","to":""}}"#))
        #expect(sender.body(of: noAddress, user: "ann") == nil, "no address")
    }

    /// An email destination waits while its variables are unset, and its pause names each one that is.
    @Test func aPausedEmailDestinationNamesEveryUnsetVariable() throws {
        let settings = """
            version: 1
            settings: mail
            destinations:
              - name: mail
                url: https://api.sendgrid.com
                email:
                  from: hi@example.com
                  api_key_env: MAIL_KEY
                  link_secret_env: LINK_SECRET
                  links_base_url: https://beckon.example.com
            """
        let rules = "version: 1\ncampaign: c\nrules:\n  - { id: r, on: E, do: [ email: { template: t, to: a@b.c } ] }\n"
        let loaded = RuleLoader.load(texts: [("rules.yaml", rules), ("settings.yaml", settings)])
        func missing(_ environment: [String: String]) throws -> [String] {
            let serving = try ServingRules.make(loaded, environment: environment, at: 0) { _, _ in 1 }
            return try #require(serving.destinations["mail"]).missing
        }
        #expect(try missing([:]) == ["MAIL_KEY", "LINK_SECRET"])
        #expect(try missing(["MAIL_KEY": "k"]) == ["LINK_SECRET"])
        #expect(try missing(["MAIL_KEY": "k", "LINK_SECRET": "s"]).isEmpty)
    }

    /// Another API's shape from the `body` template: the placeholders filled, `{{data}}` the merge data object
    /// (its links through the click endpoint), the user's values JSON-escaped, the path and the key's header.
    @Test func anEmailBodyTemplateIsFilledIn() throws {
        var spec = Destination.Email(
            from: "hi@example.com", apiKeyVariable: "K", linkSecretVariable: "S", linksBaseURL: "https://b.example")
        spec.bodyTemplate =
            #"{"From":"Shop <{{from}}>","To":"{{ to }}","Alias":"{{template}}","Model":"{{data}}","#
            + #""Headers":[{"Name":"List-Unsubscribe","Value":"<{{unsubscribe_url}}>"}],"Tag":"{{action_id}}","#
            + #""Subject":"{{subject}}{{from_name}}","N":2}"#
        spec.path = "/email/withTemplate"
        let sender = try EmailSender(spec, destination: "mail", apiKey: "key", linkSecret: "s")
        #expect(sender.url(of: Destination(name: "mail", url: "https://api.example")) == "https://api.example/email/withTemplate")
        let action =
            #"{"id":"a1","campaign":"c","rule":"r","email":{"template":"welcome","to":"ann\"x@example.com","#
            + #""data":{"shop":"https://shop.example/x","n":1}}}"#
        let email = try #require(EmailSender.Action(json: action))
        let (body, unsubscribe) = try #require(sender.body(of: email, user: "ann"))
        let m = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        #expect(m["From"] as? String == "Shop <hi@example.com>" && m["To"] as? String == #"ann"x@example.com"#)
        #expect(m["Alias"] as? String == "welcome" && m["Tag"] as? String == "a1" && m["Subject"] as? String == "")
        #expect(m["N"] as? Int == 2)
        #expect((m["Headers"] as? [[String: String]])?.first?["Value"] == "<\(unsubscribe)>")
        let model = try #require(m["Model"] as? [String: Any])
        #expect(model["n"] as? Int == 1 && model["unsubscribe_url"] as? String == unsubscribe)
        #expect((model["shop"] as? String)?.hasPrefix("https://b.example/v1/click?") == true)
        var sendGrid = spec
        (sendGrid.bodyTemplate, sendGrid.path) = (nil, nil)
        #expect(
            try EmailSender(sendGrid, destination: "mail", apiKey: "key", linkSecret: "s").url(
                of: Destination(name: "mail", url: "https://api.example")) == "https://api.example/v3/mail/send")
    }
}
