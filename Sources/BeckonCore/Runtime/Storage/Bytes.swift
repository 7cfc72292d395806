import Crypto

/// Byte-level primitives over strings and buffers: equality of UTF-8 bytes and a fast hash, read in place through the
/// standard library's public API (`withContiguousStorageIfAvailable`), never through a `String`'s private layout.
enum Bytes {
    /// Whether two strings have the same UTF-8 bytes (Swift's `==` would also equate canonically equivalent ones, which
    /// Beckon's ids and values do not).
    @inline(__always) static func equal(_ x: String, _ y: String) -> Bool {
        let n = x.utf8.count
        guard n == y.utf8.count else { return false }
        if let same = x.utf8.withContiguousStorageIfAvailable({ a in
            y.utf8.withContiguousStorageIfAvailable { b in equal(a, b, count: n) }
        }), let same {
            return same
        }
        return x.utf8.elementsEqual(y.utf8)
    }

    /// ``equal(_:_:)`` when `ascii` is known to hold only ASCII (a rule's constant, a user id checked once): the same
    /// answer from Swift's `==`, whose check for identical storage is inline, so that equal short strings compare at
    /// the cost of two words.
    ///
    /// Why it is exact: a string canonically equivalent to ASCII text decomposes to that text, so each of its scalars is
    /// either that ASCII character or a non-ASCII one whose canonical decomposition is a single ASCII character (the
    /// Kelvin sign `K`, the Greek question mark `;`, …) — two or more bytes for one. Equal under `==` and equal in byte
    /// count therefore means the same bytes (`BytesTests` checks those characters).
    @inline(__always) static func equal(_ x: String, ascii: String) -> Bool {
        x.utf8.count == ascii.utf8.count && x == ascii
    }

