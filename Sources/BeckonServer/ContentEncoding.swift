import CompressNIO
import Foundation
import NIOCore

/// The `Content-Encoding` of an ingest request (docs/service.md, "Compressed requests"): none, gzip, or deflate (the
/// zlib format of RFC 9110, or a raw deflate stream as some clients send), as Segment's API takes them. Every limit
/// applies to the inflated bytes, and inflating stops at the limit: a small body that would inflate to hundreds of
/// megabytes costs no more than the limit.
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
        case .gzip: return try Self.inflate(body, .gzip(), upTo: limit)
        case .deflate:
            do {
                return try Self.inflate(body, .zlib(), upTo: limit)
            } catch .corrupt {
                return try Self.inflate(body, .deflate(), upTo: limit)
            }
        }
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
