/// A problem found in a rule file, with where it is, a matchable id and, when there is one, a suggestion.
///
/// Rendered as `path/file.yaml:6:15: error: message [id]`, then the source line, a caret, and the suggestion.
///
/// ## Topics
/// - ``DiagnosticID``
/// - ``DiagnosticRenderer``
public struct Diagnostic: Sendable, Hashable, CustomStringConvertible {
    public enum Severity: String, Sendable, Hashable, Comparable {
        case error, warning, note
        public static func < (a: Severity, b: Severity) -> Bool {
            let order: [Severity] = [.error, .warning, .note]
            return order.firstIndex(of: a)! < order.firstIndex(of: b)!
        }
    }

    public var severity: Severity
    public var id: DiagnosticID
    public var message: String
    public var location: SourceLocation
    /// A replacement or next step, shown as `help: …`.
    public var suggestion: String?

    public init(
        _ severity: Severity, _ id: DiagnosticID, _ message: String, at location: SourceLocation,
        suggestion: String? = nil
    ) {
        self.severity = severity
        self.id = id
        self.message = message
        self.location = location
        self.suggestion = suggestion
    }

    public static func error(
        _ id: DiagnosticID, _ message: String, at location: SourceLocation, suggestion: String? = nil
    ) -> Diagnostic {
        Diagnostic(.error, id, message, at: location, suggestion: suggestion)
    }

    public var description: String {
        "\(location.file):\(location.position.line):\(location.position.column): \(severity.rawValue): \(message) [\(id.rawValue)]"
    }
}

/// The classes of problems `beckon validate` reports. Each has a test that provokes it.
public struct DiagnosticID: RawRepresentable, Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public var description: String { rawValue }

    public static let yamlSyntax: DiagnosticID = "yaml_syntax"
    public static let unknownKey: DiagnosticID = "unknown_key"
    public static let missingKey: DiagnosticID = "missing_key"
    public static let duplicateKey: DiagnosticID = "duplicate_key"
    public static let wrongType: DiagnosticID = "wrong_type"
    public static let invalidValue: DiagnosticID = "invalid_value"
    public static let invalidDuration: DiagnosticID = "invalid_duration"
    public static let invalidTimestamp: DiagnosticID = "invalid_timestamp"
    public static let invalidWindow: DiagnosticID = "invalid_window"
    public static let unsupportedVersion: DiagnosticID = "unsupported_version"
    public static let duplicateRuleID: DiagnosticID = "duplicate_rule_id"
    public static let duplicateName: DiagnosticID = "duplicate_name"
    public static let invalidIdentifier: DiagnosticID = "invalid_identifier"
    public static let expressionSyntax: DiagnosticID = "expression_syntax"
    public static let expressionType: DiagnosticID = "expression_type"
    public static let unknownIdentifier: DiagnosticID = "unknown_identifier"
    public static let unknownFunction: DiagnosticID = "unknown_function"
    public static let segmentCycle: DiagnosticID = "segment_cycle"
    public static let invalidRegex: DiagnosticID = "invalid_regex"
    public static let invalidLimit: DiagnosticID = "invalid_limit"
    public static let invalidAction: DiagnosticID = "invalid_action"
    public static let invalidTrigger: DiagnosticID = "invalid_trigger"
    public static let invalidSchedule: DiagnosticID = "invalid_schedule"
    public static let limitExceeded: DiagnosticID = "limit_exceeded"
    public static let unreadableFile: DiagnosticID = "unreadable_file"
    public static let noRuleFiles: DiagnosticID = "no_rule_files"
    public static let duplicateSettings: DiagnosticID = "duplicate_settings"
    public static let unknownEvent: DiagnosticID = "unknown_event"
    public static let unknownProperty: DiagnosticID = "unknown_property"
    public static let unknownTrait: DiagnosticID = "unknown_trait"
    public static let unknownFlow: DiagnosticID = "unknown_flow"

    // Analysis warnings: the rules load, but some part of them cannot do what it says.
    public static let neverTrue: DiagnosticID = "never_true"
    public static let shadowedRule: DiagnosticID = "shadowed_rule"
    public static let limitNeverBinds: DiagnosticID = "limit_never_binds"
    public static let limitAlwaysBinds: DiagnosticID = "limit_always_binds"
    public static let deepLinkScheme: DiagnosticID = "deep_link_scheme"
    public static let delayOutlivesCampaign: DiagnosticID = "delay_outlives_campaign"

    /// The analysis warnings; a rule or a file silences them with `silence: [id]`. Each has a fixture under
    /// Tests/BeckonCommandsTests/Fixtures/analysis.
    public static let analysis: [DiagnosticID] = [
        .neverTrue, .shadowedRule, .limitNeverBinds, .limitAlwaysBinds, .deepLinkScheme, .delayOutlivesCampaign,
    ]

    /// Every class `validate` reports; each has a fixture under Tests/BeckonCommandsTests/Fixtures/diagnostics.
    public static let all: [DiagnosticID] = [
        .yamlSyntax, .unknownKey, .missingKey, .duplicateKey, .wrongType, .invalidValue, .invalidDuration, .invalidTimestamp,
        .invalidWindow, .unsupportedVersion, .duplicateRuleID, .duplicateName, .invalidIdentifier, .expressionSyntax,
        .expressionType, .unknownIdentifier, .unknownFunction, .segmentCycle, .invalidRegex, .invalidLimit, .invalidAction,
        .invalidTrigger, .invalidSchedule, .limitExceeded, .unreadableFile, .noRuleFiles, .duplicateSettings, .unknownEvent,
        .unknownProperty, .unknownTrait, .unknownFlow,
    ]
}

