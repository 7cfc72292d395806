/// Parses CEL text into an ``Expr``, expanding macros.
///
/// Limits (documented in docs/reference/limits.md): an expression is at most ``maxLength`` Unicode scalars and
/// nests at most ``maxDepth`` levels. Every construct that puts one expression inside another counts: parentheses,
/// calls, lists, maps, ternaries, indexing, field selection, unary operators, and each operator of a chain
/// (`1 + 2 + 3` is `(1 + 2) + 3`, two levels). The parser itself never recurses deeper than that, and no tree it
/// returns is higher (``Expr/height``), so the passes after it (checking, compiling, evaluating, explaining) are
/// bounded too. The error, `limit_exceeded`, points at the token where the limit is passed.
public struct Parser {
    public static let maxLength = 16_384
    public static let maxDepth = 64

    private var tokens: [Token]
    private var p = 0
    private var depth = 0

    /// Parses `text`; the error carries the span of the offending token.
    public static func parse(_ text: String) throws(ExprProblem) -> Expr {
        let n = text.unicodeScalars.count
        if n > maxLength {
            throw ExprProblem(
                "expression is \(n) characters long; the limit is \(maxLength)", SourceSpan(0, n),
                id: .limitExceeded)
        }
        var lexer = Lexer(text)
        var parser = Parser(tokens: try lexer.tokens())
        if case .eof = parser.tokens[0].kind {
            throw ExprProblem("expression is empty", SourceSpan(0, 0))
        }
        let e = try parser.expr()
        let t = parser.tokens[parser.p]
        if t.kind != .eof {
            throw ExprProblem("unexpected \(Parser.describe(t.kind)) after the end of the expression", t.span)
        }
        return e
    }

    private init(tokens: [Token]) { self.tokens = tokens }

    static func describe(_ k: Token.Kind) -> String {
        switch k {
        case .ident(let s): "'\(s)'"
        case .quotedIdent(let s): "'`\(s)`'"
        case .int(let v): "'\(v)'"
        case .uint(let v): "'\(v)u'"
        case .double(let v): "'\(v)'"
        case .string: "string literal"
        case .bytes: "bytes literal"
        case .punct(let s): "'\(s)'"
        case .eof: "end of expression"
        }
    }

    private var tok: Token { tokens[p] }

    private func isPunct(_ s: String) -> Bool {
        if case .punct(let q) = tok.kind, q == s { return true }
        return false
    }

    private mutating func eat(_ s: String) -> Bool {
        if isPunct(s) {
            p += 1
            return true
        }
        return false
    }

    private mutating func expect(_ s: String, _ context: String) throws(ExprProblem) -> Token {
        guard isPunct(s) else {
            throw ExprProblem("expected '\(s)' \(context), found \(Parser.describe(tok.kind))", tok.span)
        }
        let t = tok
        p += 1
        return t
    }

    private mutating func enter() throws(ExprProblem) {
        depth += 1
        if depth > Parser.maxDepth {
            throw ExprProblem(
                "expression nests more than \(Parser.maxDepth) levels deep", tok.span,
                id: .limitExceeded)
        }
    }

    private func span(_ a: Expr, _ b: Expr) -> SourceSpan { SourceSpan(a.span.start, b.span.end) }

    /// A node built above others (an operator of a chain, a field selection, an index…), refused when the tree
    /// would nest deeper than ``maxDepth``; `at` is the token that builds it.
    private func make(_ node: Expr.Node, _ span: SourceSpan, at token: SourceSpan) throws(ExprProblem) -> Expr {
        let e = Expr(node, span)
        if e.height > Parser.maxDepth {
            throw ExprProblem(
                "expression nests more than \(Parser.maxDepth) levels deep", token, id: .limitExceeded)
        }
        return e
    }

    // Expr = ConditionalOr ['?' ConditionalOr ':' Expr]
    mutating func expr() throws(ExprProblem) -> Expr {
        try enter()
        defer { depth -= 1 }
        let cond = try conditionalOr()
        let question = tok.span
        if eat("?") {
            let a = try conditionalOr()
            _ = try expect(":", "in a conditional 'a ? b : c'")
            let b = try expr()
            return try make(.call(function: "_?_:_", target: nil, args: [cond, a, b]), span(cond, b), at: question)
        }
        return cond
    }

    private mutating func conditionalOr() throws(ExprProblem) -> Expr {
        var lhs = try conditionalAnd()
        while isPunct("||") {
            let op = tok.span
            p += 1
            let rhs = try conditionalAnd()
            lhs = try make(.call(function: "_||_", target: nil, args: [lhs, rhs]), span(lhs, rhs), at: op)
        }
        return lhs
    }

    private mutating func conditionalAnd() throws(ExprProblem) -> Expr {
        var lhs = try relation()
        while isPunct("&&") {
            let op = tok.span
            p += 1
            let rhs = try relation()
            lhs = try make(.call(function: "_&&_", target: nil, args: [lhs, rhs]), span(lhs, rhs), at: op)
        }
        return lhs
    }

    private static let relops: [String: String] = [
        "<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_",
    ]

