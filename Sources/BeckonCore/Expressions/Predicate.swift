/// A condition that is a conjunction of simple tests — a slot or a count compared with a constant — kept as a flat
/// list so the engine can decide it without running closures or building values: `user.plan == "free" &&
/// event.properties.price > 50.0 && count("app_open", "1h") >= 3`, which is what most campaign conditions are.
///
/// It answers only *whether the condition is true*. Each test uses the very functions the compiled closures use
/// (``Value/equal(_:_:)``, ``Value/order(_:_:)``), and a missing value fails a test just as the error it evaluates to
/// fails the closure, so `holds` is exactly `evaluate(scope).isTrue`. When a verdict needs the value or the reasons,
/// the engine evaluates the closures instead.
///
/// A class, built once at load: a rule's gate borrows it (``Borrowed``: the compiled expression owns it), so handing
/// it around counts no references.
final class Predicate: Sendable {
    /// Where a test's left side comes from.
    enum Operand: Sendable, Equatable, BitwiseCopyable {
        /// `user.NAME`: the profile's attribute slot.
        case attribute(Int)
        /// `event.properties.NAME`: the event's property slot.
        case property(Int)
        /// `count(…)` over a rolling window.
        case count(series: Int32, windowMs: Int64)
        /// `count(…, "lifetime")`.
        case lifetimeCount(series: Int32)
    }

    /// What a term asks of its operand. The constants it compares with are the term's ``Term/constant`` (`equal`,
    /// `notEqual`, `order`) or ``Term/list`` (`isIn`), kept beside it so that they are compared in place.
    enum Test: Sendable, Equatable, BitwiseCopyable {
        case equal
        case notEqual
        /// An ordering (`<`, `<=`, `>`, `>=`): holds when the order of the operand to the constant is in `accepts`.
        case order(accepts: OrderSet)
        case isIn
        /// A bare boolean operand (`user.push`).
        case isTrue
    }

    struct OrderSet: OptionSet, Sendable, BitwiseCopyable {
        let rawValue: UInt8
        init(rawValue: UInt8) { self.rawValue = rawValue }
        static let ascending = OrderSet(rawValue: 1)
        static let same = OrderSet(rawValue: 2)
        static let descending = OrderSet(rawValue: 4)

        func accepts(_ o: Numeric.Order) -> Bool {
            switch o {
            case .orderedAscending: contains(.ascending)
            case .orderedSame: contains(.same)
            case .orderedDescending: contains(.descending)
            case .unordered: false
            }
        }

        /// The same relation with the sides swapped: `5 < x` is `x > 5`.
        var flipped: OrderSet {
            var f: OrderSet = intersection(.same)
            if contains(.ascending) { f.insert(.descending) }
            if contains(.descending) { f.insert(.ascending) }
            return f
        }

        /// The relation of a comparison operator (`_<_`…), if it is one.
        init?(operator fn: String) {
            switch fn {
            case "_<_": self = .ascending
            case "_<=_": self = [.ascending, .same]
            case "_>_": self = .descending
            case "_>=_": self = [.descending, .same]
            default: return nil
            }
        }
    }

    struct Term: Sendable {
        var operand: Operand
        var test: Test
        var constant: Value = .null
        var list: [Value] = []
    }

    let terms: [Term]

    /// A term as `holds` runs it: the test specialised for the constant's kind when it is a number, a flag or a
    /// string (the common conditions), so deciding it is one switch on the test and one on the value; anything else,
    /// and a value of another kind than the constant's, goes to the general comparison of ``Value``.
    private enum Op: BitwiseCopyable {
        case orderInt(OrderSet, Int64)
        case orderDouble(OrderSet, Double)
        /// `==` (or with `negate`, `!=`) of a number or flag.
        case equalInt(Int64, negate: Bool)
        case equalDouble(Double, negate: Bool)
        case equalBool(Bool, negate: Bool)
        /// `==`/`!=` of a string constant; `ascii`: compared with ``Bytes/equal(_:ascii:)``.
        case equalString(ascii: Bool, negate: Bool)
        case isIn
        /// `in` a list of integers only.
        case isInInts
        case isTrue
        /// Any other constant: the general comparison.
        case general
    }

