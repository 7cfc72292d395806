/// The evaluator of a compiled expression node.
public typealias Eval = @Sendable (EvalScope) -> Value

/// A checked and compiled expression: closures built once at load time, never re-parsed per event.
public final class CompiledExpr: Sendable {
    /// The text it was compiled from.
    public let source: String
    /// The statically inferred type.
    public let type: CELType
    /// The value, when the expression is constant.
    public let constant: Value?
    let eval: Eval
    /// Comprehension variables it needs in ``EvalScope/locals``.
    let localsNeeded: Int
    /// The same condition as a flat conjunction of tests, when it is one (decides truth without the closures).
    let predicate: Predicate?

    init(
        source: String, type: CELType, constant: Value?, eval: @escaping Eval, localsNeeded: Int,
        predicate: Predicate? = nil
    ) {
        self.source = source
        self.type = type
        self.constant = constant
        self.eval = eval
        self.localsNeeded = localsNeeded
        self.predicate = predicate
    }

    @inline(__always) public func evaluate(_ scope: EvalScope) -> Value {
        if scope.locals.count < localsNeeded { scope.ensureLocals(localsNeeded) }
        return eval(scope)
    }
}

/// How a name in an expression resolves at compile time: the environment of a rule, a segment, an action.
public protocol ExpressionEnvironment {
    /// The variable `name`, or `nil` if there is none.
    func variable(_ name: String) -> VariableBinding?
    /// A function provided by the environment (Beckon's history functions…), or `nil`.
    func function(_ name: String) -> CustomFunction?
    /// Names offered in "did you mean" suggestions.
    var variableNames: [String] { get }
    var functionNames: [String] { get }
}

/// A variable: its type, and how to compile a field path below it (`user.plan`, `event.properties.price`).
public struct VariableBinding {
    public var type: CELType
    /// Compiles `name.path…`. Returns the evaluator, its type, and how many path elements it consumed
    /// (the rest are compiled as ordinary field selections). With `testOnly`, the whole path is a `has()` test.
    public var select: (_ path: [String], _ testOnly: Bool, _ span: SourceSpan) throws(ExprProblem) -> (Eval, CELType, Int)
    /// The slot a whole path reads, when it reads one (``Predicate`` tests it without the closure).
    var operand: ((_ path: [String]) -> Predicate.Operand?)?

    public init(
        type: CELType,
        select: @escaping (_ path: [String], _ testOnly: Bool, _ span: SourceSpan) throws(ExprProblem) -> (Eval, CELType, Int)
    ) {
        self.type = type
        self.select = select
    }

    /// A variable read from ``EvalScope/bindings`` by name, with no special paths.
    public static func binding(_ name: String, type: CELType = .dyn) -> VariableBinding {
        VariableBinding(type: type) { _, _, _ in
            ({ s in s.bindings[name] ?? .error(EvalError("no value bound to '\(name)'")) }, type, 0)
        }
    }
}

/// A function whose compilation the environment controls (it may require constant arguments).
public struct CustomFunction {
    /// `count(name, window)`…, for messages.
    public var usage: String
    public var compile: (_ args: [Expr], _ span: SourceSpan, _ compiler: ExprCompiler) throws(ExprProblem) -> CompiledNode

    public init(
        usage: String,
        compile: @escaping (_ args: [Expr], _ span: SourceSpan, _ compiler: ExprCompiler) throws(ExprProblem) -> CompiledNode
    ) {
        self.usage = usage
        self.compile = compile
    }
}

/// A compiled sub-expression while compiling.
public struct CompiledNode {
    public var type: CELType
    public var eval: Eval
    public var constant: Value?
    /// What it reads, when it is a slot or a count (the left side of a ``Predicate`` test).
    var operand: Predicate.Operand?
    /// The condition it computes as a flat conjunction of tests, when it is one.
    var predicate: Predicate?

    public init(type: CELType, eval: @escaping Eval, constant: Value? = nil) {
        self.type = type
        self.eval = eval
        self.constant = constant
    }

