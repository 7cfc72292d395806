/// Parses RE2 syntax (as RE2 and Go's regexp/syntax accept it) into a `RegexAST`, refusing what RE2 refuses.
///
/// Groups are parsed with an explicit stack, not recursion, so a deeply nested pattern cannot exhaust the stack.
struct RegexParser {
    /// `(?i)`, `(?m)`, `(?s)`, `(?U)`: set until the end of the enclosing group.
    struct Flags {
        var foldCase = false
        var multiLine = false
        var dotNewline = false
        /// Swaps greedy and lazy: read and kept, though it cannot change whether a pattern matches.
        var ungreedy = false
    }

    /// An open group: its flags, the branches before the last `|`, and the items of the branch being read.
    private struct Frame {
        var flags: Flags
        var open: Int
        var branches: [Int] = []
        var items: [Int] = []
    }

    /// What an escape sequence stands for.
    private enum Escape {
        case scalar(UInt32)
        case ranges([ClosedRange<UInt32>], negated: Bool)
        case category(RegexCharSet.CategoryTerm)
        case assertion(RegexAST.Assertion)
        case quote
    }

    private let p: [Unicode.Scalar]
    private var i = 0
    private var ast = RegexAST()
    private var setIndex: [RegexCharSet: Int] = [:]
    private var rangeCount = 0
    private var names: Set<String> = []
    /// Where each `{n,m}` repetition was written, for messages.
    private var repeatSpans: [Int: Range<Int>] = [:]

    private init(_ scalars: [Unicode.Scalar]) { p = scalars }

    static func parse(_ pattern: String) throws(RegexError) -> RegexAST {
        var parser = RegexParser(Array(pattern.unicodeScalars))
        try parser.parseAll()
        return parser.ast
    }

    private mutating func parseAll() throws(RegexError) {
        var stack: [Frame] = []
        var cur = Frame(flags: Flags(), open: 0)
        // Start of the quantifier just read, and whether it was lazy: a quantifier right after another is refused
        // (`a**`, and `a*+`, a possessive quantifier).
        var lastQuantifier: (start: Int, lazy: Bool)? = nil
        while i < p.count {
            let start = i
            let c = p[i]
            var quantifier: (min: Int, max: Int, counted: Bool)? = nil
            switch c {
            case "|":
                i += 1
                cur.branches.append(concat(cur.items))
                cur.items = []
            case "(":
                if i + 1 < p.count && p[i + 1] == "?" {
                    switch try groupPrefix(&cur.flags) {
                    case .flagsOnly: break
                    case .group(let flags):
                        guard stack.count < RegexLimits.maxNesting else { throw RegexError(.nestsTooDeeply, at: start) }
                        stack.append(cur)
                        cur = Frame(flags: flags, open: start)
                    }
                } else {
                    guard stack.count < RegexLimits.maxNesting else { throw RegexError(.nestsTooDeeply, at: start) }
                    i += 1
                    stack.append(cur)
                    cur = Frame(flags: cur.flags, open: start)
                }
            case ")":
                guard let outer = stack.popLast() else { throw RegexError(.unexpectedParen, at: start) }
                i += 1
                let node = finish(cur)
                cur = outer
                cur.items.append(node)
            case "*":
                i += 1
                quantifier = (0, -1, false)
            case "+":
                i += 1
                quantifier = (1, -1, false)
            case "?":
                i += 1
                quantifier = (0, 1, false)
            case "{":
                if let (lo, hi, end) = repeatSpec(at: i) {
                    i = end
                    let bad = lo > RegexLimits.maxRepeat || hi > RegexLimits.maxRepeat || (hi >= 0 && lo > hi)
                    if bad { throw RegexError(.repeatCount(text(start..<end)), at: start) }
                    quantifier = (lo, hi, true)
                } else {
                    i += 1
                    cur.items.append(literal(c.value, cur.flags))
                }
            case "[":
                cur.items.append(try bracket(cur.flags))
            case "^":
                i += 1
                cur.items.append(add(.assertion(cur.flags.multiLine ? .beginLine : .beginText)))
            case "$":
                i += 1
                cur.items.append(add(.assertion(cur.flags.multiLine ? .endLine : .endText)))
            case ".":
                i += 1
                cur.items.append(add(.any(newline: cur.flags.dotNewline)))
            case "\\":
                switch try escape(inClass: false) {
                case .scalar(let v): cur.items.append(literal(v, cur.flags))
                case .assertion(let a): cur.items.append(add(.assertion(a)))
                case .quote:
                    while i < p.count && !(p[i] == "\\" && i + 1 < p.count && p[i + 1] == "E") {
                        cur.items.append(literal(p[i].value, cur.flags))
                        i += 1
                    }
                    if i < p.count { i += 2 }
                case let item:
                    var b = RegexCharSet.Builder()
                    add(item, to: &b, cur.flags)
                    cur.items.append(add(.set(try intern(b.build(foldCase: cur.flags.foldCase)))))
                }
            default:
                i += 1
                cur.items.append(literal(c.value, cur.flags))
            }
            guard let q = quantifier else {
                lastQuantifier = nil
                continue
            }
            // Lazy: the same language, so the same answer to "does it match?".
            let lazy = i < p.count && p[i] == "?"
            if lazy { i += 1 }
            if let previous = lastQuantifier {
                let written = text(previous.start..<i)
                let kind: RegexError.Kind =
                    c == "+" && !previous.lazy ? .possessive(written) : .nestedRepetition(written)
                throw RegexError(kind, at: previous.start)
            }
            guard let operand = cur.items.last else {
                throw RegexError(.missingRepeatArgument(text(start..<i)), at: start)
            }
            let node = add(.repeat(operand, min: q.min, max: q.max, counted: q.counted))
            if q.counted { repeatSpans[node] = start..<i }
            cur.items[cur.items.count - 1] = node
            lastQuantifier = (start, lazy)
        }
        guard stack.isEmpty else { throw RegexError(.missingParen, at: cur.open) }
        ast.root = finish(cur)
        try checkRepeatProducts(ast.root, budget: RegexLimits.maxRepeat)
    }

