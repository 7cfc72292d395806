/// The shape of Beckon's YAML: every key, what it holds, and what it means.
///
/// One declaration serves the loader (unknown keys, wrong types, "did you mean"), `beckon schema`
/// (JSON Schema for editors) and the generated key reference in docs/reference/dsl.md.
public final class ObjectSchema: Sendable {
    public let name: String
    public let doc: String
    public let keys: [KeySchema]

    public init(_ name: String, doc: String, keys: [KeySchema]) {
        self.name = name
        self.doc = doc
        self.keys = keys
    }

    public func key(_ name: String) -> KeySchema? { keys.first { $0.name == name } }
}

/// One key of an object.
public struct KeySchema: Sendable {
    public let name: String
    public let type: ValueSchema
    public let required: Bool
    public let doc: String
    public let example: String?

    public init(_ name: String, _ type: ValueSchema, required: Bool = false, doc: String, example: String? = nil) {
        self.name = name
        self.type = type
        self.required = required
        self.doc = doc
        self.example = example
    }
}

/// What a key's value may be.
public indirect enum ValueSchema: Sendable {
    case text
    /// snake_case: `^[a-z][a-z0-9_]*$`.
    case identifier
    case integer(min: Int)
    case boolean
    /// `7d`, `24h`, `30m`, `90s`, `500ms`, `2w`, or combinations like `1h30m`.
    case duration
    /// RFC 3339, e.g. `2026-01-01T00:00:00Z`.
    case timestamp
    /// An IANA zone (`Europe/Berlin`) or an offset (`+02:00`).
    case zone
    /// A CEL expression.
    case expression
    /// Text in which `${expression}` parts are replaced when the action fires.
    case template
    /// Any YAML value; strings may hold `${expression}`.
    case anyValue
    /// A name from an app's tracking plan (free text: `Application Opened`).
    case eventName
    case attributeName
    case enumeration([String])
    /// Either one value or a list of them.
    case oneOrMany(ValueSchema)
    case list(ValueSchema)
    case object(ObjectSchema)
    /// A map with keys chosen by the author (segment names, attribute names, params).
    case map(key: ValueSchema, value: ValueSchema)
    /// A map with exactly one key, which picks the variant (actions: `- message: {…}`).
    case variant([KeySchema])
    /// Any of these forms (a screen is a route id or `{id, params}`).
    case either([ValueSchema])

    /// A short name for messages: "a duration like 7d".
    public var expectation: String {
        switch self {
        case .text: "a string"
        case .identifier: "a snake_case name like welcome_nudge"
        case .integer(let min): min <= 0 ? "a whole number" : "a whole number of at least \(min)"
        case .boolean: "true or false"
        case .duration: "a duration like 7d, 24h or 30m"
        case .timestamp: "a timestamp like 2026-01-01T00:00:00Z"
        case .zone: "a time zone like Europe/Berlin, +02:00 or user"
        case .expression: "an expression"
        case .template: "text"
        case .anyValue: "a value"
        case .eventName: "an event name"
        case .attributeName: "an attribute name"
        case .enumeration(let xs): "one of " + xs.map { "'\($0)'" }.joined(separator: ", ")
        case .oneOrMany(let v): v.expectation + " or a list of them"
        case .list(.variant): "a list of actions"
        case .list(.object(let o)): "a list of \(o.name)s"
        case .list(let v): "a list of " + v.expectation.replacingPrefix("a ", with: "")
        case .object(let o): "a map (\(o.name))"
        case .map: "a map"
        case .variant(let ks): "one of " + ks.map { "'\($0.name)'" }.joined(separator: ", ")
        case .either(let vs): vs.map(\.expectation).joined(separator: " or ")
        }
    }
}

extension String {
    func replacingPrefix(_ p: String, with r: String) -> String { hasPrefix(p) ? r + dropFirst(p.count) : self }
    func replacingSuffix(_ p: String, with r: String) -> String { hasSuffix(p) ? dropLast(p.count) + r : self }
}

/// The DSL, version 1.
public enum DSL {
    public static let windowDoc = """
        a rolling window (`30m`, `24h`, `7d`, `2w`), `lifetime`, or a calendar window in the user's time zone \
        (`calendar day`, `calendar week`, `calendar month`: the current one so far; `7 calendar days`: today and the 6 days \
        before)
        """

