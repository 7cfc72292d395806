/// A fixed row of optional values (a user's attributes or context fields, an event's properties), by slot, in memory
/// the row owns: read and written in place, without an array's reference count, uniqueness check or exclusivity check.
///
/// Noncopyable: one owner (a profile, an event) holds it, writes go through it in place (`nonmutating`: the row is
/// a handle to its memory), and it deinitializes its values and frees its memory when the owner goes.
public struct SlotRow: ~Copyable {
    private let base: UnsafeMutablePointer<Value?>
    public let count: Int

    /// A row of `count` empty slots.
    init(count: Int) {
        precondition(count >= 0, "a row cannot have a negative count")
        self.count = count
        // No slots (a rule set that reads no context): no allocation, a pointer never read.
        base = count == 0 ? SlotRow.none : .allocate(capacity: count)
        base.initialize(repeating: nil, count: count)
    }

    /// A row holding `values`.
    init(copying values: some Collection<Value?>) {
        self.init(count: values.count)
        for (i, v) in values.enumerated() where v != nil { base[i] = v }
    }

    deinit {
        guard count > 0 else { return }
        // Only the slots holding a counted payload are deinitialized, one by one: `deinitialize(count:)` over the row
        // goes through the runtime's generic destroy for every slot, empty ones too (≈ 1,100 instructions an event for
        // the benchmark's properties, most of them empty, against ≈ 100 this way).
        for k in 0..<count {
            switch base[k] {
            case nil, .null?, .int?, .uint?, .double?, .bool?, .timestamp?, .duration?: continue
            default: (base + k).deinitialize(count: 1)
            }
        }
        base.deallocate()
    }

    private nonisolated(unsafe) static let none = UnsafeMutablePointer<Value?>.allocate(capacity: 1)

    /// The value in slot `i` (checked: `0 <= i < count`).
    public subscript(_ i: Int) -> Value? {
        @inline(__always) get {
            precondition(UInt(bitPattern: i) < UInt(count), "slot out of range")
            return base[i]
        }
        @inline(__always) nonmutating set {
            precondition(UInt(bitPattern: i) < UInt(count), "slot out of range")
            base[i] = newValue
        }
    }

    /// Slot `i`, read in place (checked: `0 <= i < count`).
    @inline(__always) public func slot(_ i: Int) -> SlotRef {
        precondition(UInt(bitPattern: i) < UInt(count), "slot out of range")
        return SlotRef(base + i)
    }

    /// What slot `i` holds, read in place: a number or a flag with its value, or only the kind of anything else
    /// (reading a string or a list this way counts no reference). Checked: `0 <= i < count`.
    @inline(__always) public func peek(_ i: Int) -> SlotPeek { slot(i).peek }

    /// Runs `body` with the string in slot `i`, read in place; `nil` when the slot holds no string.
    @inline(__always) public func withString<R>(_ i: Int, _ body: (String) -> R) -> R? { slot(i).withString(body) }

    /// Every value, by slot (a copy).
    public var values: [Value?] { (0..<count).map { base[$0] } }

    /// Asks the CPU for the row's memory (a hint).
    @inline(__always) func prefetch() {
        Prefetch.range(base, bytes: count * MemoryLayout<Value?>.stride, maxLines: 4)
    }
}

/// One slot of a row (``SlotRow``, ``SparseRow``), found once and read in place: what a predicate's term tests.
///
/// It points into the row's memory, so it is read at once: it is valid until the row is next written or freed (the
/// engine's thread reads a term's slot and is done with it before anything writes the row).
public struct SlotRef {
    private let at: UnsafePointer<Value?>?

    /// `at` is the slot's value, or nil for a slot with none.
    @inline(__always) init(_ at: UnsafePointer<Value?>?) { self.at = at }
    @inline(__always) init(_ at: UnsafeMutablePointer<Value?>?) { self.at = at.map { UnsafePointer($0) } }

    /// What the slot holds: a number or a flag with its value, or only the kind of anything else (reading a string or
    /// a list this way counts no reference).
    @inline(__always) public var peek: SlotPeek {
        guard let at else { return .missing }
        switch at.pointee {
        case nil: return .missing
        case .int(let x)?: return .int(x)
        case .double(let x)?: return .double(x)
        case .bool(let x)?: return .bool(x)
        case .string?: return .string
        case .error?: return .error
        default: return .other
        }
    }

    /// Runs `body` with the slot's string, read in place; `nil` when it holds no string.
    @inline(__always) public func withString<R>(_ body: (String) -> R) -> R? {
        guard let at, case .string(let s)? = at.pointee else { return nil }
        return body(s)
    }

    /// The slot's value (a copy).
    public var value: Value? { at?.pointee }
}

/// What a slot holds, as ``SlotRow/peek(_:)`` reads it in place: plain values whole, the kind of the rest.
public enum SlotPeek: BitwiseCopyable {
    case missing
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case string
    case error
    /// Any other kind (unsigned, bytes, lists, maps, times…): read the slot itself.
    case other
}

/// A row of values written once, when it is built, and then only read (a predicate's constants): a ``SlotRow`` that
/// can be shared across threads, since nothing writes it after `init`.
struct ConstantRow: ~Copyable, @unchecked Sendable {
    private let row: SlotRow

    init(_ values: [Value?]) { row = SlotRow(copying: values) }

    var count: Int { row.count }
    @inline(__always) subscript(_ i: Int) -> Value? { row[i] }
    @inline(__always) func peek(_ i: Int) -> SlotPeek { row.peek(i) }
    @inline(__always) func withString<R>(_ i: Int, _ body: (String) -> R) -> R? { row.withString(i, body) }
}
