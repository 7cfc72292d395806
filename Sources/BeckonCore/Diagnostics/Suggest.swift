/// "Did you mean" for names: the closest candidate by edit distance, if close enough.
public enum Suggest {
    /// The longest name "did you mean" looks at.
    public static let maxSuggestedLength = 256
    public static func nearest(_ word: String, in candidates: [String]) -> String? {
        var best: (String, Int)?
        // Names are short; a long one gets no suggestion (the distance costs the product of the lengths).
        guard word.unicodeScalars.count <= maxSuggestedLength else { return nil }
        let lw = word.lowercased()
        for c in Set(candidates) where c != word && c.unicodeScalars.count <= maxSuggestedLength {
            let limit = max(1, min(3, (max(word.count, c.count) + 2) / 4))
            if abs(word.count - c.count) > limit { continue }
            let d = distance(lw, c.lowercased())
            if d <= limit, best == nil || d < best!.1 || (d == best!.1 && c < best!.0) { best = (c, d) }
        }
        if best == nil && lw.count >= 3 {
            // A shortened name: `stamp` for `stamp_id`.
            let prefixed = Set(candidates).filter { $0.lowercased().hasPrefix(lw) && $0.count - word.count <= 6 }.sorted()
            if prefixed.count == 1 { return prefixed[0] }
        }
        return best?.0
    }

    /// Damerau-Levenshtein (optimal string alignment) distance.
    public static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a)
        let y = Array(b)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var d = Array(repeating: Array(repeating: 0, count: y.count + 1), count: x.count + 1)
        for i in 0...x.count { d[i][0] = i }
        for j in 0...y.count { d[0][j] = j }
        for i in 1...x.count {
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[x.count][y.count]
    }
}