    public static let limits = ObjectSchema(
        "limit",
        doc: """
            How often a rule may fire for one user. Every limit is exact at any count. Rolling windows count the \
            fires in the span that ends now; `per_month` spans one calendar month back in the user's time zone. \
            Calendar limits count the fires since the current day, week (from Monday) or month began in the user's \
            time zone, as Braze's frequency caps do: `per_calendar_day: 1` allows one at 23:00 and another at 00:30.
            """,
        keys: [
            KeySchema("per_user", .integer(min: 1), doc: "at most this many fires per user, ever", example: "3"),
            KeySchema("per_session", .integer(min: 1), doc: "at most this many fires per session", example: "1"),
            KeySchema("per_minute", .integer(min: 1), doc: "at most this many fires in any rolling minute"),
            KeySchema("per_hour", .integer(min: 1), doc: "at most this many fires in any rolling hour"),
            KeySchema("per_day", .integer(min: 1), doc: "at most this many fires in any rolling 24 hours", example: "1"),
            KeySchema("per_week", .integer(min: 1), doc: "at most this many fires in any rolling 7 days"),
            KeySchema("per_month", .integer(min: 1), doc: "at most this many fires in any rolling calendar month (user's zone)"),
            KeySchema(
                "per_calendar_day", .integer(min: 1),
                doc: "at most this many fires per calendar day, midnight to midnight in the user's zone", example: "1"),
            KeySchema(
                "per_calendar_week", .integer(min: 1),
                doc: "at most this many fires per calendar week, from Monday 00:00 in the user's zone"),
            KeySchema(
                "per_calendar_month", .integer(min: 1),
                doc: "at most this many fires per calendar month, from the 1st at 00:00 in the user's zone"),
            KeySchema("cooldown", .duration, doc: "least time between two fires", example: "7d"),
            KeySchema(
                "on_occurrence", .integer(min: 1),
                doc: """
                    fire only on the Nth occurrence of the trigger (the Nth event that matched `on` and `where`, \
                    counted whether or not it fired)
                    """, example: "3"),
            KeySchema(
                "every_occurrence", .integer(min: 1),
                doc: """
                    fire only on every Nth occurrence of the trigger (N, 2N, 3N…; counted whether or not it fired)
                    """, example: "5"),
        ])

    static let button = ObjectSchema(
        "button", doc: "A button of an in-app message.",
        keys: [
            KeySchema("label", .template, required: true, doc: "the button's text", example: "Set as default"),
            KeySchema(
                "deep_link", .template, doc: "URL the app opens when it is tapped",
                example: "firefox://deep-link?url=settings/general"),
            KeySchema(
                "action", .template, doc: "a named app action instead of a link (`dismiss`, `accept`…)", example: "dismiss"),
        ])

    static let message = ObjectSchema(
        "message", doc: "An in-app message.",
        keys: [
            KeySchema(
                "surface", .identifier, required: true,
                doc: """
                    where it shows (`launch`, `home`, `inbox`…); rules that qualify on the same event and surface \
                    are arbitrated by priority
                    """, example: "launch"),
            KeySchema("template", .identifier, doc: "the app's layout for it (`modal`, `banner`, `tooltip`…)", example: "modal"),
            KeySchema("title", .template, doc: "headline", example: "Make it your default browser"),
            KeySchema("body", .template, doc: "text under the title"),
            KeySchema("image", .template, doc: "image URL or asset name"),
            KeySchema("buttons", .list(.object(button)), doc: "buttons, in order"),
            KeySchema("data", .map(key: .text, value: .anyValue), doc: "extra fields passed to the app unchanged"),
        ])

    static let screen = ObjectSchema(
        "screen", doc: "A screen of a flow, for the app to navigate to.",
        keys: [
            KeySchema("id", .template, required: true, doc: "route id", example: "email_input"),
            KeySchema(
                "params", .map(key: .text, value: .anyValue), doc: "parameters for the screen",
                example: "{ email: \"${user.email}\" }"),
        ])

    static let notify = ObjectSchema(
        "notify", doc: "An item in the user's inbox, unread until read.",
        keys: [
            KeySchema("id", .template, doc: "the item's id (default: the action id); `mark_read` names it", example: "welcome"),
            KeySchema("sender", .template, doc: "who it is from", example: "Stampbook Team"),
            KeySchema("message", .template, required: true, doc: "its text", example: "Welcome! Claim your first stamp"),
            KeySchema("link", .template, doc: "where tapping it leads", example: "stampbook://stamp/welcome"),
            KeySchema("data", .map(key: .text, value: .anyValue), doc: "extra fields passed to the app unchanged"),
        ])

    static let push = ObjectSchema(
        "push",
        doc: """
            A push notification to the user's devices, for the service or a destination to send (e.g. with \
            `destinations: [{ kinds: [push] }]`). Counts toward `global_limit` and `channel_limits.push`.
            """,
        keys: [
            KeySchema("title", .template, doc: "headline", example: "Your cart misses you"),
            KeySchema(
                "body", .template, required: true, doc: "its text",
                example: "${user.first_name}, your ${event.properties.product} is waiting"),
            KeySchema(
                "deep_link", .template, doc: "URL the app opens when it is tapped (its scheme is checked)", example: "shop://cart"
            ),
            KeySchema("image", .template, doc: "an https:// image URL", example: "https://cdn.example.com/cart.png"),
            KeySchema("data", .map(key: .text, value: .anyValue), doc: "extra fields passed to the app unchanged"),
            KeySchema(
                "to", .template,
                doc: """
                    a device token or push address; when it has no value at fire time the push comes out as \
                    `skipped` with the reason (default: the user's devices, resolved by the sender)
                    """, example: "\"${user.push_token}\""),
        ])

    static let email = ObjectSchema(
        "email",
        doc: """
            An email, rendered by the sender's template with the merge data. Counts toward `global_limit` and \
            `channel_limits.email`.
            """,
        keys: [
            KeySchema("template", .template, required: true, doc: "the sender's template id", example: "cart_reminder"),
            KeySchema(
                "to", .template, required: true,
                doc: "the address; when it has no value at fire time the email comes out as `skipped` with the reason",
                example: "\"${user.email}\""),
            KeySchema("subject", .template, doc: "the subject, when the template does not set it"),
            KeySchema(
                "data", .map(key: .text, value: .anyValue), doc: "merge data for the template",
                example: "{ product: \"${event.properties.product}\" }"),
        ])

