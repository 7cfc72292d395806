import Foundation

/// The statistics `beckon report` uses: proportions with Wilson score intervals, the difference of two proportions
/// with Newcombe's hybrid score interval, and quantiles by linear interpolation between order statistics.
enum Statistics {
    /// The 0.975 quantile of the standard normal distribution: a two-sided 95% interval.
    static let z95 = 1.959963984540054

    /// Wilson's score interval for `successes` out of `n` (Wilson 1927). `nil` when `n` is 0.
    static func wilson(_ successes: Int, _ n: Int, z: Double = z95) -> (low: Double, high: Double)? {
        guard n > 0 else { return nil }
        let nn = Double(n)
        let p = Double(successes) / nn
        let z2 = z * z
        let denominator = 1 + z2 / nn
        let center = (p + z2 / (2 * nn)) / denominator
        let half = z * (p * (1 - p) / nn + z2 / (4 * nn * nn)).squareRoot() / denominator
        return (max(0, center - half), min(1, center + half))
    }

    /// The difference `p1 − p2` of two independent proportions, with Newcombe's hybrid score interval (method 10
    /// of Newcombe 1998), which keeps its coverage for small groups and rates near 0 or 1, unlike the Wald interval.
    static func difference(_ x1: Int, _ n1: Int, _ x2: Int, _ n2: Int) -> (estimate: Double, low: Double, high: Double)? {
        guard let (l1, u1) = wilson(x1, n1), let (l2, u2) = wilson(x2, n2) else { return nil }
        let p1 = Double(x1) / Double(n1)
        let p2 = Double(x2) / Double(n2)
        let d = p1 - p2
        let low = d - ((p1 - l1) * (p1 - l1) + (u2 - p2) * (u2 - p2)).squareRoot()
        let high = d + ((u1 - p1) * (u1 - p1) + (p2 - l2) * (p2 - l2)).squareRoot()
        return (d, low, high)
    }

    /// The mean of `values` with a 95% interval from the normal approximation (the sample's standard deviation over
    /// √n); `nil` for fewer than two values. Revenue per user is skewed: with few users the interval is rough.
    static func meanInterval(_ values: [Double], z: Double = z95) -> (low: Double, high: Double)? {
        guard values.count >= 2 else { return nil }
        let n = Double(values.count)
        let mean = values.reduce(0, +) / n
        let variance = values.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / (n - 1)
        let half = z * (variance / n).squareRoot()
        return (mean - half, mean + half)
    }

    /// The difference of two means (Welch: each group's own variance), with a 95% normal-approximation interval.
    static func meanDifference(_ a: [Double], _ b: [Double], z: Double = z95) -> (estimate: Double, low: Double, high: Double)? {
        guard a.count >= 2, b.count >= 2 else { return nil }
        func stats(_ x: [Double]) -> (mean: Double, varianceOfMean: Double) {
            let n = Double(x.count)
            let m = x.reduce(0, +) / n
            return (m, x.reduce(0) { $0 + ($1 - m) * ($1 - m) } / (n - 1) / n)
        }
        let (ma, va) = stats(a)
        let (mb, vb) = stats(b)
        let d = ma - mb
        let half = z * (va + vb).squareRoot()
        return (d, d - half, d + half)
    }

    /// The `q` quantile (0…1) of sorted values, interpolating linearly between the two nearest ranks (the definition
    /// R calls type 7 and NumPy uses by default). `nil` for no values.
    static func quantile(_ sorted: [Int64], _ q: Double) -> Int64? {
        guard !sorted.isEmpty else { return nil }
        let h = Double(sorted.count - 1) * q
        let lo = Int(h.rounded(.down))
        let hi = min(lo + 1, sorted.count - 1)
        let v = Double(sorted[lo]) + (h - Double(lo)) * Double(sorted[hi] - sorted[lo])
        return Int64(v.rounded())
    }
}

/// Durations for people: `45s`, `12m`, `5h 12m`, `2d 3h`.
enum HumanDuration {
    static func format(_ ms: Int64) -> String {
        let s = ms / 1000
        if s < 60 { return "\(s)s" }
        let m = s / 60
        if m < 60 { return "\(m)m" }
        let h = m / 60
        if h < 24 { return m % 60 == 0 ? "\(h)h" : "\(h)h \(m % 60)m" }
        let d = h / 24
        return h % 24 == 0 ? "\(d)d" : "\(d)d \(h % 24)h"
    }
}
