import Foundation
import PropertyBased
import Testing

@testable import BeckonCore

/// The regular-expression engine behind CEL's `matches`: RE2 syntax, linear time.
struct RegexTests {
    /// Every construct, with a text it matches and one it does not. `matches` is an unanchored search.
    @Test(
        arguments: [
            // The empty pattern matches everywhere.
            ("", "", true), ("", "abc", true),
            // Literals and escapes.
            ("abc", "xabcx", true), ("abc", "ab", false), ("ubb", "hubba", true),
            (#"a\.c"#, "a.c", true), (#"a\.c"#, "abc", false), (#"a\\b"#, #"a\b"#, true), (#"a\\b"#, "ab", false),
            (#"\n"#, "a\nb", true), (#"\t"#, "a\tb", true), (#"\t"#, "a b", false),
            (#"\a\f\v\r"#, "\u{7}\u{C}\u{B}\r", true), (#"\x41"#, "A", true), (#"\x41"#, "a", false),
            (#"\x{263a}"#, "☺", true), (#"\x{263A}"#, "☹", false), (#"\x{1F600}"#, "😀", true),
            (#"\101"#, "A", true), (#"\0"#, "\u{0}", true), (#"\012"#, "\n", true),
            (#"\Qa.b*\E"#, "a.b*", true), (#"\Qa.b*\E"#, "axbb", false), (#"\Qa.b"#, "a.b", true),
            ("\\-\\ \\#\\/", "- #/", true), ("a{", "a{", true), ("a{,3}", "a{,3}", true), ("a{x}", "a{x}", true),
            ("{", "{", true), ("a{01}", "a{01}", true), ("ñ", "mañana", true), ("ñ", "manana", false),
            ("a+ñ+a+", "mañana", true), ("(a|😀){2}", "🐱😀😀", true), ("(a|😀){2}", "🐱😀🐱a", false),
            // `.` is any scalar but \n, unless (?s).
            (".", "x", true), (".", "", false), (".", "\n", false), ("a.c", "a\nc", false), ("(?s)a.c", "a\nc", true),
            ("^.$", "😀", true), ("^.$", "e\u{301}", false), ("^..$", "e\u{301}", true),
            // Classes.
            ("[a-c]", "b", true), ("[a-c]", "d", false), ("[^a-c]", "d", true), ("[^a-c]", "abc", false),
            ("[^a]", "\n", true), ("[]a]", "]", true), ("[]a]", "b", false), ("[^]a]", "b", true), ("[^]a]", "]", false),
            ("[a-]", "-", true), ("[-a]", "-", true), ("[a-c-e]", "-", true), ("[a-c-e]", "d", false),
            (#"[\]]"#, "]", true), (#"[\\]"#, #"\"#, true), (#"[\n]"#, "\n", true), (#"[\x41-\x43]"#, "B", true),
            (#"[\x41-\x43]"#, "D", false), (#"[\d]"#, "5", true), (#"[\D]"#, "5", false), (#"[\w-]"#, "-", true),
            ("[[]", "[", true), ("[.]", "a", false), ("[.]", ".", true), ("[😀-😂]", "😁", true), ("[😀-😂]", "😃", false),
            // Perl classes: ASCII only, as in RE2; \s is [\t\n\f\r ].
            (#"\d"#, "5", true), (#"\d"#, "٥", false), (#"\D"#, "a", true), (#"\D"#, "5", false),
            (#"^\w+$"#, "_a1Z", true), (#"\w"#, "é", false), (#"\W"#, "é", true), (#"\W"#, "a", false),
            (#"\s"#, " ", true), (#"\s"#, "\t\n\r\u{C}", true), (#"\s"#, "\u{B}", false), (#"\s"#, "\u{A0}", false),
            (#"\S"#, " ", false), (#"\S"#, "x", true),
            // POSIX classes, inside brackets.
            ("[[:alpha:]]", "x", true), ("[[:alpha:]]", "1", false), ("[[:^alpha:]]", "1", true),
            ("[[:^alpha:]]", "x", false), ("[[:digit:][:upper:]]", "Q", true), ("[[:digit:][:upper:]]", "q", false),
            ("[[:punct:]]", "!", true), ("[[:punct:]]", "a", false), ("[[:space:]]", "\u{B}", true),
            ("^[[:xdigit:]]+$", "fF09", true), ("^[[:xdigit:]]+$", "fg", false), ("[[:word:]]", "_", true),
            ("[[:alnum:]]", "é", false), ("[[:lower:]]", "a", true), ("[[:lower:]]", "A", false),
            ("[[:blank:]]", "\t", true), ("[[:cntrl:]]", "\u{7F}", true), ("[[:graph:]]", " ", false),
            ("[[:print:]]", " ", true), ("[[:ascii:]]", "é", false), ("[[:ascii:]]", "~", true),
            // Unicode general categories.
            (#"\pL"#, "é", true), (#"\pL"#, "1", false), (#"\p{L}"#, "ж", true), (#"\p{Lu}"#, "Ж", true),
            (#"\p{Lu}"#, "ж", false), (#"\p{Ll}"#, "ж", true), (#"\PL"#, "1", true), (#"\PL"#, "a", false),
            (#"\p{^L}"#, "1", true), (#"\P{^L}"#, "a", true), (#"\pN"#, "٥", true), (#"\p{Nd}"#, "5", true),
            (#"\p{Nd}"#, "Ⅻ", false), (#"\p{Nl}"#, "Ⅻ", true), (#"[\p{Lu}\d]"#, "7", true), (#"[\p{Lu}\d]"#, "x", false),
            (#"[^\p{L}]"#, "a", false), (#"[^\p{L}]"#, "!", true), (#"[\P{L}\P{N}]"#, "a", true),
            (#"\p{Any}"#, "x", true), (#"\p{Any}"#, "", false), (#"\p{Sc}"#, "€", true), (#"\p{Sc}"#, "e", false),
            (#"\p{Zs}"#, "\u{3000}", true), (#"\p{P}"#, "¡", true), (#"\p{S}"#, "+", true), (#"\p{M}"#, "\u{301}", true),
            (#"\p{Co}"#, "\u{E000}", true), (#"\p{C}"#, "\u{200B}", true), (#"\p{Cc}"#, "\u{0}", true),
            (#"^\p{Lu}\p{Ll}+$"#, "Émile", true), (#"^\p{Lu}\p{Ll}+$"#, "émile", false),
            // Anchors; $ without (?m) matches only at the very end (not before a final \n, unlike Perl and ICU).
            ("^abc", "abcd", true), ("^abc", "xabc", false), ("abc$", "xabc", true), ("abc$", "abc\n", false),
            ("^$", "", true), ("^$", "a", false), ("(?m)^b", "a\nb", true), ("^b", "a\nb", false),
            ("(?m)a$", "a\nb", true), ("a$", "a\nb", false), ("(?m)^$", "a\n\nb", true), ("(?m)^x$", "a\nxb", false),
            (#"\Aa"#, "ba", false), (#"\Aa"#, "ab", true), (#"(?m)\Ab"#, "a\nb", false), (#"a\z"#, "ba", true),
            (#"(?m)a\z"#, "a\nb", false), (#"\bfoo\b"#, "a foo b", true), (#"\bfoo\b"#, "afoo", false),
            (#"\Bfoo"#, "afoo", true), (#"\Bfoo"#, "a foo", false), (#"\b"#, "", false), (#"\B"#, "", true),
            (#"\bé"#, "é", false), ("^*a", "a", true), ("x^", "x", false), ("$x", "x", false),
            // Groups.
            ("gr(a|e)y", "grey", true), ("gr(?:a|e)y", "gray", true), ("gr(?:a|e)y", "griy", false),
            ("(?P<first>a)(?P<second>b)", "ab", true), ("(?P<first>a)(?P<second>b)", "ba", false),
            ("(?<n>x)", "x", true), ("(?<n_1>x)y", "xz", false), ("(a)(b)(c)", "abc", true), ("a|b|", "z", true),
            ("()", "", true), ("(|x)y", "y", true), ("((((a))))", "a", true), ("x(?:)y", "xy", true),
            // Flags.
            ("(?i)hello", "HeLLo", true), ("hello", "HeLLo", false), ("(?i:h)ello", "Hello", true),
            ("(?i:h)ello", "HELLO", false), ("a(?i)b", "aB", true), ("a(?i)b", "AB", false),
            ("(?i)a(?-i)b", "Ab", true), ("(?i)a(?-i)b", "AB", false), ("(a(?i)b)c", "aBc", true),
            ("(a(?i)b)c", "aBC", false), ("(?i)a|b", "B", true), ("(?m)", "x", true), ("(?)", "x", true),
            ("(?i-s:a.)", "A\n", false), ("(?s-i:a.)", "a\n", true), ("(?s-i:a.)", "A\n", false),
            ("(?ims)^A.$", "x\na\n", true), ("(?U)a+", "aaa", true), ("(?U)^a+b$", "aab", true),
            // Case folding: simple folding, orbits included (k K K, s S ſ, σ ς Σ), no Turkic i, no ß → ss.
            ("(?i)k", "\u{212A}", true), ("(?i)\u{212A}", "k", true), ("(?i)s", "ſ", true), ("(?i)σ", "ς", true),
            ("(?i)Σ", "σ", true), ("(?i)ß", "ẞ", true), ("(?i)ss", "ß", false), ("(?i)i", "ı", false),
            ("(?i)i", "İ", false), ("(?i)i", "I", true), ("(?i)[a-z]", "K", true), ("(?i)[a-z]", "\u{212A}", true),
            ("(?i)[k]", "\u{212A}", true), ("(?i)[^k]", "K", false), ("(?i)[^k]", "x", true),
            (#"(?i)\W"#, "\u{212A}", false), (#"\W"#, "\u{212A}", true), (#"(?i)\p{Lu}"#, "a", true),
            (#"(?i)\P{Lu}"#, "a", false), (#"(?i)\p{Lu}"#, "1", false), ("(?i)é", "É", true), ("(?i)ǆ", "ǅ", true),
            ("(?i)ǆ", "Ǆ", true), ("(?i)1", "1", true), ("(?i)[[:upper:]]", "a", true),
            // Quantifiers, greedy and lazy (the same answer to "does it match?").
            ("a*", "", true), ("ba*c", "bc", true), ("ba+c", "bc", false), ("ba+c", "baac", true), ("ba?c", "bac", true),
            ("ba?c", "baac", false), ("^a{3}$", "aaa", true), ("^a{3}$", "aa", false), ("^a{2,}$", "aaaaa", true),
            ("^a{2,}$", "a", false), ("^a{2,3}$", "aaaa", false), ("^a{2,3}$", "aaa", true), ("^a{0}$", "", true),
            ("^a{0}$", "a", false), ("^a{0,1}$", "a", true), ("^(ab){2}$", "abab", true), ("^(ab){2}$", "ab", false),
            ("^(?:a{10}){100}$", String(repeating: "a", count: 1000), true),
            ("^(?:a{10}){100}$", String(repeating: "a", count: 999), false),
            ("^a{1000}$", String(repeating: "a", count: 1000), true), ("a*?b", "aab", true), ("a+?", "b", false),
            ("a??b", "b", true), ("^a{2,3}?$", "aaa", true), ("^a{2,}?$", "a", false),
            ("^(a+)+$", "aaaa!", false), ("(a|a)*b", "aaaab", true), ("x*y*z*", "", true), ("^(a*)*$", "aaa", true),
            ("^(a*)+$", "", true), ("^(a?){3}$", "", true), ("ba(na)*", "banana", true), ("^(?:a|ab)(?:c|bcd)$", "abcd", true),
        ] as [(String, String, Bool)])
    func matches(pattern: String, text: String, expected: Bool) throws {
        let program = try RegexProgram(pattern)
        #expect(program.matches(text) == expected)
    }

    /// What RE2 refuses is refused when the pattern is compiled, with a message naming the construct and where.
    @Test(
        arguments: [
            // Backreferences.
            (#"(a)\1"#, #"backreference '\1' is not supported (RE2 syntax has none) at character 4"#),
            (#"\8"#, #"backreference '\8'"#), ("(?P<n>a)(?P=n)", "backreference '(?P='"),
            (#"\k<n>"#, #"backreference '\k'"#), (#"\g1"#, #"backreference '\g'"#),
            // Lookaround.
            ("a(?=b)", "lookahead '(?=' is not supported (RE2 syntax has no lookaround) at character 2"),
            ("a(?!b)", "negative lookahead '(?!'"), ("(?<=a)b", "lookbehind '(?<='"),
            ("(?<!a)b", "negative lookbehind '(?<!'"),
            // Possessive and stacked quantifiers.
            ("a*+", "possessive quantifier '*+' is not supported (RE2 syntax) at character 2"),
            ("a++", "possessive quantifier '++'"), ("a?+", "possessive quantifier '?+'"),
            ("a{2}+", "possessive quantifier '{2}+'"), ("a**", "invalid nested repetition operator '**' at character 2"),
            ("a*??", "invalid nested repetition operator '*??'"), ("a{2}{3}", "invalid nested repetition operator '{2}{3}'"),
            // Any byte.
            (#"a\C"#, #"'\C' (any byte) is not supported at character 2"#),
            // Repetition counts.
            ("a{1001}", "invalid repeat count '{1001}' at character 2: counts go up to 1000"),
            ("a{2,1001}", "invalid repeat count '{2,1001}'"), ("a{1001,}", "invalid repeat count '{1001,}'"),
            ("a{3,2}", "invalid repeat count '{3,2}'"), ("a{99999999999}", "invalid repeat count"),
            ("(a{100}){100}", "invalid repeat count '{100}' at character 3: nested counts multiply to more than 1000"),
            ("((a{10}){10}){11}", "nested counts multiply to more than 1000"),
            // Program size.
            ("(abcdefghijk){1000}", "the pattern is too large: it compiles to more than 10000 instructions"),
            (
                "(?:a{1000})(?:b{1000})(?:c{1000})(?:d{1000})(?:e{1000})(?:f{1000})(?:g{1000})(?:h{1000})(?:i{1000})"
                    + "(?:j{1000})(?:k{1000})", "more than 10000 instructions"
            ),
            // Other syntax errors.
            ("(?>a)", "atomic group '(?>' is not supported"), ("(?#c)", "invalid or unsupported group syntax '(?#'"),
            ("(?x)a", "invalid or unsupported group syntax '(?x'"), ("(?i-)a", "invalid or unsupported group syntax '(?i-)'"),
            ("(?i", "invalid or unsupported group syntax '(?i'"), ("(a", "missing closing ) for the group at character 1"),
            ("a)", "unexpected ) at character 2"), ("x[a", "missing closing ] for the class at character 2"),
            (#"a\"#, "trailing backslash at the end of the pattern"),
            ("*a", "missing argument to repetition operator '*' at character 1"),
            ("(*)", "missing argument to repetition operator '*'"), ("a|+", "missing argument to repetition operator '+'"),
            ("{2}", "missing argument to repetition operator '{2}'"), ("(?i)*", "missing argument"),
            ("[z-a]", "invalid character class range 'z-a' at character 2"),
            (#"[a-\d]"#, #"invalid character class range '\d'"#),
            (#"\pX"#, #"unknown Unicode class '\pX' at character 1"#), (#"\p{Greek}"#, #"scripts such as \p{Greek} are not"#),
            (#"\p{Cn}"#, "unknown Unicode class"), (#"\p{L"#, "unknown Unicode class"),
            ("[[:foo:]]", "unknown character class '[:foo:]' at character 2"), (#"\Z"#, #"invalid escape sequence '\Z'"#),
            (#"\x{110000}"#, #"invalid escape sequence '\x{110000}'"#), (#"\xZ1"#, "invalid escape sequence"),
            (#"\x{12"#, "invalid escape sequence"), (#"\é"#, #"invalid escape sequence '\é'"#),
            (#"[\b]"#, #"invalid escape sequence '\b'"#), ("(?P<a-b>x)", "invalid named capture '(?P<a-b>'"),
            ("(?P<>x)", "invalid named capture"), ("(?P<n", "invalid named capture '(?P<n'"),
            ("(?P<n>a)(?P<n>b)", "duplicate capture group name 'n' at character 9"),
            (String(repeating: "(", count: 1001) + String(repeating: ")", count: 1001), "nests more than 1000 levels"),
        ] as [(String, String)])
    func refuses(pattern: String, message: String) {
        #expect(throws: RegexError.self) { try RegexProgram(pattern) }
        do {
            _ = try RegexProgram(pattern)
        } catch {
            #expect(error.message.contains(message), "\(error.message)")
        }
    }

    /// The deepest nesting accepted compiles and runs (the parser keeps its own stack; compiling recurses once per
    /// level).
    @Test func deepNestingWithinTheLimit() throws {
        let pattern = String(repeating: "(?:a", count: 1000) + String(repeating: ")*", count: 1000)
        let program = try RegexProgram(pattern)
        #expect(program.matches("aaa"))
        let groups = String(repeating: "(", count: 1000) + "b" + String(repeating: ")", count: 1000)
        #expect(try RegexProgram(groups).matches("abc"))
    }

    /// Matching takes at most (instructions + 1) × (text length + 1) steps, whatever the pattern: the patterns that
    /// make backtracking engines take exponential time finish on 10,000 characters within that bound.
    @Test(
        arguments: [
            ("(a+)+$", String(repeating: "a", count: 9_999) + "!", false),
            ("(a|a)*b", String(repeating: "a", count: 10_000), false),
            ("(a*)*b", String(repeating: "a", count: 10_000), false),
            ("(x+x+)+y", String(repeating: "x", count: 10_000), false),
            ("(.*a){20}", String(repeating: "a", count: 19) + String(repeating: "b", count: 9_981), false),
            ("(.*a){20}", String(repeating: "b", count: 9_980) + String(repeating: "a", count: 20), true),
            ("(?i)(\\w+\\s?)+$", String(repeating: "word ", count: 1_999) + "!!!!!", false),
            ("^(\\d+)*x", String(repeating: "1", count: 10_000), false),
        ] as [(String, String, Bool)])
    func linearSteps(pattern: String, text: String, expected: Bool) throws {
        let program = try RegexProgram(pattern)
        var steps = 0
        #expect(program.matches(text, steps: &steps) == expected)
        let n = text.unicodeScalars.count
        #expect(steps > 0)
        #expect(steps <= (program.instructions.count + 1) * (n + 1), "\(steps) steps")
    }

    /// Twice the text, at most about twice the steps: the work per character does not grow with the text.
    @Test func stepsGrowLinearly() throws {
        let program = try RegexProgram("(x+x+)+y")
        var short = 0
        var long = 0
        _ = program.matches(String(repeating: "x", count: 5_000), steps: &short)
        _ = program.matches(String(repeating: "x", count: 10_000), steps: &long)
        #expect(long <= 2 * short + program.instructions.count)
    }

    /// A plain-string pattern is compared as bytes, in at most two steps a byte.
    @Test func literalPatterns() throws {
        for (pattern, text, expected) in [
            ("abab", "ababac ababab", true), ("abab", "abaabab", true), ("abc", "ababd", false), (#"^ab"#, "abc", true),
            (#"^ab"#, "cab", false), ("ab$", "cab", true), ("ab$", "abc", false), (#"\Aab\z"#, "ab", true),
            (#"\Aab\z"#, "abc", false), ("[a]b", "ab", true), ("é😀", "xé😀", true),
        ] {
            let program = try RegexProgram(pattern)
            #expect(program.literal != nil, "\(pattern)")
            var steps = 0
            #expect(program.matches(text, steps: &steps) == expected, "\(pattern) on \(text)")
            #expect(steps <= 2 * text.utf8.count + 4)
        }
        #expect(try RegexProgram("(?i)ab").literal == nil)
        #expect(try RegexProgram("(?i)12").literal != nil)
    }

    /// `RegexBox` is the front door `matches` and the compiler use: a bad pattern is an `EvalError` naming the
    /// pattern and what is wrong; a good one is compiled once and shared.
    @Test func box() throws {
        guard case .failure(let error) = RegexBox.compile("a(?=b)") else {
            Issue.record("lookahead accepted")
            return
        }
        #expect(
            error.message
                == "invalid regular expression 'a(?=b)': lookahead '(?=' is not supported (RE2 syntax has no lookaround) "
                + "at character 2")
        let first = try RegexBox.compile("gr(a|e)y").get()
        #expect(try RegexBox.compile("gr(a|e)y").get() === first)
        #expect(first.matches("grey") && !first.matches("gruy"))
    }

    /// Through CEL: `matches` is an unanchored search, the empty pattern matches everything, a constant bad pattern
    /// is refused when the expression is compiled and a pattern from data is an error value when evaluated.
    @Test func throughCEL() {
        #expect(same(eval("''.matches('')"), .bool(true)))
        #expect(same(eval("'cows'.matches('')"), .bool(true)))
        #expect(same(eval("matches('hubba', 'ubb')"), .bool(true)))
        #expect(same(eval("'aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!'.matches('(a+)+$')"), .bool(false)))
        #expect(problems("'a'.matches('(?<=a)b')").map(\.id) == [.invalidRegex])
        guard case .error(let e) = eval("'a'.matches(p)", ["p": .string("(?<=a)b")]) else {
            Issue.record("a pattern from data was not checked")
            return
        }
        #expect(e.message.contains("lookbehind '(?<='"))
        // A long pattern from data, or a long string to convert, is cut in the message: an error never holds it whole.
        let long = String(repeating: "x", count: 100_000)
        for (expression, value) in [("'a'.matches(p)", long + "("), ("int(p)", long), ("timestamp(p)", long)] {
            guard case .error(let e) = eval(expression, ["p": .string(value)]) else {
                Issue.record("\(expression) was not an error")
                continue
            }
            #expect(e.message.count <= EvalError.maxMessageCharacters, "\(expression): \(e.message.count)")
            if expression != "'a'.matches(p)" { #expect(e.message.hasSuffix("…"), "\(expression)") }
        }
        #expect(same(eval("s.matches('^(a|a)*b$')", ["s": .string(String(repeating: "a", count: 10_000))]), .bool(false)))
    }

    /// A lazy loop whose body can match empty, before an anchor: RE2 and PCRE (Python's `re`) match, which ICU
    /// does not (so the ICU comparison below asks ICU about the greedy pattern).
    @Test func lazyLoopOverAnEmptyBodyMatchesAsRE2Does() throws {
        for pattern in [
            "(a?)+?^", "(.{0,2})+?^", "(a{0}?.{0,2})+?^", "(?:a?)+?^", "(a*?^)*?$", "(a?^){0,}?$",
        ] {
            #expect(try RegexProgram(pattern).matches("a"), "\(pattern)")
        }
        for pattern in ["(a)+?^", "(a?^){1,}?$", "(^){1,3}?$"] {
            #expect(try !RegexProgram(pattern).matches("a"), "\(pattern)")
        }
    }

    /// The engine agrees with ICU (NSRegularExpression) on whether a pattern matches, for patterns from a grammar
    /// where RE2 and ICU mean the same: literals over a small alphabet, classes, `.`, quantifiers, alternation,
    /// groups, `^` and `$`, on short texts without newlines.
    @Test func agreesWithICU() async {
        let choices = Gen.int(in: 0...99).array(of: 1...16)
        // Twelve texts of up to eight letters from a–d: a letter 0...3, or 4 to end a text.
        let texts = Gen.int(in: 0...4).array(of: 0...60)
        await propertyCheck(count: 2_000, input: choices, texts) { choices, texts in
            var generator = PatternGenerator(choices: choices)
            let generated = generator.alternation(depth: 0)
            // Whether a search finds a match does not depend on greed, so ICU is asked with every loop greedy: it
            // fails lazy loops whose body can match empty (`lazyLoopOverAnEmptyBodyMatchesAsRE2Does`).
            let pattern = generated.replacingOccurrences(of: "~", with: "?")
            let greedy = generated.replacingOccurrences(of: "~", with: "")
            guard let icu = try? NSRegularExpression(pattern: greedy) else {
                Issue.record("ICU refuses \(greedy)")
                return
            }
            let program: RegexProgram
            do {
                program = try RegexProgram(pattern)
            } catch {
                Issue.record("refused \(pattern): \(error)")
                return
            }
            let list = texts.split(separator: 4, omittingEmptySubsequences: false).prefix(12).map {
                String($0.prefix(8).map { Character(Unicode.Scalar(UInt8(0x61 + $0))) })
            }
            // (ICU backtracks: a pattern whose nested loops make it take more than two seconds is passed over, as a
            // run once spun for ten minutes on one. RE2's matching, Beckon's, is linear.)
            guard let answers = ICU.answers(icu, list, within: 2) else { return }
            for (text, theirs) in zip(list, answers) {
                #expect(program.matches(text) == theirs, "'\(pattern)' on '\(text)'")
            }
        }
    }
}

/// ICU's answers on a thread of its own, or `nil` past a time limit (the thread is left to finish).
private final class ICU: @unchecked Sendable {
    // @unchecked: `regex` is only read (matching does not change it); `result` is written before `done` is signalled
    // and read after.
    let regex: NSRegularExpression
    var result: [Bool] = []
    let done = DispatchSemaphore(value: 0)
    init(_ regex: NSRegularExpression) { self.regex = regex }

    static func answers(_ regex: NSRegularExpression, _ texts: [String], within seconds: Double) -> [Bool]? {
        let job = ICU(regex)
        Thread {
            job.result = texts.map {
                job.regex.firstMatch(in: $0, range: NSRange(location: 0, length: ($0 as NSString).length)) != nil
            }
            job.done.signal()
        }.start()
        return job.done.wait(timeout: .now() + seconds) == .success ? job.result : nil
    }
}

/// Builds a pattern from a list of choices (each 0...99, 0 once they run out), so that shrinking the list shrinks the
/// pattern.
private struct PatternGenerator {
    var choices: [Int]
    var next = 0

    mutating func pick(_ n: Int) -> Int {
        defer { next += 1 }
        return next < choices.count ? choices[next] % n : 0
    }

    mutating func alternation(depth: Int) -> String {
        var branches = [concatenation(depth: depth)]
        while depth < 3 && pick(4) == 1 { branches.append(concatenation(depth: depth)) }
        return branches.joined(separator: "|")
    }

    mutating func concatenation(depth: Int) -> String {
        var out = ""
        for _ in 0...pick(3) { out += piece(depth: depth) }
        return out
    }

    mutating func piece(depth: Int) -> String {
        switch pick(20) {
        case 0: return "^"
        case 1: return "$"
        default: return atom(depth: depth) + quantifier()
        }
    }

    mutating func atom(depth: Int) -> String {
        switch pick(12) {
        case 0, 1, 2, 3: return ["a", "b", "c", "d"][pick(4)]
        case 4: return "."
        case 5: return ["[ab]", "[^a]", "[a-c]", "[^bc]", "[b-d]", "[a-]"][pick(6)]
        case 6, 7: return depth < 3 ? "(" + alternation(depth: depth + 1) + ")" : "a"
        case 8: return depth < 3 ? "(?:" + alternation(depth: depth + 1) + ")" : "b"
        case 9: return #"\w"#
        default: return ["a", "b"][pick(2)]
        }
    }

    mutating func quantifier() -> String {
        let q = ["", "", "", "*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,3}", "{2,}", "{0}"][pick(12)]
        // A lazy loop is marked `~`: the comparison gives Beckon `?` there and ICU the greedy loop.
        return q.isEmpty || pick(4) != 0 ? q : q + "~"
    }
}
