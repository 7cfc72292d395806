/// A compiled regular expression: a Thompson NFA as a flat array of instructions addressed by index, with its classes
/// in flat tables beside it. Immutable once built; `RegexProgram+Match.swift` runs it.
///
/// ```swift
/// let program = try RegexProgram("^[a-z]+@example\\.com$")
/// program.matches("ana@example.com")  // true
/// ```
struct RegexProgram: Sendable {
    enum Opcode: UInt8, Sendable {
        /// Consumes the scalar `arg`.
        case scalar
        /// Consumes a scalar of class `arg`.
        case set
        /// Consumes any scalar.
        case any
        /// Consumes any scalar but `\n`.
        case anyButNewline
        /// Continues at both `out` and `alt`.
        case split
        /// Continues at `out` when the assertion whose raw value is `arg` holds between the scalars either side.
        case assertion
        case match
    }

    struct Instruction: Sendable {
        var op: Opcode
        var arg: UInt32
        var out: Int32
        var alt: Int32
    }

    /// A class as the matcher reads it: ASCII scalars from a bitmap, the others from its ranges (`bounds`) and
    /// category terms (`terms`).
    struct Class: Sendable {
        var asciiLow: UInt64
        var asciiHigh: UInt64
        var bounds: Range<Int>
        var terms: Range<Int>
        var negated: Bool
    }

    /// A pattern that is a plain string, perhaps anchored at either end: compared as UTF-8, without the NFA.
    struct Literal: Sendable {
        var bytes: [UInt8]
        var anchoredStart: Bool
        var anchoredEnd: Bool
        /// Knuth–Morris–Pratt failure links: the length of the longest proper border of `bytes[0...i]`.
        var failure: [Int]
    }

    private(set) var instructions: [Instruction] = []
    private(set) var start: Int32 = 0
    private(set) var classes: [Class] = []
    private(set) var bounds: [UInt32] = []
    private(set) var terms: [RegexCharSet.CategoryTerm] = []
    /// A match can only begin at the start of the text (every branch starts with `\A`, or `^` outside `(?m)`).
    private(set) var anchoredAtStart = false
    /// A class holding every scalar a match can begin with, when a match must begin with one (no assertion and no
    /// empty match at the start); -1 otherwise. Lets the matcher skip text where no match can start.
    private(set) var firstClass = -1
    private(set) var literal: Literal?

    /// About the bytes the program holds (for the cache's bound).
    var byteCost: Int {
        instructions.count * MemoryLayout<Instruction>.stride + classes.count * MemoryLayout<Class>.stride
            + bounds.count * 4 + terms.count * MemoryLayout<RegexCharSet.CategoryTerm>.stride
            + (literal.map { $0.bytes.count + $0.failure.count * 8 } ?? 0) + 64
    }

    /// Parses and compiles `pattern`, or says what is wrong with it.
    init(_ pattern: String) throws(RegexError) {
        try self.init(RegexParser.parse(pattern))
    }

    init(_ ast: RegexAST) throws(RegexError) {
        let cap = RegexLimits.maxInstructions + 1
        guard Self.size(ast, ast.root, cap: cap) + 1 < cap else { throw RegexError(.tooManyInstructions, at: 0) }
        for set in ast.sets { addClass(set) }
        var emitter = Emitter(ast: ast)
        let match = emitter.append(.match, 0, -1)
        start = emitter.emit(ast.root, match)
        instructions = emitter.instructions
        anchoredAtStart = Self.beginsWithBeginText(ast, ast.root)
        literal = Self.literal(ast)
        firstClass = firstScalars()
    }

    // MARK: Size

    /// The number of instructions `node` compiles to, saturating at `cap`: checked before anything is emitted, so
    /// that an oversized pattern costs no memory.
    private static func size(_ ast: RegexAST, _ node: Int, cap: Int) -> Int {
        func sum(_ a: Int, _ b: Int) -> Int { min(a + b, cap) }
        func product(_ a: Int, _ b: Int) -> Int {
            let (p, overflow) = a.multipliedReportingOverflow(by: b)
            return overflow ? cap : min(p, cap)
        }
        switch ast.nodes[node] {
        case .empty: return 0
        case .scalar, .set, .any, .assertion: return 1
        case .concat(let subs): return subs.reduce(0) { sum($0, size(ast, $1, cap: cap)) }
        case .alternate(let subs): return subs.reduce(subs.count - 1) { sum($0, size(ast, $1, cap: cap)) }
        case .repeat(let sub, let lo, let hi, _):
            let s = size(ast, sub, cap: cap)
            if hi < 0 { return sum(product(max(lo, 1), s), 1) }
            return sum(product(lo, s), product(hi - lo, s + 1))
        }
    }

    // MARK: Emitting

    /// Emits instructions backwards from a known continuation: `emit(node, next)` returns the entry of code that
    /// matches `node` and then continues at `next`. No patch lists are needed.
    private struct Emitter {
        let ast: RegexAST
        var instructions: [Instruction] = []

        mutating func append(_ op: Opcode, _ arg: UInt32, _ out: Int32, alt: Int32 = -1) -> Int32 {
            instructions.append(Instruction(op: op, arg: arg, out: out, alt: alt))
            return Int32(instructions.count - 1)
        }