    // MARK: Building nodes

    private mutating func add(_ node: RegexAST.Node) -> Int {
        ast.nodes.append(node)
        return ast.nodes.count - 1
    }

    private mutating func concat(_ items: [Int]) -> Int {
        switch items.count {
        case 0: add(.empty)
        case 1: items[0]
        default: add(.concat(items))
        }
    }

    private mutating func finish(_ frame: Frame) -> Int {
        let last = concat(frame.items)
        return frame.branches.isEmpty ? last : add(.alternate(frame.branches + [last]))
    }

    /// A literal scalar; under `(?i)`, the class of its case-folding orbit when it has one.
    private mutating func literal(_ c: UInt32, _ flags: Flags) -> Int {
        guard flags.foldCase, RegexUnicode.hasFold(c) else { return add(.scalar(c)) }
        var b = RegexCharSet.Builder()
        b.add(c, c)
        // A one-scalar orbit's class is small: interning it cannot reach the range limit on its own, but counts.
        let set = b.build(foldCase: true)
        if let index = setIndex[set] { return add(.set(index)) }
        rangeCount += set.bounds.count / 2
        ast.sets.append(set)
        setIndex[set] = ast.sets.count - 1
        return add(.set(ast.sets.count - 1))
    }

    /// The index of `set` among the pattern's classes, the same index for the same set.
    private mutating func intern(_ set: RegexCharSet) throws(RegexError) -> Int {
        if let index = setIndex[set] { return index }
        rangeCount += set.bounds.count / 2 + set.terms.count
        if rangeCount > RegexLimits.maxClassRanges { throw RegexError(.tooManyRanges, at: i) }
        ast.sets.append(set)
        setIndex[set] = ast.sets.count - 1
        return ast.sets.count - 1
    }

    private func text(_ r: Range<Int>) -> String {
        var s = String.UnicodeScalarView()
        s.append(contentsOf: p[r.clamped(to: 0..<p.count)])
        return String(s)
    }

    // MARK: Groups

    private enum GroupPrefix {
        case flagsOnly
        case group(Flags)
    }

