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
/// A row that holds several entries (a page: ``packPage(_:receivedAt:)``, its row's `last_seq` set) has its own body:
///
/// ```
/// 0x02 LENGTH(4 bytes, little-endian) DEFLATE     LENGTH bytes of entries: deflated as a record is
/// 0x03 ENTRIES                                      the entries as they are
/// entry: OFFSET AGE USERLENGTH USER RECORDLENGTH RECORD    (OFFSET, AGE and the lengths as LEB128 varints)
/// ```
/// OFFSET is the entry's sequence number minus the row's, AGE the row's `received_at` minus the entry's.
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
        guard record.count > 16, record.count <= maxRecord, let packed = deflate(record, marker: deflated),
            packed.count < record.count
        else { return record }
        return packed
    }

    static let deflatedPage: UInt8 = 0x02
    static let plainPage: UInt8 = 0x03

    /// An entry of a page: its sequence number's offset from the row's, its user, when it was received and its record.
    package struct PageEntry: Equatable, Sendable {
        package var offset: Int64
        package var userID: String
        package var receivedAt: Int64
        package var record: [UInt8]
        package init(offset: Int64, userID: String, receivedAt: Int64, record: [UInt8]) {
            self.offset = offset
            self.userID = userID
            self.receivedAt = receivedAt
            self.record = record
        }
    }

    /// The body of a row of several entries, received no later than `receivedAt` (the row's): deflated as one stream,
    /// so that an entry's fields and values reach back to the entries before it.
    package static func packPage(_ entries: [PageEntry], receivedAt: Int64) -> [UInt8] {
        var plain: [UInt8] = [plainPage]
        plain.reserveCapacity(1 + entries.reduce(0) { $0 + $1.record.count + $1.userID.utf8.count + 16 })
        for e in entries {
            varint(UInt64(e.offset), into: &plain)
            varint(UInt64(max(0, receivedAt - e.receivedAt)), into: &plain)
            varint(UInt64(e.userID.utf8.count), into: &plain)
            plain += e.userID.utf8
            varint(UInt64(e.record.count), into: &plain)
            plain += e.record
        }
        guard plain.count - 1 <= maxRecord, let packed = deflate(plain[1...], marker: deflatedPage),
            packed.count < plain.count
        else { return plain }
        return packed
    }

    /// The entries of a page's body, or nil when it is damaged (it does not inflate, or an entry runs past its end).
    package static func unpackPage(_ stored: [UInt8], receivedAt: Int64) -> [PageEntry]? {
        var plain: ArraySlice<UInt8>
        switch stored.first {
        case plainPage: plain = stored[1...]
        case deflatedPage:
            guard stored.count > 5 else { return nil }
            let length = (1...4).reduce(0) { $0 | Int(stored[$1]) << (8 * ($1 - 1)) }
            guard length <= maxRecord, let out = inflate(stored[5...], length: length) else {
                return nil
            }
            plain = out[...]
        default: return nil
        }
        var entries: [PageEntry] = []
        while !plain.isEmpty {
            guard let offset = readVarint(&plain), let age = readVarint(&plain), age <= UInt64(Int64.max),
                let u = readVarint(&plain), u <= plain.count
            else { return nil }
            let user = String(decoding: plain.prefix(Int(u)), as: UTF8.self)
            plain = plain.dropFirst(Int(u))
            guard let r = readVarint(&plain), r <= plain.count, offset <= UInt64(Int64.max) else { return nil }
            let (at, overflow) = receivedAt.subtractingReportingOverflow(Int64(age))
            guard !overflow else { return nil }
            entries.append(PageEntry(offset: Int64(offset), userID: user, receivedAt: at, record: Array(plain.prefix(Int(r)))))
            plain = plain.dropFirst(Int(r))
        }
        return entries
    }

    private static func varint(_ v: UInt64, into out: inout [UInt8]) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    private static func readVarint(_ bytes: inout ArraySlice<UInt8>) -> UInt64? {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        while let b = bytes.popFirst() {
            guard shift < 64 else { return nil }
            v |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return v }
            shift += 7
        }
        return nil
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

    private static func deflate(_ record: some Collection<UInt8>, marker: UInt8) -> [UInt8]? {
        guard primed.ready else { return nil }
        var stream = z_stream()
        guard deflateCopy(&stream, primed.stream) == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: 5 + Int(deflateBound(&stream, uLong(record.count))))
        out[0] = marker
        for k in 0..<4 { out[1 + k] = UInt8(truncatingIfNeeded: record.count >> (8 * k)) }
        var input = Array(record)
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
