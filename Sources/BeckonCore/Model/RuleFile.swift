import Foundation

/// A value with the place in a file it came from.
public struct Located<T: Sendable>: Sendable {
    public var value: T
    public var location: SourceLocation
    public init(_ value: T, _ location: SourceLocation) {
        self.value = value
        self.location = location
    }
}

/// Expression text and where it sits in a scalar of a file (so problems point inside the expression).
public struct ExpressionSource: Sendable {
    public var text: String
    public var scalar: ScalarNode
    /// Offset of `text` within the scalar's text (non-zero inside `${…}`).
    public var offset: Int

    public init(text: String, scalar: ScalarNode, offset: Int = 0) {
        self.text = text
        self.scalar = scalar
        self.offset = offset
    }

    public func location(of span: SourceSpan) -> SourceLocation {
        scalar.location(of: SourceSpan(span.start + offset, span.end + offset))
    }

    public var location: SourceLocation { location(of: SourceSpan(0, max(1, text.unicodeScalars.count))) }
}

/// Text with `${expression}` parts.
public struct TemplateSource: Sendable {
    public enum Part: Sendable {
        case text(String)
        case expression(ExpressionSource)
    }
    public var parts: [Part]
    public var location: SourceLocation

    /// The text when it has no expressions.
    public var literal: String? {
        if parts.isEmpty { return "" }
        if parts.count == 1, case .text(let s) = parts[0] { return s }
        return nil
    }
}

/// A value in an action: a literal, a template, or a list or map of them.
public indirect enum ValueSource: Sendable {
    case literal(Value)
    /// A whole scalar `${expr}` keeps the expression's type; mixed text makes a string.
    case template(TemplateSource)
    case list([ValueSource])
    case map([(key: String, value: ValueSource)])
}

public enum UnitKind: String, Sendable {
    case campaign, ruleset
}

/// One campaign or rule-set file, as written.
public struct RuleFileSpec: Sendable {
    public var path: String
    public var kind: UnitKind
    public var name: Located<String>
    public var description: String?
    public var enabled: Bool
    public var start: Located<Timestamp>?
    public var end: Located<Timestamp>?
    public var audience: ExpressionSource?
    public var segments: [(name: Located<String>, expression: ExpressionSource)]
    public var defaultPriority: Int?
    public var defaultLimits: LimitSpec
    public var defaultQuietHours: QuietHoursSpec?
    /// The zone of `start` and `end` when they have no offset: a fixed zone, or each user's own.
    public var timezone: Located<ZoneSpec>?
    public var rules: [RuleSpec]
    public var goals: [GoalSpec] = []
    public var flows: [FlowSpec] = []
    /// `conversion_values:`, as written (their rules are in ``rules``, made by the parser).
    public var conversionValues: [ConversionValueSpec] = []
    /// The share of users (0 ≤ share < 1) held back as a control group.
    public var holdout: Located<Double>? = nil
    /// `variants:` of the whole file (empty: none).
    public var variants: [VariantSpec] = []
    /// Analysis warnings not reported for any rule of the file.
    public var silence: [Located<String>] = []
}

/// A zone named in a file: an IANA zone or offset, or `user` (each user's own zone).
public enum ZoneSpec: Sendable, Hashable {
    case fixed(Zone)
    case user
}

/// `quiet_hours: { from: "22:00", to: "08:00", then: hold }`, in the user's zone.
public struct QuietHoursSpec: Sendable, Hashable {
    /// Minutes after local midnight.
    public var from: Int
    public var to: Int
    public var hold: Bool
    public var location: SourceLocation

    /// Whether a local minute-of-day falls in the window (which may wrap past midnight).
    public func contains(minute m: Int) -> Bool {
        from <= to ? (m >= from && m < to) : (m >= from || m < to)
    }

    public static func == (a: QuietHoursSpec, b: QuietHoursSpec) -> Bool { a.from == b.from && a.to == b.to && a.hold == b.hold }
    public func hash(into h: inout Hasher) {
        h.combine(from)
        h.combine(to)
        h.combine(hold)
    }
}

