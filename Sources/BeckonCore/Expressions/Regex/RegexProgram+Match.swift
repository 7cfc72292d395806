extension RegexProgram {
    /// Whether the pattern matches anywhere in `text` (an unanchored search, as CEL's `matches`).
    func matches(_ text: String) -> Bool {
        var steps = 0
        return matches(text, steps: &steps)
    }

    /// Whether the pattern matches anywhere in `text`, adding to `steps` the work done: for the NFA, one step per
    /// instruction a thread visits at a position. Each instruction is visited at most once per position, so
    /// `steps` grows by at most `instructions.count × (scalars in text + 1)`, whatever the pattern; a plain-string
    /// pattern counts one step per UTF-8 byte compared, at most twice the text's length in bytes.
    func matches(_ text: String, steps: inout Int) -> Bool {
        if let literal { return literal.matches(text, steps: &steps) }
        return simulate(text, steps: &steps)
    }

    /// The Pike VM without captures (a Thompson NFA simulation): the threads alive at a position are a set of
    /// instructions, kept once each, stepped together over the text one scalar at a time. Only whether some thread
    /// reaches `match` is asked, so thread priority (greedy or lazy) plays no part.
    private func simulate(_ text: String, steps: inout Int) -> Bool {
        let none = RegexAST.noScalar
        var vm = Threads(count: instructions.count)
        defer { steps += vm.steps }
        var scalars = text.unicodeScalars.makeIterator()
        var before = none
        var here = scalars.next()?.value ?? none
        var position = 0
        while true {
            if vm.currentCount == 0 {
                if anchoredAtStart && position > 0 { return false }
                if firstClass >= 0 {
                    // No thread alive: skip to where a match can begin.
                    while here != none && !contains(firstClass, here) {
                        before = here
                        here = scalars.next()?.value ?? none
                        position += 1
                    }
                    if here == none { return false }
                }
            }
            if position == 0 || !anchoredAtStart {
                if vm.add(start, self, next: false, position, before, here) { return true }
            }
            if here == none { return false }
            let after = scalars.next()?.value ?? none
            vm.nextCount = 0
            var k = 0
            while k < vm.currentCount {
                let inst = instructions[Int(vm.lists[vm.currentBase + k])]
                k += 1
                let consumes =
                    switch inst.op {
                    case .scalar: inst.arg == here
                    case .set: contains(Int(inst.arg), here)
                    case .any: true
                    case .anyButNewline: here != 0x0A
                    case .split, .assertion, .match: false
                    }
                if consumes && vm.add(inst.out, self, next: true, position + 1, here, after) { return true }
            }
            vm.advance()
            before = here
            here = after
            position += 1
        }
    }

    /// The thread lists of a run, in one struct so that the compiler checks access to them statically.
    private struct Threads {
        /// marks[pc] is the last position at which pc joined a list: each joins at most once per position.
        var marks: [Int]
        /// Two lists of instruction indices side by side: the current position's and the next one's.
        var lists: [Int32]
        var currentBase = 0
        var currentCount = 0
        var nextCount = 0
        var stack: [Int32] = []
        var steps = 0

        init(count: Int) {
            marks = [Int](repeating: -1, count: count)
            lists = [Int32](repeating: 0, count: 2 * count)
            stack.reserveCapacity(count)
        }

        /// Swaps the lists: the next position's becomes the current one.
        mutating func advance() {
            currentBase = marks.count - currentBase
            currentCount = nextCount
            nextCount = 0
        }

        /// Adds `pc`, and everything reachable from it without consuming a scalar, to the current or the next list at
        /// `position`, between scalars `before` and `after`; true when that reaches `match`.
        mutating func add(
            _ pc: Int32, _ program: RegexProgram, next: Bool, _ position: Int, _ before: UInt32, _ after: UInt32
        ) -> Bool {
            if marks[Int(pc)] == position { return false }
            marks[Int(pc)] = position
            stack.append(pc)
            while let pc = stack.popLast() {
                steps += 1
                let inst = program.instructions[Int(pc)]
                switch inst.op {
                case .match:
                    stack.removeAll(keepingCapacity: true)
                    return true
                case .split:
                    push(inst.out, position)
                    push(inst.alt, position)
                case .assertion:
                    if RegexAST.Assertion(rawValue: inst.arg)!.holds(after: before, before: after) {
                        push(inst.out, position)
                    }
                case .scalar, .set, .any, .anyButNewline:
                    if next {
                        lists[marks.count - currentBase + nextCount] = pc
                        nextCount += 1
                    } else {
                        lists[currentBase + currentCount] = pc
                        currentCount += 1
                    }
                }
            }
            return false
        }

        @inline(__always)
        private mutating func push(_ pc: Int32, _ position: Int) {
            if marks[Int(pc)] != position {
                marks[Int(pc)] = position
                stack.append(pc)
            }
        }
    }

    /// Whether scalar `c` is in class `k`.
    @inline(__always)
    func contains(_ k: Int, _ c: UInt32) -> Bool {
        let cls = classes[k]
        if c < 64 { return (cls.asciiLow >> UInt64(c)) & 1 != 0 }
        if c < 128 { return (cls.asciiHigh >> UInt64(c - 64)) & 1 != 0 }
        var lo = cls.bounds.lowerBound / 2
        var hi = cls.bounds.upperBound / 2
        var hit = false
        while lo < hi {
            let mid = (lo + hi) / 2
            if bounds[2 * mid + 1] < c {
                lo = mid + 1
            } else if bounds[2 * mid] > c {
                hi = mid
            } else {
                hit = true
                break
            }
        }
        if !hit && !cls.terms.isEmpty {
            hit = terms[cls.terms].contains { $0.contains(c) }
        }
        return hit != cls.negated
    }
}

extension RegexProgram.Literal {
    func matches(_ text: String, steps: inout Int) -> Bool {
        let utf8 = text.utf8
        switch (anchoredStart, anchoredEnd) {
        case (true, true):
            steps += bytes.count
            return utf8.elementsEqual(bytes)
        case (true, false):
            steps += bytes.count
            return utf8.starts(with: bytes)
        case (false, true):
            steps += bytes.count
            return utf8.reversed().starts(with: bytes.reversed())
        case (false, false):
            if bytes.isEmpty { return true }
            var k = 0
            for b in utf8 {
                steps += 1
                while k > 0 && bytes[k] != b {
                    k = failure[k - 1]
                    steps += 1
                }
                if bytes[k] == b {
                    k += 1
                    if k == bytes.count { return true }
                }
            }
            return false
        }
    }
}