    static let emit = ObjectSchema(
        "emit", doc: "An outgoing event or conversion, for the service to send on.",
        keys: [
            KeySchema("event", .text, required: true, doc: "its name", example: "AppInstall"),
            KeySchema("payload", .map(key: .text, value: .anyValue), doc: "its fields; values may be `${expressions}`"),
        ])

    public static let actions: [KeySchema] = [
        KeySchema("message", .object(message), doc: "show an in-app message"),
        KeySchema(
            "screen", .either([.template, .object(screen)]), doc: "navigate to a screen of a flow",
            example: "welcome"),
        KeySchema("deep_link", .template, doc: "open a URL in the app", example: "app-settings:"),
        KeySchema("notify", .object(notify), doc: "put an item in the user's inbox"),
        KeySchema("push", .object(push), doc: "send a push notification"),
        KeySchema("email", .object(email), doc: "send an email"),
        KeySchema("mark_read", .template, doc: "mark the inbox item with this id as read", example: "welcome"),
        KeySchema(
            "prompt", .enumeration(["att", "notifications", "location"]),
            doc: "ask for a system permission (`att` = App Tracking Transparency)", example: "att"),
        KeySchema("emit", .object(emit), doc: "send an event or conversion out"),
        KeySchema(
            "set", .map(key: .attributeName, value: .anyValue),
            doc: """
                set user attributes; values may be `${expressions}`; a change can trigger `on_change` rules
                """, example: "{ att_status: \"${event.properties.status}\" }"),
        KeySchema("unset", .oneOrMany(.attributeName), doc: "remove user attributes", example: "pending_email"),
        KeySchema(
            "flow", .object(flowAction),
            doc: "start a flow, resume it at its first unfinished step, or complete a step and show the next one",
            example: "{ complete: employee_onboarding, step: \"${event.properties.step}\" }"),
    ]

    static let flowAction = ObjectSchema(
        "flow action", doc: "Moves a user through a flow; shows (as a `screen` action) the step they land on.",
        keys: [
            KeySchema("start", .template, doc: "start (or restart) this flow at its first step", example: "employee_onboarding"),
            KeySchema(
                "resume", .template, doc: "show this flow's first unfinished step, if the user is in it",
                example: "employee_onboarding"),
            KeySchema(
                "complete", .template, doc: "mark `step` of this flow done and show the next unfinished step",
                example: "employee_onboarding"),
            KeySchema("step", .template, doc: "with `complete`: the step id", example: "\"${event.properties.step}\""),
        ])

    static let flowStep = ObjectSchema(
        "flow step", doc: "A step of a flow: its screen, and when it is left out.",
        keys: [
            KeySchema("id", .identifier, required: true, doc: "the step id, also the screen's route id", example: "company_code"),
            KeySchema(
                "skip_if", .expression, doc: "leave the step out (and do not count it) when this holds",
                example: "has(user.company_id)"),
            KeySchema("back", .boolean, doc: "`false`: from this step on, screens disallow going back"),
            KeySchema("params", .map(key: .text, value: .anyValue), doc: "params for this step's screen"),
        ])

    static let flowMigration = ObjectSchema(
        "flow migration", doc: "Where users whose state is from an older version of the flow resume.",
        keys: [
            KeySchema("from", .integer(min: 1), required: true, doc: "the older version", example: "1"),
            KeySchema(
                "steps", .map(key: .text, value: .identifier), required: true, doc: "old step id → new step id",
                example: "{ email: account_setup, password: account_setup }"),
            KeySchema("otherwise", .identifier, doc: "the new step for old steps not in the table (default: the first step)"),
        ])

    public static let flow = ObjectSchema(
        "flow",
        doc: """
            A versioned sequence of screens. Each user's place in it is kept in the attribute named like the flow \
            (`user.FLOW.step`, `.completed`, `.done`, `.version`). Screens carry `params.step` and `params.total` \
            counted over the steps not skipped.
            """,
        keys: [
            KeySchema("id", .identifier, required: true, doc: "the flow's name", example: "employee_onboarding"),
            KeySchema("version", .integer(min: 1), required: true, doc: "the flow's version", example: "2"),
            KeySchema("description", .text, doc: "what it is for"),
            KeySchema(
                "params", .map(key: .text, value: .anyValue), doc: "params added to every step's screen",
                example: "{ theme: light }"),
            KeySchema("steps", .list(.either([.identifier, .object(flowStep)])), required: true, doc: "the steps, in order"),
            KeySchema("finish", .identifier, doc: "a screen to show when the last step is done", example: "completion"),
            KeySchema("migrate", .list(.object(flowMigration)), doc: "how users on older versions are placed in this one"),
        ])

    public static let goal = ObjectSchema(
        "goal", doc: "What success means: an event within a window after a user is exposed (first fire of the file's rules).",
        keys: [
            KeySchema("id", .identifier, required: true, doc: "the goal's name", example: "claimed_within_24h"),
            KeySchema("description", .text, doc: "what it measures"),
            KeySchema("event", .eventName, required: true, doc: "the goal event", example: "Stamp Claimed"),
            KeySchema(
                "where", .expression, doc: "condition on the goal event", example: "event.properties.stamp_id == \"welcome\""),
            KeySchema("within", .duration, required: true, doc: "the window after exposure", example: "24h"),
            KeySchema(
                "exposure", .identifier, doc: "the rule whose first fire exposes a user (default: any rule of the file)",
                example: "welcome_notification"),
            KeySchema(
                "value", .text,
                doc: """
                    a numeric property of the goal event to sum (revenue): the report then gives the value per exposed \
                    user beside the conversion rate
                    """, example: "revenue"),
        ])