/// `at: "10:00"`, `at: "weekday 10:00"`, `at: "monday 09:30"`: the next such local time.
public struct AtSpec: Sendable, Hashable {
    /// Minutes after local midnight.
    public var minute: Int
    /// Allowed weekdays, 0 = Sunday; empty means every day.
    public var days: Set<Int>
    public var text: String

    /// Parses `[next] [day|weekday|weekend|monday…sunday] HH:MM`.
    public static func parse(_ text: String) -> AtSpec? {
        var words = text.lowercased().split(separator: " ").map(String.init)
        if words.first == "next" { words.removeFirst() }
        guard let time = words.popLast(), words.count <= 1 else { return nil }
        let hm = time.split(separator: ":")
        guard hm.count == 2, let h = Int(hm[0]), let m = Int(hm[1]), (0...23).contains(h), (0...59).contains(m), hm[1].count == 2
        else { return nil }
        var days = Set<Int>()
        if let w = words.first {
            let names = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
            switch w {
            case "day", "daily": break
            case "weekday": days = [1, 2, 3, 4, 5]
            case "weekend": days = [0, 6]
            default:
                guard let d = names.firstIndex(of: w) ?? names.firstIndex(where: { $0.hasPrefix(w) && w.count >= 3 }) else {
                    return nil
                }
                days = [d]
            }
        }
        return AtSpec(minute: h * 60 + m, days: days, text: text)
    }

    /// The day words a time may follow.
    static let dayWords = [
        "day", "daily", "weekday", "weekend", "sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    ]

    /// What a time that does not parse probably meant: each word that is not a day word or the time replaced by the
    /// nearest day word, an `at` left out (`every fryday at 10:00` → `every friday 10:00`); `nil` when that does not
    /// parse either. `keep` are leading words kept as they are (`every`, `next`).
    static func nearest(_ text: String, keeping keep: Set<String>) -> String? {
        var words: [String] = []
        for w in text.split(separator: " ").map(String.init) {
            let lower = w.lowercased()
            if lower == "at" { continue }
            if keep.contains(lower) || lower.contains(":") || dayWords.contains(lower) {
                words.append(w)
            } else if let near = Suggest.nearest(lower, in: dayWords) {
                words.append(near)
            } else {
                return nil
            }
        }
        let fixed = words.joined(separator: " ")
        guard fixed != text, parse(words.filter { !keep.contains($0.lowercased()) }.joined(separator: " ")) != nil else {
            return nil
        }
        return fixed
    }

    /// The first instant at or after `ms` (UTC) whose local time in `zone` is this time on an allowed day.
    public func next(atOrAfter ms: Int64, zone: Zone) -> Int64 {
        let (secs, _) = Civil.floorDivMod(ms, 1000)
        let local = zone.local(fromUTC: secs)
        var (day, _) = Civil.floorDivMod(local, 86_400)
        for _ in 0..<15 {
            if days.isEmpty || days.contains(Civil.weekday(fromDays: day)) {
                let candidate = zone.utc(fromLocal: day * 86_400 + Int64(minute) * 60) * 1000
                if candidate >= ms { return candidate }
            }
            day += 1
        }
        return ms
    }
}

/// An event that cancels a pending delayed action: `unless: Stamp Claimed`, or with a condition.
public struct UnlessSpec: Sendable {
    public var event: Located<String>
    public var whereClause: ExpressionSource?
}

/// One step of a sequence trigger.
public struct StepSpec: Sendable {
    public var event: Located<String>
    public var whereClause: ExpressionSource?
}

/// What a new trigger does while the rule already has a pending delayed action for the user.
public enum RetriggerPolicy: String, Sendable { case keep, restart, add }

/// `reprompt: { after: EVENT, when: {property: value}, wait: 14d, times: 3 }`.
public struct RepromptSpec: Sendable {
    public var after: Located<String>
    public var when: [(key: String, value: Value)]
    public var waitMs: Int64
    /// Most re-prompts in all (`nil`: no cap).
    public var times: Int?
    public var location: SourceLocation
}

public enum TriggerSpec: Sendable {
    case events([Located<String>])
    case screens([Located<String>])
    case change(attribute: Located<String>, from: [Located<Value>]?, to: [Located<Value>]?)
    /// Steps in order, the last within `withinMs` of the first, optionally with equal `correlate` property values.
    case sequence(steps: [StepSpec], withinMs: Int64, correlate: Located<String>?)
    /// `inactive_for: 7d`: once the user has had no activity (track, screen or page events) for that long.
    case inactive(Located<Int64>)
    /// `schedule: "monday 10:00"` (every such local time) or `schedule: 2026-03-05T10:00:00Z` (once), for each user.
    case schedule(Located<ScheduleSpec>)
}

/// When a scheduled rule runs for each user: once at an instant, or at every matching local time in the user's zone.
public enum ScheduleSpec: Sendable, Hashable {
    case once(Int64)
    case every(AtSpec)

