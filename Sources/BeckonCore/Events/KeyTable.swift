/// Object keys to small integers, looked up by a key's raw UTF-8 bytes, so a decoder matches keys without making a
/// `String` of each: open addressing over FNV-1a, at most half full.
struct KeyTable: Sendable {
    private var keys: [[UInt8]]
    private var values: [Int32]
    private let mask: Int
    /// The same keys as text (for keys written with escapes).
    let byName: [String: Int]

    init(_ table: [String: Int]) {
        byName = table
        var size = 8
        while size < table.count * 2 { size <<= 1 }
        keys = Array(repeating: [], count: size)
        values = Array(repeating: -1, count: size)
        mask = size - 1
        for (key, value) in table {
            let bytes = Array(key.utf8)
            var i = bytes.withUnsafeBufferPointer { Int(truncatingIfNeeded: FNV1a.hash($0)) } & mask
            while values[i] >= 0 { i = (i + 1) & mask }
            keys[i] = bytes
            values[i] = Int32(value)
        }
    }

    var isEmpty: Bool { byName.isEmpty }

    func lookup(_ key: UnsafeBufferPointer<UInt8>) -> Int? {
        var i = Int(truncatingIfNeeded: FNV1a.hash(key)) & mask
        while values[i] >= 0 {
            if keys[i].withUnsafeBufferPointer({ $0.elementsEqual(key) }) { return Int(values[i]) }
            i = (i + 1) & mask
        }
        return nil
    }
}