    static func constant(_ v: Value) -> CompiledNode {
        CompiledNode(type: CELType.of(v), eval: { _ in v }, constant: v)
    }

    static var failed: CompiledNode {
        CompiledNode(type: .error, eval: { _ in .error(EvalError("expression failed to compile")) })
    }
}

/// Type-checks and compiles an ``Expr`` against an environment, collecting every problem.
public final class ExprCompiler {
    public let environment: any ExpressionEnvironment
    /// Record sub-expression values in ``EvalScope/trace`` (for `explain`).
    public let tracing: Bool
    /// When false (cel-spec tests with `disable_check`), type mismatches are left for evaluation to report.
    public let checkTypes: Bool
    public private(set) var problems: [ExprProblem] = []
    private var locals: [(name: String, index: Int)] = []
    /// The text being compiled (traced values name it).
    private var source = ""
    private var localsInUse = 0
    private var maxLocals = 0

    public init(environment: any ExpressionEnvironment, tracing: Bool = false, checkTypes: Bool = true) {
        self.environment = environment
        self.tracing = tracing
        self.checkTypes = checkTypes
    }

    /// Parses, checks and compiles `text`. Returns `nil` when there were problems (see ``problems``).
    public func compile(_ text: String) -> CompiledExpr? {
        let expr: Expr
        do { expr = try Parser.parse(text) } catch {
            problems.append(error)
            return nil
        }
        return compile(expr, source: text)
    }

    public func compile(_ expr: Expr, source: String) -> CompiledExpr? {
        let before = problems.count
        let outer = self.source
        self.source = source
        defer { self.source = outer }
        maxLocals = 0
        let node = compileNode(expr)
        guard problems.count == before else { return nil }
        return CompiledExpr(
            source: source, type: node.type, constant: node.constant, eval: node.eval,
            localsNeeded: maxLocals, predicate: tracing || node.constant != nil ? nil : Predicate.truth(node))
    }

    public func report(_ p: ExprProblem) { problems.append(p) }

    /// Compiles a sub-expression, reporting problems and returning a failed node instead of throwing.
    public func compileNode(_ e: Expr) -> CompiledNode {
        do { return try node(e) } catch {
            problems.append(error)
            return .failed
        }
    }

    private func traced(_ n: CompiledNode, _ span: SourceSpan, op: String? = nil) -> CompiledNode {
        guard tracing, n.constant == nil else { return n }
        let inner = n.eval
        let src = source
        return CompiledNode(
            type: n.type,
            eval: { s in
                guard let trace = s.trace else { return inner(s) }
                trace.depth += 1
                let v = inner(s)
                trace.depth -= 1
                trace.record(src, span, v, op: op)
                return v
            })
    }