    /// Reads what follows `(?`: flags `(?i)`, a group with flags `(?i:`, or a named group `(?P<name>`, `(?<name>`;
    /// refuses lookaround, atomic groups, comments and backreferences by name.
    private mutating func groupPrefix(_ flags: inout Flags) throws(RegexError) -> GroupPrefix {
        let start = i
        var j = i + 2
        func starts(_ s: String) -> Bool {
            var k = j
            for c in s.unicodeScalars {
                guard k < p.count, p[k] == c else { return false }
                k += 1
            }
            return true
        }
        for look in ["=", "!", "<=", "<!"] where starts(look) {
            throw RegexError(.lookaround("(?" + look), at: start)
        }
        if starts(">") { throw RegexError(.atomicGroup, at: start) }
        if starts("P=") { throw RegexError(.backreference(text(start..<min(j + 2, p.count))), at: start) }
        if starts("P<") || starts("<") {
            j += starts("P") ? 2 : 1
            var k = j
            while k < p.count && p[k] != ">" { k += 1 }
            guard k < p.count else { throw RegexError(.invalidNamedCapture(text(start..<p.count)), at: start) }
            let name = text(j..<k)
            let valid = !name.isEmpty && name.unicodeScalars.allSatisfy { $0 == "_" || $0.isASCIIAlphanumeric }
            guard valid else { throw RegexError(.invalidNamedCapture(text(start..<k + 1)), at: start) }
            guard names.insert(name).inserted else { throw RegexError(.duplicateName(name), at: start) }
            i = k + 1
            return .group(flags)
        }
        var f = flags
        var negate = false
        var sawFlag = false
        while j < p.count {
            let c = p[j]
            j += 1
            switch c {
            case "i": f.foldCase = !negate
            case "m": f.multiLine = !negate
            case "s": f.dotNewline = !negate
            case "U": f.ungreedy = !negate
            case "-":
                if negate { break }
                negate = true
                sawFlag = false
                continue
            case ":", ")":
                if negate && !sawFlag { break }
                i = j
                if c == ")" {
                    flags = f
                    return .flagsOnly
                }
                return .group(f)
            default: break
            }
            guard "imsU".unicodeScalars.contains(c) else { break }
            sawFlag = true
        }
        throw RegexError(.unsupportedGroup(text(start..<j)), at: start)
    }

    // MARK: Repetition

    /// `{n}`, `{n,}` or `{n,m}` at `start`: the counts (max -1 when open) and the index after `}`; nil when the text
    /// is not one, and then `{` is a literal, as in RE2.
    private func repeatSpec(at start: Int) -> (Int, Int, Int)? {
        guard let (lo, afterLo) = number(at: start + 1) else { return nil }
        var j = afterLo
        var hi = lo
        if j < p.count && p[j] == "," {
            j += 1
            if j < p.count && p[j] == "}" {
                hi = -1
            } else {
                guard let (h, afterHi) = number(at: j) else { return nil }
                hi = h
                j = afterHi
            }
        }
        guard j < p.count && p[j] == "}" else { return nil }
        return (lo, hi, j + 1)
    }

    /// Decimal digits without a leading zero (as Go), saturating far above any valid count.
    private func number(at start: Int) -> (Int, Int)? {
        var j = start
        var n = 0
        while j < p.count, let d = digit(p[j]) {
            n = min(n * 10 + d, 100_000_000)
            j += 1
        }
        guard j > start, !(j - start > 1 && p[start] == "0") else { return nil }
        return (n, j)
    }

    private func digit(_ c: Unicode.Scalar) -> Int? {
        c.value >= 0x30 && c.value <= 0x39 ? Int(c.value - 0x30) : nil
    }

    /// RE2's rule that nested counted repetitions multiply to at most 1000 (`(a{100}){100}` is refused):
    /// Go's `repeatIsValid`, walked once from the root.
    private func checkRepeatProducts(_ node: Int, budget: Int) throws(RegexError) {
        var budget = budget
        switch ast.nodes[node] {
        case .repeat(let sub, let lo, let hi, let counted):
            if counted {
                if hi == 0 { return }
                let m = hi < 0 ? lo : hi
                if m > budget {
                    let span = repeatSpans[node] ?? 0..<0
                    throw RegexError(.repeatProduct(text(span)), at: span.lowerBound)
                }
                if m > 0 { budget /= m }
            }
            try checkRepeatProducts(sub, budget: budget)
        case .concat(let subs), .alternate(let subs):
            for s in subs { try checkRepeatProducts(s, budget: budget) }
        default: return
        }
    }