    /// Parses an RFC 3339 instant, or `[every] [day|weekday|weekend|monday…sunday] HH:MM`.
    public static func parse(_ text: String) -> ScheduleSpec? {
        if let t = Timestamp.parse(text) { return .once(t.milliseconds) }
        var words = text.split(separator: " ").map(String.init)
        if words.first?.lowercased() == "every" { words.removeFirst() }
        return AtSpec.parse(words.joined(separator: " ")).map { .every($0) }
    }

    /// What a schedule that does not parse probably meant (``AtSpec/nearest(_:keeping:)``), as a suggestion.
    public static func suggestion(for text: String) -> String? {
        AtSpec.nearest(text, keeping: ["every"]).map { "did you mean '\($0)'?" }
    }

    /// The first run at or after `ms` for a user in `zone` (`nil`: a one-off already past).
    public func next(atOrAfter ms: Int64, zone: Zone) -> Int64? {
        switch self {
        case .once(let t): t >= ms ? t : nil
        case .every(let at): at.next(atOrAfter: ms, zone: zone)
        }
    }

    public var description: String {
        switch self {
        case .once(let t): Timestamp(milliseconds: t).description
        case .every(let at): "every " + at.text
        }
    }
}

public struct LimitSpec: Sendable {
    public var perUser: Located<Int>?
    public var perSession: Located<Int>?
    /// Rolling windows (each a ``LimitKind`` with a ``LimitKind/window``) and their most fires, in the order written.
    public var rolling: [(kind: LimitKind, max: Located<Int>)] = []
    /// Milliseconds.
    public var cooldown: Located<Int64>?
    public var onOccurrence: Located<Int>?
    public var everyOccurrence: Located<Int>?

    public init() {}

    public var isEmpty: Bool {
        perUser == nil && perSession == nil && rolling.isEmpty && cooldown == nil && onOccurrence == nil
            && everyOccurrence == nil
    }

    /// These limits, with any key this one lacks taken from `defaults`.
    public func merged(over defaults: LimitSpec) -> LimitSpec {
        var m = self
        m.perUser = perUser ?? defaults.perUser
        m.perSession = perSession ?? defaults.perSession
        m.cooldown = cooldown ?? defaults.cooldown
        m.onOccurrence = onOccurrence ?? defaults.onOccurrence
        m.everyOccurrence = everyOccurrence ?? defaults.everyOccurrence
        for d in defaults.rolling where !rolling.contains(where: { $0.kind == d.kind }) { m.rolling.append(d) }
        return m
    }
}

public struct RuleSpec: Sendable {
    public var id: Located<String>
    public var description: String?
    public var enabled: Bool
    public var trigger: TriggerSpec
    public var whereClause: ExpressionSource?
    public var ifClause: ExpressionSource?
    public var limits: LimitSpec
    public var priority: Located<Int>?
    public var actions: [Located<ActionSpec>]
    public var location: SourceLocation
    /// Delay between trigger and action.
    public var waitMs: Located<Int64>? = nil
    public var at: Located<AtSpec>? = nil
    public var unless: [UnlessSpec] = []
    public var retrigger: RetriggerPolicy = .keep
    /// Re-evaluate `audience` and `if` when a delayed action comes due.
    public var recheck = false
    public var quietHours: QuietHoursSpec? = nil
    /// `quiet_hours: none`: not the file's default quiet hours.
    public var quietHoursOff = false
    public var reprompt: RepromptSpec? = nil
    /// Analysis warnings not reported for this rule.
    public var silence: [Located<String>] = []
    /// The rule's own A/B test (empty: none).
    public var variants: [VariantSpec] = []
    /// A message the user asked for (an order confirmation): neither held by nor counted toward `global_limit` and
    /// `channel_limits`.
    public var transactional = false
    /// `rate: 10000/min`: a schedule's runs fire for at most this many users per window.
    public var rate: Located<SendRate>? = nil
}

/// A schedule's send rate (`rate: 10000/min`): at most `count` users' runs fire in each window of `perMs`, the
/// windows aligned to the epoch in UTC; the runs beyond it wait for the next window (docs/time.md).
public struct SendRate: Sendable, Hashable, CustomStringConvertible {
    public var count: Int
    public var perMs: Int64