    private func node(_ e: Expr) throws(ExprProblem) -> CompiledNode {
        switch e.node {
        case .literal(let v): return .constant(v)
        case .ident(let name): return traced(try identifier(name, e.span), e.span)
        case .select(let operand, let field, let testOnly):
            return traced(try select(e, operand: operand, field: field, testOnly: testOnly), e.span)
        case .call("_[_]", nil, let args) where args.count == 2 && args[1].isStringLiteral && args[0].qualifiedName != nil:
            // `user["Is Default Browser"]` is `user.Is Default Browser`: a slot, not a map look-up.
            guard case .literal(.string(let key)) = args[1].node else { return .failed }
            return try node(Expr(.select(args[0], field: key, testOnly: false), e.span))
        case .call(let fn, let target, let args): return try call(fn, target: target, args: args, span: e.span)
        case .list(let items):
            let nodes = items.map(compileNode)
            let type = CELType.list(CELType.join(nodes.map(\.type)))
            if nodes.allSatisfy({ $0.constant != nil }) {
                return CompiledNode(
                    type: type, eval: { [list = Value.list(nodes.map { $0.constant! })] _ in list },
                    constant: .list(nodes.map { $0.constant! }))
            }
            let evals = nodes.map(\.eval)
            return CompiledNode(
                type: type,
                eval: { s in
                    var out: [Value] = []
                    out.reserveCapacity(evals.count)
                    for ev in evals {
                        let v = ev(s)
                        if case .error = v { return v }
                        out.append(v)
                    }
                    return .list(out)
                })
        case .map(let entries):
            let keys = entries.map { compileNode($0.key) }
            let values = entries.map { compileNode($0.value) }
            for (i, k) in keys.enumerated() where checkTypes {
                switch k.type {
                case .string, .int, .uint, .number, .bool, .dyn, .error: break
                default:
                    problems.append(
                        ExprProblem(
                            "map keys must be strings, ints, uints or bools, not \(k.type)",
                            entries[i].key.span, id: .expressionType))
                }
            }
            let type = CELType.map(CELType.join(keys.map(\.type)), CELType.join(values.map(\.type)))
            let ke = keys.map(\.eval)
            let ve = values.map(\.eval)
            let build: Eval = { s in
                var pairs: [(Value, Value)] = []
                pairs.reserveCapacity(ke.count)
                for i in ke.indices {
                    let k = ke[i](s)
                    if case .error = k { return k }
                    let v = ve[i](s)
                    if case .error = v { return v }
                    pairs.append((k, v))
                }
                do throws(EvalError) { return .map(try ValueMap(checking: pairs)) } catch { return .error(error) }
            }
            if keys.allSatisfy({ $0.constant != nil }) && values.allSatisfy({ $0.constant != nil }) {
                let v = build(EvalScope.constantFolding)
                return CompiledNode(type: type, eval: { _ in v }, constant: v)
            }
            return CompiledNode(type: type, eval: build)
        case .comprehension(let c): return traced(try comprehension(c, e.span), e.span)
        }
    }

    // MARK: Names

    private static let typeNames: Set<String> = [
        "int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type",
        "google.protobuf.Timestamp", "google.protobuf.Duration",
    ]

    private func identifier(_ name: String, _ span: SourceSpan) throws(ExprProblem) -> CompiledNode {
        if let local = locals.last(where: { $0.name == name }) {
            let i = local.index
            return CompiledNode(type: .dyn, eval: { s in s.locals[i] })
        }
        if let v = environment.variable(name) {
            let (ev, t, _) = try v.select([], false, span)
            return CompiledNode(type: t, eval: ev)
        }
        if ExprCompiler.typeNames.contains(name) { return .constant(.type(name)) }
        if !checkTypes { return runtimeError("undeclared reference to '\(name)'") }
        throw unknownName(name, span)
    }

    /// In unchecked mode, what the checker would reject fails when evaluated instead.
    private func runtimeError(_ message: String) -> CompiledNode {
        CompiledNode(type: .dyn, eval: { _ in .error(EvalError(message)) })
    }

    private func unknownName(_ name: String, _ span: SourceSpan) -> ExprProblem {
        let candidates = environment.variableNames + locals.map(\.name)
        let hint = Suggest.nearest(name, in: candidates)
        return ExprProblem(
            "unknown name '\(name)'" + (hint.map { "; did you mean '\($0)'?" } ?? ""), span,
            id: .unknownIdentifier, suggestion: hint)
    }

