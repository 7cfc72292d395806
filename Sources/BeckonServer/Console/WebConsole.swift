import BeckonCore
import BeckonStore
import BeckonTools
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// The console (docs/console.md): pages under `/console` for marketers — the rules served and their live counts, a
/// user's timeline with `beckon explain`'s verdicts, a playground over `validate` and `dry-run`, and `beckon report`
/// over stored events. Signed in with an admin key; server-rendered, no script, nothing fetched from elsewhere.
package struct WebConsole: Sendable {
    let store: any ConsoleStore
    let current: CurrentRules
    let reloader: Reloader
    let adminKeys: KeyRing
    let clock: ClockMode
    let logger: Logger
    let sessions = ConsoleSessions()

    package init(
        store: any ConsoleStore, current: CurrentRules, reloader: Reloader, adminKeys: KeyRing, clock: ClockMode,
        logger: Logger
    ) {
        self.store = store
        self.current = current
        self.reloader = reloader
        self.adminKeys = adminKeys
        self.clock = clock
        self.logger = logger
    }
    /// Heavy work under way: playground runs, the console's whole-log reads, and privacy exports and forgets (at most
    /// ``maxRuns`` at once: each takes a thread for as long as it reads).
    let runs = Slots(WebConsole.maxRuns)
    /// The last audience sizes of the schedules counted for the overview: the rule set's digest, when, the sizes.
    let audienceCache = AudienceCache()
    /// How long the overview shows an audience count before counting again.
    static let audienceMs: Int64 = 60_000

    /// Heavy work at once: playground runs and reads of the whole input log (timelines, "the last N events",
    /// reports), each on a thread of its own.
    static let maxRuns = ServiceLimits.heavyWorkSlots
    /// The most of one user's events a timeline replays (the latest), and a report's events.
    static let maxUserEvents = 10_000
    static let maxReportEvents = 2_000_000
    /// Steps of a timeline shown (the latest).
    static let shownSteps = 200
    /// The longest report period, in days.
    static let maxReportDays = 92
    /// "The last N events of this user" in the playground: at most this many.
    static let maxPlaygroundEvents = 1_000
    /// Request bodies: the login form, and the playground's (form-encoded, so up to three times its texts).
    static let maxLoginBytes = 16 * 1024
    static let maxPlaygroundBytes = 4 * 1024 * 1024

    /// The pages' policy: nothing but this origin's stylesheet and forms; no script, no frames, no other origin.
    static let securityHeaders: HTTPFields = [
        .contentSecurityPolicy:
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        .xContentTypeOptions: "nosniff", HTTPField.Name("X-Frame-Options")!: "DENY",
        HTTPField.Name("Referrer-Policy")!: "no-referrer", .cacheControl: "no-store",
    ]

    func add(to router: Router<BeckonContext>) {
        router.get("/console/style.css") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/css; charset=utf-8", .xContentTypeOptions: "nosniff"],
                body: .init(byteBuffer: ByteBuffer(string: ConsoleTemplates.css)))
        }
        router.get("/console/login") { request, _ in loginPage(failed: false, status: .ok) }
        router.post("/console/login") { request, _ in await login(request) }
        router.post("/console/logout") { request, _ in
            switch await form(request, limit: Self.maxLoginBytes) {
            case .failure(let refused): return refused.response
            case .success(let (session, _)):
                sessions.end(session.id)
                logger.info("console sign-out", metadata: ["key": "\(session.key)"])
                var headers: HTTPFields = [.location: "/console/login"]
                headers.append(
                    HTTPField(name: .setCookie, value: ConsoleSessions.setCookie(ConsoleSessions.cookie, "", maxAge: 0)))
                return Response(status: .seeOther, headers: headers)
            }
        }
        router.get("/console") { request, _ in
            guard let session = signedIn(request) else { return Self.toLogin }
            return await overview(session)
        }
        router.get("/console/user") { request, _ in
            guard let session = signedIn(request) else { return Self.toLogin }
            return try await timeline(session, query: FormData(query: request.uri.query))
        }
        router.get("/console/playground") { request, _ in
            guard let session = signedIn(request) else { return Self.toLogin }
            return try await playgroundPage(session, query: FormData(query: request.uri.query))
        }
        router.post("/console/playground") { request, _ in
            switch await form(request, limit: Self.maxPlaygroundBytes) {
            case .failure(let refused): return refused.response
            case .success(let (session, fields)): return try await runPlayground(session, fields)
            }
        }
        router.get("/console/report") { request, _ in
            guard let session = signedIn(request) else { return Self.toLogin }
            return try await report(session, query: FormData(query: request.uri.query))
        }
    }

    // MARK: Sessions and forms

    static var toLogin: Response { Response(status: .seeOther, headers: [.location: "/console/login"]) }

    func signedIn(_ request: Request) -> ConsoleSessions.Session? { sessions.find(request.headers, at: Processor.nowMs()) }

    static func html(_ status: HTTPResponse.Status, _ text: String, headers: HTTPFields = [:]) -> Response {
        var h = securityHeaders
        h[.contentType] = "text/html; charset=utf-8"
        h.append(contentsOf: headers)
        return Response(status: status, headers: h, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    func message(_ status: HTTPResponse.Status, _ heading: String, _ text: String, session: ConsoleSessions.Session?) -> Response
    {
        let chrome = session.map { Chrome(signedIn: true, csrf: $0.csrf) } ?? Chrome()
        let link = session == nil ? MessagePage.Link(href: "/console/login", label: "Sign in") : nil
        return Self.html(
            status, ConsoleTemplates.render(MessagePage(chrome: chrome, heading: heading, text: text, link: link), "message"))
    }

    struct Refused: Error { var response: Response }

    /// A posted form of a signed-in session whose CSRF token is the session's, from a page of this origin.
    func form(_ request: Request, limit: Int) async -> Result<(ConsoleSessions.Session, FormData), Refused> {
        guard let session = signedIn(request) else {
            return .failure(Refused(response: message(.forbidden, "Not signed in", "Sign in to use the console.", session: nil)))
        }
        if let refused = crossSite(request, session: session) { return .failure(refused) }
        let body: ByteBuffer
        do throws(API.BodyRefusal) {
            body = try await API.collect(request, upTo: limit)
        } catch {
            return .failure(Refused(response: unread(error, limit: limit, session: session)))
        }
        let fields = FormData(body.readableBytesView)
        guard let token = fields["csrf"], KeyRing.same(Array(token.utf8), Array(session.csrf.utf8)) else {
            logger.notice("console form refused: no valid CSRF token", metadata: ["path": "\(request.uri.path)"])
            return .failure(
                Refused(
                    response: message(
                        .forbidden, "Refused",
                        "The form did not carry this session's token (cross-site request?). Reload the page and try again.",
                        session: session)))
        }
        return .success((session, fields))
    }

    /// The page for a form not read whole (``API/collect(_:upTo:encoded:)``).
    func unread(_ refusal: API.BodyRefusal, limit: Int, session: ConsoleSessions.Session?) -> Response {
        switch refusal {
        case .tooLarge: message(.contentTooLarge, "Too large", "The form is over \(limit / 1024) KiB.", session: session)
        case .unframed:
            message(.badRequest, "Not read", "The form did not come as its request said; send it again.", session: session)
        case .encoded:
            message(.unsupportedMediaType, "Not read", "The form came compressed; send it as it is.", session: session)
        }
    }

    /// A refusal when the browser says the request comes from a page of another site (`Sec-Fetch-Site` other than
    /// `same-origin` or `none`: a sibling subdomain is another site here). The token check is the main defence; this
    /// is a second, which holds behind a proxy whatever `Host` it forwards.
    func crossSite(_ request: Request, session: ConsoleSessions.Session?) -> Refused? {
        guard let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!], site != "same-origin", site != "none" else {
            return nil
        }
        logger.notice("console form refused: from another site", metadata: ["path": "\(request.uri.path)"])
        return Refused(response: message(.forbidden, "Refused", "A form of another site cannot post here.", session: session))
    }

    func loginPage(failed: Bool, status: HTTPResponse.Status) -> Response {
        let token = ConsoleSessions.token()
        let cookie = ConsoleSessions.setCookie(ConsoleSessions.loginCookie, token, path: "/console/login", maxAge: 3600)
        return Self.html(
            status, ConsoleTemplates.render(LoginPage(token: token, failed: failed), "login"),
            headers: [.setCookie: cookie])
    }

    func login(_ request: Request) async -> Response {
        if let refused = crossSite(request, session: nil) { return refused.response }
        let body: ByteBuffer
        do throws(API.BodyRefusal) {
            body = try await API.collect(request, upTo: Self.maxLoginBytes)
        } catch {
            return unread(error, limit: Self.maxLoginBytes, session: nil)
        }
        let fields = FormData(body.readableBytesView)
        guard let token = fields["csrf"], let expected = ConsoleSessions.cookie(ConsoleSessions.loginCookie, in: request.headers),
            !token.isEmpty, KeyRing.same(Array(token.utf8), Array(expected.utf8))
        else {
            logger.notice("console sign-in refused: no valid CSRF token")
            return message(.forbidden, "Refused", "The sign-in form's token did not match (cross-site request?).", session: nil)
        }
        guard let key = fields["key"], !key.isEmpty, adminKeys.contains(key) else {
            logger.notice("console sign-in refused: not an admin key")
            // (Its 401 counts against the address: CredentialThrottle.)
            return loginPage(failed: true, status: .unauthorized)
        }
        let session = sessions.create(key: LoadedRules.fingerprint(key), at: Processor.nowMs())
        logger.info("console sign-in", metadata: ["key": "\(session.key)"])
        var headers: HTTPFields = [.location: "/console"]
        headers.append(
            HTTPField(
                name: .setCookie,
                value: ConsoleSessions.setCookie(ConsoleSessions.cookie, session.id, maxAge: ConsoleSessions.lifetimeMs / 1000)))
        headers.append(
            HTTPField(
                name: .setCookie,
                value: ConsoleSessions.setCookie(ConsoleSessions.loginCookie, "", path: "/console/login", maxAge: 0)))
        return Response(status: .seeOther, headers: headers)
    }

    // MARK: Overview

    func overview(_ session: ConsoleSessions.Session) async -> Response {
        let rules = current.value
        let now = Processor.nowMs()
        let activity = await store.activity(at: now)
        var page = OverviewPage(chrome: Chrome(signedIn: true, csrf: session.csrf, overview: true))
        page.loadedAt = Timestamp(milliseconds: rules.loaded.loadedAt).description
        page.digest = String(rules.digest.prefix(16))
        page.ruleCount = rules.ruleSet.rules.count
        page.unitCount = rules.loaded.units.count
        page.files = rules.loaded.files.map { .init(path: $0.path, sha: String($0.sha256.prefix(16)), bytes: $0.bytes) }
        if let r = reloader.lastRefused.value {
            page.refused = .init(
                at: Timestamp(milliseconds: r.at).description, by: r.by, message: r.refused.message,
                diagnostics: r.refused.diagnostics)
        }
        page.rules = rules.ruleSet.rules.map { rule in
            let s = RuleActivity.summary(activity[rule.qualifiedID] ?? [:], at: now)
            return OverviewPage.RuleRow(
                id: rule.qualifiedID, anchor: Self.anchor(rule.qualifiedID), hour: .init(s.hour), day: .init(s.day),
                chart: Self.chart(triggered: s.triggeredByHour, fired: s.firedByHour))
        }
        let schedules = rules.ruleSet.schedules
        if !schedules.isEmpty {
            let (sizes, at) = await audiences(of: rules, now: now)
            page.reachAt = Timestamp(milliseconds: at).description
            page.broadcasts = schedules.map { r in
                OverviewPage.Broadcast(
                    id: r.qualifiedID,
                    schedule: { if case .schedule(let s) = r.trigger { s.description } else { r.triggerDescription } }(),
                    reach: sizes.map { Self.reach($0[r.qualifiedID]) } ?? "not counted now (other heavy work is under way)")
            }
        }
        return Self.html(.ok, ConsoleTemplates.render(page, "overview"))
    }

    // MARK: Audiences

    /// "20 of 30 stored users".
    static func reach(_ size: AudienceSize?) -> String {
        guard let size else { return "-" }
        return "\(size.users) of \(size.stored) stored users"
            + (size.undecodable > 0 ? " (\(size.undecodable) states did not decode)" : "")
    }

    /// The audience sizes of `rules`' schedules by qualified id and when they were counted: the last count if it is of
    /// this rule set and under ``audienceMs`` old, else a new one in a heavy-work slot (`nil`: no slot free).
    func audiences(of rules: ServingRules, now: Int64) async -> ([String: AudienceSize]?, Int64) {
        if let last = audienceCache.value.withLock({ $0 }), last.digest == rules.digest, now - last.at < Self.audienceMs {
            return (last.sizes, last.at)
        }
        guard runs.take() else { return (nil, now) }
        defer { runs.give() }
        do {
            let counted = try await audiences(of: rules.ruleSet.schedules, in: rules.ruleSet, now: now)
            let sizes = Dictionary(counted.map { ($0.rule.qualifiedID, $0.size) }, uniquingKeysWith: { a, _ in a })
            audienceCache.value.withLock { $0 = (rules.digest, now, sizes) }
            return (sizes, now)
        } catch {
            logger.warning("the stored users could not be read for the audiences", metadata: ["error": "\(error)"])
            return (nil, now)
        }
    }

    /// `rules`' audiences in `ruleSet` at `now`, counted over the store's states in one pass (``AudienceCount``),
    /// stopped at `deadline` when there is one.
    func audiences(
        of rules: [CompiledRule], in ruleSet: CompiledRuleSet, now: Int64, deadline: ContinuousClock.Instant? = nil
    ) async throws -> [AudienceCounter] {
        let store = store
        let counters = rules.map { rule in
            var c = AudienceCounter(ruleSet: ruleSet, rule: rule, now: now)
            c.deadline = deadline
            return c
        }
        return try await AudienceCount.count(counters) { try await store.storedStates(after: $0, limit: $1) }
    }

    /// An id made of letters, digits and `-` (for an element id).
    static func anchor(_ s: String) -> String {
        String(s.unicodeScalars.map { $0.properties.isAlphabetic || ("0"..."9").contains($0) ? Character($0) : "-" })
    }

    /// Bars per hour, oldest first: trigger matches light, fires dark over them. Numbers only (no text of anyone's).
    static func chart(triggered: [Int], fired: [Int]) -> String {
        let top = max(1, triggered.max() ?? 0, fired.max() ?? 0)
        let (w, h) = (6, 30)
        var bars = ""
        func bar(_ x: Int, _ n: Int, _ color: String) {
            guard n > 0 else { return }
            let height = Double(n) / Double(top) * Double(h)
            bars +=
                "<rect x=\"\(x)\" y=\"\(String(format: "%.1f", Double(h) - height))\" width=\"\(w - 1)\" height=\"\(String(format: "%.1f", height))\" fill=\"\(color)\"/>"
        }
        for i in triggered.indices {
            bar(i * w, triggered[i], "#93c5fd")
            bar(i * w, fired[i], "#1d4ed8")
        }
        let label =
            "Per hour over the last 24 hours, oldest first. Triggered: \(triggered.map(String.init).joined(separator: ", ")). Fired: \(fired.map(String.init).joined(separator: ", "))."
        return
            "<svg class=\"chart\" width=\"\(w * 24)\" height=\"\(h + 1)\" role=\"img\" aria-label=\"\(label)\"><line x1=\"0\" y1=\"\(h)\" x2=\"\(w * 24)\" y2=\"\(h)\" stroke=\"#64748b\"/>\(bars)</svg>"
    }

    // MARK: Timeline

    /// The latest (at most `limit`) events of `user` in the input log, decoded as the service decoded them, and how
    /// many there are; with `lines`, each also as a line `dry-run` reads the same (``replayLine(_:json:)``).
    ///
    /// Each event comes with the service's clock when it was processed, when that clock had moved since the user's
    /// previous event (`clocks`, by event): a replay lets time pass to it first, so that what came due for the user
    /// before a late event had come due before it there too (docs/events.md#events-out-of-time-order).
    func events(
        of user: String, limit: Int, lines wanted: Bool
    ) throws -> (
        events: [BoundEvent], clocks: [Int64?], lines: [String], total: Int
    ) {
        var events: [BoundEvent] = []
        var clocks: [Int64?] = []
        var lines: [String] = []
        var total = 0
        var clock = Int64.min
        var passed = Int64.min
        func trim(to n: Int) {
            guard events.count > n else { return }
            events.removeFirst(events.count - n)
            clocks.removeFirst(clocks.count - n)
            if wanted { lines.removeFirst(lines.count - n) }
        }
        try Self.eachStoredEvent(store, naming: user, current.value.decoder, tick: { clock = max(clock, $0) }) { e, json in
            guard e.userID == user else { return }
            total += 1
            events.append(e)
            clocks.append(clock > passed ? clock : nil)
            passed = max(passed, clock)
            if wanted { lines.append(Self.replayLine(e, json: json)) }
            if events.count > 2 * limit { trim(to: limit) }
        }
        trim(to: limit)
        return (events, clocks, lines, total)
    }

    /// A stored event as a line that reads back as the event the service processed: its `type` and `timestamp` as
    /// decoded (an event posted to `/v1/track` may have no `type`; the time may have been corrected by `sentAt`, or
    /// be the arrival time), without the fields that corrected it.
    static func replayLine(_ e: BoundEvent, json: ArraySlice<UInt8>) -> String {
        guard case .map(let m)? = try? JSONValue.parse(String(decoding: json, as: UTF8.self)) else {
            return String(decoding: json, as: UTF8.self)
        }
        let dropped: Set<String> = ["type", "timestamp", "originalTimestamp", "sentAt", "receivedAt"]
        var out = ValueMap([
            ("type", .string(e.kind.description)), ("timestamp", .string(Timestamp(milliseconds: e.timestamp).description)),
        ])
        for (k, v) in m.entries {
            guard case .string(let name) = k, !dropped.contains(name) else { continue }
            out[string: name] = v
        }
        return JSONWriter.encode(.map(out))
    }

    /// Each event of the input log in order, decoded as the service decoded it (`decoder`: the rules served), with
    /// its JSON as it arrived. Records or events that do not decode are passed over.
    static func eachStoredEvent(
        _ store: any ConsoleStore, naming user: String? = nil, _ decoder: SegmentDecoder, tick: ((Int64) -> Void)? = nil,
        _ body: (BoundEvent, ArraySlice<UInt8>) throws -> Void
    ) throws {
        let arrivals = tick != nil && !store.logsTicks
        try store.eachRecord(naming: user) { bytes in
            try InputLog.events(in: bytes, decoder: decoder, tick: tick, arrivals: arrivals, body)
        }
    }

    func timeline(_ session: ConsoleSessions.Session, query: FormData) async throws -> Response {
        var page = UserPage(chrome: Chrome(signedIn: true, csrf: session.csrf, user: true))
        // (An id with U+0000 is no user's: none can be stored, and the database would read the id cut there.)
        guard let user = query["id"]?.trimmingCharacters(in: .whitespaces), !user.isEmpty,
            SegmentDecoder.idProblem(user) == nil
        else {
            return Self.html(.ok, ConsoleTemplates.render(page, "user"))
        }
        page.query = user
        let state: UserState?
        do {
            state = try await store.state(of: user)
        } catch {
            return message(.serviceUnavailable, "Not now", "The service is stopping; try again.", session: session)
        }
        let rules = current.value
        let until = clock == .wall ? Processor.nowMs() : nil
        let console = self
        guard
            let (trace, total) = try await heavy({
                let found = try console.events(of: user, limit: Self.maxUserEvents, lines: false)
                return (
                    ExplainRunner.timeline(
                        ruleSet: rules.ruleSet, events: found.events, clocks: found.clocks, user: user, until: until),
                    found.total
                )
            })
        else { return busy(session) }
        var found = UserPage.Found(id: user, known: state != nil)
        if let state {
            found.attributes = state.attributes.map { .init(name: $0.name, value: JSONWriter.encode($0.value)) }
            found.pending = state.pending.map {
                .init(rule: $0.rule, due: Timestamp(milliseconds: $0.due).description, held: $0.held)
            }
            found.inbox = state.inbox.map {
                .init(
                    message: $0.message, rule: $0.rule, created: Timestamp(milliseconds: $0.createdAt).description, read: $0.read)
            }
            found.mergedInto = state.mergedInto.map {
                .init(id: $0, url: $0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            }
        }
        found.eventCount = total
        let steps = trace.steps.suffix(Self.shownSteps)
        found.earlier = trace.steps.count > steps.count ? trace.steps.count - steps.count : nil
        found.steps = steps.map {
            .init(
                kind: $0.isEvent ? "event" : "time", time: Timestamp(milliseconds: $0.time).description, title: $0.title,
                text: $0.lines.map { $0.hasPrefix("  ") ? String($0.dropFirst(2)) : $0 }.joined(separator: "\n"))
        }
        found.pendingText = trace.pending.isEmpty ? nil : trace.pending.joined(separator: "\n")
        page.found = found
        return Self.html(.ok, ConsoleTemplates.render(page, "user"))
    }

    // MARK: Playground

    func playgroundPage(_ session: ConsoleSessions.Session, query: FormData) async throws -> Response {
        let files = current.value.files
        let path = query["file"].flatMap { p in files.contains { $0.path == p } ? p : nil } ?? files.first?.path ?? "rules.yaml"
        var page = PlaygroundPage(chrome: Chrome(signedIn: true, csrf: session.csrf, playground: true))
        page.files = files.map { .init(path: $0.path, selected: $0.path == path) }
        page.path = path
        page.rules = files.first { $0.path == path }?.text ?? ""
        if let user = query["user"], !user.isEmpty, SegmentDecoder.idProblem(user) == nil {
            let n = min(max(Int(query["n"] ?? "") ?? 50, 1), Self.maxPlaygroundEvents)
            page.user = user
            page.n = n
            let console = self
            guard let lines = try await heavy({ try console.events(of: user, limit: n, lines: true).lines }) else {
                return busy(session)
            }
            page.events = lines.joined(separator: "\n")
        }
        return Self.html(.ok, ConsoleTemplates.render(page, "playground"))
    }

    func runPlayground(_ session: ConsoleSessions.Session, _ fields: FormData) async throws -> Response {
        let files = current.value.files
        var page = PlaygroundPage(chrome: Chrome(signedIn: true, csrf: session.csrf, playground: true))
        let path = fields["path"].map { $0.isEmpty ? "playground.yaml" : $0 } ?? "playground.yaml"
        page.path = path
        page.files = files.map { .init(path: $0.path, selected: $0.path == path) }
        page.rules = fields["rules"] ?? ""
        page.events = fields["events"] ?? ""
        page.until = fields["until"] ?? ""
        guard runs.take() else {
            return message(
                .serviceUnavailable, "Busy", "Other playground runs are under way; try again in a moment.", session: session)
        }
        defer { runs.give() }
        let (rules, events, until) = (page.rules, page.events, page.until)
        let result = try await Blocking.run {
            Playground.run(files: files, path: path, edited: rules, events: events, until: until.isEmpty ? nil : until)
        }
        page.result = .init(result)
        // An edited schedule: who it would reach now among the stored users (one pass for the file's schedules).
        if let edited = result.ruleSet {
            let schedules = edited.schedules.filter { $0.location.file == path }
            if !schedules.isEmpty {
                // (Within the playground's time, as its events are: a costly condition over many users stops there.)
                let ms = Playground.Limits().runMilliseconds
                let counted = try? await audiences(
                    of: schedules, in: edited, now: Processor.nowMs(), deadline: .now + .milliseconds(ms))
                page.reach =
                    counted?.map { c in
                        c.stopped
                            ? "\(c.rule.qualifiedID): stopped counting over the playground's \(ms) ms, after \(c.size.stored) "
                                + "stored users (\(c.size.users) of them reached)"
                            : "\(c.rule.qualifiedID): this edit would reach \(Self.reach(c.size)) now"
                    }
                    ?? ["The stored users could not be read now; run it again."]
            }
        }
        return Self.html(.ok, ConsoleTemplates.render(page, "playground"))
    }

    /// Runs `body` on a thread of its own if fewer than ``maxRuns`` such jobs are under way (`nil`: too many).
    func heavy<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T? {
        guard runs.take() else { return nil }
        defer { runs.give() }
        return try await Blocking.run(body)
    }

    func busy(_ session: ConsoleSessions.Session) -> Response {
        message(.serviceUnavailable, "Busy", "Other heavy pages are being made; try again in a moment.", session: session)
    }

    // MARK: Report

    func report(_ session: ConsoleSessions.Session, query: FormData) async throws -> Response {
        var page = ReportPage(chrome: Chrome(signedIn: true, csrf: session.csrf, report: true))
        let now = Processor.nowMs()
        let today = now / Milliseconds.day * Milliseconds.day
        let to = query["to"].flatMap(Self.day) ?? today
        let from = query["from"].flatMap(Self.day) ?? (to - 6 * Milliseconds.day)
        page.from = Self.dayText(from)
        page.to = Self.dayText(to)
        if query["from"].map({ Self.day($0) == nil }) == true || query["to"].map({ Self.day($0) == nil }) == true {
            page.error = "A day is written YYYY-MM-DD."
        } else if to < from {
            page.error = "The period ends before it starts."
        } else if (to - from) / Milliseconds.day + 1 > Int64(Self.maxReportDays) {
            page.error = "A report covers at most \(Self.maxReportDays) days."
        }
        guard page.error == nil else { return Self.html(.badRequest, ConsoleTemplates.render(page, "report")) }
        let rules = current.value
        let end = min(to + Milliseconds.day, max(now, from))
        let (store, first, last) = (store, page.from, page.to)
        let made: Result<String, ReportTooLarge>?
        do {
            made = try await heavy({
                var count = 0
                let html = try ReportRunner.body(
                    ruleSet: rules.ruleSet, source: "the rules served (digest \(rules.digest.prefix(12)))",
                    eventsName: "the stored events of \(first) to \(last)", end: end
                ) { feed in
                    try Self.eachStoredEvent(store, rules.decoder) { e, _ in
                        guard e.timestamp >= from, e.timestamp < to + Milliseconds.day else { return }
                        count += 1
                        guard count <= Self.maxReportEvents else { throw ReportTooLarge() }
                        feed(e)
                    }
                }
                return .success(html)
            })
        } catch is ReportTooLarge {
            made = .failure(ReportTooLarge())
        }
        switch made {
        case nil: return busy(session)
        case .failure?: page.error = "The period holds over \(Self.maxReportEvents) events; choose a shorter one."
        case .success(let html)?: page.body = html
        }
        return Self.html(.ok, ConsoleTemplates.render(page, "report"))
    }

    struct ReportTooLarge: Error {}

    /// Midnight UTC of a `YYYY-MM-DD` day, in milliseconds.
    static func day(_ text: String) -> Int64? {
        let parts = text.split(separator: "-")
        guard parts.count == 3, parts[0].count == 4, let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
            (1...12).contains(m), (1...31).contains(d)
        else { return nil }
        var c = DateComponents()
        (c.year, c.month, c.day) = (y, m, d)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: c), calendar.component(.day, from: date) == d else { return nil }
        return Int64(date.timeIntervalSince1970 * 1000)
    }

    static func dayText(_ ms: Int64) -> String { String(Timestamp(milliseconds: ms).description.prefix(10)) }
}

/// At most `count` holders at once.
final class Slots: Sendable {
    private let used = Mutex(0)
    let count: Int
    init(_ count: Int) { self.count = count }

    /// Takes a slot if one is free.
    func take() -> Bool {
        used.withLock { n in
            guard n < count else { return false }
            n += 1
            return true
        }
    }
    func give() { used.withLock { $0 -= 1 } }
}

/// The overview's last count of the schedules' audiences: of which rule set (its digest), when, and the sizes.
final class AudienceCache: Sendable {
    let value = Mutex<(digest: String, at: Int64, sizes: [String: AudienceSize])?>(nil)
}
