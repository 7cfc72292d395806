/// Object keys to small integers, looked up by a key's raw UTF-8 bytes, so a decoder matches keys without making a
/// `String` of each: open addressing over ``ByteHash``, at most half full. The keys' bytes live in one pool; a slot holds
/// the value, and the key's offset and length in the pool, so a probe compares a length before any byte.
struct KeyTable: Sendable {
    private struct Slot: Sendable {
        var value: Int32 = -1
        var length: Int32 = 0
        var offset: Int = 0
    }

    private var slots: [Slot]
    private var pool: [UInt8] = []
    private let mask: Int
    private let count: Int

    init(_ table: [String: Int]) {
        count = table.count
        var size = 8
        while size < table.count * 2 { size <<= 1 }
        slots = Array(repeating: Slot(), count: size)
        mask = size - 1
        for (key, value) in table {
            let bytes = Array(key.utf8)
            var i = bytes.withUnsafeBufferPointer { KeyTable.start($0) } & mask
            while slots[i].value >= 0 { i = (i + 1) & mask }
            slots[i] = Slot(value: Int32(value), length: Int32(bytes.count), offset: pool.count)
            pool += bytes
        }
    }

    var isEmpty: Bool { count == 0 }

    /// Where a probe for `key` starts: the high half of ``ByteHash/fold(_:seed:)`` (the hash without its finish). Any
    /// start gives the right answer — the table is at most half full and a probe compares bytes — so a poor spread of
    /// the rule set's keys costs probes, never a wrong slot, and a line's bytes only choose where a probe begins.
    @inline(__always) static func start(_ key: UnsafeBufferPointer<UInt8>) -> Int {
        Int(truncatingIfNeeded: ByteHash.fold(key) >> 32)
    }

    func lookup(_ key: UnsafeBufferPointer<UInt8>) -> Int? {
        slots.withUnsafeBufferPointer { slots in
            pool.withUnsafeBufferPointer { pool in
                var i = KeyTable.start(key) & mask
                while slots[i].value >= 0 {
                    if Int(slots[i].length) == key.count,
                        Bytes.equal(
                            UnsafeBufferPointer(start: pool.baseAddress.map { $0 + slots[i].offset }, count: key.count), key,
                            count: key.count)
                    {
                        return Int(slots[i].value)
                    }
                    i = (i + 1) & mask
                }
                return nil
            }
        }
    }
}
