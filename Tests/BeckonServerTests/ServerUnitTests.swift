import BeckonCore
import BeckonStore
import BeckonYAML
import Foundation
import JWTKit
import Testing

@testable import BeckonServer

struct IngestTests {
    let decoder: SegmentDecoder

    init() throws {
        let loaded = RuleLoader.load(texts: [
            (
                "r.yaml",
                "version: 1\ncampaign: c\nrules:\n  - id: r\n    on: Opened\n    do: [{ message: { surface: launch, title: Hi } }]\n"
            )
        ])
        decoder = SegmentDecoder(ruleSet: try #require(loaded.ruleSet))
    }

    func events(_ body: String, kind: Event.Kind? = nil) throws(Ingest.Problem) -> ([BoundEvent], [LoggedEvent]) {
        try Ingest.events(Array(body.utf8), kind: kind, now: 1_000_000, clock: .wall, decoder: decoder)
    }

    @Test func aBatchIsDecodedInOrderWithWhatTheLogKeeps() throws {
        let body =
            #"{"batch":[{"type":"track","event":"Opened","userId":"a","messageId":"m1"},{"type":"identify","userId":"b","traits":{"x":1}}]}"#
        let (e, logged) = try events(body)
        #expect(e.map(\.userID) == ["a", "b"])
        #expect(e.map(\.timestamp) == [1_000_000, 1_000_000])
        #expect(logged.map(\.messageID) == ["m1", nil])
        #expect(String(decoding: logged[1].body, as: UTF8.self) == #"{"type":"identify","userId":"b","traits":{"x":1}}"#)
    }

    @Test func theEndpointGivesTheType() throws {
        let (e, _) = try events(#"{"event":"Opened","userId":"a"}"#, kind: .track)
        #expect(e[0].kind == .track)
    }

    @Test func aProblemNamesTheEventAndWhy() {
        #expect {
            try events(#"{"batch":[{"type":"track","event":"Opened","userId":"a"},{"type":"track","event":"Opened"}]}"#)
        } throws: { error in
            let p = error as! Ingest.Problem
            return p.event == 1 && p.message.contains("userId") && p.json.contains(#""event":1"#)
        }
    }

    @Test func anEventOverTheLimitIsRefused() {
        let big = String(repeating: "x", count: Ingest.maxEventBytes)
        #expect {
            try events(#"{"batch":[{"type":"track","event":"Opened","userId":"a","properties":{"p":"\#(big)"}}]}"#)
        } throws: { error in
            (error as! Ingest.Problem).message.contains("limit is \(Ingest.maxEventBytes)")
        }
    }
}

struct AuthTests {
    let keys = WriteKeys(keys: ["wk1", "wk2"])

    func basic(_ s: String) -> String { "Basic " + Data(s.utf8).base64EncodedString() }

    @Test func writeKeysAreTheUserNameWithAnEmptyPassword() {
        #expect(keys.allows(basic("wk1:")))
        #expect(keys.allows(basic("wk2")))
        #expect(keys.allows("basic " + Data("wk1:".utf8).base64EncodedString()))
        #expect(!keys.allows(basic("wk3:")))
        #expect(!keys.allows(basic("wk1:password")))
        #expect(!keys.allows(basic(":")))
        #expect(!keys.allows("Bearer wk1"))
        #expect(!keys.allows("Basic !!!"))
        #expect(!keys.allows(nil))
    }

    @Test func aUserTokenProvesOneUser() async throws {
        let secret = String(repeating: "s", count: 32)
        let auth = await UserAuth(secret: secret)
        let signer = JWTKeyCollection()
        await signer.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        let token = try await signer.sign(UserToken(sub: "amy", exp: .init(value: Date().addingTimeInterval(60))))
        try await auth.check("Bearer " + token, user: "amy")
        await #expect(throws: UserAuth.Failure.otherUser) { try await auth.check("Bearer " + token, user: "bo") }
        await #expect(throws: UserAuth.Failure.missing) { try await auth.check(nil, user: "amy") }
        let expired = try await signer.sign(UserToken(sub: "amy", exp: .init(value: Date().addingTimeInterval(-60))))
        await #expect(throws: UserAuth.Failure.invalid) { try await auth.check("Bearer " + expired, user: "amy") }
        let other = JWTKeyCollection()
        await other.add(hmac: HMACKey(from: String(repeating: "t", count: 32)), digestAlgorithm: .sha256)
        let forged = try await other.sign(UserToken(sub: "amy", exp: nil))
        await #expect(throws: UserAuth.Failure.invalid) { try await auth.check("Bearer " + forged, user: "amy") }
    }
}

struct ActionFeedTests {
    @Test func aWaitEndsWhenTheUserGetsActions() async {
        let feed = ActionFeed()
        let seen = feed.version(of: "u")
        let start = ContinuousClock.now
        async let waited: Void = feed.wait(for: "u", seen: seen, seconds: 20)
        try? await Task.sleep(for: .milliseconds(50))
        feed.notify(["u"])
        await waited
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    @Test func aWaitAfterANotificationReturnsAtOnceAndOtherwiseTimesOut() async {
        let feed = ActionFeed()
        let seen = feed.version(of: "u")
        feed.notify(["u"])
        let start = ContinuousClock.now
        await feed.wait(for: "u", seen: seen, seconds: 20)
        #expect(ContinuousClock.now - start < .seconds(10))
        await feed.wait(for: "v", seen: feed.version(of: "v"), seconds: 0.1)
        #expect(ContinuousClock.now - start >= .milliseconds(100))
    }
}
