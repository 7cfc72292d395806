import CBeckonZlib
import Foundation

/// gzip (RFC 1952) through the system's zlib: request bodies of a batch, as Segment's SDKs send them
/// (`Content-Encoding: gzip`; `beckon serve` inflates them within its 500 KB bound).
enum Gzip {
    /// The compressed bytes, or nil when zlib fails (the caller then sends the body as it is).
    static func compress(_ input: Data, level: Int32 = 6) -> Data? {
        var stream = z_stream()
        // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
        guard
            deflateInit2_(
                &stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, zlibVersion(),
                Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { return nil }
        defer { deflateEnd(&stream) }
        var output = Data(count: Int(deflateBound(&stream, uLong(input.count))) + 32)
        var input = input
        let status = input.withUnsafeMutableBytes { (source: UnsafeMutableRawBufferPointer) -> Int32 in
            output.withUnsafeMutableBytes { (target: UnsafeMutableRawBufferPointer) -> Int32 in
                stream.next_in = source.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(target.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        output.count = Int(stream.total_out)
        return output
    }
}
