/// Text from events (ids, names, property values) shown on a terminal or in a text file, made safe to show.
///
/// An id may hold any character JSON can carry: a newline or a carriage return in one would start a forged line of
/// the dry-run table (`… ✓ …`), escape sequences would drive the terminal, and bidirectional overrides would show
/// text in another order than it is. Each such character is shown as `\u{…}` with its code instead: C0 controls, DEL,
/// C1 controls, U+2028 and U+2029, and the bidirectional marks, embeddings, overrides and isolates.
package enum Terminal {
    /// `keepingLineBreaks`: a report of several lines, whose `\n`s are its own.
    package static func safe(_ s: String, keepingLineBreaks: Bool = false) -> String {
        // Printable ASCII, the common case, as it is.
        if s.utf8.allSatisfy({ ($0 >= 0x20 && $0 < 0x7F) || (keepingLineBreaks && $0 == 0x0A) }) { return s }
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for u in s.unicodeScalars {
            if isUnsafe(u) && !(keepingLineBreaks && u == "\n") {
                out += "\\u{" + String(u.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(u)
            }
        }
        return out
    }

    package static func isUnsafe(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x00..<0x20, 0x7F..<0xA0: true
        case 0x2028, 0x2029: true
        case 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

extension String {
    /// The text, or its first `n - 1` characters and `…` when it has more than `n`: a message that quotes an input (an
    /// event's value, a name or a value of a rule file) never holds it whole.
    package func clipped(to n: Int) -> String {
        utf8.count <= n || count <= n ? self : prefix(n - 1) + "…"
    }
}