    /// The units a rate is written in, with their windows.
    static let units: [(names: [String], ms: Int64)] = [
        (["s", "sec", "second"], 1_000), (["min", "minute"], 60_000), (["h", "hour"], 3_600_000),
        (["d", "day"], 86_400_000),
    ]

    /// `N/UNIT` (`10000/min`, `50/s`, `100000/h`, `1000000/day`); `nil` when it is not one.
    public static func parse(_ text: String) -> SendRate? {
        let parts = text.replacingOccurrences(of: " ", with: "").replacingOccurrences(of: "_", with: "")
            .split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let n = Int(parts[0]), n >= 1,
            let unit = units.first(where: { $0.names.contains(parts[1].lowercased()) })
        else { return nil }
        return SendRate(count: n, perMs: unit.ms)
    }

    public var description: String {
        "\(count)/" + (Self.units.first { $0.ms == perMs }?.names[1] ?? "\(perMs)ms")
    }
}

/// One arm of an A/B test (a file's or a rule's `variants:`).
public struct VariantSpec: Sendable {
    public var id: Located<String>
    /// Percent, as written (the weights of a test should add up to 100; they are used as shares of their sum).
    public var weight: Located<Double>
    public var control: Bool
    /// A rule's variant's own actions (`nil`: the rule's).
    public var actions: [Located<ActionSpec>]?
    public var location: SourceLocation
}

public enum ActionSpec: Sendable {
    case message(MessageSpec)
    case screen(id: TemplateSource, params: [(key: String, value: ValueSource)])
    case deepLink(TemplateSource)
    case notify(NotifySpec)
    case push(PushSpec)
    case email(EmailSpec)
    case markRead(TemplateSource)
    case prompt(String)
    case emit(event: String, payload: [(key: String, value: ValueSource)])
    case set([(attribute: Located<String>, value: ValueSource)])
    case unset([Located<String>])
    /// `flow: { start | resume | complete: FLOW, step: … }`.
    case flow(FlowActionSpec)

