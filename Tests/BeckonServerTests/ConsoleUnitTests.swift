import BeckonCore
import Foundation
import HTTPTypes
import Testing

@testable import BeckonServer

/// The console's parts that need no server: sessions, forms, live counts, templates (the pages themselves are tested
/// in a browser by Tests/Service/console_test.py).
struct ConsoleUnitTests {
    @Test func formsDecodeAsBrowsersEncode() {
        let f = FormData(Array("a=1+2%2B3&b=%3Cscript%3E&a=second&c&d=%ZZ%4".utf8))
        #expect(f["a"] == "1 2+3")
        #expect(f["b"] == "<script>")
        #expect(f["c"] == "")
        #expect(f["d"] == "%ZZ%4")
        #expect(FormData(query: "id=caf%C3%A9")["id"] == "café")
    }

    @Test func sessionsEndWhenIdleOrOld() {
        let sessions = ConsoleSessions()
        let s = sessions.create(key: "k", at: 0)
        #expect(s.id.count == 64 && s.csrf.count == 64 && s.id != s.csrf)
        var headers: HTTPFields = [.cookie: "other=1; __Secure-beckon_session=\(s.id)"]
        #expect(sessions.find(headers, at: ConsoleSessions.idleMs - 1)?.id == s.id)
        // Used a moment ago: alive until idle from then; never past its lifetime.
        #expect(sessions.find(headers, at: 2 * ConsoleSessions.idleMs - 2)?.id == s.id)
        #expect(sessions.find(headers, at: ConsoleSessions.lifetimeMs) == nil)
        let t = sessions.create(key: "k", at: 0)
        headers = [.cookie: "__Secure-beckon_session=\(t.id)"]
        #expect(sessions.find(headers, at: ConsoleSessions.idleMs) == nil)
        headers = [.cookie: "__Secure-beckon_session=\(t.id)x"]
        #expect(sessions.find(headers, at: 1) == nil)
    }

    @Test func sessionsAreBounded() {
        let sessions = ConsoleSessions()
        let first = sessions.create(key: "k", at: 0)
        for i in 1...ConsoleSessions.maxSessions { _ = sessions.create(key: "k", at: Int64(i)) }
        #expect(sessions.count == ConsoleSessions.maxSessions)
        #expect(sessions.find([.cookie: "__Secure-beckon_session=\(first.id)"], at: 10) == nil)
    }

    @Test func cookiesAreSecureHttpOnlyStrict() {
        let c = ConsoleSessions.setCookie("__Secure-beckon_session", "v", maxAge: 60)
        #expect(c == "__Secure-beckon_session=v; Path=/console; Max-Age=60; Secure; HttpOnly; SameSite=Strict")
    }

    @Test func liveCountsAddWhatTheEngineGained() {
        let activity = RuleActivity()
        var stats = Engine.Stats()
        (stats.triggered, stats.fired, stats.scheduled, stats.heldBack) = ([5, 0], [2, 0], [0, 0], [1, 0])
        stats.blocked = [["limit:per_day": 2], [:]]
        // What a new engine holds already (a replay) is not new.
        activity.restart(from: stats)
        let hour: Int64 = 3_600_000
        let now = 1000 * Milliseconds.day
        (stats.triggered[0], stats.fired[0]) = (8, 3)
        stats.blocked[0]["limit:per_day"] = 4
        activity.add(activity.take(stats, names: ["a/r", "a/s"]), at: now - 2 * hour)
        (stats.triggered[0], stats.fired[0]) = (9, 4)
        // A gain taken but never added (its group was not written) is not counted, nor taken again.
        _ = activity.take(stats, names: ["a/r", "a/s"])
        (stats.triggered[0], stats.fired[0]) = (10, 5)
        activity.add(activity.take(stats, names: ["a/r", "a/s"]), at: now - 60_000)
        let s = activity.summary(of: "a/r", at: now)
        #expect(s.hour.triggered == 1 && s.hour.fired == 1 && s.hour.blocked.isEmpty)
        #expect(s.day.triggered == 4 && s.day.fired == 2 && s.day.blocked == ["limit:per_day": 2])
        #expect(s.firedByHour.reduce(0, +) == 2 && s.firedByHour[23] == 1)
        #expect(activity.summary(of: "a/s", at: now).day == RuleActivity.Counts())
        // A day later nothing of it is counted.
        #expect(activity.summary(of: "a/r", at: now + Milliseconds.day).day == RuleActivity.Counts())
    }

    /// Pushes and emails are counted by rule in the live counts too, and said in one order.
    @Test func messageCountsJoinTheLiveCounts() {
        let activity = RuleActivity()
        let now = 1000 * Milliseconds.day
        activity.add(["a/r": RuleActivity.Counts(messages: ["sent": 2, "delivered": 1])], at: now - 60_000)
        activity.add(["a/r": RuleActivity.Counts(messages: ["sent": 1, "token_removed": 1])], at: now - 30_000)
        let day = activity.summary(of: "a/r", at: now).day
        #expect(day.messages == ["sent": 3, "delivered": 1, "token_removed": 1] && day.fired == 0)
        #expect(MessageCounts.describe(day.messages) == "sent 3, delivered 1, token removed 1")
        #expect(MessageCounts.describe(["clicked": 2, "unsubscribed": 0, "later": 1]) == "clicked 2, later 1")
        #expect(MessageCounts.describe([:]) == "-")
    }

    @Test func templatesEscapeEveryValue() {
        var page = UserPage(chrome: Chrome(signedIn: true, csrf: "t\"><x"))
        var found = UserPage.Found(id: "<script>alert(1)</script>", known: true)
        found.attributes = [.init(name: "a\"b", value: "\"><img src=x onerror=alert(1)>")]
        found.steps = [.init(kind: "event", time: "t", title: "<b>", text: "</pre><script>")]
        page.found = found
        let html = ConsoleTemplates.render(page, "user")
        #expect(!html.contains("<script>") && !html.contains("<img") && !html.contains("<b>"))
        #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(html.contains("value=\"t&quot;&gt;&lt;x\""))
    }

    @Test func reportDaysAreUTCDates() {
        #expect(WebConsole.day("2026-03-01") == 1_772_323_200_000)
        #expect(WebConsole.day("2026-02-30") == nil)
        #expect(WebConsole.day("2026-3-1x") == nil)
        #expect(WebConsole.dayText(1_772_323_200_000) == "2026-03-01")
    }
}