    private func select(_ e: Expr, operand: Expr, field: String, testOnly: Bool) throws(ExprProblem) -> CompiledNode {
        // A chain rooted at an environment variable is resolved by the variable (slots, not map look-ups).
        var path: [String] = [field]
        var root = operand
        while case .select(let inner, let f, false) = root.node {
            path.insert(f, at: 0)
            root = inner
        }
        if case .ident(let name) = root.node, !locals.contains(where: { $0.name == name }) {
            // A dotted name may itself be a variable: the longest declared prefix wins (`a.b.c`, then `a.b`).
            for k in stride(from: path.count, to: 0, by: -1) {
                let qualified = ([name] + path.prefix(k)).joined(separator: ".")
                if let v = environment.variable(qualified) {
                    let (ev, t, _) = try v.select([], false, e.span)
                    var node = CompiledNode(type: t, eval: ev)
                    for (j, f) in path.enumerated().dropFirst(k) {
                        node = selectField(node, f, testOnly: testOnly && j == path.count - 1)
                    }
                    if k == path.count && testOnly { break }
                    return node
                }
            }
            if let v = environment.variable(name) {
                let (ev, t, consumed) = try v.select(path, testOnly, e.span)
                if consumed == path.count {
                    var node = CompiledNode(type: t, eval: ev)
                    if !testOnly { node.operand = v.operand?(path) }
                    return node
                }
                // Compile the remaining fields as ordinary selections on the variable's value.
                var node = CompiledNode(type: t, eval: ev)
                for (k, f) in path.enumerated().dropFirst(consumed) {
                    node = selectField(node, f, testOnly: testOnly && k == path.count - 1)
                }
                return node
            }
            let qualified = ([name] + path).joined(separator: ".")
            if ExprCompiler.typeNames.contains(qualified) && !testOnly { return .constant(.type(qualified)) }
            if !checkTypes { return runtimeError("undeclared reference to '\(qualified)'") }
            throw unknownName(name, root.span)
        }
        let base = try node(operand)
        return selectField(base, field, testOnly: testOnly)
    }

    /// `base.field` on a map value (or `has(base.field)`).
    func selectField(_ base: CompiledNode, _ field: String, testOnly: Bool) -> CompiledNode {
        let ev = base.eval
        if testOnly {
            return CompiledNode(
                type: .bool,
                eval: { s in
                    switch ev(s) {
                    case .map(let m): return .bool(m[string: field] != nil)
                    case .error(let e): return .error(e)
                    default: return .error(.noSuchOverload)
                    }
                })
        }
        var t = CELType.dyn
        if case .map(_, let v) = base.type { t = v }
        return CompiledNode(type: t, eval: { s in ev(s)[field] })
    }

    // MARK: Calls

    private static let operatorNames: [String: String] = [
        "_+_": "+", "_-_": "-", "_*_": "*", "_/_": "/", "_%_": "%", "-_": "-", "!_": "!", "_<_": "<", "_<=_": "<=",
        "_>_": ">", "_>=_": ">=", "_==_": "==", "_!=_": "!=", "@in": "in", "_[_]": "[]", "_&&_": "&&", "_||_": "||",
    ]

    private func call(_ fn: String, target: Expr?, args: [Expr], span: SourceSpan) throws(ExprProblem) -> CompiledNode {
        switch fn {
        case "_&&_", "_||_": return logical(fn == "_&&_", args.map(compileNode), span)
        case "_?_:_": return conditional(args.map(compileNode), args, span)
        case "!_":
            let a = compileNode(args[0])
            try expectBool(a, args[0], what: "'!'")
            let ev = a.eval
            return fold(
                CompiledNode(
                    type: .bool,
                    eval: { s in
                        switch ev(s) {
                        case .bool(let b): .bool(!b)
                        case .error(let e): .error(e)
                        default: .error(.noSuchOverload)
                        }
                    }), [a], span)
        default: break
        }
        if target == nil, let custom = environment.function(fn) {
            return traced(try custom.compile(args, span, self), span)
        }
        guard let decl = FunctionDecl.standard[fn] ?? FunctionDecl.beckon[fn] else {
            if !checkTypes { return runtimeError("unbound function '\(fn)'") }
            if let t = target, environment.function(fn) != nil {
                _ = t
                throw ExprProblem("'\(fn)' is called as \(fn)(…), not as a method", span, id: .unknownFunction)
            }
            let names =
                Array(FunctionDecl.standard.keys.filter { !$0.contains("_") && $0 != "@in" })
                + Array(FunctionDecl.beckon.keys) + environment.functionNames
            let hint = Suggest.nearest(fn, in: names)
            throw ExprProblem(
                "unknown function '\(fn)'" + (hint.map { "; did you mean '\($0)'?" } ?? ""), span,
                id: .unknownFunction, suggestion: hint)
        }
        var nodes: [CompiledNode] = []
        if let target { nodes.append(compileNode(target)) }
        nodes += args.map(compileNode)
        let resultType = try checkCall(decl, receiver: target != nil, nodes, span)
        if fn == "matches", let pattern = nodes.last?.constant, case .string(let p) = pattern {
            if case .failure(let err) = RegexBox.compile(p) {
                throw ExprProblem(err.message, (target != nil ? args[0] : args[1]).span, id: .invalidRegex)
            }
        }
        // (Arguments that can only be scalars cost nothing to charge: the check is left out when the types say so.)
        let charges = decl.chargesWork && nodes.contains { Self.mayBeLong($0.type) }
        let n = CompiledNode(
            type: resultType,
            eval: fn == "matches" ? makeMatches(nodes) : makeCall(decl.impl, nodes, chargesWork: charges))
        var folded = decl.pure ? fold(n, nodes, span) : n
        if !tracing && folded.constant == nil { folded.predicate = Predicate.comparison(fn, nodes) }
        if ExprCompiler.operatorNames[fn] != nil && !["_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_", "@in"].contains(fn) {
            return folded
        }
        return traced(folded, span, op: ExprCompiler.operatorNames[fn])
    }

