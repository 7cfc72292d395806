import BeckonCommands
import BeckonCore
import BeckonTools
import BeckonYAML
import Foundation
import Testing

/// The shipped rule sets for the user's seed documents: each validates clean, and each sample stream produces
/// exactly the golden action sequence (Snapshots/samples/APP/NAME.jsonl). Targeted checks below state the
/// seeds' requirements directly.
struct SeedRuleSetTests {
    static let root = Snapshot.testsDirectory.deletingLastPathComponent().deletingLastPathComponent()
    static let apps = [
        "bossup": "rules/bossup", "stampbook": "rules/stampbook", "firefox": "campaigns/firefox", "ops": "rules/ops",
    ]

    static var samples: [String] {
        apps.keys.sorted().flatMap { app -> [String] in
            let dir = root.appendingPathComponent("samples/\(app)")
            let files = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
            return files.filter { $0.hasSuffix(".jsonl") }.sorted().map { "\(app)/\($0)" }
        }
    }

    static func run(_ sample: String) -> (Int32, StringConsole) {
        let app = String(sample.split(separator: "/")[0])
        let console = StringConsole()
        let status = DryRunRunner.run(
            .init(
                paths: [root.appendingPathComponent(apps[app]!).path],
                events: root.appendingPathComponent("samples/\(sample)").path,
                format: .jsonl),
            console: console)
        return (status, console)
    }

    static func actions(_ sample: String) -> [[String: Any]] {
        run(sample).1.stdout.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    @Test(arguments: apps.values.sorted())
    func ruleSetValidatesClean(_ path: String) {
        let console = StringConsole()
        #expect(
            ValidateRunner.run(paths: [Self.root.appendingPathComponent(path).path], console: console) == 0, "\(console.stderr)")
        #expect(console.stdout.contains(": 0 errors, 0 warnings"))
    }

