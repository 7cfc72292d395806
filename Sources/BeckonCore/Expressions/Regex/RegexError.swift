/// Why a pattern is not a regular expression in RE2 syntax, or one this engine refuses, with where in the pattern.
///
/// The messages name the construct and the 1-based character (Unicode scalar) where it starts, e.g.
/// `lookahead '(?=' is not supported (RE2 syntax has no lookaround) at character 2`.
struct RegexError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Kind: Sendable, Equatable {
        case missingBracket
        case missingParen
        case unexpectedParen
        case trailingBackslash
        case invalidEscape(String)
        case invalidRange(String)
        case unknownClass(String)
        case unknownUnicodeClass(String)
        case missingRepeatArgument(String)
        case nestedRepetition(String)
        case possessive(String)
        case repeatCount(String)
        case repeatProduct(String)
        case backreference(String)
        case lookaround(String)
        case atomicGroup
        case unsupportedGroup(String)
        case invalidNamedCapture(String)
        case duplicateName(String)
        case anyByte
        case nestsTooDeeply
        case tooManyInstructions
        case tooManyRanges
    }

    var kind: Kind
    /// 0-based index of the Unicode scalar where the construct starts.
    var offset: Int

    init(_ kind: Kind, at offset: Int) {
        self.kind = kind
        self.offset = offset
    }

    var description: String { message }

    var message: String {
        let at = "at character \(offset + 1)"
        switch kind {
        case .missingBracket: return "missing closing ] for the class \(at)"
        case .missingParen: return "missing closing ) for the group \(at)"
        case .unexpectedParen: return "unexpected ) \(at)"
        case .trailingBackslash: return "trailing backslash at the end of the pattern"
        case .invalidEscape(let s): return "invalid escape sequence '\(s)' \(at)"
        case .invalidRange(let s): return "invalid character class range '\(s)' \(at)"
        case .unknownClass(let s): return "unknown character class '\(s)' \(at)"
        case .unknownUnicodeClass(let s):
            return "unknown Unicode class '\(s)' \(at) (general categories such as \\p{L} or \\p{Lu} and \\p{Any} are "
                + "supported; scripts such as \\p{Greek} are not)"
        case .missingRepeatArgument(let s): return "missing argument to repetition operator '\(s)' \(at)"
        case .nestedRepetition(let s): return "invalid nested repetition operator '\(s)' \(at)"
        case .possessive(let s): return "possessive quantifier '\(s)' is not supported (RE2 syntax) \(at)"
        case .repeatCount(let s):
            return "invalid repeat count '\(s)' \(at): counts go up to \(RegexLimits.maxRepeat)"
        case .repeatProduct(let s):
            return "invalid repeat count '\(s)' \(at): nested counts multiply to more than \(RegexLimits.maxRepeat)"
        case .backreference(let s): return "backreference '\(s)' is not supported (RE2 syntax has none) \(at)"
        case .lookaround(let s):
            let name =
                switch s {
                case "(?=": "lookahead"
                case "(?!": "negative lookahead"
                case "(?<=": "lookbehind"
                default: "negative lookbehind"
                }
            return "\(name) '\(s)' is not supported (RE2 syntax has no lookaround) \(at)"
        case .atomicGroup: return "atomic group '(?>' is not supported (RE2 syntax) \(at)"
        case .unsupportedGroup(let s): return "invalid or unsupported group syntax '\(s)' \(at)"
        case .invalidNamedCapture(let s): return "invalid named capture '\(s)' \(at)"
        case .duplicateName(let s): return "duplicate capture group name '\(s)' \(at)"
        case .anyByte: return "'\\C' (any byte) is not supported \(at)"
        case .nestsTooDeeply: return "the pattern nests more than \(RegexLimits.maxNesting) levels deep \(at)"
        case .tooManyInstructions:
            return "the pattern is too large: it compiles to more than \(RegexLimits.maxInstructions) instructions"
        case .tooManyRanges:
            return "the pattern is too large: its classes hold more than \(RegexLimits.maxClassRanges) ranges"
        }
    }
}

/// The bounds that keep compiling and matching a pattern cheap, whoever wrote it.
public enum RegexLimits {
    /// The largest count in `{n}`, `{n,}` or `{n,m}`, and the largest product of nested counts (as RE2).
    public static let maxRepeat = 1000
    /// Groups and repetitions nested inside one another (as Go's regexp/syntax).
    public static let maxNesting = 1000
    /// Instructions in a compiled program; matching costs at most this many steps per character of text.
    public static let maxInstructions = 10_000
    /// Scalar ranges held by all of a pattern's distinct classes together.
    public static let maxClassRanges = 100_000
    /// Compiled patterns kept for reuse, all evaluations together: at most this many, holding at most
    /// ``cacheBytes``; past either, the cache is emptied and patterns compile again when next used.
    public static let cacheEntries = 1024
    public static let cacheBytes = 32 << 20
}