    static let variant = ObjectSchema(
        "variant",
        doc: """
            One arm of an A/B test. Each user is in one variant, chosen by a stable hash of the user id and the file \
            (or the rule, for a rule's own variants) and the weights in the order written: the same on every machine \
            and run, and unchanged by edits that keep the variants' order and weights. Every action carries \
            `"variant"`; a control variant's fires are recorded as `held_back` and send nothing.
            """,
        keys: [
            KeySchema(
                "id", .identifier, required: true, doc: "its name, in every action and in the report", example: "short_copy"),
            KeySchema(
                "weight", .text, required: true, doc: "its share of users, in percent (the weights add up to 100)", example: "45"),
            KeySchema("control", .boolean, doc: "`true`: the control group, sent nothing, that the others are compared with"),
            KeySchema(
                "do", .list(.variant(actions)),
                doc: "on a rule's variant: its actions instead of the rule's `do`",
                example: "[ { push: { body: \"Still thinking it over?\" } } ]"),
        ])

    static let planField = ObjectSchema(
        "property", doc: "A property or trait: its type and, optionally, the only values it takes.",
        keys: [
            KeySchema("type", .enumeration(PlanType.allCases.map(\.rawValue)), doc: "its type", example: "string"),
            KeySchema("values", .list(.anyValue), doc: "the values it takes", example: "[authorized, denied]"),
            KeySchema("description", .text, doc: "what it is"),
        ])

    static let planEvent = ObjectSchema(
        "event", doc: "An event of the plan.",
        keys: [
            KeySchema("description", .text, doc: "when the app sends it"),
            KeySchema("properties", .map(key: .text, value: .object(planField)), doc: "its properties"),
        ])

    public static let trackingPlanFile = ObjectSchema(
        "tracking plan file",
        doc: """
            The events an app sends and the traits its users have. When a plan is loaded with rules, `validate` rejects \
            event, property and trait names the plan lacks, and uses the declared types to check expressions.
            """,
        keys: [
            KeySchema("version", .integer(min: 1), required: true, doc: "the DSL version; must be 1", example: "1"),
            KeySchema("tracking_plan", .identifier, required: true, doc: "the plan's name", example: "bossup"),
            KeySchema("description", .text, doc: "what it covers"),
            KeySchema("events", .map(key: .eventName, value: .object(planEvent)), required: true, doc: "track events by name"),
            KeySchema("screens", .list(.eventName), doc: "screen names sent with `screen` calls"),
            KeySchema("traits", .map(key: .attributeName, value: .object(planField)), doc: "user traits and attributes by name"),
        ])

    public static let quietHours = ObjectSchema(
        "quiet_hours",
        doc: "Local hours (user's zone) in which the rule's actions are not sent: held until the window ends, or dropped.",
        keys: [
            KeySchema("from", .text, required: true, doc: "start of the quiet window, `HH:MM` local time", example: "\"22:00\""),
            KeySchema(
                "to", .text, required: true,
                doc: "end of the window (exclusive), `HH:MM`; may be earlier than `from` (over midnight)",
                example: "\"08:00\""),
            KeySchema(
                "then", .enumeration(["hold", "drop"]), doc: "`hold` (default): send when the window ends; `drop`: do not send",
                example: "hold"),
        ])

    static let eventStep = ObjectSchema(
        "event step", doc: "An event with a condition on it.",
        keys: [
            KeySchema("event", .eventName, required: true, doc: "the event name", example: "Stamp Claimed"),
            KeySchema(
                "where", .expression, doc: "condition on that event (`event` is that event)",
                example: "event.properties.stamp_id == \"welcome\""),
        ])

    static let reprompt = ObjectSchema(
        "reprompt",
        doc: """
            "Ask again N days after a denial, at most K times" in one line: the rule fires only when the user's latest `after` \
            event matched `when`, at least `wait` ago, the rule itself last fired at least `wait` ago, and it has fired \
            fewer than `times` times.
            """,
        keys: [
            KeySchema("after", .eventName, required: true, doc: "the answer event", example: "Tracking Permission Answered"),
            KeySchema(
                "when", .map(key: .text, value: .anyValue), doc: "property values the latest answer must have",
                example: "{ status: denied }"),
            KeySchema("wait", .duration, required: true, doc: "least time since that answer", example: "14d"),
            KeySchema("times", .integer(min: 1), doc: "most re-prompts in all (default: no cap)", example: "3"),
        ])

