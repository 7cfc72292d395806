import CompressNIO
import Foundation
import NIOCore

/// The `Content-Encoding` of an ingest request (docs/service.md, "Compressed requests"): none, gzip, or deflate (the
/// zlib format of RFC 9110, or a raw deflate stream as some clients send), as Segment's API takes them. Every limit
/// applies to the inflated bytes, and inflating stops at the limit: a small body that would inflate to hundreds of
/// megabytes costs no more than the limit. A gzip or zlib body must end with its stream, its check and nothing after:
/// a truncated one (its trailer cut off) or one followed by other bytes is corrupt. (A raw deflate stream has no
/// check to end with.)
enum ContentEncoding: CustomStringConvertible {
    case identity, gzip, deflate
    case unsupported(String)

    init(_ header: String?) {
        switch header?.trimmingCharacters(in: .whitespaces).lowercased() {
        case nil, "", "identity": self = .identity
        case "gzip", "x-gzip": self = .gzip
        case "deflate": self = .deflate
        case let other?: self = .unsupported(other)
        }
    }

    var description: String {
        switch self {
        case .identity: "identity"
        case .gzip: "gzip"
        case .deflate: "deflate"
        case .unsupported(let name): name
        }
    }

    enum Failure: Error { case tooLarge, corrupt }

    /// The body's bytes once decoded, at most `limit` of them.
    func decoded(_ body: ByteBuffer, upTo limit: Int) throws(Failure) -> [UInt8] {
        switch self {
        case .identity, .unsupported: return Array(body.readableBytesView)
        case .gzip:
            let out = try Self.inflate(body, .gzip(), upTo: limit)
            // The trailer: CRC-32 and length (mod 2^32), little-endian. zlib checks it only when it reaches it.
            let check = Self.littleEndian(Self.crc32(out)) + Self.littleEndian(UInt32(truncatingIfNeeded: out.count))
            guard Self.trailer(body, 8) == check else { throw .corrupt }
            return out
        case .deflate:
            let zlib: [UInt8]
            do {
                zlib = try Self.inflate(body, .zlib(), upTo: limit)
            } catch .corrupt {
                return try Self.inflate(body, .deflate(), upTo: limit)
            }
            // The trailer: Adler-32, big-endian.
            guard Self.trailer(body, 4) == Self.littleEndian(Self.adler32(zlib)).reversed() else { throw .corrupt }
            return zlib
        }
    }

    private static func trailer(_ body: ByteBuffer, _ n: Int) -> [UInt8] {
        body.readableBytes < n ? [] : Array(body.readableBytesView.suffix(n))
    }

    private static func littleEndian(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }

    /// CRC-32 (IEEE 802.3, gzip's), a table a byte.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = crcTable[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        (0..<8).reduce(UInt32(n)) { c, _ in c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    }

    /// Adler-32 (zlib's).
    static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        var k = 0
        while k < bytes.count {
            // (5,552 bytes at most between reductions: the sums stay within 32 bits.)
            for byte in bytes[k..<min(k + 5552, bytes.count)] {
                a &+= UInt32(byte)
                b &+= a
            }
            a %= 65521
            b %= 65521
            k += 5552
        }
        return b << 16 | a
    }

    private static func inflate(
        _ body: ByteBuffer, _ algorithm: CompressionAlgorithm, upTo limit: Int
    ) throws(Failure)
        -> [UInt8]
    {
        guard body.readableBytes > 0 else { return [] }
        var input = body
        do {
            // (One byte over the limit tells a body at the limit from one past it.)
            let out = try input.decompress(with: algorithm, maxSize: limit + 1)
            guard out.readableBytes <= limit else { throw Failure.tooLarge }
            // (Bytes after the stream's end: not part of it.)
            guard input.readableBytes == 0 else { throw Failure.corrupt }
            return Array(out.readableBytesView)
        } catch let e as CompressNIOError where e == .bufferOverflow {
            throw .tooLarge
        } catch let e as Failure {
            throw e
        } catch {
            throw .corrupt
        }
    }
}
