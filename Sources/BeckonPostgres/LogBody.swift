import CBeckonZlib

/// The log's bodies as `beckon_log` stores them. An input log record (BeckonServer's `InputLog`: text headers and each
/// event's JSON) of ~250 bytes was the largest part of a fleet's WAL per event, and PostgreSQL compresses no value under ~2 KB. So
/// a record is stored deflated against a preset dictionary of the words Segment's events and the record's headers
/// are made of, when that is smaller:
///
/// ```
/// 0x01 LENGTH(4 bytes, little-endian) DEFLATE     a record of LENGTH bytes: raw deflate, a 2 KB window, dictionary 1
/// anything else                                     the record as it is (every record starts with a letter)
/// ```
///
/// The dictionary is part of the format: a different one is a new first byte, and a reader keeps every one it ever
/// wrote. A body that does not inflate to exactly LENGTH bytes is read as a damaged record.
package enum LogBody {
    static let deflated: UInt8 = 0x01
    /// A record over this is stored as it is (the service takes 500 KB a request).
    static let maxRecord = 16 << 20

    /// Segment's names and the record headers, the commonest last (deflate reaches the end of a dictionary with the
    /// shortest distances). General, not the benchmark's events: an app's own event names and values are not in it.
    static let dictionary: [UInt8] = Array(
        """
        "integrations":{},"originalTimestamp":"","receivedAt":"","sentAt":"","version":2,"channel":"server",\
        "groupId":"","previousId":"","traits":{"email":"","name":"","firstName":"","lastName":"","phone":"",\
        "plan":"","createdAt":""},"context":{"library":{"name":"analytics-swift","version":""},"ip":"",\
        "network":{"wifi":true,"cellular":false,"carrier":""},"screen":{"width":,"height":,"density":},\
        "device":{"id":"","manufacturer":"Apple","model":"","type":"ios","token":"","pushEnabled":true},\
        "app":{"name":"","version":"","build":"","namespace":"com."},"os":{"name":"iOS","version":""},\
        "timezone":"Europe/","locale":"en-US","userAgent":"Mozilla/5.0"},"name":"","category":"",\
        "properties":{"url":"https://","utm_source":"","utm_campaign":"","product_id":"","price":,"currency":"USD",\
        "path":"/","referrer":"","title":"","search":""},"type":"screen","type":"identify","type":"track",\
        "event":"Application Opened","event":"","anonymousId":"","userId":"","messageId":"","timestamp":"20\
        T00:00:00.000Z"}
        A identify 17 - -
        A - 17 - -
        A track 17 - -
        E 2
        {"type":"track","userId":"
        """.utf8)

    /// What to store for `record`: deflated when that is smaller.
    package static func pack(_ record: [UInt8]) -> [UInt8] {
        guard record.count > 16, record.count <= maxRecord, let packed = deflate(record), packed.count < record.count
        else { return record }
        return packed
    }

    /// The record a stored body holds. A deflated body that does not inflate to its length comes back as it is
    /// stored, which no record reader takes (its first byte is no header): the entry is then handled as any damaged
    /// record is, rather than failing the read of its whole partition.
    package static func unpack(_ stored: [UInt8]) -> [UInt8] {
        guard stored.first == deflated, stored.count > 5 else { return stored }
        let length = (1...4).reduce(0) { $0 | Int(stored[$1]) << (8 * ($1 - 1)) }
        guard length <= maxRecord, let record = inflate(stored[5...], length: length) else { return stored }
        return record
    }

    /// The window: a record's matches reach back into the dictionary (1.5 KB) and the record itself.
    static let windowBits: Int32 = 11

    /// A deflate stream with the dictionary set, copied for each record (`deflateCopy` only reads it, so threads share
    /// it): setting the dictionary up every time cost 4.3 µs a record, copying it 3.2 µs (a 239-byte record).
    private final class Primed: @unchecked Sendable {
        let stream: UnsafeMutablePointer<z_stream>
        let ready: Bool

        init() {
            let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            stream.initialize(to: z_stream())
            self.stream = stream
            ready =
                deflateInit2_(
                    stream, 6, Z_DEFLATED, -LogBody.windowBits, 4, Z_DEFAULT_STRATEGY, zlibVersion(),
                    Int32(MemoryLayout<z_stream>.size)) == Z_OK
                && LogBody.dictionary.withUnsafeBufferPointer { d in
                    deflateSetDictionary(stream, d.baseAddress, uInt(d.count))
                } == Z_OK
        }
    }
    private static let primed = Primed()

    private static func deflate(_ record: [UInt8]) -> [UInt8]? {
        guard primed.ready else { return nil }
        var stream = z_stream()
        guard deflateCopy(&stream, primed.stream) == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: 5 + Int(deflateBound(&stream, uLong(record.count))))
        out[0] = deflated
        for k in 0..<4 { out[1 + k] = UInt8(truncatingIfNeeded: record.count >> (8 * k)) }
        var input = record
        let status = input.withUnsafeMutableBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                stream.next_in = source.baseAddress
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress! + 5
                stream.avail_out = uInt(target.count - 5)
                return CBeckonZlib.deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        out.removeLast(out.count - 5 - Int(stream.total_out))
        return out
    }

    private static func inflate(_ packed: ArraySlice<UInt8>, length: Int) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit2_(&stream, -windowBits, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        let set = dictionary.withUnsafeBufferPointer { d in
            inflateSetDictionary(&stream, d.baseAddress, uInt(d.count))
        }
        guard set == Z_OK else { return nil }
        var out = [UInt8](repeating: 0, count: length)
        var input = Array(packed)
        let status = input.withUnsafeMutableBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                stream.next_in = source.baseAddress
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress
                stream.avail_out = uInt(target.count)
                return CBeckonZlib.inflate(&stream, Z_FINISH)
            }
        }
        // Exactly `length` bytes and the stream's end, with no input left over.
        guard status == Z_STREAM_END, Int(stream.total_out) == length, stream.avail_in == 0 else { return nil }
        return out
    }
}
