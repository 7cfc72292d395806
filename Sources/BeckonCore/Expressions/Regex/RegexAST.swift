/// A parsed regular expression: nodes in one array, children by index, classes interned in another.
///
/// Only what decides *whether* a pattern matches is kept: groups and captures become their contents, and lazy
/// quantifiers their greedy forms (they choose among matches, never whether there is one).
struct RegexAST: Sendable {
    enum Node: Sendable, Equatable {
        /// Matches the empty string.
        case empty
        /// One scalar, exactly.
        case scalar(UInt32)
        /// Any scalar of `sets[i]`.
        case set(Int)
        /// `.`: any scalar, `\n` only when `newline` (`(?s)`).
        case any(newline: Bool)
        case assertion(Assertion)
        case concat([Int])
        case alternate([Int])
        /// `max` is -1 for no upper bound; `counted` marks the `{n,m}` forms, whose counts RE2 bounds.
        case `repeat`(Int, min: Int, max: Int, counted: Bool)
    }

    /// The empty-width tests; `^` and `$` become `beginLine`/`endLine` under `(?m)` and `beginText`/`endText`
    /// otherwise (so `$` matches only at the very end, never before a final newline, as in RE2).
    enum Assertion: UInt32, Sendable {
        case beginText, endText, beginLine, endLine, wordBoundary, notWordBoundary

        func holds(after prev: UInt32, before next: UInt32) -> Bool {
            let none = RegexAST.noScalar
            switch self {
            case .beginText: return prev == none
            case .endText: return next == none
            case .beginLine: return prev == none || prev == 0x0A
            case .endLine: return next == none || next == 0x0A
            case .wordBoundary, .notWordBoundary:
                let a = prev != none && RegexUnicode.isWordCharacter(prev)
                let b = next != none && RegexUnicode.isWordCharacter(next)
                return (a != b) == (self == .wordBoundary)
            }
        }
    }

    /// Stands for "no scalar" before the start and after the end of the text.
    static let noScalar = UInt32.max

    var nodes: [Node] = []
    var sets: [RegexCharSet] = []
    var root = 0
}
