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
    public var rules: [RuleSpec]
}

public enum TriggerSpec: Sendable {
    case events([Located<String>])
    case screens([Located<String>])
    case change(attribute: Located<String>, from: [Located<Value>]?, to: [Located<Value>]?)
}

public struct LimitSpec: Sendable {
    public var perUser: Located<Int>?
    public var perSession: Located<Int>?
    /// Rolling windows: (window in ms, or `month` for one calendar month, max fires).
    public var rolling: [(window: RollingWindow, max: Located<Int>)] = []
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
        for d in defaults.rolling where !rolling.contains(where: { $0.window == d.window }) { m.rolling.append(d) }
        return m
    }
}

/// The span of a rolling limit.
public enum RollingWindow: Sendable, Hashable, CustomStringConvertible {
    case fixed(ms: Int64, key: String)
    /// One calendar month back from now, in the user's zone.
    case month

    public var key: String {
        switch self {
        case .fixed(_, let key): key
        case .month: "per_month"
        }
    }
    public var description: String { key }
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
}

public enum ActionSpec: Sendable {
    case message(MessageSpec)
    case screen(id: TemplateSource, params: [(key: String, value: ValueSource)])
    case deepLink(TemplateSource)
    case notify(NotifySpec)
    case markRead(TemplateSource)
    case prompt(String)
    case emit(event: String, payload: [(key: String, value: ValueSource)])
    case set([(attribute: Located<String>, value: ValueSource)])
    case unset([Located<String>])

    public var kind: String {
        switch self {
        case .message: "message"
        case .screen: "screen"
        case .deepLink: "deep_link"
        case .notify: "notify"
        case .markRead: "mark_read"
        case .prompt: "prompt"
        case .emit: "emit"
        case .set: "set"
        case .unset: "unset"
        }
    }
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

/// A settings file, as written.
public struct SettingsSpec: Sendable {
    public var path: String
    public var name: Located<String>
    public var sessionStartEvents: [Located<String>] = []
    public var sessionTimeoutMs: Int64?
    public var globalLimits: LimitSpec = LimitSpec()
    public var globalLimitsLocation: SourceLocation?
    public var dedupWindowMs: Int64?
}

/// A parsed file of any kind.
public enum ParsedFile: Sendable {
    case rules(RuleFileSpec)
    case settings(SettingsSpec)
}