    public var kind: ActionKind {
        switch self {
        case .message: .message
        case .screen: .screen
        case .deepLink: .deepLink
        case .notify: .notify
        case .push: .push
        case .email: .email
        case .markRead: .markRead
        case .prompt: .prompt
        case .emit: .emit
        case .set: .set
        case .unset: .unset
        case .flow: .flow
        }
    }
}

public struct FlowActionSpec: Sendable {
    public enum Verb: String, Sendable { case start, resume, complete }
    public var verb: Verb
    /// The flow's id (may be a `${…}` template).
    public var flow: TemplateSource
    /// With `complete`: the step that was completed.
    public var step: TemplateSource?
}

public struct MessageSpec: Sendable {
    public var surface: String
    public var template: String?
    public var title: TemplateSource?
    public var body: TemplateSource?
    public var image: TemplateSource?
    public var buttons: [ButtonSpec]
    public var data: [(key: String, value: ValueSource)]
}

public struct ButtonSpec: Sendable {
    public var label: TemplateSource
    public var deepLink: TemplateSource?
    public var action: TemplateSource?
}

public struct NotifySpec: Sendable {
    public var id: TemplateSource?
    public var sender: TemplateSource?
    public var message: TemplateSource
    public var link: TemplateSource?
    public var data: [(key: String, value: ValueSource)]
}

/// A push notification, for the service (or a destination) to send to the user's devices.
public struct PushSpec: Sendable {
    public var title: TemplateSource?
    public var body: TemplateSource
    public var deepLink: TemplateSource?
    public var image: TemplateSource?
    public var data: [(key: String, value: ValueSource)]
    /// A device token or push address; when given and empty at fire time, the push is `skipped`.
    public var to: TemplateSource?
}

/// An email, rendered by the sender's template with the merge data.
public struct EmailSpec: Sendable {
    public var template: TemplateSource
    /// The address; empty at fire time, the email is `skipped` with the reason.
    public var to: TemplateSource
    public var subject: TemplateSource?
    public var data: [(key: String, value: ValueSource)]
}

/// A settings file, as written.
public struct SettingsSpec: Sendable {
    public var path: String
    public var name: Located<String>
    public var sessionStartEvents: [Located<String>] = []
    public var sessionTimeoutMs: Int64?
    public var globalLimits: LimitSpec = LimitSpec()
    public var globalLimitsLocation: SourceLocation?
    /// `channel_limits:` caps across all rules per channel (``ActionKind/channels``), windowed kinds only.
    public var channelLimits: [(channel: Located<ActionKind>, limits: LimitSpec)] = []
    public var dedupWindowMs: Int64?
    public var clockSkewMs: Int64?
    /// The URL schemes deep links may use, when declared.
    public var deepLinkSchemes: [Located<String>]?
    public var destinations: [Destination] = []
}

/// A server endpoint that a service (`beckon serve`) sends fired actions to, from a durable outbox: at least once, with
/// the action's id as the `Idempotency-Key` header, retried with exponential backoff and jitter, then dead-lettered
/// (settings' `destinations:`; docs/operations.md). The engine itself sends nothing: this is configuration it carries.
public struct Destination: Sendable, Hashable {
    public enum Body: String, Sendable, CaseIterable {
        /// The action's JSON object, as a pull returns it.
        case action
        /// An `emit`'s payload object alone (what a conversions API takes).
        case payload
    }

    public var name: String
    public var url: String
    /// `POST`, `PUT` or `PATCH`.
    public var method: String = "POST"
    /// Headers sent as written.
    public var headers: [Header] = []
    /// Headers whose values a service reads from its environment when it loads the rules (secrets stay out of YAML).
    public var secretHeaders: [Header] = []
    /// The action kinds sent here.
    public var kinds: [String] = [ActionKind.emit.rawValue]
    /// For `emit`: the emitted event names sent here (`nil`: all).
    public var events: [String]?
    public var body: Body = .action
    /// When set, the body is sent as `{"ENVELOPE": [BODY]}` (Meta's Conversions API takes `{"data": [event]}`).
    public var envelope: String?
    public var timeoutMs: Int64 = 10_000
    /// Attempts before an action is dead.
    public var maxAttempts: Int = 10
    /// The delay before the first retry; each later one doubles it, up to ``maxBackoffMs``.
    public var backoffMs: Int64 = 1_000
    public var maxBackoffMs: Int64 = 3_600_000
    /// The most requests a second this service sends here (`nil`: no limit), as a token bucket a second deep: a push
    /// counts one request per device.
    public var ratePerSecond: Double?

    /// A header: its name and value (for a secret header, the environment variable that holds the value).
    public struct Header: Sendable, Hashable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Set when the destination is Apple's push service (docs/push.md): `url` is its host, and pushes go to each of
    /// the user's iOS devices with a provider token made from this key.
    public var apns: APNs?

