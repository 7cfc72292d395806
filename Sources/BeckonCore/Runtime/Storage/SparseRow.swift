/// A profile's row of optional values by slot (its attributes, the last value of each context field): the same reads
/// as ``SlotRow``, in memory that holds only the slots that have a value.
///
/// A rule set reads a slot for every attribute any rule names, and a user has a few of them: bossup's rules read 13
/// attributes, a user who installed from a link has three. A dense row is 24 bytes a slot; this one is a byte a slot
/// (where its value is, or none) and 24 bytes a value, in one allocation made when the first value comes and grown a
/// half at a time. When a row fills up so that its values would take as much as the dense layout, it turns dense (a
/// slot's value at its own index) and stays so; a row of 255 slots or more is dense from the start (the byte could
/// not name a place).
///
/// Noncopyable, 16 bytes, changed through `mutating` writes by its one owner (a profile's row), which frees it.
public struct SparseRow: ~Copyable {
    /// Rows with at least this many slots keep one value a slot.
    static let denseFrom = 255
    private static let missing: UInt8 = 0xFF
    private static let stride = MemoryLayout<Value?>.stride

    /// ``room`` of a dense row.
    private static let dense = UInt16.max

    /// Sparse: `slotCount` place bytes (rounded up to 8), then `room` values, the first `used` held. Dense: `slotCount`
    /// values. Nil until the first value is set, and again after ``removeAll()``.
    private var base: UnsafeMutableRawPointer?
    private let slotCount: UInt32
    private var used: UInt16 = 0
    /// Values the sparse layout has room for; ``dense`` for the dense layout.
    private var room: UInt16

    /// A row of `count` empty slots (no memory until a value is set).
    init(count: Int) {
        precondition(count >= 0 && count <= Int(UInt32.max), "a row's count is out of range")
        slotCount = UInt32(count)
        room = SparseRow.emptyRoom(count)
    }

    /// ``room`` of an empty row of `count` slots: none, or ``dense`` for a row of 255 slots or more.
    private static func emptyRoom(_ count: Int) -> UInt16 { count < denseFrom ? 0 : dense }

    deinit { release() }

    public var count: Int { Int(slotCount) }
    @inline(__always) private var isSparse: Bool { room != SparseRow.dense }
    @inline(__always) private var placeBytes: Int { (Int(slotCount) + 7) & ~7 }
    /// Values held (sparse), or slots (dense, allocated).
    private var held: Int { isSparse ? Int(used) : (base == nil ? 0 : count) }