    // MARK: Escapes and classes

    /// Reads an escape sequence starting at the backslash at `i`.
    private mutating func escape(inClass: Bool) throws(RegexError) -> Escape {
        let start = i
        i += 1
        guard i < p.count else { throw RegexError(.trailingBackslash, at: start) }
        let c = p[i]
        i += 1
        let invalid = RegexError(.invalidEscape(text(start..<i)), at: start)
        switch c {
        case "1"..."7" where !(i < p.count && ("0"..."7").contains(p[i])), "8", "9":
            throw RegexError(.backreference(text(start..<i)), at: start)
        case "0"..."7":
            // Octal: up to three digits in all (`\0`, `\012`, `\177`).
            var v = c.value - 0x30
            var n = 1
            while n < 3 && i < p.count && ("0"..."7").contains(p[i]) {
                v = v * 8 + p[i].value - 0x30
                i += 1
                n += 1
            }
            return .scalar(v)
        case "x":
            return .scalar(try hexEscape(start))
        case "a": return .scalar(0x07)
        case "f": return .scalar(0x0C)
        case "n": return .scalar(0x0A)
        case "r": return .scalar(0x0D)
        case "t": return .scalar(0x09)
        case "v": return .scalar(0x0B)
        case "A" where !inClass: return .assertion(.beginText)
        case "z" where !inClass: return .assertion(.endText)
        case "b" where !inClass: return .assertion(.wordBoundary)
        case "B" where !inClass: return .assertion(.notWordBoundary)
        case "Q" where !inClass: return .quote
        case "d", "D", "s", "S", "w", "W":
            return .ranges(RegexUnicode.perlClass(c)!, negated: c.properties.isUppercase)
        case "p", "P":
            return try unicodeClass(start, negated: c == "P")
        case "C":
            throw RegexError(.anyByte, at: start)
        case "k", "g":
            // Perl's and PCRE's named and numbered backreferences.
            throw RegexError(.backreference(text(start..<i)), at: start)
        default:
            if c.isASCII && !c.isASCIIAlphanumeric { return .scalar(c.value) }
            throw invalid
        }
    }

    /// `\x41` (exactly two hex digits) or `\x{263a}` (one or more, up to U+10FFFF); `i` is after the `x`.
    private mutating func hexEscape(_ start: Int) throws(RegexError) -> UInt32 {
        func hex(_ c: Unicode.Scalar) -> UInt32? {
            switch c {
            case "0"..."9": c.value - 0x30
            case "a"..."f": c.value - 0x61 + 10
            case "A"..."F": c.value - 0x41 + 10
            default: nil
            }
        }
        if i < p.count && p[i] == "{" {
            var j = i + 1
            var v: UInt32 = 0
            while j < p.count, let d = hex(p[j]) {
                v = min(v * 16 + d, 0x11_0000)
                j += 1
            }
            guard j > i + 1, j < p.count, p[j] == "}", v <= RegexCharSet.maxScalar else {
                throw RegexError(.invalidEscape(text(start..<min(j + 1, p.count))), at: start)
            }
            i = j + 1
            return v
        }
        guard i + 1 < p.count, let a = hex(p[i]), let b = hex(p[i + 1]) else {
            throw RegexError(.invalidEscape(text(start..<min(i + 2, p.count))), at: start)
        }
        i += 2
        return a * 16 + b
    }

