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
}
