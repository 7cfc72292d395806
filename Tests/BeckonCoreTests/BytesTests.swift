import Crypto
import Foundation
import Testing

@testable import BeckonCore

/// `Bytes.equal` (the storage layer's string comparison, which `Value.sameBytes` and the profile table use) and
/// `Bytes.hash` read strings through public API only; they must agree with a byte-by-byte comparison for strings of
/// every kind.
struct BytesTests {
    /// The same texts made in different ways: literals, decoded bytes, built up with spare capacity (a large string
    /// holding few bytes), bridged through Foundation, and non-ASCII.
    static func variants(_ text: String) -> [String] {
        var reserved = String()
        reserved.reserveCapacity(64)
        reserved += text
        let decoded = String(decoding: Array(text.utf8), as: UTF8.self)
        let bridged = NSString(string: text) as String
        return [text, decoded, reserved, bridged, String(text.reversed().reversed())]
    }

    @Test func equalStringsHashAlike() {
        for text in ["", "free", "sixteen bytes!!!", "caf\u{e9}", String(repeating: "x", count: 41)] {
            let hashes = Set(
                Self.variants(text).map { s -> Int in
                    var h = Hasher()
                    Bytes.hash(s, into: &h)
                    return h.finalize()
                })
            #expect(hashes.count == 1, "\(text)")
        }
        // Canonically equivalent, different bytes: different keys (a seeded Hasher makes a collision unlikely).
        #expect(ExactString("caf\u{e9}") != ExactString("cafe\u{301}"))
    }

    /// The comparison reads words (eight bytes, or two overlapping four-byte halves for four to seven): a difference at
    /// any one byte of any length is seen, in the decoder's key table too.
    @Test func aDifferenceAtAnyByteIsSeen() {
        for length in 1...24 {
            let base = String(repeating: "k", count: length)
            let table = KeyTable([base: 1])
            #expect(Bytes.equal(base, String(repeating: "k", count: length)))
            #expect(Array(base.utf8).withUnsafeBufferPointer { table.lookup($0) } == 1)
            for at in 0..<length {
                var bytes = Array(base.utf8)
                bytes[at] = UInt8(ascii: "j")
                #expect(!Bytes.equal(base, String(decoding: bytes, as: UTF8.self)), "\(length) \(at)")
                #expect(bytes.withUnsafeBufferPointer { table.lookup($0) } == nil, "\(length) \(at)")
            }
        }
    }

    @Test func sameBytesAgreesWithTheBytes() {
        let texts = [
            "", "a", "free", "pro", "US", "UK", "fifteen bytes!!", "fifteen bytes!?", "sixteen bytes!!!",
            "sixteen bytes!!?", "é", "e\u{301}", "caf\u{e9}", "cafe\u{301}", String(repeating: "x", count: 40),
            String(repeating: "x", count: 41),
        ]
        for x in texts {
            for y in texts {
                for a in Self.variants(x) {
                    for b in Self.variants(y) {
                        #expect(
                            Bytes.equal(a, b) == (Array(a.utf8) == Array(b.utf8)),
                            "\(a.debugDescription) \(b.debugDescription)")
                    }
                }
            }
        }
    }

    /// `equal(_:ascii:)` is `equal` whenever its second string is ASCII, for texts that are canonically equivalent to
    /// ASCII ones without being them: the Kelvin sign, the Greek question mark, varia, the Ohm and Ångström signs.
    @Test func asciiFastPathAgreesWithTheBytes() {
        let ascii = ["", "K", "K;", "`", "a`b", "US", "free", "sixteen bytes!!!", String(repeating: "x", count: 40)]
        let others =
            ascii + [
                "\u{212A}", "\u{212A};", "\u{037E}", "K\u{037E}", "\u{1FEF}", "a\u{1FEF}b", "\u{2126}", "\u{212B}", "é", "KK",
            ]
        for c in ascii {
            #expect(Bytes.isASCII(c))
            for x in others {
                for a in Self.variants(x) {
                    for b in Self.variants(c) {
                        #expect(
                            Bytes.equal(a, ascii: b) == (Array(a.utf8) == Array(b.utf8)),
                            "\(a.debugDescription) \(b.debugDescription)")
                    }
                }
            }
        }
        #expect(!Bytes.isASCII("é"))
    }

    /// The digits of an action id, written four bytes to a word, are those of each byte in turn (every byte value in
    /// every place of a word, and counts that leave a tail of one to three bytes).
    @Test func hexDigitsAreEachBytesInTurn() {
        for round in 0..<64 {
            let digest = SHA256.hash(data: Array("id \(round)".utf8))
            for count in [0, 1, 3, 4, 7, 16, 31, 32] {
                var out: [UInt8] = [42]
                Bytes.appendHex(first: count, of: digest, to: &out)
                var expected: [UInt8] = [42]
                Hex.append(Array(digest).prefix(count), to: &expected)
                #expect(out == expected, "round \(round), \(count) bytes")
            }
        }
        for b in 0...255 {
            let w = UInt32(b) | UInt32(255 - b) << 8 | UInt32(b ^ 0x5A) << 16 | UInt32(b &* 7 & 255) << 24
            var expected: [UInt8] = []
            Hex.append([UInt8(b), UInt8(255 - b), UInt8(b ^ 0x5A), UInt8(b &* 7 & 255)], to: &expected)
            #expect(withUnsafeBytes(of: Bytes.hexDigits(w).littleEndian) { Array($0) } == expected, "byte \(b)")
        }
    }
}