    public static let rule = ObjectSchema(
        "rule", doc: "When to do what, for one user.",
        keys: [
            KeySchema(
                "id", .identifier, required: true, doc: "unique within the file; snake_case", example: "prompt_default_browser"),
            KeySchema("description", .text, doc: "what the rule is for"),
            KeySchema("enabled", .boolean, doc: "`false` keeps the rule in the file but never evaluates it"),
            KeySchema("on", .oneOrMany(.eventName), doc: "the track event(s) that trigger the rule", example: "E_Opened_App"),
            KeySchema("on_screen", .oneOrMany(.eventName), doc: "the screen view(s) that trigger the rule", example: "Settings"),
            KeySchema(
                "on_change", .attributeName,
                doc: """
                    trigger when this user attribute changes value (from `identify` traits or a `set` action)
                    """, example: "plan"),
            KeySchema(
                "sequence", .list(.either([.eventName, .object(eventStep)])),
                doc:
                    "trigger when these events happen in this order (others may come between), the last within `within` of the first",
                example: "[Added To Cart, Checkout Started]"),
            KeySchema(
                "inactive_for", .duration,
                doc: """
                    trigger once when the user has had no activity (track, screen or page events; not identify) for this \
                    long; `audience` and `if` are checked then, against the user's state then; the next activity starts \
                    the count again
                    """, example: "7d"),
            KeySchema(
                "schedule", .text,
                doc: """
                    run at a time for every known user: once (`2026-03-05T10:00:00Z`) or at every such local time in \
                    the user's zone (`every monday 10:00`, `every weekday 09:30`, `every day 18:00`); `audience` and `if` \
                    are checked then
                    """, example: "\"every monday 10:00\""),
            KeySchema("within", .duration, doc: "with `sequence`: the most time from the first step to the last", example: "1h"),
            KeySchema(
                "correlate", .text, doc: "with `sequence`: a property every step must share (`event.properties.NAME`)",
                example: "cart_id"),
            KeySchema("from", .oneOrMany(.anyValue), doc: "with `on_change`: only when the old value is one of these"),
            KeySchema("to", .oneOrMany(.anyValue), doc: "with `on_change`: only when the new value is one of these"),
            KeySchema(
                "where", .expression, doc: "condition on the triggering event", example: "event.properties.source != \"widget\""),
            KeySchema("if", .expression, doc: "condition on the user", example: "heavy_user && !user.is_default_browser"),
            KeySchema("limit", .object(limits), doc: "how often it may fire", example: "{ per_user: 3, cooldown: 7d }"),
            KeySchema(
                "transactional", .boolean,
                doc: """
                    `true`: a message the user asked for (an order confirmation, a password reset): neither held by \
                    nor counted toward the settings' `global_limit` and `channel_limits` (its own `limit` applies)
                    """, example: "true"),
            KeySchema(
                "rate", .text,
                doc: """
                    with `schedule`: a run fires for at most this many users per second, minute, hour or day \
                    (windows aligned in UTC); the others wait for the next window, in order, their run's id unchanged
                    """, example: "10000/min"),
            KeySchema(
                "priority", .integer(min: 0),
                doc: """
                    arbitration among message rules on one surface for one event: the larger number wins
                    """, example: "10"),
            KeySchema(
                "wait", .duration,
                doc: "delay the actions this long after the trigger (kept in state; fires when event time passes it)",
                example: "24h"),
            KeySchema(
                "at", .text,
                doc: """
                    delay the actions to the next such local time in the user's zone (after `wait`, if both): `10:00`, \
                    `weekday 10:00`, `monday 09:30`
                    """, example: "\"weekday 10:00\""),
            KeySchema(
                "unless", .oneOrMany(.either([.eventName, .object(eventStep)])),
                doc:
                    "events that cancel a pending delayed action of this rule for the user (absence: \"if B has not happened within T\")",
                example: "Stamp Claimed"),
            KeySchema(
                "retrigger", .enumeration(["keep", "restart", "add"]),
                doc:
                    "when the trigger happens again while an action is pending: `keep` it (default), `restart` the delay, or `add` another",
                example: "restart"),
            KeySchema(
                "recheck", .boolean, doc: "re-evaluate `audience` and `if` when a delayed action comes due (default false)"),
            KeySchema(
                "quiet_hours", .either([.object(quietHours), .enumeration(["none"])]),
                doc: "hours in which the actions wait or are dropped (`none`: not the file's default quiet hours)",
                example: "{ from: \"22:00\", to: \"08:00\" }"),
            KeySchema(
                "reprompt", .object(reprompt), doc: "the re-prompt pattern in one line",
                example: "{ after: Tracking Permission Answered, when: { status: denied }, wait: 14d, times: 3 }"),
            KeySchema(
                "silence", .oneOrMany(.identifier), doc: "analysis warnings not to report for this rule (their ids)",
                example: "[shadowed_rule]"),
            KeySchema(
                "do", .list(.variant(actions)), required: true, doc: "the actions, in order",
                example: "[ { message: { surface: launch, title: Hello } } ]"),
            KeySchema(
                "variants", .list(.object(variant)),
                doc: "an A/B test of this rule: each variant's own `do` (or the rule's), with weights and a control"),
        ])

    static let defaults = ObjectSchema(
        "defaults", doc: "Values every rule of the file gets unless it sets its own.",
        keys: [
            KeySchema("priority", .integer(min: 0), doc: "default priority"),
            KeySchema("limit", .object(limits), doc: "default limits; a rule's own `limit` keys override these one by one"),
            KeySchema("quiet_hours", .object(quietHours), doc: "default quiet hours"),
        ])

