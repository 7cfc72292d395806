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

    /// The terms as `holds` reads them: plain data in a flat table, with each term's constant, then each `in` list's
    /// values, in a row of slots beside them, and what kind each constant is in a flat table of its own — all read in
    /// place, counting no references.
    private struct FlatTerm: BitwiseCopyable {
        var operand: Operand
        var test: Test
        /// Where the term's constant is in ``constants``, and its `in` list after it.
        var constant: Int32
        var listCount: Int32
    }

    /// A constant as the tests read it: numbers and flags whole, strings by whether they are ASCII (compared with
    /// ``Bytes/equal(_:ascii:)``), the rest read from ``constants``.
    private enum ConstantKind: BitwiseCopyable {
        case int(Int64)
        case double(Double)
        case bool(Bool)
        case asciiString
        case string
        case other

        init(_ v: Value) {
            switch v {
            case .int(let x): self = .int(x)
            case .double(let x): self = .double(x)
            case .bool(let x): self = .bool(x)
            case .string(let s): self = Bytes.isASCII(s) ? .asciiString : .string
            default: self = .other
            }
        }
    }
    private let flat: FlatTable<FlatTerm>
    private let constants: ConstantRow
    private let kinds: FlatTable<ConstantKind>

    init(terms: [Term]) {
        self.terms = terms
        var flat: [FlatTerm] = []
        var constants: [Value] = []
        for t in terms {
            flat.append(
                FlatTerm(operand: t.operand, test: t.test, constant: Int32(constants.count), listCount: Int32(t.list.count)))
            constants.append(t.constant)
            constants += t.list
        }
        self.flat = FlatTable(flat)
        self.kinds = FlatTable(constants.map(ConstantKind.init))
        self.constants = ConstantRow(constants.map(Optional.some))
    }

    /// Whether term `i` holds for this user and event at `now` (both read through their loans: no reference counted).
    private func holds(term i: Int, _ profile: Borrowed<UserProfile>?, _ event: Borrowed<BoundEvent>?, _ now: Int64) -> Bool {
        let t = i
        switch flat[i].operand {
        case .attribute(let slot):
            guard let profile else { return false }
            return profile.with { test(t, $0.attributes, slot) }
        case .property(let slot):
            guard let event else { return false }
            return event.with { test(t, $0.propertySlots, slot) }
        case .count(let series, let ms):
            let n = profile?.with { $0.history.count(series: series, from: now - ms + 1, to: now) } ?? 0
            return test(t, count: Int64(n))
        case .lifetimeCount(let series):
            return test(t, count: Int64(profile?.with { $0.history.lifetimeStat(series: series)?.count } ?? 0))
        }
    }

    @inline(__always) private func test(_ t: Int, count n: Int64) -> Bool {
        if case .int(let c) = kinds[Int(flat[t].constant)] {
            switch flat[t].test {
            case .order(let accepts): return accepts.accepts(Numeric.cmp(n, c))
            case .equal: return n == c
            case .notEqual: return n != c
            default: break
            }
        }
        return test(t, .int(n))
    }

    /// Term `t` of a slot's value, read in place. A missing value or an error fails every test, as the error the
    /// closures evaluate to fails the condition.
    @inline(__always) private func test(_ t: Int, _ row: borrowing SlotRow, _ slot: Int) -> Bool {
        let k = Int(flat[t].constant)
        switch flat[t].test {
        case .equal: return equal(row, slot, k) ?? false
        case .notEqual: return equal(row, slot, k).map { !$0 } ?? false
        case .order(let accepts):
            let v = row.peek(slot)
            switch (v, kinds[k]) {
            case (.missing, _), (.error, _): return false
            case (.int(let x), .int(let y)): return accepts.accepts(Numeric.cmp(x, y))
            case (.double(let x), .double(let y)): return accepts.accepts(Numeric.cmp(x, y))
            default: return order(row, slot, k, accepts)
            }
        case .isIn:
            for i in k + 1..<k + 1 + Int(flat[t].listCount) {
                guard let e = equal(row, slot, i) else { return false }
                if e { return true }
            }
            return false
        case .isTrue:
            if case .bool(true) = row.peek(slot) { return true }
            return false
        }
    }

    /// ``Value/equal(_:_:)`` of a slot's value and constant `k`, read in place; `nil` when the slot holds nothing or an
    /// error.
    @inline(__always) private func equal(_ row: borrowing SlotRow, _ slot: Int, _ k: Int) -> Bool? {
        let v = row.peek(slot)
        switch (v, kinds[k]) {
        case (.missing, _), (.error, _): return nil
        case (.int(let x), .int(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y
        case (.bool(let x), .bool(let y)): return x == y
        case (.string, .asciiString):
            return row.withString(slot) { x in constants.withString(k) { Bytes.equal(x, ascii: $0) } ?? false }
        case (.string, .string): return row.withString(slot) { x in constants.withString(k) { Bytes.equal(x, $0) } ?? false }
        case (_, .asciiString), (_, .string): return false
        default: return slowEqual(row, slot, k)
        }
    }

    /// The general comparisons, for kinds the fast paths leave (mixed numbers, unsigned, lists…).
    @inline(never) private func slowEqual(_ row: borrowing SlotRow, _ slot: Int, _ k: Int) -> Bool {
        Value.equal(row[slot]!, constants[k]!)
    }

    @inline(never) private func order(_ row: borrowing SlotRow, _ slot: Int, _ k: Int, _ accepts: OrderSet) -> Bool {
        guard let o = Value.order(row[slot]!, constants[k]!) else { return false }
        return accepts.accepts(o)
    }

    /// Term `t` of a computed value (a count that is not compared with an integer).
    private func test(_ t: Int, _ v: Value) -> Bool {
        let k = Int(flat[t].constant)
        switch flat[t].test {
        case .equal: return Value.equal(v, constants[k]!)
        case .notEqual: return !Value.equal(v, constants[k]!)
        case .order(let accepts):
            guard let o = Value.order(v, constants[k]!) else { return false }
            return accepts.accepts(o)
        case .isIn: return (k + 1..<k + 1 + Int(flat[t].listCount)).contains { Value.equal(v, constants[$0]!) }
        case .isTrue: return false
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
    func holds(profile: Borrowed<UserProfile>?, event: Borrowed<BoundEvent>?, now: Int64) -> Bool {
        for i in 0..<flat.count where !holds(term: i, profile, event, now) { return false }
        return true
    }
}