    /// Whether a value of type `t` may be a string, bytes, a list or a map (whose length a call is charged for).
    static func mayBeLong(_ t: CELType) -> Bool {
        switch t {
        case .null, .bool, .int, .uint, .double, .number, .timestamp, .duration, .type: false
        default: true
        }
    }

    /// Takes the nodes, not `[Eval]`: closures kept in an array are stored at the most general abstraction and every
    /// call would go through reabstraction thunks.
    ///
    /// With `chargesWork`, each call is charged its arguments' lengths (``Value/work``) before it runs, so that a
    /// comprehension's iterations cannot each do unbounded work unseen by the budget.
    private func makeCall(_ impl: FunctionDecl.Impl, _ nodes: [CompiledNode], chargesWork: Bool) -> Eval {
        switch (impl, nodes.count) {
        case (.unary(let f), 1):
            let a = nodes[0].eval
            guard chargesWork else { return { s in f(a(s)) } }
            return { s in
                let x = a(s)
                let w = x.work
                if w > 0 && !s.charge(w) { return .error(ValueLimits.stepsSpent) }
                return f(x)
            }
        case (.binary(let f), 2):
            let a = nodes[0].eval
            let b = nodes[1].eval
            guard chargesWork else { return { s in f(a(s), b(s)) } }
            return { s in
                let x = a(s)
                let y = b(s)
                let w = x.work &+ y.work
                if w > 0 && !s.charge(w) { return .error(ValueLimits.stepsSpent) }
                return f(x, y)
            }
        case (.nary(let f), _):
            let evals = nodes.map(\.eval)
            guard chargesWork else { return { s in f(evals.map { $0(s) }) } }
            return { s in
                let xs = evals.map { $0(s) }
                var w = 0
                for x in xs { w &+= x.work }
                if w > 0 && !s.charge(w) { return .error(ValueLimits.stepsSpent) }
                return f(xs)
            }
        default:
            return { _ in .error(.noSuchOverload) }
        }
    }

    /// `matches`, whose work is charged to the event's step budget (``RegexBox/steps(for:)``) before it runs.
    private func makeMatches(_ nodes: [CompiledNode]) -> Eval {
        guard nodes.count == 2 else { return { _ in .error(.noSuchOverload) } }
        let a = nodes[0].eval
        let b = nodes[1].eval
        return { s in
            StringFunctions.stringPair(a(s), b(s)) { text, pattern in
                switch RegexBox.compile(pattern) {
                case .failure(let e): return .error(e)
                case .success(let r):
                    guard s.charge(r.steps(for: text)) else { return .error(ValueLimits.stepsSpent) }
                    return .bool(r.matches(text))
                }
            }
        }
    }

    /// Evaluates a node of constant inputs once, now.
    private func fold(_ n: CompiledNode, _ inputs: [CompiledNode], _ span: SourceSpan) -> CompiledNode {
        guard inputs.allSatisfy({ $0.constant != nil }) else { return n }
        let v = n.eval(EvalScope.constantFolding)
        return CompiledNode(type: n.type == .error ? CELType.of(v) : n.type, eval: { _ in v }, constant: v)
    }