/// Collects diagnostics while loading; every problem is kept, in order.
public struct DiagnosticBag: Sendable {
    public private(set) var items: [Diagnostic] = []
    public init() {}

    public mutating func append(_ d: Diagnostic) { items.append(d) }
    public mutating func append(contentsOf ds: [Diagnostic]) { items.append(contentsOf: ds) }

    public mutating func error(_ id: DiagnosticID, _ message: String, at location: SourceLocation, suggestion: String? = nil) {
        items.append(.error(id, message, at: location, suggestion: suggestion))
    }

    public mutating func warning(_ id: DiagnosticID, _ message: String, at location: SourceLocation, suggestion: String? = nil) {
        items.append(Diagnostic(.warning, id, message, at: location, suggestion: suggestion))
    }

    public var hasErrors: Bool { items.contains { $0.severity == .error } }
    public var errorCount: Int { items.count(where: { $0.severity == .error }) }
    public var warningCount: Int { items.count(where: { $0.severity == .warning }) }

    /// Sorted by file, line, column, as a compiler prints them.
    public var sorted: [Diagnostic] {
        items.enumerated().sorted { a, b in
            let x = a.element.location
            let y = b.element.location
            if x.file != y.file { return x.file < y.file }
            if x.position != y.position { return x.position < y.position }
            return a.offset < b.offset
        }.map(\.element)
    }
}

/// Renders diagnostics the way compilers do: the header line, the source line, a caret, and a `help:` line.
public struct DiagnosticRenderer: Sendable {
    /// File contents by path, cut into lines as positions count them (``SourceLines``).
    public var sources: [String: SourceLines]

    public init(sources: [String: String] = [:]) {
        self.sources = sources.mapValues { SourceLines($0) }
    }

    public func render(_ d: Diagnostic) -> String {
        var out = d.description + "\n"
        if let line = sources[d.location.file]?.text(ofLine: d.location.position.line).map(DiagnosticRenderer.visible) {
            out += line + "\n"
            let col = max(1, d.location.position.column)
            // Keep tabs so the caret lines up under tab-indented text.
            let prefix = line.unicodeScalars.prefix(col - 1).map { $0 == "\t" ? "\t" : " " }.joined()
            let available = max(1, line.unicodeScalars.count - (col - 1))
            out += prefix + "^" + String(repeating: "~", count: max(0, min(d.location.length, available) - 1)) + "\n"
        }
        if let s = d.suggestion { out += "help: \(s)\n" }
        return out
    }

    public func render(_ ds: [Diagnostic]) -> String { ds.map(render).joined() }

    /// A source line with control characters (a NUL, an escape…) shown as symbols (␀, ␛), one for one so that the
    /// caret still lines up, instead of written raw to the terminal. Tabs stay.
    static func visible(_ line: String) -> String {
        guard line.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || (0x7F...0x9F).contains($0.value) })
        else { return line }
        var out = String.UnicodeScalarView()
        for c in line.unicodeScalars {
            switch c.value {
            case 0x09: out.append(c)
            case 0x00..<0x20: out.append(Unicode.Scalar(0x2400 + c.value)!)
            case 0x7F: out.append("\u{2421}")
            case 0x80...0x9F: out.append("\u{FFFD}")
            default: out.append(c)
            }
        }
        return String(out)
    }
}