    /// The terms as `holds` reads them: plain data in a flat table, each with where its constant (then its `in` list)
    /// is in a row of slots beside them — both read in place, counting no references.
    private struct FlatTerm: BitwiseCopyable {
        var operand: Operand
        var op: Op
        var constant: Int32
        var listCount: Int32
    }
    private let flat: FlatTable<FlatTerm>
    private let constants: ConstantRow
    /// Per constant: an ASCII string (for `in` lists).
    private let asciiConstants: FlatTable<Bool>

    init(terms: [Term]) {
        self.terms = terms
        var flat: [FlatTerm] = []
        var constants: [Value] = []
        for t in terms {
            flat.append(
                FlatTerm(
                    operand: t.operand, op: Predicate.op(t), constant: Int32(constants.count), listCount: Int32(t.list.count)))
            constants.append(t.constant)
            constants += t.list
        }
        self.flat = FlatTable(flat)
        self.asciiConstants = FlatTable(constants.map { if case .string(let s) = $0 { Bytes.isASCII(s) } else { false } })
        self.constants = ConstantRow(constants.map(Optional.some))
    }

    private static func op(_ t: Term) -> Op {
        switch (t.test, t.constant) {
        case (.order(let a), .int(let c)): .orderInt(a, c)
        case (.order(let a), .double(let c)): .orderDouble(a, c)
        case (.equal, .int(let c)): .equalInt(c, negate: false)
        case (.notEqual, .int(let c)): .equalInt(c, negate: true)
        case (.equal, .double(let c)): .equalDouble(c, negate: false)
        case (.notEqual, .double(let c)): .equalDouble(c, negate: true)
        case (.equal, .bool(let c)): .equalBool(c, negate: false)
        case (.notEqual, .bool(let c)): .equalBool(c, negate: true)
        case (.equal, .string(let c)): .equalString(ascii: Bytes.isASCII(c), negate: false)
        case (.notEqual, .string(let c)): .equalString(ascii: Bytes.isASCII(c), negate: true)
        case (.isIn, _): t.list.allSatisfy { if case .int = $0 { true } else { false } } ? .isInInts : .isIn
        case (.isTrue, _): .isTrue
        default: .general
        }
    }

    /// Whether term `i` holds for this user and event at `now` (both read through their loans: no reference counted).
    private func holds(term i: Int, _ profile: Borrowed<UserProfile>?, _ event: Borrowed<BoundEvent>?, _ now: Int64) -> Bool {
        switch flat[inRange: i].operand {
        case .attribute(let slot):
            guard let profile else { return false }
            return profile.with { test(i, $0.attributes.slot(slot)) }
        case .property(let slot):
            guard let event else { return false }
            return event.with { test(i, $0.propertySlots.slot(slot)) }
        case .count(let series, let ms):
            let n = profile?.with { $0.history.count(series: series, from: now - ms + 1, to: now) } ?? 0
            return test(i, count: Int64(n))
        case .lifetimeCount(let series):
            return test(i, count: Int64(profile?.with { $0.history.lifetimeStat(series: series)?.count } ?? 0))
        }
    }

    @inline(__always) private func test(_ t: Int, count n: Int64) -> Bool {
        switch flat[inRange: t].op {
        case .orderInt(let accepts, let c): accepts.accepts(Numeric.cmp(n, c))
        case .equalInt(let c, let negate): (n == c) != negate
        default: test(t, .int(n))
        }
    }

    /// Term `t` of a slot's value, read in place. A missing value or an error fails every test, as the error the
    /// closures evaluate to fails the condition.
    @inline(__always) private func test(_ t: Int, _ slot: SlotRef) -> Bool {
        let v = slot.peek
        switch flat[inRange: t].op {
        case .orderDouble(let accepts, let c):
            switch v {
            case .double(let x): return accepts.accepts(Numeric.cmp(x, c))
            case .int(let x): return accepts.accepts(Numeric.cmpIntDouble(x, c))
            default: break
            }
        case .orderInt(let accepts, let c):
            switch v {
            case .int(let x): return accepts.accepts(Numeric.cmp(x, c))
            case .double(let x): return accepts.accepts(Numeric.flip(Numeric.cmpIntDouble(c, x)))
            default: break
            }
        case .equalString(let ascii, let negate):
            if case .string = v {
                let k = Int(flat[inRange: t].constant)
                return slot.withString { x in
                    constants.withString(k) { ascii ? Bytes.equal(x, ascii: $0) : Bytes.equal(x, $0) } ?? false
                } != negate
            }
        case .equalInt(let c, let negate): if case .int(let x) = v { return (x == c) != negate }
        case .equalDouble(let c, let negate): if case .double(let x) = v { return (x == c) != negate }
        case .equalBool(let c, let negate): if case .bool(let x) = v { return (x == c) != negate }
        case .isTrue: if case .bool(let x) = v { return x }
        case .isIn:
            switch v {
            case .string:
                return slot.withString { x in
                    list(t).contains { i in
                        constants.withString(i) { asciiConstants[inRange: i] ? Bytes.equal(x, ascii: $0) : Bytes.equal(x, $0) }
                            == true
                    }
                } ?? false
            default: break
            }
        case .isInInts:
            if case .int(let x) = v {
                return list(t).contains { if case .int(let y) = constants.peek($0) { x == y } else { false } }
            }
        case .general: break
        }
        switch v {
        case .missing, .error: return false
        default: return slowTest(t, slot)
        }
    }