    private mutating func relation() throws(ExprProblem) -> Expr {
        var lhs = try addition()
        while true {
            let fn: String
            if case .punct(let q) = tok.kind, let f = Parser.relops[q] {
                fn = f
            } else if case .ident("in") = tok.kind {
                fn = "@in"
            } else {
                return lhs
            }
            let op = tok.span
            p += 1
            let rhs = try addition()
            lhs = try make(.call(function: fn, target: nil, args: [lhs, rhs]), span(lhs, rhs), at: op)
        }
    }

    private mutating func addition() throws(ExprProblem) -> Expr {
        var lhs = try multiplication()
        while true {
            let fn: String
            if isPunct("+") { fn = "_+_" } else if isPunct("-") { fn = "_-_" } else { return lhs }
            let op = tok.span
            p += 1
            let rhs = try multiplication()
            lhs = try make(.call(function: fn, target: nil, args: [lhs, rhs]), span(lhs, rhs), at: op)
        }
    }

    private mutating func multiplication() throws(ExprProblem) -> Expr {
        var lhs = try unary()
        while true {
            let fn: String
            if isPunct("*") {
                fn = "_*_"
            } else if isPunct("/") {
                fn = "_/_"
            } else if isPunct("%") {
                fn = "_%_"
            } else {
                return lhs
            }
            let op = tok.span
            p += 1
            let rhs = try unary()
            lhs = try make(.call(function: fn, target: nil, args: [lhs, rhs]), span(lhs, rhs), at: op)
        }
    }

    /// `!x`, `-x`, `!!x`…: each operator is a level, counted as it is read, so that the error points at the first
    /// operator past the limit.
    private mutating func unary() throws(ExprProblem) -> Expr {
        guard isPunct("!") || isPunct("-") else { return try member() }
        let isNot = isPunct("!")
        let symbol = isNot ? "!" : "-"
        let first = p
        let start = tok.span.start
        var n = 0
        while isPunct(symbol) {
            try enter()
            p += 1
            n += 1
        }
        defer { depth -= n }
        // The node of the operator `k` places from the innermost.
        func wrap(_ e: Expr, _ k: Int) throws(ExprProblem) -> Expr {
            try make(
                .call(function: isNot ? "!_" : "-_", target: nil, args: [e]), SourceSpan(start, e.span.end),
                at: tokens[first + n - 1 - k].span)
        }
        if !isNot {
            // A negated integer literal is folded first, so that -9223372036854775808 is representable.
            if case .int(let mag) = tok.kind, !nextIsMemberSuffix() {
                let t = tok
                p += 1
                var e: Expr
                if mag == UInt64(Int64.max) + 1 {
                    e = Expr(.literal(.int(Int64.min)), SourceSpan(start + n - 1, t.span.end))
                } else if mag <= UInt64(Int64.max) {
                    e = Expr(.literal(.int(-Int64(mag))), SourceSpan(start + n - 1, t.span.end))
                } else {
                    throw ExprProblem("integer literal is out of range", t.span)
                }
                for k in 1..<n { e = try wrap(e, k) }
                return e
            }
            if case .double(let d) = tok.kind, !nextIsMemberSuffix() {
                let t = tok
                p += 1
                var e = Expr(.literal(.double(-d)), SourceSpan(start + n - 1, t.span.end))
                for k in 1..<n { e = try wrap(e, k) }
                return e
            }
        }
        var e = try member()
        for k in 0..<n { e = try wrap(e, k) }
        return e
    }

    private func nextIsMemberSuffix() -> Bool {
        guard p + 1 < tokens.count else { return false }
        if case .punct(let q) = tokens[p + 1].kind, q == "." || q == "[" { return true }
        return false
    }

    private mutating func member() throws(ExprProblem) -> Expr {
        var e = try primary()
        while true {
            if eat(".") {
                let name: String
                var quoted = false
                switch tok.kind {
                case .ident(let n): name = n
                case .quotedIdent(let n):
                    name = n
                    quoted = true
                default:
                    throw ExprProblem("expected a field name after '.', found \(Parser.describe(tok.kind))", tok.span)
                }
                let nameTok = tok
                p += 1
                if isPunct("(") && !quoted {
                    try enter()
                    defer { depth -= 1 }
                    p += 1
                    let args = try exprList(closing: ")")
                    let close = try expect(")", "to close the argument list of '\(name)'")
                    let sp = SourceSpan(e.span.start, close.span.end)
                    e = try receiverCall(name, target: e, args: args, span: sp, nameSpan: nameTok.span)
                } else {
                    e = try make(
                        .select(e, field: name, testOnly: false), SourceSpan(e.span.start, nameTok.span.end),
                        at: nameTok.span)
                }
            } else if isPunct("[") {
                let open = tok.span
                try enter()
                defer { depth -= 1 }
                p += 1
                let index = try expr()
                let close = try expect("]", "to close the index")
                e = try make(
                    .call(function: "_[_]", target: nil, args: [e, index]), SourceSpan(e.span.start, close.span.end), at: open)
            } else {
                return e
            }
        }
    }