    /// How Beckon speaks to APNs: the app's topic and the key it signs provider tokens with.
    public struct APNs: Sendable, Hashable {
        /// `apns-topic`: the app's bundle id.
        public var topic: String
        public var teamID: String
        public var keyID: String
        /// The `.p8` key's path (resolved against the file that names it), or the environment variable that holds its
        /// PEM text (while it is unset the destination is paused, as for secret headers).
        public var keyFile: String?
        public var keyVariable: String?
        /// `apns-push-type`, `apns-priority`; `apns-expiration` as seconds from the fire (`nil`: APNs stores it once).
        public var pushType: String = "alert"
        public var priority: Int = 10
        public var expirationSeconds: Int64?
        /// A PEM file of the certificates to trust for `url` instead of the system's (a private or test host).
        public var caFile: String?

        public init(topic: String, teamID: String, keyID: String) {
            self.topic = topic
            self.teamID = teamID
            self.keyID = keyID
        }
    }

    /// Set when the destination is Firebase Cloud Messaging (docs/push.md): `url` is its host, and pushes go to each
    /// of the user's Android devices with an access token of the service account's.
    public var fcm: FCM?

    /// How Beckon speaks to FCM's HTTP v1 API: the service account (its key file, from the Firebase console) and the
    /// project.
    public struct FCM: Sendable, Hashable {
        /// The service account's JSON key file (resolved against the file that names it), or the environment variable
        /// holding its text (while it is unset the destination is paused).
        public var serviceAccountFile: String?
        public var serviceAccountVariable: String?
        /// The Firebase project; `nil`: the service account's `project_id`.
        public var projectID: String?
        /// A PEM file of the certificates to trust for `url` and the token endpoint instead of the system's.
        public var caFile: String?
        public init() {}
    }

    /// Set when the destination is an email API (docs/push.md, "Email"): `url` is its host; emails are sent in
    /// SendGrid's v3 Mail Send shape with an unsubscribe link and click tracking through signed links of this service.
    public var email: Email?

    public struct Email: Sendable, Hashable {
        /// The sender's address and name.
        public var from: String
        public var fromName: String?
        /// The environment variable holding the API key (sent as a bearer token); unset: paused.
        public var apiKeyVariable: String
        /// The environment variable holding the secret the unsubscribe and click links are signed with; unset: paused.
        public var linkSecretVariable: String
        /// This service's address as recipients reach it (`https://beckon.example.com`): links point there.
        public var linksBaseURL: String
        /// Whether `http(s)://` values of the merge data go through the click endpoint.
        public var trackClicks = true
        /// A PEM file of the certificates to trust for `url` instead of the system's.
        public var caFile: String?
        /// Another API's shape (``bodyTemplate``): the JSON body as written, with `{{name}}` placeholders
        /// (``bodyPlaceholders``) in its strings; `nil`: SendGrid's v3 Mail Send.
        public var bodyTemplate: String?
        /// The path after `url` the email is posted to (SendGrid's shape: `/v3/mail/send`).
        public var path: String?
        /// The header the API key goes in as it is (`X-Postmark-Server-Token`); `nil`: `Authorization: Bearer KEY`.
        public var apiKeyHeader: String?
        /// The names a ``bodyTemplate`` may use: each is the email's, and `data` (a whole value) its merge data.
        public static let bodyPlaceholders = [
            "to", "from", "from_name", "subject", "template", "unsubscribe_url", "action_id", "data",
        ]

        /// A ``bodyTemplate`` text's parts in order: text as written, and `{{ name }}` placeholders by their trimmed
        /// names; `nil` when a `{{` has no `}}`. The one reading of a placeholder, for the check when the rules load
        /// and the filling in when an email is sent.
        public static func parts(of text: String) -> [(text: Substring, placeholder: String?)]? {
            var out: [(text: Substring, placeholder: String?)] = []
            var rest = Substring(text)
            while let open = rest.range(of: "{{") {
                guard let close = rest[open.upperBound...].range(of: "}}") else { return nil }
                if open.lowerBound > rest.startIndex { out.append((rest[..<open.lowerBound], nil)) }
                out.append(("", rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces)))
                rest = rest[close.upperBound...]
            }
            if !rest.isEmpty { out.append((rest, nil)) }
            return out
        }

