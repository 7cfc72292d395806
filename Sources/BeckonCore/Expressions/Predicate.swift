/// A condition that is a conjunction of simple tests — a slot or a count compared with a constant — kept as a flat
/// list so the engine can decide it without running closures or building values: `user.plan == "free" &&
/// event.properties.price > 50.0 && count("app_open", "1h") >= 3`, which is what most campaign conditions are.
///
/// It answers only *whether the condition is true*. Each test uses the very functions the compiled closures use
/// (``Value/equal(_:_:)``, ``Value/order(_:_:)``), and a missing value fails a test just as the error it evaluates to
/// fails the closure, so `holds` is exactly `evaluate(scope).isTrue`. When a verdict needs the value or the reasons,
/// the engine evaluates the closures instead.
///
/// A class, built once at load: a rule's gate keeps an `unowned(unsafe)` reference to it (the compiled expression owns
/// it), so handing it around counts no references. Sendable unchecked: the memory it owns is written only in `init`.
final class Predicate: @unchecked Sendable {
    /// Where a test's left side comes from.
    enum Operand: Sendable, Equatable {
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
    enum Test: Sendable, Equatable {
        case equal
        case notEqual
        /// An ordering (`<`, `<=`, `>`, `>=`): holds when the order of the operand to the constant is in `accepts`.
        case order(accepts: OrderSet)
        case isIn
        /// A bare boolean operand (`user.push`).
        case isTrue
    }

    struct OrderSet: OptionSet, Sendable {
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

    /// The terms as `holds` reads them: in memory the predicate owns, each `in` list's values in one pool beside them,
    /// so reading a term or a list counts no references (reading `terms` or a term's `list` would).
    private struct FlatTerm {
        var operand: Operand
        var test: Test
        var constant: Value
        var listStart: Int
        var listCount: Int

        // The tests are static functions of this struct (not of the class, whose static calls pass its metadata).
        static func holds(
            _ t: UnsafePointer<FlatTerm>, _ pool: UnsafePointer<Value>?, _ profile: UserProfile?, _ event: BoundEvent?,
            _ now: Int64
        ) -> Bool {
            switch t.pointee.operand {
            case .attribute(let slot):
                guard let profile else { return false }
                return test(t, pool, profile.attributes.pointer(slot))
            case .property(let slot):
                guard let event else { return false }
                return test(t, pool, event.propertySlots.pointer(slot))
            case .count(let series, let ms):
                let n = profile?.history.count(series: series, from: now - ms + 1, to: now) ?? 0
                return test(t, pool, count: Int64(n))
            case .lifetimeCount(let series):
                return test(t, pool, count: Int64(profile?.history.lifetimeStat(series: series)?.count ?? 0))
            }
        }

        @inline(__always) static func test(
            _ t: UnsafePointer<FlatTerm>, _ pool: UnsafePointer<Value>?, count n: Int64
        ) -> Bool {
            if case .int(let c) = t.pointee.constant {
                switch t.pointee.test {
                case .order(let accepts):
                    return accepts.accepts(Numeric.cmp(n, c))
                case .equal: return n == c
                case .notEqual: return n != c
                default: break
                }
            }
            return withUnsafePointer(to: Value?.some(.int(n))) { test(t, pool, $0) }
        }

        /// The constant of `t`, in place.
        @inline(__always) static func constant(_ t: UnsafePointer<FlatTerm>) -> UnsafePointer<Value> {
            (UnsafeRawPointer(t) + MemoryLayout<FlatTerm>.offset(of: \.constant)!).assumingMemoryBound(to: Value.self)
        }

        @inline(__always) static func test(
            _ t: UnsafePointer<FlatTerm>, _ pool: UnsafePointer<Value>?, _ v: UnsafePointer<Value?>
        ) -> Bool {
            switch v.pointee {
            case nil, .error?: return false
            default: break
            }
            switch t.pointee.test {
            case .equal: return Value.equal(v, constant(t))
            case .notEqual: return !Value.equal(v, constant(t))
            case .order(let accepts):
                guard let o = Value.order(v, constant(t)) else { return false }
                return accepts.accepts(o)
            case .isIn:
                guard let xs = pool.map({ $0 + t.pointee.listStart }) else { return false }
                for i in 0..<t.pointee.listCount where Value.equal(v, xs + i) { return true }
                return false
            case .isTrue:
                if case .bool(true)? = v.pointee { return true }
                return false
            }
        }
    }
    private let flat: UnsafeMutableBufferPointer<FlatTerm>
    private let listPool: UnsafeMutableBufferPointer<Value>

    init(terms: [Term]) {
        self.terms = terms
        listPool = .allocate(capacity: terms.reduce(0) { $0 + $1.list.count })
        flat = .allocate(capacity: terms.count)
        var at = 0
        for (i, t) in terms.enumerated() {
            _ = listPool[at...].initialize(from: t.list)
            (flat.baseAddress! + i).initialize(
                to: FlatTerm(operand: t.operand, test: t.test, constant: t.constant, listStart: at, listCount: t.list.count))
            at += t.list.count
        }
    }

    deinit {
        flat.deinitialize().deallocate()
        listPool.deinitialize().deallocate()
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
    func holds(_ s: EvalScope) -> Bool { holds(profile: s.profile, event: s.event, now: s.now) }

    /// Whether every test holds for this user and event at `now` (the engine passes what it holds, so reading them
    /// counts no references).
    func holds(profile: UserProfile?, event: BoundEvent?, now: Int64) -> Bool {
        // Terms, operands and constants are read in place: a copy of a string would count references.
        let pool = UnsafePointer(listPool.baseAddress)
        for i in flat.indices where !FlatTerm.holds(UnsafePointer(flat.baseAddress! + i), pool, profile, event, now) {
            return false
        }
        return true
    }
}
