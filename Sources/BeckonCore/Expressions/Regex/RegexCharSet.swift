/// A set of Unicode scalars as a character class denotes it: explicit ranges, plus scalars chosen by general category
/// (`\p{L}`), the whole possibly complemented (`[^…]`).
///
/// Categories stay terms evaluated per scalar instead of being expanded into ranges: the standard library answers a
/// scalar's category, but listing a category's ranges would mean asking about all 1.1 million scalars.
struct RegexCharSet: Hashable, Sendable {
    /// Sorted, disjoint, non-adjacent closed ranges, flattened as lo, hi, lo, hi, ….
    private(set) var bounds: [UInt32] = []
    /// Scalars chosen by general category; a scalar is in the set when it is in a range or any term holds for it.
    private(set) var terms: [CategoryTerm] = []
    /// The set is the complement of what `bounds` and `terms` describe (only ever set when there are terms:
    /// without them the complement is taken on the ranges).
    private(set) var negated = false

    static let maxScalar: UInt32 = 0x10_FFFF

    /// Scalars whose general category is in `mask`; when `folded`, also those that case-fold together with one;
    /// when `negated`, the complement of that.
    struct CategoryTerm: Hashable, Sendable {
        var mask: UInt32
        var folded: Bool
        var negated: Bool

        func contains(_ c: UInt32) -> Bool {
            var hit = RegexUnicode.category(of: c) & mask != 0
            if !hit && folded {
                RegexUnicode.forEachFold(of: c) { o in
                    if !hit && RegexUnicode.category(of: o) & mask != 0 { hit = true }
                }
            }
            return hit != negated
        }
    }

    init() {}

    init(_ ranges: [ClosedRange<UInt32>]) {
        var b = Builder()
        for r in ranges { b.add(r.lowerBound, r.upperBound) }
        self = b.build(foldCase: false)
    }

    func contains(_ c: UInt32) -> Bool {
        (rangesContain(c) || terms.contains { $0.contains(c) }) != negated
    }

    func rangesContain(_ c: UInt32) -> Bool {
        var lo = 0
        var hi = bounds.count / 2
        while lo < hi {
            let mid = (lo + hi) / 2
            if bounds[2 * mid + 1] < c {
                lo = mid + 1
            } else if bounds[2 * mid] > c {
                hi = mid
            } else {
                return true
            }
        }
        return false
    }

    /// The complement, over all scalar values.
    func inverted() -> RegexCharSet {
        var out = self
        if !terms.isEmpty {
            out.negated.toggle()
            return out
        }
        var flipped: [UInt32] = []
        var next: UInt32 = 0
        var i = 0
        while i < bounds.count {
            if bounds[i] > next { flipped += [next, bounds[i] - 1] }
            next = bounds[i + 1] + 1
            i += 2
        }
        if next <= Self.maxScalar { flipped += [next, Self.maxScalar] }
        out.bounds = flipped
        return out
    }

    /// The single scalar this set holds, if that is all it holds.
    var singleScalar: UInt32? {
        terms.isEmpty && !negated && bounds.count == 2 && bounds[0] == bounds[1] ? bounds[0] : nil
    }

    /// Whether the set holds every scalar except, at most, `\n`.
    var isAnyButNewline: Bool {
        terms.isEmpty && !negated && bounds == [0, 9, 11, Self.maxScalar]
    }

    var isAny: Bool { terms.isEmpty && !negated && bounds == [0, Self.maxScalar] }

    /// Collects the items of a class in any order, then sorts and merges them.
    struct Builder {
        private var raw: [UInt32] = []
        private var terms: [CategoryTerm] = []

        mutating func add(_ lo: UInt32, _ hi: UInt32) { raw += [lo, hi] }

        mutating func add(_ set: RegexCharSet) {
            precondition(!set.negated, "a complemented class is added by its ranges or its terms")
            raw += set.bounds
            for t in set.terms { add(t) }
        }

        mutating func add(_ term: CategoryTerm) {
            // Plain terms with the same folding merge; complemented ones do not (¬A ∪ ¬B is ¬(A ∩ B)).
            if !term.negated, let i = terms.firstIndex(where: { !$0.negated && $0.folded == term.folded }) {
                terms[i].mask |= term.mask
            } else if !terms.contains(term) {
                terms.append(term)
            }
        }

        /// The set, with every scalar's case-folding orbit added when `foldCase`.
        func build(foldCase: Bool) -> RegexCharSet {
            var out = RegexCharSet()
            out.bounds = Self.normalized(raw)
            out.terms = terms
            if foldCase {
                var more = out.bounds
                let orbits = RegexUnicode.foldOrbits
                var i = 0
                while i < out.bounds.count {
                    let (lo, hi) = (out.bounds[i], out.bounds[i + 1])
                    var k = RegexUnicode.firstFoldKey(atLeast: lo)
                    while k < orbits.keys.count && orbits.keys[k] <= hi {
                        RegexUnicode.forEachFold(of: orbits.keys[k]) { more += [$0, $0] }
                        k += 1
                    }
                    i += 2
                }
                out.bounds = Self.normalized(more)
                out.terms = terms.map { CategoryTerm(mask: $0.mask, folded: true, negated: $0.negated) }
            }
            return out
        }

        private static func normalized(_ raw: [UInt32]) -> [UInt32] {
            var pairs: [(UInt32, UInt32)] = []
            pairs.reserveCapacity(raw.count / 2)
            var i = 0
            while i < raw.count {
                pairs.append((raw[i], raw[i + 1]))
                i += 2
            }
            pairs.sort { $0.0 < $1.0 }
            var out: [UInt32] = []
            for (lo, hi) in pairs {
                if let last = out.last, lo <= last + 1 {
                    out[out.count - 1] = max(last, hi)
                } else {
                    out += [lo, hi]
                }
            }
            return out
        }
    }
}
