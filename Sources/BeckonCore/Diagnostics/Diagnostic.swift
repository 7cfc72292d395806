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

    /// The most characters a message or a suggestion keeps (cut with `…`): one quoting a name or a value of the file
    /// (a 1 MB id) does not print it whole, twice. The longest written by the checks is about 320.
    public static let maxMessageCharacters = 1_000

    public init(
        _ severity: Severity, _ id: DiagnosticID, _ message: String, at location: SourceLocation,
        suggestion: String? = nil
    ) {
        self.severity = severity
        self.id = id
        self.message = message.clipped(to: Self.maxMessageCharacters)
        self.location = location
        self.suggestion = suggestion?.clipped(to: Self.maxMessageCharacters)
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

/// The classes of problems `beckon validate` reports (a closed set: an id is a case, never a string made on the spot).
/// Each has a test that provokes it.
public enum DiagnosticID: String, CaseIterable, Sendable, CustomStringConvertible {
    case yamlSyntax = "yaml_syntax"
    case unknownKey = "unknown_key"
    case missingKey = "missing_key"
    case duplicateKey = "duplicate_key"
    case wrongType = "wrong_type"
    case invalidValue = "invalid_value"
    case invalidDuration = "invalid_duration"
    case invalidTimestamp = "invalid_timestamp"
    case invalidWindow = "invalid_window"
    case unsupportedVersion = "unsupported_version"
    case duplicateRuleID = "duplicate_rule_id"
    case duplicateName = "duplicate_name"
    case invalidIdentifier = "invalid_identifier"
    case expressionSyntax = "expression_syntax"
    case expressionType = "expression_type"
    case unknownIdentifier = "unknown_identifier"
    case unknownFunction = "unknown_function"
    case segmentCycle = "segment_cycle"
    case invalidRegex = "invalid_regex"
    case invalidLimit = "invalid_limit"
    case invalidAction = "invalid_action"
    case invalidTrigger = "invalid_trigger"
    case invalidSchedule = "invalid_schedule"
    case limitExceeded = "limit_exceeded"
    case unreadableFile = "unreadable_file"
    case noRuleFiles = "no_rule_files"
    case duplicateSettings = "duplicate_settings"
    case unknownEvent = "unknown_event"
    case unknownProperty = "unknown_property"
    case unknownTrait = "unknown_trait"
    case unknownFlow = "unknown_flow"

    // Analysis warnings: the rules load, but some part of them cannot do what it says.
    case neverTrue = "never_true"
    case shadowedRule = "shadowed_rule"
    case limitNeverBinds = "limit_never_binds"
    case limitAlwaysBinds = "limit_always_binds"
    case deepLinkScheme = "deep_link_scheme"
    case delayOutlivesCampaign = "delay_outlives_campaign"
    case channelLimitNeverBinds = "channel_limit_never_binds"
    case variantWeights = "variant_weights"
    case scheduleOutsideCampaign = "schedule_outside_campaign"
    case quietHoursInApp = "quiet_hours_in_app"

    public var description: String { rawValue }

    /// The analysis warnings; a rule or a file silences them with `silence: [id]`. Each has a fixture under
    /// Tests/BeckonCommandsTests/Fixtures/analysis.
    public static let analysis: [DiagnosticID] = [
        .neverTrue, .shadowedRule, .limitNeverBinds, .limitAlwaysBinds, .deepLinkScheme, .delayOutlivesCampaign,
        .channelLimitNeverBinds, .variantWeights, .scheduleOutsideCampaign, .quietHoursInApp,
    ]

    /// Every class `validate` reports that is not an analysis warning; each has a fixture under
    /// Tests/BeckonCommandsTests/Fixtures/diagnostics.
    public static let all: [DiagnosticID] = allCases.filter { !analysis.contains($0) }
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

    /// The most columns of a source line shown under a diagnostic: a longer line is shown around the caret, cut
    /// with `…` (a whole rule set on one line would otherwise be printed again under each of its problems).
    public static let excerptColumns = 160
    /// The most diagnostics ``render(_:)-([Diagnostic])`` writes out; the rest are counted in one line.
    public static let maxRendered = 200

    public func render(_ d: Diagnostic) -> String {
        // (The message and the help quote names and values of the file, which may hold any character: shown safe.)
        var out = Terminal.safe(d.description) + "\n"
        if let full = sources[d.location.file]?.text(ofLine: d.location.position.line).map(DiagnosticRenderer.visible) {
            var line = Array(full.unicodeScalars)
            var col = max(1, d.location.position.column)
            var length = d.location.length
            if line.count > Self.excerptColumns {
                // A window around the caret, a quarter of it before.
                let from = max(0, min(col - 1 - Self.excerptColumns / 4, line.count - Self.excerptColumns))
                let to = min(line.count, from + Self.excerptColumns)
                length = min(length, to - (col - 1))
                line = (from > 0 ? ["…"] : []) + Array(line[from..<to]) + (to < line.count ? ["…"] : [])
                col = col - from + (from > 0 ? 1 : 0)
            }
            out += String(String.UnicodeScalarView(line)) + "\n"
            // Keep tabs so the caret lines up under tab-indented text.
            let prefix = line.prefix(col - 1).map { $0 == "\t" ? "\t" : " " }.joined()
            let available = max(1, line.count - (col - 1))
            out += prefix + "^" + String(repeating: "~", count: max(0, min(length, available) - 1)) + "\n"
        }
        if let s = d.suggestion { out += "help: \(Terminal.safe(s))\n" }
        return out
    }

    /// The diagnostics in order, at most ``maxRendered`` of them written out (a file with thousands of mistakes
    /// would otherwise take time and memory with the square of them), the rest counted.
    public func render(_ ds: [Diagnostic]) -> String {
        var out = ds.prefix(Self.maxRendered).map(render).joined()
        if ds.count > Self.maxRendered {
            let errors = ds.dropFirst(Self.maxRendered).count(where: { $0.severity == .error })
            out += "… and \(ds.count - Self.maxRendered) more (\(errors) of them errors), not shown: fix these first\n"
        }
        return out
    }

    /// A source line with control characters (a NUL, an escape…) shown as symbols (␀, ␛), and the other characters
    /// ``Terminal`` does not show raw, or of no width, as `�`: one for one so that the caret still lines up, instead of
    /// written raw to the terminal. Tabs stay.
    static func visible(_ line: String) -> String {
        func shown(_ c: Unicode.Scalar) -> Bool { c != "\t" && (Terminal.isUnsafe(c) || isInvisible(c)) }
        guard line.unicodeScalars.contains(where: shown) else { return line }
        var out = String.UnicodeScalarView()
        for c in line.unicodeScalars {
            switch c.value {
            case 0x09: out.append(c)
            case 0x00..<0x20: out.append(Unicode.Scalar(0x2400 + c.value)!)
            case 0x7F: out.append("\u{2421}")
            // (Bidirectional controls would show the rest of the line in another order, zero-width ones move the
            // caret off its character: one column each, as the caret counts them.)
            default: out.append(shown(c) ? "\u{FFFD}" : c)
            }
        }
        return String(out)
    }

    /// Characters of no width: the zero-width space, joiners, word joiner, a byte-order mark within a line.
    static func isInvisible(_ c: Unicode.Scalar) -> Bool {
        switch c.value {
        case 0x200B...0x200D, 0x2060, 0xFEFF: true
        default: false
        }
    }
}