    @inline(__always) private func values(_ base: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Value?> {
        (isSparse ? base + placeBytes : base).assumingMemoryBound(to: Value?.self)
    }

    /// Where slot `i`'s value is; nil when it has none (checked: `0 <= i < count`).
    @inline(__always) private func address(_ i: Int) -> UnsafeMutablePointer<Value?>? {
        precondition(UInt(bitPattern: i) < UInt(slotCount), "slot out of range")
        guard let base else { return nil }
        guard isSparse else { return base.assumingMemoryBound(to: Value?.self) + i }
        let place = base.load(fromByteOffset: i, as: UInt8.self)
        if place == SparseRow.missing { return nil }
        return (base + placeBytes).assumingMemoryBound(to: Value?.self) + Int(place)
    }

    /// The value in slot `i` (checked: `0 <= i < count`).
    public subscript(_ i: Int) -> Value? {
        @inline(__always) get { address(i)?.pointee }
        set { _ = replace(i, with: newValue) }
    }

    /// Puts `value` in slot `i` (nil empties it) and returns what the slot held, with one look-up. When the slot had
    /// no value and the row must grow, it makes room for `more` values besides: a batch of writes is under way, and
    /// its writer calls ``trim()`` after the batch.
    mutating func replace(_ i: Int, with value: Value?, roomForMore more: Int = 0) -> Value? {
        if let at = address(i) {
            let old = at.move()
            if case .none = value, isSparse { remove(i, at) } else { at.initialize(to: value) }
            return old
        }
        if let value { insert(i, value, more: more) }
        return nil
    }

    /// Gives back the room a batch of writes did not fill (see ``replace(_:with:roomForMore:)``): a sparse row keeps
    /// room for what it holds.
    mutating func trim() {
        guard isSparse, let old = base, room > used else { return }
        guard used > 0 else { return removeAll() }
        let b = SparseRow.allocateSparse(placeBytes, room: Int(used))
        b.copyMemory(from: old, byteCount: placeBytes)
        values(b).moveInitialize(from: values(old), count: Int(used))
        old.deallocate()
        base = b
        room = used
    }

    /// Slot `i`, read in place (checked: `0 <= i < count`).
    @inline(__always) public func slot(_ i: Int) -> SlotRef { SlotRef(address(i)) }

    /// What slot `i` holds, read in place (as ``SlotRow/peek(_:)``). Checked: `0 <= i < count`.
    @inline(__always) public func peek(_ i: Int) -> SlotPeek { slot(i).peek }

    /// Runs `body` with the string in slot `i`, read in place; `nil` when the slot holds no string.
    @inline(__always) public func withString<R>(_ i: Int, _ body: (String) -> R) -> R? { slot(i).withString(body) }

    /// Every value, by slot (a copy).
    public var values: [Value?] { (0..<count).map { self[$0] } }

    /// Empties every slot and frees the row's memory (sparse again, unless the row has 255 slots or more).
    mutating func removeAll() {
        release()
        base = nil
        used = 0
        room = SparseRow.emptyRoom(count)
    }

    /// Heap bytes the row holds (for estimates).
    var byteCount: Int {
        guard base != nil else { return 0 }
        return isSparse ? placeBytes + Int(room) * SparseRow.stride : count * SparseRow.stride
    }

    /// Asks the CPU for the row's memory (a hint).
    @inline(__always) func prefetch() {
        Prefetch.range(base, bytes: isSparse ? placeBytes + Int(used) * SparseRow.stride : count * SparseRow.stride, maxLines: 4)
    }

    /// A first value for slot `i`, which has none (growing with room for `more` besides, if it must grow).
    private mutating func insert(_ i: Int, _ value: Value, more: Int) {
        if isSparse, used == room { grow(more: more) }
        guard isSparse else {
            if base == nil { base = SparseRow.allocateDense(count) }
            values(base.unsafelyUnwrapped)[i] = value
            return
        }
        let b = base.unsafelyUnwrapped
        (values(b) + Int(used)).initialize(to: value)
        b.storeBytes(of: UInt8(truncatingIfNeeded: used), toByteOffset: i, as: UInt8.self)
        used += 1
    }

    /// Room for one more value, and `more` besides: 2 to start, then half as much again; or the dense layout, once that
    /// takes no more.
    private mutating func grow(more: Int) {
        let byPolicy = room == 0 ? 2 : Int(room) + max(1, Int(room) / 2)
        let newRoom = min(Int(slotCount), max(byPolicy, Int(used) + 1 + max(0, more)))
        if placeBytes + newRoom * SparseRow.stride >= count * SparseRow.stride {
            let d = SparseRow.allocateDense(count)
            if let old = base {
                let v = values(old)
                let into = d.assumingMemoryBound(to: Value?.self)
                for s in 0..<count {
                    let place = old.load(fromByteOffset: s, as: UInt8.self)
                    if place != SparseRow.missing { (into + s).moveUpdate(from: v + Int(place), count: 1) }
                }
                old.deallocate()
            }
            base = d
            used = 0
            room = SparseRow.dense
            return
        }
        let b = SparseRow.allocateSparse(placeBytes, room: newRoom)
        if let old = base {
            b.copyMemory(from: old, byteCount: placeBytes)
            values(b).moveInitialize(from: values(old), count: Int(used))
            old.deallocate()
        } else {
            b.initializeMemory(as: UInt8.self, repeating: SparseRow.missing, count: placeBytes)
        }
        base = b
        room = UInt16(newRoom)
    }

    /// Memory for `placeBytes` places and `room` values (neither initialized).
    private static func allocateSparse(_ placeBytes: Int, room: Int) -> UnsafeMutableRawPointer {
        let b = UnsafeMutableRawPointer.allocate(byteCount: placeBytes + room * SparseRow.stride, alignment: 16)
        b.bindMemory(to: UInt8.self, capacity: placeBytes)
        (b + placeBytes).bindMemory(to: Value?.self, capacity: room)
        return b
    }

    /// `count` empty slots of the dense layout.
    private static func allocateDense(_ count: Int) -> UnsafeMutableRawPointer {
        let b = UnsafeMutableRawPointer.allocate(byteCount: count * SparseRow.stride, alignment: 16)
        b.bindMemory(to: Value?.self, capacity: count).initialize(repeating: nil, count: count)
        return b
    }

    /// Slot `i`'s value, at `at`, is gone (moved out, sparse): the last value held moves into its place.
    private mutating func remove(_ i: Int, _ at: UnsafeMutablePointer<Value?>) {
        let b = base.unsafelyUnwrapped
        let last = Int(used) - 1
        let place = b.load(fromByteOffset: i, as: UInt8.self)
        if Int(place) != last {
            at.moveInitialize(from: values(b) + last, count: 1)
            for s in 0..<count where b.load(fromByteOffset: s, as: UInt8.self) == UInt8(last) {
                b.storeBytes(of: place, toByteOffset: s, as: UInt8.self)
                break
            }
        }
        b.storeBytes(of: SparseRow.missing, toByteOffset: i, as: UInt8.self)
        used -= 1
    }

    /// Deinitializes the values held and frees the memory.
    private func release() {
        guard let base else { return }
        let v = values(base)
        // Only the values holding a counted payload are deinitialized (as ``SlotRow``'s `deinit`).
        for k in 0..<held {
            switch v[k] {
            case nil, .null?, .int?, .uint?, .double?, .bool?, .timestamp?, .duration?: continue
            default: (v + k).deinitialize(count: 1)
            }
        }
        base.deallocate()
    }
}