    private func expectBool(_ n: CompiledNode, _ e: Expr, what: String) throws(ExprProblem) {
        guard checkTypes else { return }
        switch n.type {
        case .bool, .dyn, .error: return
        default:
            throw ExprProblem(
                "\(what) needs a true/false value, but this is \(describe(n.type))", e.span,
                id: .expressionType)
        }
    }

    private func describe(_ t: CELType) -> String {
        switch t {
        case .int, .uint, .double: "a number (\(t))"
        case .number: "a number"
        case .string: "a string"
        case .null: "null"
        default: "a \(t)"
        }
    }

    private func logical(_ isAnd: Bool, _ ops: [CompiledNode], _ span: SourceSpan) -> CompiledNode {
        for (i, o) in ops.enumerated() where checkTypes && !(o.type == .bool || o.type.isDynLike) {
            problems.append(
                ExprProblem(
                    "'\(isAnd ? "&&" : "||")' needs true/false values on both sides, but the \(i == 0 ? "left" : "right") side is \(describe(o.type))",
                    span, id: .expressionType))
        }
        let a = ops[0].eval
        let b = ops[1].eval
        var node: CompiledNode
        if isAnd {
            node = CompiledNode(
                type: .bool,
                eval: { s in
                    let l = a(s)
                    if case .bool(false) = l { return l }
                    let r = b(s)
                    if case .bool(false) = r { return r }
                    if case .bool(true) = l, case .bool(true) = r { return r }
                    if case .error = l { return l }
                    if case .error = r { return r }
                    return .error(.noSuchOverload)
                })
        } else {
            node = CompiledNode(
                type: .bool,
                eval: { s in
                    let l = a(s)
                    if case .bool(true) = l { return l }
                    let r = b(s)
                    if case .bool(true) = r { return r }
                    if case .bool(false) = l, case .bool(false) = r { return r }
                    if case .error = l { return l }
                    if case .error = r { return r }
                    return .error(.noSuchOverload)
                })
        }
        if isAnd && !tracing, let l = Predicate.truth(ops[0]), let r = Predicate.truth(ops[1]) {
            node.predicate = Predicate(terms: l.terms + r.terms)
        }
        // Fold only when the outcome is decided by constants (false && x, true || x) or both are constant.
        if let c = ops[0].constant, c.isTrue != isAnd, case .bool = c { return .constant(c) }
        if let c = ops[1].constant, c.isTrue != isAnd, case .bool = c, ops[0].type == .bool { return .constant(c) }
        return fold(node, ops, span)
    }

    private func conditional(_ ops: [CompiledNode], _ exprs: [Expr], _ span: SourceSpan) -> CompiledNode {
        do { try expectBool(ops[0], exprs[0], what: "the condition of 'a ? b : c'") } catch { problems.append(error) }
        let c = ops[0].eval
        let a = ops[1].eval
        let b = ops[2].eval
        let t =
            ops[1].type == ops[2].type
            ? ops[1].type : (ops[1].type == .null ? ops[2].type : (ops[2].type == .null ? ops[1].type : .dyn))
        if let cv = ops[0].constant, case .bool(let cb) = cv { return cb ? ops[1] : ops[2] }
        return CompiledNode(
            type: t,
            eval: { s in
                switch c(s) {
                case .bool(true): a(s)
                case .bool(false): b(s)
                case .error(let e): .error(e)
                default: .error(.noSuchOverload)
                }
            })
    }