    public static let ruleFile = ObjectSchema(
        "rule file",
        doc: """
            A campaign (`campaigns/`) or a rule set (`rules/`): rules that share an audience, segments and defaults.
            """,
        keys: [
            KeySchema("version", .integer(min: 1), required: true, doc: "the DSL version; must be 1", example: "1"),
            KeySchema(
                "campaign", .identifier, doc: "the campaign's name (files in campaigns/)", example: "default_browser_nudge"),
            KeySchema("ruleset", .identifier, doc: "the rule set's name (files in rules/)", example: "bossup_onboarding"),
            KeySchema("description", .text, doc: "what it is for"),
            KeySchema("enabled", .boolean, doc: "`false` turns every rule of the file off"),
            KeySchema(
                "timezone", .zone,
                doc: "the zone of `start` and `end` when they are written without an offset; `user` means each user's own zone",
                example: "Europe/Berlin"),
            KeySchema("start", .timestamp, doc: "first instant rules may fire (inclusive)", example: "2026-01-01T00:00:00Z"),
            KeySchema(
                "end", .timestamp, doc: "instant from which rules no longer fire (exclusive)", example: "2026-02-01T00:00:00Z"),
            KeySchema(
                "audience", .expression,
                doc: """
                    condition every rule of the file must also meet; `context` is the triggering event's device context
                    """, example: "context.locale in [\"en_US\", \"de\"]"),
            KeySchema(
                "segments", .map(key: .identifier, value: .expression),
                doc: """
                    named conditions, usable by name in every expression of the file
                    """, example: "{ heavy_user: 'count(\"E_Opened_App\", \"7d\") >= 10' }"),
            KeySchema("defaults", .object(defaults), doc: "defaults for every rule"),
            KeySchema(
                "silence", .oneOrMany(.identifier), doc: "analysis warnings not to report for any rule of this file (their ids)",
                example: "[limit_never_binds]"),
            KeySchema("goals", .list(.object(goal)), doc: "what success means, for `beckon report`"),
            KeySchema(
                "holdout", .text,
                doc: """
                    a share of users held back as a control group (`10%`), chosen by user id: their fires are recorded as \
                    `held_back` and their actions are not sent
                    """, example: "10%"),
            KeySchema(
                "variants", .list(.object(variant)),
                doc: """
                    an A/B test of the whole file: every rule's actions carry the user's variant; a control variant \
                    is held back (instead of `holdout`)
                    """),
            KeySchema("flows", .list(.object(flow)), doc: "multi-step flows the rules move users through"),
            KeySchema(
                "conversion_values", .list(.object(conversionValue)),
                doc: "SKAdNetwork-style conversion values: the highest-priority event in a window from install"),
            KeySchema("rules", .list(.object(rule)), required: true, doc: "the rules"),
        ])

    static let conversionValueEntry = ObjectSchema(
        "conversion value", doc: "One row of the priority table: an event and its value.",
        keys: [
            KeySchema("event", .eventName, required: true, doc: "the event", example: "Order Completed"),
            KeySchema(
                "value", .integer(min: 0), required: true, doc: "its value, 0 to 63 (SKAdNetwork's six bits); higher wins",
                example: "63"),
            KeySchema(
                "where", .expression, doc: "only occurrences for which this holds", example: "event.properties.revenue > 0"),
        ])

    static let conversionValue = ObjectSchema(
        "conversion values",
        doc: """
            Per user, the highest value among the events seen within `window` of the first `starts_on`, from a \
            priority table, as SKAdNetwork reports only the highest-priority event of its window. Each time the value \
            rises an `emit` of `emit` goes out with `conversion_value`, `previous_value` and `event`; never once the \
            window has closed, never for a lower or equal value. The current value is the user attribute `id`. It \
            compiles to one rule per row, named `ID_VALUE`, which dry-run, explain and reports show as any rule.
            """,
        keys: [
            KeySchema(
                "id", .identifier, required: true, doc: "its name, and the attribute that holds the value",
                example: "skan_conversion_value"),
            KeySchema("description", .text, doc: "what it is for"),
            KeySchema(
                "starts_on", .eventName, required: true, doc: "the event that opens the window (its first time)",
                example: "Application Installed"),
            KeySchema("window", .duration, required: true, doc: "how long the window stays open", example: "24h"),
            KeySchema(
                "values", .list(.object(conversionValueEntry)), required: true, doc: "the priority table, any order",
                example: "[ { event: Order Completed, value: 63 }, { event: Signed Up, value: 50 } ]"),
            KeySchema(
                "emit", .text, required: true, doc: "the name of the event emitted on each rise",
                example: "SKAdNetworkConversionValue"),
        ])

    static let sessions = ObjectSchema(
        "sessions", doc: "What a session is, for `per_session` limits and caps.",
        keys: [
            KeySchema(
                "start_on", .oneOrMany(.eventName), doc: "events that always start a new session (app open, foreground)",
                example: "[Application Opened]"),
            KeySchema(
                "timeout", .duration, doc: "inactivity after which the next event starts a new session (default 30m)",
                example: "30m"),
        ])