    /// Two lower-case hex digits for each of the first `count` bytes of `digest` (checked: it has that many), appended
    /// to `out`: the digest read in place, the digits written in place after one capacity check (an action id, per
    /// fire; iterating a digest as a sequence reads it through a closure per byte).
    static func appendHex(first count: Int, of digest: SHA256.Digest, to out: inout [UInt8]) {
        digest.withUnsafeBytes { raw in
            precondition(count >= 0 && count <= raw.count, "more bytes than the digest has")
            out.append(addingCapacity: 2 * count) { o in
                o.withUnsafeMutableBufferPointer { dst, initialized in
                    let p = UnsafeMutableRawPointer(dst.baseAddress! + initialized)
                    // Four bytes at a time become eight digits in one word (a digit at a time into the output span
                    // took ≈ 480 instructions for an id's 16 bytes, most of them the span's checks).
                    var i = 0
                    while i + 4 <= count {
                        let digits = hexDigits(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt32.self)))
                        p.storeBytes(of: digits.littleEndian, toByteOffset: 2 * i, as: UInt64.self)
                        i += 4
                    }
                    while i < count {
                        p.storeBytes(of: Hex.hexDigit(raw[i] >> 4), toByteOffset: 2 * i, as: UInt8.self)
                        p.storeBytes(of: Hex.hexDigit(raw[i] & 15), toByteOffset: 2 * i + 1, as: UInt8.self)
                        i += 1
                    }
                    initialized += 2 * count
                }
            }
        }
    }

    /// Appends the UTF-8 bytes of `s` to `out`, read in place and copied at once after one capacity check (a byte at a
    /// time into an output span costs about six instructions a byte; `append(contentsOf:)` of a buffer or of `s.utf8`
    /// goes through the generic sequence path, 40–100 a call).
    @inline(__always) static func append(utf8 s: String, to out: inout [UInt8]) {
        let span = s.utf8.span
        let n = span.count
        guard n > 0 else { return }
        span.withUnsafeBufferPointer { src in
            out.append(addingCapacity: n) { o in
                o.withUnsafeMutableBufferPointer { dst, initialized in
                    (dst.baseAddress! + initialized).initialize(from: src.baseAddress!, count: n)
                    initialized += n
                }
            }
        }
    }

    /// The eight lower-case hex digits of four bytes (`w`'s lowest byte first), as the bytes of a little-endian word:
    /// each byte is spread to a 16-bit lane, its high nibble in the lane's low byte and its low nibble above, and each
    /// nibble `n` becomes `"0" + n`, plus 39 more (`"a" - "0" - 10`) where `n + 6` carries into bit 4 (n ≥ 10).
    @inline(__always) static func hexDigits(_ w: UInt32) -> UInt64 {
        var x = UInt64(w)
        x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF
        x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF
        let nibbles = (x >> 4) & 0x000F_000F_000F_000F | (x & 0x000F_000F_000F_000F) << 8
        let letters = ((nibbles &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        return nibbles &+ 0x3030_3030_3030_3030 &+ letters &* 39
    }

    /// Whether every byte of `s` is ASCII.
    static func isASCII(_ s: String) -> Bool { s.utf8.allSatisfy { $0 < 0x80 } }

    /// Feeds a string's UTF-8 bytes to `h` (so that strings with the same bytes, and only those, hash alike).
    static func hash(_ s: String, into h: inout Hasher) {
        if s.utf8.withContiguousStorageIfAvailable({ h.combine(bytes: UnsafeRawBufferPointer($0)) }) != nil { return }
        var s = s
        s.withUTF8 { h.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Whether the first `n` bytes of `a` and `b` are equal, eight at a time (inlined: for short keys a call to libc's
    /// `memcmp` costs more than the comparison).
    @inline(__always) static func equal(
        _ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>, count n: Int
    ) -> Bool {
        guard n > 0, let p = UnsafeRawPointer(a.baseAddress), let q = UnsafeRawPointer(b.baseAddress) else { return true }
        if n >= 8 {
            var i = 0
            while i + 8 <= n {
                if p.loadUnaligned(fromByteOffset: i, as: UInt64.self) != q.loadUnaligned(fromByteOffset: i, as: UInt64.self) {
                    return false
                }
                i += 8
            }
            // The last word overlaps the one before.
            return i == n
                || p.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
                    == q.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
        }
        if n >= 4 {
            return p.loadUnaligned(as: UInt32.self) == q.loadUnaligned(as: UInt32.self)
                && p.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
                    == q.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
        }
        var i = 0
        while i < n {
            if a[i] != b[i] { return false }
            i += 1
        }
        return true
    }
}

/// A fast, deterministic 64-bit hash of short byte strings (object keys, user ids, messageIds; never stored, so one
/// byte order is enough), eight bytes at a time: each word (the last one overlapping the one before, or small loads for
/// a short string) is mixed in with a multiply and a shift, and the result finished with MurmurHash3's fmix64. The
/// length is mixed in first, so an overlapping load cannot make two strings of different lengths look alike. Not for
/// adversarial input: the store seeds it.
enum ByteHash {
    @inline(__always) static func hash(_ s: String, seed: UInt64 = 0) -> UInt64 {
        // Read where the string is (no copy of it, which would count a reference); a bridged string is copied.
        if let h = s.utf8.withContiguousStorageIfAvailable({ hash($0, seed: seed) }) { return h }
        var s = s
        return s.withUTF8 { hash($0, seed: seed) }
    }

    @inline(__always) static func hash(_ bytes: UnsafeBufferPointer<UInt8>, seed: UInt64 = 0) -> UInt64 {
        var h = fold(bytes, seed: seed)
        // fmix64: every input bit reaches the low bits that tables keep.
        h ^= h >> 33
        h = h &* 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h = h &* 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return h
    }

    /// The length and the words of `bytes` mixed in, before the finish: ``hash(_:seed:)`` without fmix64. Its high half
    /// spreads well enough for where a probe starts in a table that compares bytes (the decoder's key table, which looks
    /// up about a dozen keys an event and so skips the finish's two multiplies); ids that are stored or compared by
    /// their hash take ``hash(_:seed:)``.
    @inline(__always) static func fold(_ bytes: UnsafeBufferPointer<UInt8>, seed: UInt64 = 0) -> UInt64 {
        let n = bytes.count
        var h = seed ^ (UInt64(truncatingIfNeeded: n) &* 0x9e37_79b9_7f4a_7c15)
        @inline(__always) func mix(_ w: UInt64) {
            h = (h ^ w) &* 0xff51_afd7_ed55_8ccd
            h ^= h >> 32
        }
        if n > 0, let p = UnsafeRawPointer(bytes.baseAddress) {
            if n >= 8 {
                var i = 0
                while i + 8 <= n {
                    mix(p.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                    i += 8
                }
                if i < n { mix(p.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)) }
            } else if n >= 4 {
                mix(
                    UInt64(p.loadUnaligned(as: UInt32.self))
                        | UInt64(p.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)) << 32)
            } else {
                let b = bytes
                mix(UInt64(b[0]) | UInt64(b[n / 2]) << 8 | UInt64(b[n - 1]) << 16)
            }
        }
        return h
    }
}