    /// Finds the signatures that accept these argument types; returns the result type or throws a type error.
    private func checkCall(
        _ decl: FunctionDecl, receiver: Bool, _ nodes: [CompiledNode], _ span: SourceSpan
    )
        throws(ExprProblem) -> CELType
    {
        let types = nodes.map(\.type)
        if types.contains(.error) { return .dyn }
        if !checkTypes {
            // Only the number of arguments is checked; kinds are left to evaluation ("no such overload").
            let counts = Set(
                decl.signatures.filter { ($0.receiver != nil) == receiver }.map { $0.params.count + (receiver ? 1 : 0) })
            if counts.contains(types.count) { return .dyn }
        }
        if decl.name == "_==_" || decl.name == "_!=_" {
            if ExprCompiler.equatable(types[0], types[1]) { return .bool }
            throw ExprProblem(
                "cannot compare \(describe(types[0])) with \(describe(types[1])) using '\(ExprCompiler.operatorNames[decl.name]!)'",
                span, id: .expressionType, suggestion: ExprCompiler.comparisonHint(nodes))
        }
        var results: [CELType] = []
        var arityMatched = false
        for sig in decl.signatures {
            guard (sig.receiver != nil) == receiver else { continue }
            let params = (sig.receiver.map { [$0] } ?? []) + sig.params
            guard params.count == types.count else { continue }
            arityMatched = true
            var b = TypeBindings()
            var ok = true
            for (p, t) in zip(params, types) where !b.assign(p, t) {
                ok = false
                break
            }
            if ok { results.append(b.substitute(sig.result)) }
        }
        if let first = results.first {
            return results.allSatisfy { $0 == first } ? first : .dyn
        }
        let shown = ExprCompiler.operatorNames[decl.name].map { "'\($0)'" } ?? "'\(decl.name)'"
        if !arityMatched {
            let counts = Set(decl.signatures.filter { ($0.receiver != nil) == receiver }.map(\.params.count)).sorted()
            if counts.isEmpty {
                let form = receiver ? "as a function, \(decl.name)(x)" : "as a method, x.\(decl.name)(…)"
                throw ExprProblem("\(shown) is called \(form)", span, id: .expressionType)
            }
            let argCount = types.count - (receiver ? 1 : 0)
            throw ExprProblem(
                "\(shown) takes \(counts.map(String.init).joined(separator: " or ")) argument(s), found \(argCount)",
                span, id: .expressionType)
        }
        if decl.name == "@in", types.count == 2, case .list(let element) = types[1] {
            throw ExprProblem(
                "'in' looks for \(describe(types[0])) in a list of \(describe(element).replacingFirstArticle()), which never "
                    + "holds one", span, id: .expressionType)
        }
        if ["_<_", "_<=_", "_>_", "_>=_"].contains(decl.name), types.count == 2 {
            throw ExprProblem(
                "cannot compare \(describe(types[0])) with \(describe(types[1])) using \(shown)", span,
                id: .expressionType, suggestion: ExprCompiler.comparisonHint(nodes))
        }
        let shownTypes = types.map(\.description).joined(separator: ", ")
        throw ExprProblem("no version of \(shown) accepts (\(shownTypes))", span, id: .expressionType)
    }

    /// How to fix a comparison of two kinds of values that can never be equal: a quoted number or boolean compared
    /// with a number or a boolean loses its quotes; otherwise, compare like with like.
    static func comparisonHint(_ nodes: [CompiledNode]) -> String? {
        guard nodes.count == 2 else { return nil }
        for (a, b) in [(nodes[0], nodes[1]), (nodes[1], nodes[0])] {
            guard case .string(let t)? = a.constant else { continue }
            if b.type.isNumeric, Double(t) != nil { return "write \(t) without quotes to compare numbers" }
            if b.type == .bool, t == "true" || t == "false" {
                return "write \(t) without quotes to compare with a true/false value"
            }
        }
        for (a, b) in [(nodes[0], nodes[1]), (nodes[1], nodes[0])] where a.constant == nil && b.constant != nil {
            let kind: String
            switch a.type {
            case .int, .uint, .double, .number: kind = "a number"
            case .string: kind = "a string (in quotes)"
            case .bool: kind = "true or false"
            default: continue
            }
            return "compare it with \(kind)"
        }
        return nil
    }

    static func equatable(_ a: CELType, _ b: CELType) -> Bool {
        if a == b || a.isDynLike || b.isDynLike || a == .null || b == .null { return true }
        if a.isNumeric && b.isNumeric { return true }
        switch (a, b) {
        case (.list(let x), .list(let y)): return equatable(x, y)
        case (.map(let k1, let v1), .map(let k2, let v2)): return equatable(k1, k2) && equatable(v1, v2)
        default: return false
        }
    }