    private mutating func exprList(closing: String) throws(ExprProblem) -> [Expr] {
        var out: [Expr] = []
        if isPunct(closing) { return out }
        repeat {
            if isPunct(closing) { break }  // trailing comma
            out.append(try expr())
        } while eat(",")
        return out
    }

    private mutating func primary() throws(ExprProblem) -> Expr {
        let t = tok
        switch t.kind {
        case .int(let mag):
            p += 1
            guard mag <= UInt64(Int64.max) else { throw ExprProblem("integer literal is out of range", t.span) }
            return Expr(.literal(.int(Int64(mag))), t.span)
        case .uint(let v):
            p += 1
            return Expr(.literal(.uint(v)), t.span)
        case .double(let v):
            p += 1
            return Expr(.literal(.double(v)), t.span)
        case .string(let v):
            p += 1
            return Expr(.literal(.string(v)), t.span)
        case .bytes(let v):
            p += 1
            return Expr(.literal(.bytes(v)), t.span)
        case .ident(let name):
            p += 1
            switch name {
            case "true": return Expr(.literal(.bool(true)), t.span)
            case "false": return Expr(.literal(.bool(false)), t.span)
            case "null": return Expr(.literal(.null), t.span)
            case "in": throw ExprProblem("'in' needs a value on its left", t.span)
            default: break
            }
            if Lexer.reserved.contains(name) {
                throw ExprProblem("'\(name)' is a reserved word and cannot be used as a name", t.span)
            }
            if isPunct("(") {
                try enter()
                defer { depth -= 1 }
                p += 1
                let args = try exprList(closing: ")")
                let close = try expect(")", "to close the argument list of '\(name)'")
                let sp = SourceSpan(t.span.start, close.span.end)
                if name == "has" {
                    guard args.count == 1, case .select(let operand, let field, false) = args[0].node else {
                        throw ExprProblem("has() takes one field selection, like has(user.plan)", sp)
                    }
                    return try make(.select(operand, field: field, testOnly: true), sp, at: t.span)
                }
                return try make(.call(function: name, target: nil, args: args), sp, at: t.span)
            }
            return Expr(.ident(name), t.span)
        case .punct("."):
            // A leading dot names an identifier from the root scope.
            p += 1
            guard case .ident(let name) = tok.kind else {
                throw ExprProblem("expected a name after '.'", tok.span)
            }
            let nt = tok
            p += 1
            if isPunct("(") {
                try enter()
                defer { depth -= 1 }
                p += 1
                let args = try exprList(closing: ")")
                let close = try expect(")", "to close the argument list of '\(name)'")
                return try make(
                    .call(function: name, target: nil, args: args), SourceSpan(t.span.start, close.span.end), at: nt.span)
            }
            return Expr(.ident(name), SourceSpan(t.span.start, nt.span.end))
        case .punct("("):
            p += 1
            let e = try expr()
            _ = try expect(")", "to close '('")
            return e
        case .punct("["):
            try enter()
            defer { depth -= 1 }
            p += 1
            let items = try exprList(closing: "]")
            let close = try expect("]", "to close the list")
            return try make(.list(items), SourceSpan(t.span.start, close.span.end), at: t.span)
        case .punct("{"):
            try enter()
            defer { depth -= 1 }
            p += 1
            var entries: [(key: Expr, value: Expr)] = []
            if !isPunct("}") {
                repeat {
                    if isPunct("}") { break }
                    let k = try expr()
                    _ = try expect(":", "between a map key and its value")
                    let v = try expr()
                    entries.append((k, v))
                } while eat(",")
            }
            let close = try expect("}", "to close the map")
            return try make(.map(entries), SourceSpan(t.span.start, close.span.end), at: t.span)
        case .eof:
            throw ExprProblem("expression ends too early: a value is missing", t.span)
        default:
            throw ExprProblem("expected a value, found \(Parser.describe(t.kind))", t.span)
        }
    }

    private mutating func receiverCall(
        _ name: String, target: Expr, args: [Expr], span: SourceSpan, nameSpan: SourceSpan
    ) throws(ExprProblem) -> Expr {
        let kind: Comprehension.Kind?
        switch name {
        case "all": kind = .all
        case "exists": kind = .exists
        case "exists_one", "existsOne": kind = .existsOne
        case "map": kind = .map
        case "filter": kind = .filter
        default: kind = nil
        }
        guard let kind else { return try make(.call(function: name, target: target, args: args), span, at: nameSpan) }
        let arity = kind == .map ? [2, 3] : [2]
        guard arity.contains(args.count), case .ident(let v) = args[0].node else {
            throw ExprProblem(
                "\(name)() takes a variable name and an expression, like list.\(name)(x, x > 0)", span)
        }
        var c = Comprehension(kind: kind, range: target, variable: v, predicate: nil, transform: nil)
        switch kind {
        case .map:
            if args.count == 3 {
                c.predicate = args[1]
                c.transform = args[2]
            } else {
                c.transform = args[1]
            }
        default: c.predicate = args[1]
        }
        return try make(.comprehension(c), span, at: nameSpan)
    }
}
