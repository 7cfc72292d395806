import Foundation
import Testing

@testable import BeckonCore

/// `Value.sameBytes` decides most comparisons from a string's two words: identical words are the same bytes, and two
/// strings in Swift's small form (up to 15 UTF-8 bytes, stored in the words) with different words differ. These
/// tests hold that layout to what the code assumes, and the result to a byte-by-byte comparison.
struct StringBitsTests {
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

    @Test func smallFlagFollowsTheByteCount() {
        #if _pointerBitWidth(_64)
            #expect(StringBits("").isSmall)
            #expect(StringBits("free").isSmall)
            #expect(StringBits("fifteen bytes!!").isSmall)
            #expect(StringBits("é").isSmall)
            #expect(!StringBits("sixteen bytes!!!").isSmall)
            var reserved = String()
            reserved.reserveCapacity(64)
            reserved += "abc"
            #expect(!StringBits(reserved).isSmall)
        #endif
    }

    /// `Value.equal` of a value and a constant in place reads a string payload as the first two words of a `Value`
    /// and of a `Value?`.
    @Test func stringPayloadIsTheFirstTwoWords() {
        #if _pointerBitWidth(_64)
            for text in ["free", "sixteen bytes!!!"] {
                let bits = StringBits(text)
                withUnsafePointer(to: Value.string(text)) {
                    #expect(UnsafeRawPointer($0).load(as: StringBits.self) == bits)
                }
                withUnsafePointer(to: Value?.some(.string(text))) {
                    #expect(UnsafeRawPointer($0).load(as: StringBits.self) == bits)
                }
            }
        #endif
    }

    @Test func inPlaceEqualityAgreesWithEquality() {
        let values: [Value?] = [
            nil, .null, .bool(true), .int(3), .double(3), .uint(3), .string("free"), .string("pro"),
            .string("sixteen bytes!!!"), .string("e\u{301}"), .string("\u{e9}"), .list([.int(1)]),
        ]
        for a in values {
            for b in values.compactMap({ $0 }) {
                for x
                    in (a.map { v -> [Value?] in
                        guard case .string(let s) = v else { return [v] }
                        return Self.variants(s).map { .string($0) }
                    } ?? [nil])
                {
                    let expected = x.map { Value.equal($0, b) } ?? false
                    let got = withUnsafePointer(to: x) { p in withUnsafePointer(to: b) { Value.equal(p, $0) } }
                    #expect(got == expected, "\(String(describing: x)) \(b)")
                }
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
                            Value.sameBytes(a, b) == (Array(a.utf8) == Array(b.utf8)),
                            "\(a.debugDescription) \(b.debugDescription)")
                    }
                }
            }
        }
    }
}