    /// `\pL`, `\p{Lu}`, `\p{^L}`, `\PL`, `\p{Any}`; `i` is after the `p` or `P`.
    private mutating func unicodeClass(_ start: Int, negated: Bool) throws(RegexError) -> Escape {
        guard i < p.count else { throw RegexError(.invalidEscape(text(start..<i)), at: start) }
        var name: String
        if p[i] == "{" {
            var j = i + 1
            while j < p.count && p[j] != "}" { j += 1 }
            guard j < p.count else { throw RegexError(.unknownUnicodeClass(text(start..<j)), at: start) }
            name = text(i + 1..<j)
            i = j + 1
        } else {
            name = String(p[i])
            i += 1
        }
        var negated = negated
        if name.hasPrefix("^") {
            negated.toggle()
            name.removeFirst()
        }
        if name == "Any" { return .ranges([0...RegexCharSet.maxScalar], negated: negated) }
        guard let mask = RegexUnicode.categoryMask(named: name) else {
            throw RegexError(.unknownUnicodeClass(text(start..<i)), at: start)
        }
        return .category(RegexCharSet.CategoryTerm(mask: mask, folded: false, negated: negated))
    }

    /// Adds a class item: a complemented one is case-folded first, then complemented (as RE2: `(?i)\W` leaves out
    /// `K`, U+212A, because `k` is a word character).
    private func add(_ item: Escape, to b: inout RegexCharSet.Builder, _ flags: Flags) {
        switch item {
        case .scalar(let v): b.add(v, v)
        case .ranges(let ranges, let negated):
            if negated {
                var inner = RegexCharSet.Builder()
                for r in ranges { inner.add(r.lowerBound, r.upperBound) }
                b.add(inner.build(foldCase: flags.foldCase).inverted())
            } else {
                for r in ranges { b.add(r.lowerBound, r.upperBound) }
            }
        case .category(let term): b.add(term)
        case .assertion, .quote: preconditionFailure("not a class item")
        }
    }

    /// `[…]` or `[^…]` at `i`.
    private mutating func bracket(_ flags: Flags) throws(RegexError) -> Int {
        let start = i
        i += 1
        var negated = false
        if i < p.count && p[i] == "^" {
            negated = true
            i += 1
        }
        var b = RegexCharSet.Builder()
        var first = true
        while true {
            guard i < p.count else { throw RegexError(.missingBracket, at: start) }
            let c = p[i]
            if c == "]" && !first {
                i += 1
                break
            }
            first = false
            if c == "[" && i + 1 < p.count && p[i + 1] == ":", let close = posixEnd(from: i + 2) {
                var name = text(i + 2..<close)
                let itemNegated = name.hasPrefix("^")
                if itemNegated { name.removeFirst() }
                guard let ranges = RegexUnicode.posixClasses[name] else {
                    throw RegexError(.unknownClass(text(i..<close + 2)), at: i)
                }
                add(.ranges(ranges, negated: itemNegated), to: &b, flags)
                i = close + 2
                continue
            }
            if c == "\\" && i + 1 < p.count && "dDsSwWpP".unicodeScalars.contains(p[i + 1]) {
                add(try escape(inClass: true), to: &b, flags)
                continue
            }
            let rangeStart = i
            let lo = try classScalar()
            var hi = lo
            if i + 1 < p.count && p[i] == "-" && p[i + 1] != "]" {
                i += 1
                hi = try classScalar()
                if hi < lo { throw RegexError(.invalidRange(text(rangeStart..<i)), at: rangeStart) }
            }
            b.add(lo, hi)
        }
        var set = b.build(foldCase: flags.foldCase)
        if negated { set = set.inverted() }
        return add(.set(try intern(set)))
    }

    /// The index of the `:` of the `:]` that closes a POSIX class name starting at `from`, if any.
    private func posixEnd(from: Int) -> Int? {
        var j = from
        while j + 1 < p.count {
            if p[j] == ":" && p[j + 1] == "]" { return j }
            j += 1
        }
        return nil
    }

    /// One scalar inside a class: itself, or an escape that stands for one scalar.
    private mutating func classScalar() throws(RegexError) -> UInt32 {
        guard p[i] == "\\" else {
            i += 1
            return p[i - 1].value
        }
        let start = i
        if case .scalar(let v) = try escape(inClass: true) { return v }
        throw RegexError(.invalidRange(text(start..<i)), at: start)
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIIAlphanumeric: Bool {
        (self >= "a" && self <= "z") || (self >= "A" && self <= "Z") || (self >= "0" && self <= "9")
    }
}