    // MARK: Macros

    private func comprehension(_ c: Comprehension, _ span: SourceSpan) throws(ExprProblem) -> CompiledNode {
        let range = compileNode(c.range)
        var elemType = CELType.dyn
        switch range.type {
        case .list(let e): elemType = e
        case .map(let k, _): elemType = k
        case .dyn, .error: break
        default:
            guard checkTypes else { break }
            throw ExprProblem(
                "\(c.kind.rawValue)() works on a list or a map, not \(describe(range.type))", c.range.span,
                id: .expressionType)
        }
        _ = elemType
        let slot = localsInUse
        localsInUse += 1
        maxLocals = max(maxLocals, localsInUse)
        locals.append((c.variable, slot))
        let pred = c.predicate.map(compileNode)
        let transform = c.transform.map(compileNode)
        locals.removeLast()
        localsInUse -= 1

        let rangeEval = range.eval
        let p = pred?.eval
        let t = transform?.eval
        @Sendable func items(_ v: Value) -> [Value]? {
            switch v {
            case .list(let xs): xs
            case .map(let m): m.entries.map(\.key)
            default: nil
            }
        }
        switch c.kind {
        case .all, .exists:
            let isAll = c.kind == .all
            let p = p!
            return CompiledNode(
                type: .bool,
                eval: { s in
                    let r = rangeEval(s)
                    if case .error = r { return r }
                    guard let xs = items(r) else { return .error(.noSuchOverload) }
                    var err: Value?
                    for x in xs {
                        if !s.step() { return .error(ValueLimits.stepsSpent) }
                        s.locals[slot] = x
                        switch p(s) {
                        case .bool(let b):
                            if b != isAll { return .bool(b) }
                        case .error(let e): if err == nil { err = .error(e) }
                        default: if err == nil { err = .error(.noSuchOverload) }
                        }
                    }
                    return err ?? .bool(isAll)
                })
        case .existsOne:
            let p = p!
            return CompiledNode(
                type: .bool,
                eval: { s in
                    let r = rangeEval(s)
                    if case .error = r { return r }
                    guard let xs = items(r) else { return .error(.noSuchOverload) }
                    var n = 0
                    for x in xs {
                        if !s.step() { return .error(ValueLimits.stepsSpent) }
                        s.locals[slot] = x
                        switch p(s) {
                        case .bool(true): n += 1
                        case .bool(false): break
                        case .error(let e): return .error(e)
                        default: return .error(.noSuchOverload)
                        }
                    }
                    return .bool(n == 1)
                })
        case .map, .filter:
            let isMap = c.kind == .map
            let type: CELType = isMap ? .list(transform?.type ?? .dyn) : (range.type.isDynLike ? .list(.dyn) : .list(elemType))
            return CompiledNode(
                type: type,
                eval: { s in
                    let r = rangeEval(s)
                    if case .error = r { return r }
                    guard let xs = items(r) else { return .error(.noSuchOverload) }
                    var out: [Value] = []
                    for x in xs {
                        if !s.step() { return .error(ValueLimits.stepsSpent) }
                        s.locals[slot] = x
                        if let p {
                            switch p(s) {
                            case .bool(true): break
                            case .bool(false): continue
                            case .error(let e): return .error(e)
                            default: return .error(.noSuchOverload)
                            }
                        }
                        if isMap {
                            let v = t!(s)
                            if case .error = v { return v }
                            out.append(v)
                        } else {
                            out.append(x)
                        }
                    }
                    return .list(out)
                })
        }
    }
}

extension String {
    /// "a number" → "numbers"… for "a list of …": drops the article and makes the noun plural.
    fileprivate func replacingFirstArticle() -> String {
        var t = self
        if t.hasPrefix("a ") { t.removeFirst(2) }
        if let paren = t.firstIndex(of: " ") { return t[..<paren] + "s" + t[paren...] }
        return t + "s"
    }
}