        /// Whether a template text is the merge data placeholder alone (`"{{data}}"`, which stands for the object).
        public static func isData(_ text: String) -> Bool { text.trimmingCharacters(in: .whitespaces) == "{{data}}" }
        public init(from: String, apiKeyVariable: String, linkSecretVariable: String, linksBaseURL: String) {
            self.from = from
            self.apiKeyVariable = apiKeyVariable
            self.linkSecretVariable = linkSecretVariable
            self.linksBaseURL = linksBaseURL
        }
    }

    public init(name: String, url: String) {
        self.name = name
        self.url = url
    }

    /// Whether an action of `kind` (emitting `event`, for an `emit`) goes here.
    public func takes(kind: String, event: String?) -> Bool {
        guard kinds.contains(kind) else { return false }
        guard kind == ActionKind.emit.rawValue, let events else { return true }
        return event.map(events.contains) ?? false
    }
}

/// A parsed file of any kind.
public enum ParsedFile: Sendable {
    case rules(RuleFileSpec)
    case settings(SettingsSpec)
    case trackingPlan(TrackingPlanSpec)
    case tests(TestSuiteSpec)
}

/// The kind of value a tracking plan declares for a property or trait.
public enum PlanType: String, Sendable, CaseIterable {
    case string, int, number, bool, timestamp, object, list, any
}

/// A property of an event, or a trait, in a tracking plan.
public struct PlanField: Sendable {
    public var name: Located<String>
    public var type: PlanType
    /// The only values it takes, when the plan lists them.
    public var values: [Value]?
    public var description: String?
}

/// An app's tracking plan: the events it sends with their properties, and the traits of its users.
public struct TrackingPlanSpec: Sendable {
    public var path: String
    public var name: Located<String>
    public var events: [(name: Located<String>, properties: [PlanField], description: String?)]
    public var screens: [Located<String>]
    public var traits: [PlanField]
}

/// A goal: an event (optionally with a condition) within a window after a user is exposed to the file's rules.
public struct GoalSpec: Sendable {
    public var id: Located<String>
    public var description: String?
    public var event: Located<String>
    public var whereClause: ExpressionSource?
    public var withinMs: Located<Int64>
    /// The rule whose first fire exposes the user (default: any rule of the file).
    public var exposure: Located<String>?
    /// A numeric property of the goal event summed per user (revenue).
    public var value: Located<String>? = nil
}

/// SKAdNetwork-style conversion values: per user, the highest value of the table's events seen within a window from
/// the first `startsOn`; an update goes out only when the value rises (``FileParser/conversionRules(_:)``).
public struct ConversionValueSpec: Sendable {
    public struct Row: Sendable {
        public var event: Located<String>
        public var value: Located<Int>
        public var whereClause: ExpressionSource?
    }
    public var id: Located<String>
    public var description: String?
    public var startsOn: Located<String>
    public var windowMs: Located<Int64>
    public var values: [Row]
    public var emit: Located<String>
}

/// A versioned multi-step flow (an onboarding): each step a screen, with progress, skips and migrations.
public struct FlowSpec: Sendable {
    public var id: Located<String>
    public var version: Located<Int>
    public var description: String?
    /// Params added to every step's screen (`theme: dark`).
    public var params: [(key: String, value: ValueSource)]
    public var steps: [FlowStepSpec]
    /// A screen shown once the last step is completed.
    public var finish: Located<String>?
    public var migrations: [FlowMigrationSpec]
    public var location: SourceLocation
}

public struct FlowStepSpec: Sendable {
    public var id: Located<String>
    /// The step is left out (and not counted) when this holds.
    public var skipIf: ExpressionSource?
    /// `false`: from this step on, the screens disallow going back.
    public var back: Bool
    public var params: [(key: String, value: ValueSource)]
}

/// How a user whose flow state is from an older version is placed in this one.
public struct FlowMigrationSpec: Sendable {
    public var from: Located<Int>
    /// Old step id → new step id.
    public var steps: [(old: String, new: Located<String>)]
    /// The new step for old steps the table does not name (default: the first step).
    public var otherwise: Located<String>?
}
