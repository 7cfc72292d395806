import Synchronization

/// A compiled pattern for CEL's `matches`, shared by all evaluations through a cache keyed by the pattern.
///
/// RE2 syntax, matched in time linear in the text (see `RegexProgram`); what RE2 refuses is refused here when the
/// pattern is compiled, so a bad constant pattern is reported when rules are loaded.
final class RegexBox: Sendable {
    let program: RegexProgram

    init(_ program: RegexProgram) { self.program = program }

    /// Compiled patterns by their text, with the bytes they hold: emptied when it would pass
    /// ``RegexLimits/cacheEntries`` entries or ``RegexLimits/cacheBytes`` bytes (patterns can come from event data).
    static let cache = Mutex<(boxes: [String: RegexBox], bytes: Int)>(([:], 0))

    static func compile(_ pattern: String) -> Result<RegexBox, EvalError> {
        if let hit = cache.withLock({ $0.boxes[pattern] }) { return .success(hit) }
        let box: RegexBox
        do throws(RegexError) {
            box = RegexBox(try RegexProgram(pattern))
        } catch {
            return .failure(EvalError("invalid regular expression '\(pattern)': \(error.message)"))
        }
        let bytes = box.program.byteCost + pattern.utf8.count
        cache.withLock { c in
            if c.boxes.count >= RegexLimits.cacheEntries || c.bytes + bytes > RegexLimits.cacheBytes { c = ([:], 0) }
            c.boxes[pattern] = box
            c.bytes += bytes
        }
        return .success(box)
    }

    /// The budget steps (``ValueLimits/maxSteps``) matching `text` takes at most: the matcher's own bound,
    /// (instructions + 1) × (scalars + 1), one step per ``ValueLimits/matchWorkPerStep``.
    func steps(for text: String) -> Int {
        let perScalar = program.literal != nil ? 1 : program.instructions.count + 1
        let work = perScalar * (text.unicodeScalars.count + 1)
        return (work + ValueLimits.matchWorkPerStep - 1) / ValueLimits.matchWorkPerStep
    }

    /// Whether the pattern matches anywhere in `s`.
    func matches(_ s: String) -> Bool { program.matches(s) }

    /// Whether the pattern matches anywhere in `s`, adding the matcher's steps to `steps` (for tests of linearity).
    func matches(_ s: String, steps: inout Int) -> Bool { program.matches(s, steps: &steps) }
}