    public static let destination = ObjectSchema(
        "destination",
        doc: """
            A server endpoint `beckon serve` sends fired actions to from a durable outbox: at least once, with the \
            action's id as the `Idempotency-Key` header; 5xx, 408, 429, timeouts and connection errors are retried with \
            exponential backoff and jitter (a `Retry-After` is honoured), other 4xx and the last attempt dead-letter it \
            (`beckon outbox`). Dry-run and the library send nothing.
            """,
        keys: [
            KeySchema("name", .identifier, required: true, doc: "its name in metrics, logs and `beckon outbox`", example: "capi"),
            KeySchema(
                "url", .text, required: true, doc: "an `http://` or `https://` URL",
                example: "https://graph.facebook.com/v19.0/123/events"),
            KeySchema("method", .enumeration(["POST", "PUT", "PATCH"]), doc: "the HTTP method (default POST)", example: "POST"),
            KeySchema(
                "headers", .map(key: .text, value: .text), doc: "headers sent as written",
                example: "{ X-Source: beckon }"),
            KeySchema(
                "secret_headers", .map(key: .text, value: .text),
                doc: """
                    headers whose values the service reads from the environment variable named here when it loads the \
                    rules: secrets stay out of YAML. While a variable is not set the destination is paused: its actions \
                    wait in the outbox
                    """, example: "{ Authorization: CAPI_AUTHORIZATION }"),
            KeySchema(
                "kinds", .oneOrMany(.enumeration(ActionKind.written.map(\.rawValue))),
                doc: "the action kinds sent here (default `emit`)", example: "[emit]"),
            KeySchema(
                "events", .oneOrMany(.eventName), doc: "for `emit`: only these emitted events (default all)",
                example: "[AppInstall, AppLaunch]"),
            KeySchema(
                "body", .enumeration(Destination.Body.allCases.map(\.rawValue)),
                doc: "`action`: the action's JSON object as a pull returns it (default); `payload`: an emit's payload alone",
                example: "payload"),
            KeySchema(
                "envelope", .text, doc: "send the body in a list under this key: `data` sends `{\"data\": [BODY]}`",
                example: "data"),
            KeySchema("timeout", .duration, doc: "how long an attempt may take (default 10s)", example: "10s"),
            KeySchema(
                "max_attempts", .integer(min: 1), doc: "attempts before the action is dead-lettered (default 10)",
                example: "10"),
            KeySchema(
                "backoff", .duration, doc: "the delay before the first retry; each later one doubles (default 1s)",
                example: "1s"),
            KeySchema("max_backoff", .duration, doc: "the longest delay between attempts (default 1h)", example: "1h"),
            KeySchema(
                "rate", .text,
                doc: """
                    the most requests a second, minute or hour this service sends here (`500/s`, `30/m`, `1000/h`), \
                    as a token bucket; a push counts one request per device (default: no limit)
                    """, example: "500/s"),
            KeySchema(
                "email", .object(emailDestination),
                doc: """
                    send emails through an HTTP email API (SendGrid's v3 shape): `url` is its host \
                    (`https://api.sendgrid.com`), `kinds` defaults to `[email]`
                    """),
            KeySchema(
                "fcm", .object(fcm),
                doc: """
                    send pushes through Firebase Cloud Messaging: `url` is its host (`https://fcm.googleapis.com`), \
                    `kinds` defaults to `[push]`
                    """),
            KeySchema(
                "apns", .object(apns),
                doc: """
                    send pushes through Apple's push service: `url` is its host (`https://api.push.apple.com`, or \
                    `https://api.sandbox.push.apple.com` for development builds), `kinds` defaults to `[push]`
                    """),
        ])

    static let emailDestination = ObjectSchema(
        "email destination",
        doc: """
            An HTTP email API, in SendGrid's v3 Mail Send shape or another API's JSON body written as a template \
            (docs/push.md, "Email"): each email names the action's \
            template with its merge data, carries an unsubscribe link and `List-Unsubscribe` headers pointing at this \
            service's signed endpoint, and its links go through the signed click endpoint.
            """,
        keys: [
            KeySchema("from", .text, required: true, doc: "the sender's address", example: "hello@example.com"),
            KeySchema("from_name", .text, doc: "the sender's name", example: "Stampbook"),
            KeySchema(
                "api_key_env", .text, required: true,
                doc: "the environment variable holding the API key; while it is unset the destination is paused",
                example: "SENDGRID_API_KEY"),
            KeySchema(
                "link_secret_env", .text, required: true,
                doc: "the environment variable holding the secret the unsubscribe and click links are signed with",
                example: "BECKON_LINK_SECRET"),
            KeySchema(
                "links_base_url", .text, required: true,
                doc: "this service's address as recipients reach it: the links point there",
                example: "https://beckon.example.com"),
            KeySchema(
                "track_clicks", .boolean, doc: "send the merge data's http(s) links through the click endpoint (default true)",
                example: "true"),
            KeySchema(
                "body", .map(key: .text, value: .anyValue),
                doc: """
                    another email API's JSON body instead of SendGrid's, as written, with placeholders in its strings: \
                    `{{to}}`, `{{from}}`, `{{from_name}}`, `{{subject}}`, `{{template}}`, `{{unsubscribe_url}}` (required), \
                    `{{action_id}}`, and `"{{data}}"` alone for the merge data object
                    """,
                example: "{ From: \"{{from}}\", To: \"{{to}}\", TemplateAlias: \"{{template}}\", TemplateModel: \"{{data}}\" }"),
            KeySchema(
                "path", .text, doc: "the path after `url` emails are posted to (default `/v3/mail/send`, none with `body`)",
                example: "/email/withTemplate"),
            KeySchema(
                "api_key_header", .text,
                doc: "the header the API key goes in as it is (default: `Authorization: Bearer` and the key)",
                example: "X-Postmark-Server-Token"),
            KeySchema(
                "ca_file", .text, doc: "certificates to trust for `url` instead of the system's (a private or test host)",
                example: "certs/test-ca.pem"),
        ])