    @Test func everyAppHasSamples() {
        for app in Self.apps.keys { #expect(Self.samples.contains { $0.hasPrefix(app + "/") }, "no samples for \(app)") }
    }

    @Test(arguments: samples)
    func sampleProducesTheGoldenActions(_ sample: String) {
        let (status, console) = Self.run(sample)
        #expect(status == 0, "\(console.stderr)")
        Snapshot.assert(console.stdout, named: "samples/" + sample)
    }

    // MARK: BossUp (seeds 000 and 001)

    /// The onboarding's actions as `kind:name`, without attribute updates and without the SKAdNetwork rule set's
    /// (tested on its own below).
    func kinds(_ a: [[String: Any]]) -> [String] {
        a.filter { $0["ruleset"] as? String != "bossup_skadnetwork" }
            .map { ($0["action"] as! String) + ":" + (($0["screen"] ?? $0["event"] ?? $0["permission"] ?? "") as! String) }
            .filter { !$0.hasPrefix("set:") }
    }

    /// Seed 000: "If user opens app → registers → purchases, Facebook only sees fb_mobile_purchase (priority 63)":
    /// each rise within 24 h of install is reported, the purchase's 63 last, nothing lower after it, nothing after
    /// the window.
    @Test func bossupSKAdNetworkReportsTheHighestPriorityLast() {
        let updates = Self.actions("bossup/skadnetwork.jsonl").filter { $0["event"] as? String == "SKAdNetworkConversionValue" }
        let values = updates.map { (($0["userId"] as! String), ($0["payload"] as! [String: Any])["conversion_value"] as! Int) }
        #expect(values.map(\.0) == ["ivy", "ivy", "ivy"], "kim's purchase came 25 h after install")
        #expect(values.map(\.1) == [20, 50, 63])
    }

    @Test func bossupIOSFacebookFlow() {
        let a = Self.actions("bossup/ios_facebook_email.jsonl")
        #expect(
            kinds(a) == [
                "screen:tracking_onboarding", "prompt:att", "emit:AppInstall", "screen:email_input",
                "screen:email_confirmation", "screen:main", "emit:AppLaunch",
            ])
        let install = a.first { $0["event"] as? String == "AppInstall" }?["payload"] as? [String: Any]
        #expect(install?["advertiser_tracking_enabled"] as? Bool == true)
        #expect(install?["application_tracking_enabled"] as? Bool == true)
        #expect(install?["fbclid"] as? String == "IwAR123")
        // SHA-256 of the trimmed, lower-cased email from the link (" Ana.Diaz@Example.com").
        #expect(
            (install?["user_data"] as? [String: Any])?["em"] as? String
                == "f20701eb47dc7dd0ae3fc7c104ed51625daf2a90bbeb365752df95a73817c1fb")
        #expect((install?["custom_data"] as? [String: Any])?["utm_campaign"] as? String == "install_q4")
        let email = a.first { $0["screen"] as? String == "email_input" }?["params"] as? [String: Any]
        #expect(email?["email"] as? String == "Ana.Diaz@Example.com")
    }

    @Test func bossupDenialSendsConsentFalseAndReprompts() {
        let a = Self.actions("bossup/ios_facebook_denied_reprompt.jsonl")
        let installs = a.filter { $0["event"] as? String == "AppInstall" }
        #expect(installs.count == 1)
        #expect((installs[0]["payload"] as? [String: Any])?["advertiser_tracking_enabled"] as? Bool == false)
        let tracking = a.filter { $0["screen"] as? String == "tracking_onboarding" }.map { $0["time"] as! String }
        // First launch, then 14 days after the denial (not at 8 days, not 4 days after the second denial).
        #expect(tracking == ["2026-03-02T10:00:01Z", "2026-03-16T10:00:18Z"])
        #expect(kinds(a).contains("screen:welcome"))
    }

    @Test func bossupAndroidSendsAtOnceWithoutTrackingScreen() {
        let k = kinds(Self.actions("bossup/android_facebook_email.jsonl"))
        #expect(k.prefix(2) == ["emit:AppInstall", "screen:email_input"])
        #expect(!k.contains("screen:tracking_onboarding"))
    }

    @Test func bossupOrganicSendsNothingToFacebook() {
        let k = kinds(Self.actions("bossup/organic.jsonl"))
        #expect(k == ["screen:welcome", "screen:email_confirmation", "screen:main"])
    }

    @Test func bossupOneAppInstallWhateverArrivesTwice() {
        #expect(Self.actions("bossup/duplicates.jsonl").filter { $0["event"] as? String == "AppInstall" }.count == 1)
    }

    // MARK: Stampbook (seed 002)

    @Test func stampbookWelcomeOnceAndReadState() {
        let a = Self.actions("stampbook/claim_before_opening.jsonl")
        #expect(a.map { $0["action"] as! String } == ["notify", "push", "mark_read"])
        let n = a[0]["notification"] as? [String: Any]
        #expect(n?["sender"] as? String == "Stampbook Team")
        #expect(n?["message"] as? String == "Welcome! Claim your first stamp")
        #expect(a[0]["unread"] as? Int == 1 && a[2]["unread"] as? Int == 0)
        // The welcome also goes as a push, with the same deep link (sent to the user's devices by `beckon serve`).
        let push = a[1]["push"] as? [String: Any]
        #expect(push?["title"] as? String == "Welcome to Stampbook")
        #expect(push?["deep_link"] as? String == n?["link"] as? String)
    }

    @Test func stampbookDeclaresTheSeedsGoals() throws {
        let r = RuleLoader.load(paths: [Self.root.appendingPathComponent("rules/stampbook").path])
        let goals = try #require(r.ruleSet?.units.first?.goals)
        #expect(
            goals.map(\.id) == ["claimed_welcome_within_24h", "claimed_welcome_within_7d", "first_stamp_claimed", "bell_tapped"])
        #expect(goals.map(\.withinMs) == [86_400_000, 604_800_000, 2_592_000_000, 604_800_000])
    }

    // MARK: Firefox MMA (seed 003)

    @Test func firefoxHintsUseDifferentTriggerKinds() throws {
        let rs = try #require(RuleLoader.load(paths: [Self.root.appendingPathComponent("campaigns/firefox").path]).ruleSet)
        var kinds = Set<String>()
        for r in rs.rules {
            switch r.trigger {
            case .events: kinds.insert(r.timing.isDelayed ? "delayed" : (r.limits.tracksOccurrences ? "occurrence" : "event"))
            case .change: kinds.insert("change")
            case .sequence: kinds.insert("sequence")
            case .inactive: kinds.insert("inactive")
            case .schedule: kinds.insert("schedule")
            }
        }
        #expect(rs.rules.count >= 4)
        #expect(kinds.count >= 4, "\(kinds)")
    }

    @Test func firefoxDefaultBrowserAtMostWeeklyAndNeverAfterAccepted() {
        let a = Self.actions("firefox/default_browser.jsonl")
        #expect(a.map { $0["userId"] as! String } == ["alice", "alice"])
        #expect(a.map { $0["time"] as! String } == ["2026-03-05T19:00:00Z", "2026-03-12T19:00:00Z"])
    }

    // MARK: OPS (seed 004)

    func screens(_ sample: String) -> [(String, [String: Any])] {
        Self.actions(sample).compactMap { a in (a["screen"] as? String).map { ($0, a["params"] as? [String: Any] ?? [:]) } }
    }

    @Test func opsEmployeeSixStepsLightTheme() {
        let s = screens("ops/employee.jsonl").filter { $0.1["flow"] != nil && $0.1["step"] != nil }
        #expect(
            s.map(\.0) == ["account_setup", "organization_join", "user_details", "company_code", "permissions", "field_setup"])
        #expect(s.map { $0.1["step"] as! Int } == [1, 2, 3, 4, 5, 6])
        #expect(s.allSatisfy { $0.1["total"] as? Int == 6 && $0.1["theme"] as? String == "light" })
        // No going back once the account exists.
        #expect(s.map { $0.1["back"] as! Bool } == [true, false, false, false, false, false])
    }

    @Test func opsOwnerElevenStepsDarkTheme() {
        let s = screens("ops/company_owner.jsonl").filter { $0.1["step"] != nil }
        #expect(s.count == 11)
        #expect(s.allSatisfy { $0.1["total"] as? Int == 11 && $0.1["theme"] as? String == "dark" })
        #expect(s.last?.0 == "field_setup")
    }

    @Test func opsEmployeeWithCompanySkipsTheCode() {
        let s = screens("ops/employee_with_company.jsonl").filter { $0.1["step"] != nil }
        #expect(!s.map(\.0).contains("company_code"))
        #expect(s.allSatisfy { $0.1["total"] as? Int == 5 })
        #expect(s.map { $0.1["step"] as! Int } == [1, 2, 3, 4, 5])
    }

    @Test func opsReopeningResumesAtTheFirstUnfinishedStep() {
        let s = screens("ops/resume.jsonl")
        let resumed = s.firstIndex { $0.0 == "company_basic_info" }.map { s[$0...] }
        #expect(resumed?.prefix(2).map(\.0) == ["company_basic_info", "company_basic_info"])
    }

    @Test func opsDeniedPermissionLeadsToSettings() {
        let m = Self.actions("ops/employee.jsonl").first { $0["action"] as? String == "message" }?["message"] as? [String: Any]
        let buttons = m?["buttons"] as? [[String: Any]]
        #expect(buttons?.first?["deep_link"] as? String == "app-settings:")
    }

    @Test func opsVersionOneUsersAreMigrated() {
        let s = screens("ops/migration_v1.jsonl")
        #expect(s.first?.0 == "user_details")  // phoneNumber → user_details
        #expect(s.first?.1["step"] as? Int == 3)
        #expect(s.last?.0 == "account_setup")  // an unknown old step starts over
    }
}