        mutating func emit(_ node: Int, _ next: Int32) -> Int32 {
            switch ast.nodes[node] {
            case .empty:
                return next
            case .scalar(let c):
                return append(.scalar, c, next)
            case .set(let k):
                let set = ast.sets[k]
                if let c = set.singleScalar { return append(.scalar, c, next) }
                if set.isAny { return append(.any, 0, next) }
                if set.isAnyButNewline { return append(.anyButNewline, 0, next) }
                return append(.set, UInt32(k), next)
            case .any(let newline):
                return append(newline ? .any : .anyButNewline, 0, next)
            case .assertion(let a):
                return append(.assertion, a.rawValue, next)
            case .concat(let subs):
                var entry = next
                for s in subs.reversed() { entry = emit(s, entry) }
                return entry
            case .alternate(let subs):
                var entry = emit(subs[subs.count - 1], next)
                for s in subs.dropLast().reversed() {
                    let branch = emit(s, next)
                    entry = append(.split, 0, branch, alt: entry)
                }
                return entry
            case .repeat(let sub, let lo, let hi, _):
                var entry: Int32
                if hi < 0 {
                    // sub* is a loop through a split; sub{n,} is n-1 copies, then sub+ (the loop entered at its body).
                    let loop = append(.split, 0, -1, alt: next)
                    let body = emit(sub, loop)
                    instructions[Int(loop)].out = body
                    entry = lo == 0 ? loop : body
                    for _ in 1..<max(lo, 1) { entry = emit(sub, entry) }
                } else {
                    // sub{n,m} is n copies, then m-n nested optional ones: (sub(sub(sub)?)?)?.
                    entry = next
                    for _ in 0..<(hi - lo) { entry = append(.split, 0, emit(sub, entry), alt: next) }
                    for _ in 0..<lo { entry = emit(sub, entry) }
                }
                return entry
            }
        }
    }

    private mutating func addClass(_ set: RegexCharSet) {
        var low: UInt64 = 0
        var high: UInt64 = 0
        for c in UInt32(0)..<128 where set.contains(c) {
            if c < 64 { low |= 1 << UInt64(c) } else { high |= 1 << UInt64(c - 64) }
        }
        let b = bounds.count
        let t = terms.count
        bounds += set.bounds
        terms += set.terms
        classes.append(
            Class(asciiLow: low, asciiHigh: high, bounds: b..<bounds.count, terms: t..<terms.count, negated: set.negated))
    }

    // MARK: Shortcuts

    private static func beginsWithBeginText(_ ast: RegexAST, _ node: Int) -> Bool {
        switch ast.nodes[node] {
        case .assertion(.beginText): true
        case .concat(let subs): beginsWithBeginText(ast, subs[0])
        case .alternate(let subs): subs.allSatisfy { beginsWithBeginText(ast, $0) }
        case .repeat(let sub, let lo, _, _): lo > 0 && beginsWithBeginText(ast, sub)
        default: false
        }
    }

    /// The pattern as a plain string, when it is one: scalars only, perhaps with `\A` first and `\z` last.
    private static func literal(_ ast: RegexAST) -> Literal? {
        var items: [Int]
        switch ast.nodes[ast.root] {
        case .concat(let subs): items = subs
        case .empty: items = []
        default: items = [ast.root]
        }
        var anchoredStart = false
        var anchoredEnd = false
        if let first = items.first, ast.nodes[first] == .assertion(.beginText) {
            anchoredStart = true
            items.removeFirst()
        }
        if let last = items.last, ast.nodes[last] == .assertion(.endText) {
            anchoredEnd = true
            items.removeLast()
        }
        var scalars = String.UnicodeScalarView()
        for item in items {
            switch ast.nodes[item] {
            case .scalar(let c):
                guard let s = Unicode.Scalar(c) else { return nil }
                scalars.append(s)
            case .set(let k):
                guard let c = ast.sets[k].singleScalar, let s = Unicode.Scalar(c) else { return nil }
                scalars.append(s)
            default: return nil
            }
        }
        let bytes = Array(String(scalars).utf8)
        var failure = [Int](repeating: 0, count: bytes.count)
        var k = 0
        for i in bytes.indices.dropFirst() {
            while k > 0 && bytes[i] != bytes[k] { k = failure[k - 1] }
            if bytes[i] == bytes[k] { k += 1 }
            failure[i] = k
        }
        return Literal(bytes: bytes, anchoredStart: anchoredStart, anchoredEnd: anchoredEnd, failure: failure)
    }

    /// The class of scalars a match must begin with, added to `classes`; -1 when a match may begin with an assertion
    /// or be empty, or may begin with almost anything (then skipping would not pay).
    private mutating func firstScalars() -> Int {
        var b = RegexCharSet.Builder()
        var seen = Set<Int32>()
        var stack = [start]
        while let pc = stack.popLast() {
            guard seen.insert(pc).inserted else { continue }
            let inst = instructions[Int(pc)]
            switch inst.op {
            case .scalar: b.add(inst.arg, inst.arg)
            case .set:
                let cls = classes[Int(inst.arg)]
                guard !cls.negated else { return -1 }
                for i in stride(from: cls.bounds.lowerBound, to: cls.bounds.upperBound, by: 2) {
                    b.add(bounds[i], bounds[i + 1])
                }
                for t in terms[cls.terms] { b.add(t) }
            case .split: stack += [inst.out, inst.alt]
            case .any, .anyButNewline, .assertion, .match: return -1
            }
        }
        addClass(b.build(foldCase: false))
        return classes.count - 1
    }
}
