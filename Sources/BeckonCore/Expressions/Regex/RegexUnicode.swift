/// The Unicode data the regular-expression engine needs, all of it derived from the standard library's own tables so
/// it follows the toolchain's Unicode version: case-folding orbits, general categories, and RE2's ASCII classes.
enum RegexUnicode {
    // MARK: Case folding

    /// Simple case folding (CaseFolding.txt statuses C and S, which RE2 uses), as orbits: `foldKeys` holds, sorted,
    /// every scalar that folds together with some other, and `foldNext[i]` the next larger member of `foldKeys[i]`'s
    /// orbit, wrapping round to the smallest (`k` → `K` → `K` (U+212A KELVIN SIGN) → `k`).
    ///
    /// Built once, on first use, from the one-to-one lower, upper and title case mappings of every scalar below
    /// U+20000 (no scalar above has a case mapping). Two scalars are in one orbit when a chain of such mappings joins
    /// them, except the Turkic dotless ı (U+0131) and dotted İ (U+0130), which case folding leaves alone. During
    /// development the orbits were checked against Perl's Unicode::UCD `casefold` for all of Unicode 14: the only
    /// differences were scalars added after Unicode 14.
    static let foldOrbits: (keys: [UInt32], next: [UInt32]) = buildFoldOrbits()

    private static func buildFoldOrbits() -> (keys: [UInt32], next: [UInt32]) {
        var parent: [UInt32: UInt32] = [:]
        func root(_ x: UInt32) -> UInt32 {
            var x = x
            while let p = parent[x], p != x { x = p }
            return x
        }
        for v in UInt32(0)..<0x2_0000 {
            guard v != 0x130, v != 0x131, let s = Unicode.Scalar(v), s.properties.changesWhenCaseMapped else { continue }
            let p = s.properties
            for mapping in [p.lowercaseMapping, p.uppercaseMapping, p.titlecaseMapping] {
                var it = mapping.unicodeScalars.makeIterator()
                guard let m = it.next(), it.next() == nil, m.value != v else { continue }
                let (a, b) = (root(v), root(m.value))
                if parent[a] == nil { parent[a] = a }
                if parent[b] == nil { parent[b] = b }
                if a != b { parent[max(a, b)] = min(a, b) }
            }
        }
        var orbits: [UInt32: [UInt32]] = [:]
        for x in parent.keys { orbits[root(x), default: []].append(x) }
        var pairs: [(UInt32, UInt32)] = []
        for var members in orbits.values where members.count > 1 {
            members.sort()
            for (i, m) in members.enumerated() { pairs.append((m, members[(i + 1) % members.count])) }
        }
        pairs.sort { $0.0 < $1.0 }
        return (pairs.map(\.0), pairs.map(\.1))
    }

