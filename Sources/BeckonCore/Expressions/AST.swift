/// A parsed CEL expression. Operators are calls of CEL's internal function names (`_+_`, `_&&_`, `!_`, `_[_]`,
/// `@in`, `_?_:_`); macros (`has`, `all`, `exists`, `exists_one`, `map`, `filter`) are expanded at parse time.
public struct Expr: Sendable {
    public var span: SourceSpan
    public let node: Node
    /// Levels of the tree from this node down to its deepest leaf (a leaf is 1). The parser keeps it within
    /// ``Parser/maxDepth``, so that every pass that walks an expression recursively (the checker, the compiler,
    /// the compiled closures, the analysis, the explanations) recurses at most that deep.
    public let height: Int

    public indirect enum Node: Sendable {
        case literal(Value)
        case ident(String)
        /// `operand.field`; with `testOnly` it is `has(operand.field)`.
        case select(Expr, field: String, testOnly: Bool)
        case call(function: String, target: Expr?, args: [Expr])
        case list([Expr])
        case map([(key: Expr, value: Expr)])
        case comprehension(Comprehension)
    }

    public init(_ node: Node, _ span: SourceSpan) {
        self.node = node
        self.span = span
        var below = 0
        switch node {
        case .literal, .ident: break
        case .select(let e, _, _): below = e.height
        case .call(_, let t, let args): below = max(t?.height ?? 0, args.map(\.height).max() ?? 0)
        case .list(let es): below = es.map(\.height).max() ?? 0
        case .map(let es): below = es.map { max($0.key.height, $0.value.height) }.max() ?? 0
        case .comprehension(let c):
            below = max(c.range.height, c.predicate?.height ?? 0, c.transform?.height ?? 0)
        }
        height = below + 1
    }
}

/// The expansion of a CEL macro over a list or map.
public struct Comprehension: Sendable {
    public enum Kind: String, Sendable { case all, exists, existsOne = "exists_one", map, filter }
    public var kind: Kind
    public var range: Expr
    public var variable: String
    /// The predicate (`all`, `exists`, `exists_one`, `filter`) or the filter of a three-argument `map`.
    public var predicate: Expr?
    /// The transform of `map`.
    public var transform: Expr?
}

extension Expr {
    /// The dotted name of an `a.b.c` chain of identifiers, if the expression is one.
    var qualifiedName: String? {
        switch node {
        case .ident(let n): return n
        case .select(let operand, let field, false):
            return operand.qualifiedName.map { $0 + "." + field }
        default: return nil
        }
    }

    var isStringLiteral: Bool { if case .literal(.string) = node { true } else { false } }

    /// Calls `visit` on this expression and every sub-expression, parents first.
    public func walk(_ visit: (Expr) -> Void) {
        visit(self)
        switch node {
        case .literal, .ident: break
        case .select(let e, _, _): e.walk(visit)
        case .call(_, let t, let args):
            t?.walk(visit)
            for a in args { a.walk(visit) }
        case .list(let es): for e in es { e.walk(visit) }
        case .map(let es):
            for e in es {
                e.key.walk(visit)
                e.value.walk(visit)
            }
        case .comprehension(let c):
            c.range.walk(visit)
            c.predicate?.walk(visit)
            c.transform?.walk(visit)
        }
    }
}