    static let fcm = ObjectSchema(
        "fcm",
        doc: """
            Firebase Cloud Messaging's HTTP v1 API (docs/push.md): each push goes to every Android device of the user \
            that allows push, with an OAuth 2.0 access token of the service account's (an RS256 assertion exchanged at \
            its `token_uri`, kept until it expires).
            """,
        keys: [
            KeySchema(
                "service_account_file", .text,
                doc: "the service account's JSON key file, relative to this file (or `service_account_env`)",
                example: "secrets/firebase-adminsdk.json"),
            KeySchema(
                "service_account_env", .text,
                doc: "the environment variable holding the key file's text; while it is unset the destination is paused",
                example: "FCM_SERVICE_ACCOUNT"),
            KeySchema(
                "project_id", .text, doc: "the Firebase project (default: the service account's `project_id`)",
                example: "stampbook-prod"),
            KeySchema(
                "ca_file", .text,
                doc: "certificates to trust for `url` and the token endpoint instead of the system's (a private or test host)",
                example: "certs/test-ca.pem"),
        ])

    static let apns = ObjectSchema(
        "apns",
        doc: """
            Apple Push Notification service with token authentication (docs/push.md): each push goes to every iOS \
            device of the user that allows push, signed with an ES256 provider token made from the team's key.
            """,
        keys: [
            KeySchema("topic", .text, required: true, doc: "`apns-topic`: the app's bundle id", example: "com.example.app"),
            KeySchema("team_id", .text, required: true, doc: "the Apple developer team id", example: "ABCDE12345"),
            KeySchema("key_id", .text, required: true, doc: "the signing key's id", example: "KEY1234567"),
            KeySchema(
                "key_file", .text, doc: "the `.p8` key file, relative to this file (or `key_env`)",
                example: "secrets/AuthKey_KEY1234567.p8"),
            KeySchema(
                "key_env", .text,
                doc: "the environment variable holding the key's PEM text; while it is unset the destination is paused",
                example: "APNS_KEY"),
            KeySchema(
                "push_type", .enumeration(["alert", "background"]), doc: "`apns-push-type` (default alert)",
                example: "alert"),
            KeySchema("priority", .enumeration(["5", "10"]), doc: "`apns-priority` (default 10)", example: "10"),
            KeySchema(
                "expiration", .duration, doc: "how long APNs keeps a push for a device that is off (default: not kept)",
                example: "1d"),
            KeySchema(
                "ca_file", .text, doc: "certificates to trust for `url` instead of the system's (a private or test host)",
                example: "certs/test-ca.pem"),
        ])

    /// The schema of action `kind` under `do:`.
    static func action(_ kind: ActionKind) -> KeySchema { actions.first { $0.name == kind.rawValue }! }

    /// The limits a channel cap takes: the windowed kinds.
    static let windowLimits = ObjectSchema(
        "channel limit",
        doc: """
            Fires of one channel across all rules, counted in windows as a rule's limits are, in the user's session \
            (`per_session`) or ever (`per_user`).
            """,
        keys: limits.keys.filter { k in
            LimitKind.rolling.contains { $0.key == k.name } || k.name == LimitKind.perUser.key
                || k.name == LimitKind.perSession.key
        })

    static let channelLimits = ObjectSchema(
        "channel limits",
        doc: """
            Caps per channel across all rules and files, beside `global_limit` (which counts every channel): \
            "at most 2 pushes a calendar day". A rule blocked by one reports `channel_limit:KIND`; its explain names the channel.
            """,
        keys: ActionKind.channels.map {
            KeySchema(
                $0.rawValue, .object(windowLimits), doc: "fires of rules with a `\($0.rawValue)` action",
                example: $0 == .push ? "{ per_calendar_day: 2 }" : nil)
        })

    public static let settingsFile = ObjectSchema(
        "settings file",
        doc: """
            Settings for everything loaded with it: sessions, the global in-app message cap, event de-duplication.
            """,
        keys: [
            KeySchema("version", .integer(min: 1), required: true, doc: "the DSL version; must be 1", example: "1"),
            KeySchema("settings", .identifier, required: true, doc: "a name for these settings", example: "bossup"),
            KeySchema("description", .text, doc: "what they are for"),
            KeySchema("sessions", .object(sessions), doc: "how sessions start"),
            KeySchema(
                "global_limit", .object(limits),
                doc: """
                    a cap on fires of rules that message the user (`message`, `push`, `email`) across all rules and \
                    files: e.g. at most 1 per session, 3 per day
                    """, example: "{ per_session: 1, per_day: 3 }"),
            KeySchema(
                "channel_limits", .object(channelLimits), doc: "caps per channel: `push`, `email`, `message`",
                example: "{ push: { per_calendar_day: 2 }, email: { per_week: 1 } }"),
            KeySchema(
                "deep_link_schemes", .list(.text),
                doc: """
                    the URL schemes the app opens (`firefox`, `https`, `app-settings`); `validate` warns of deep links \
                    with any other
                    """, example: "[firefox, https]"),
            KeySchema(
                "dedup_window", .duration,
                doc: """
                    how long a `messageId` is remembered, so that an event sent twice is processed once (default 7d)
                    """, example: "7d"),
            KeySchema(
                "clock_skew", .duration,
                doc: """
                    how far one user's event may run ahead of the other users' before it moves the stream's clock alone: \
                    a device whose clock is further ahead brings no one else's delayed actions due (default 7d)
                    """, example: "7d"),
            KeySchema(
                "destinations", .list(.object(destination)),
                doc: "server endpoints `beckon serve` sends actions to (a conversions API for `emit`)"),
        ])

    /// Every kind of file: rules, settings, tracking plans, tests.
    public static let files: [ObjectSchema] = [ruleFile, settingsFile, trackingPlanFile, testFile]
}