    /// The index in `foldOrbits.keys` of the first key not below `c`.
    static func firstFoldKey(atLeast c: UInt32) -> Int {
        let keys = foldOrbits.keys
        var lo = 0
        var hi = keys.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if keys[mid] < c { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Calls `body` with every other member of `c`'s case-folding orbit.
    static func forEachFold(of c: UInt32, _ body: (UInt32) -> Void) {
        let orbits = foldOrbits
        var i = firstFoldKey(atLeast: c)
        guard i < orbits.keys.count, orbits.keys[i] == c else { return }
        var x = orbits.next[i]
        while x != c {
            body(x)
            i = firstFoldKey(atLeast: x)
            x = orbits.next[i]
        }
    }

    /// Whether `c` folds together with some other scalar.
    static func hasFold(_ c: UInt32) -> Bool {
        let i = firstFoldKey(atLeast: c)
        return i < foldOrbits.keys.count && foldOrbits.keys[i] == c
    }

    // MARK: General categories

    /// One bit per general category, for masks like `\p{L}` = Lu | Ll | Lt | Lm | Lo.
    static func categoryBit(_ g: Unicode.GeneralCategory) -> UInt32 {
        let index: UInt32 =
            switch g {
            case .uppercaseLetter: 0
            case .lowercaseLetter: 1
            case .titlecaseLetter: 2
            case .modifierLetter: 3
            case .otherLetter: 4
            case .nonspacingMark: 5
            case .spacingMark: 6
            case .enclosingMark: 7
            case .decimalNumber: 8
            case .letterNumber: 9
            case .otherNumber: 10
            case .connectorPunctuation: 11
            case .dashPunctuation: 12
            case .openPunctuation: 13
            case .closePunctuation: 14
            case .initialPunctuation: 15
            case .finalPunctuation: 16
            case .otherPunctuation: 17
            case .mathSymbol: 18
            case .currencySymbol: 19
            case .modifierSymbol: 20
            case .otherSymbol: 21
            case .spaceSeparator: 22
            case .lineSeparator: 23
            case .paragraphSeparator: 24
            case .control: 25
            case .format: 26
            case .surrogate: 27
            case .privateUse: 28
            case .unassigned: 29
            @unknown default: 29
            }
        return 1 << index
    }

    /// The mask for a general category name as RE2 accepts it after `\p`: one letter (`L`) or two (`Lu`).
    /// Like RE2, there is no `Cn` (unassigned), and `C` is Cc | Cf | Cs | Co.
    static func categoryMask(named name: String) -> UInt32? {
        if let i = twoLetterCategories[name] { return 1 << UInt32(i) }
        return oneLetterCategories[name].map { bits in bits.reduce(0) { $0 | 1 << $1 } }
    }

    private static let twoLetterCategories: [String: Int] = [
        "Lu": 0, "Ll": 1, "Lt": 2, "Lm": 3, "Lo": 4, "Mn": 5, "Mc": 6, "Me": 7, "Nd": 8, "Nl": 9, "No": 10, "Pc": 11,
        "Pd": 12, "Ps": 13, "Pe": 14, "Pi": 15, "Pf": 16, "Po": 17, "Sm": 18, "Sc": 19, "Sk": 20, "So": 21, "Zs": 22,
        "Zl": 23, "Zp": 24, "Cc": 25, "Cf": 26, "Cs": 27, "Co": 28,
    ]

    private static let oneLetterCategories: [String: ClosedRange<UInt32>] = [
        "L": 0...4, "M": 5...7, "N": 8...10, "P": 11...17, "S": 18...21, "Z": 22...24, "C": 25...28,
    ]

    /// The category bit of `c`, or 0 for a value that is not a scalar (a surrogate).
    @inline(__always)
    static func category(of c: UInt32) -> UInt32 {
        guard let s = Unicode.Scalar(c) else { return 0 }
        return categoryBit(s.properties.generalCategory)
    }

    // MARK: ASCII classes

    /// `\d`, `\s`, `\w` as RE2 defines them: ASCII only (`\s` is `[\t\n\f\r ]`, no `\v`).
    static func perlClass(_ letter: Unicode.Scalar) -> [ClosedRange<UInt32>]? {
        switch letter {
        case "d", "D": [0x30...0x39]
        case "s", "S": [0x09...0x0A, 0x0C...0x0D, 0x20...0x20]
        case "w", "W": [0x30...0x39, 0x41...0x5A, 0x5F...0x5F, 0x61...0x7A]
        default: nil
        }
    }

    /// The POSIX classes RE2 accepts inside brackets, `[[:alpha:]]`; all ASCII.
    static let posixClasses: [String: [ClosedRange<UInt32>]] = [
        "alnum": [0x30...0x39, 0x41...0x5A, 0x61...0x7A],
        "alpha": [0x41...0x5A, 0x61...0x7A],
        "ascii": [0x00...0x7F],
        "blank": [0x09...0x09, 0x20...0x20],
        "cntrl": [0x00...0x1F, 0x7F...0x7F],
        "digit": [0x30...0x39],
        "graph": [0x21...0x7E],
        "lower": [0x61...0x7A],
        "print": [0x20...0x7E],
        "punct": [0x21...0x2F, 0x3A...0x40, 0x5B...0x60, 0x7B...0x7E],
        "space": [0x09...0x0D, 0x20...0x20],
        "upper": [0x41...0x5A],
        "word": [0x30...0x39, 0x41...0x5A, 0x5F...0x5F, 0x61...0x7A],
        "xdigit": [0x30...0x39, 0x41...0x46, 0x61...0x66],
    ]

    /// RE2's `\b`: ASCII letters, digits and underscore.
    @inline(__always)
    static func isWordCharacter(_ c: UInt32) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) || c == 0x5F
    }
}