    /// Where term `t`'s `in` list is in ``constants`` (right after its constant).
    @inline(__always) private func list(_ t: Int) -> Range<Int> {
        let k = Int(flat[inRange: t].constant)
        return k + 1..<k + 1 + Int(flat[inRange: t].listCount)
    }

    /// A term the fast paths leave (another kind of value than the constant's, unsigned numbers, lists…): the general
    /// comparison of ``Value``, with the slot's value copied out.
    @inline(never) private func slowTest(_ t: Int, _ slot: SlotRef) -> Bool {
        guard let v = slot.value else { return false }
        return test(t, v)
    }

    /// Term `t` of a value by the general comparisons (a computed count, or a slot's value the fast paths left; never
    /// an error, which fails every test before this).
    private func test(_ t: Int, _ v: Value) -> Bool {
        let c = constants[Int(flat[inRange: t].constant)]!
        switch terms[t].test {
        case .equal: return Value.equal(v, c)
        case .notEqual: return !Value.equal(v, c)
        case .order(let accepts):
            guard let o = Value.order(v, c) else { return false }
            return accepts.accepts(o)
        case .isIn: return list(t).contains { Value.equal(v, constants[$0]!) }
        case .isTrue: if case .bool(let b) = v { return b } else { return false }
        }
    }

    /// `operand OP constant` (or `constant OP operand`, read with the sides swapped) for a comparison or `in` call,
    /// if it has that shape.
    static func comparison(_ fn: String, _ nodes: [CompiledNode]) -> Predicate? {
        guard nodes.count == 2 else { return nil }
        let operand: Operand
        let c: Value
        let swapped: Bool
        if let o = nodes[0].operand, let k = nodes[1].constant {
            (operand, c, swapped) = (o, k, false)
        } else if let k = nodes[0].constant, let o = nodes[1].operand {
            (operand, c, swapped) = (o, k, true)
        } else {
            return nil
        }
        if case .error = c { return nil }
        let term: Term
        switch fn {
        case "_==_": term = Term(operand: operand, test: .equal, constant: c)
        case "_!=_": term = Term(operand: operand, test: .notEqual, constant: c)
        case "@in":
            guard !swapped, case .list(let xs) = c else { return nil }
            term = Term(operand: operand, test: .isIn, list: xs)
        default:
            guard let accepts = OrderSet(operator: fn) else { return nil }
            term = Term(operand: operand, test: .order(accepts: swapped ? accepts.flipped : accepts), constant: c)
        }
        return Predicate(terms: [term])
    }

    /// A bare operand used as a condition.
    static func truth(_ node: CompiledNode) -> Predicate? {
        if let p = node.predicate { return p }
        guard let operand = node.operand else { return nil }
        return Predicate(terms: [Term(operand: operand, test: .isTrue)])
    }

    /// Whether every test holds for the scope's user, event and time.
    func holds(_ s: EvalScope) -> Bool { holds(profile: s.profileLoan, event: s.eventLoan, now: s.now) }

    /// Whether every test holds for this user and event at `now` (the engine passes what it holds, so reading them
    /// counts no references).
    @inline(__always) func holds(profile: Borrowed<UserProfile>?, event: Borrowed<BoundEvent>?, now: Int64) -> Bool {
        for i in 0..<flat.count where !holds(term: i, profile, event, now) { return false }
        return true
    }
}
