import CBeckonZlib
import CBeckonZstd
import Synchronization

/// The log's bodies as `beckon_log` stores them. An input log record (BeckonServer's `InputLog`: text headers and each
/// event's JSON) of ~250 bytes was the largest part of a fleet's WAL per event, and PostgreSQL compresses no value under
/// ~2 KB. So a record is stored compressed with zstd against a preset dictionary of the words Segment's events and the
/// record's headers are made of, when that is smaller:
///
/// ```
/// 0x04 LENGTH(4 bytes, little-endian) ZSTD        a record of LENGTH bytes: one zstd frame (level 1, its content
///                                                   size and checksum in it), the dictionary as raw content
/// 0x01 LENGTH(4 bytes, little-endian) DEFLATE     the same, as written before zstd: raw deflate, a 2 KB window,
///                                                   the dictionary preset (read, no longer written)
/// anything else                                     the record as it is (every record starts with a letter)
/// ```
///
/// A row that holds several entries (a page: ``packPage(_:receivedAt:)``, its row's `last_seq` set) has its own body:
///
/// ```
/// 0x05 LENGTH(4 bytes, little-endian) ZSTD        LENGTH bytes of entries, compressed as a record is
/// 0x02 LENGTH(4 bytes, little-endian) DEFLATE     the same, as written before zstd (read, no longer written)
/// 0x03 ENTRIES                                      the entries as they are
/// entry: OFFSET AGE USERLENGTH USER RECORDLENGTH RECORD    (OFFSET, AGE and the lengths as LEB128 varints)
/// ```
/// OFFSET is the entry's sequence number minus the row's, AGE the row's `received_at` minus the entry's.
///
/// Why zstd: deflate at level 6 took about 2.6 µs of CPU an event of the benchmark's pages, a tenth of a fleet
/// process's; zstd at level 1 with the same dictionary takes 0.4 µs and writes a quarter fewer bytes, and reads them
/// back in 0.14 µs against inflate's 0.35 (docs/fleet.md, "Capacity").
///
/// The dictionary is part of the format: a different one is a new first byte, and a reader keeps every one it ever
/// wrote. A body that does not decompress to exactly LENGTH bytes (or whose checksum does not match) is read as a
/// damaged record.
package enum LogBody {
    static let deflated: UInt8 = 0x01
    static let compressed: UInt8 = 0x04
    /// A record over this is stored as it is (the service takes 500 KB a request).
    static let maxRecord = 16 << 20

    /// Segment's names and the record headers, the commonest last (a match at the end of a dictionary is the
    /// shortest distance back). General, not the benchmark's events: an app's own event names and values are not in it.
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

    /// What to store for `record`: compressed when that is smaller.
    package static func pack(_ record: [UInt8]) -> [UInt8] {
        guard record.count > 16, record.count <= maxRecord, let packed = compress(record, marker: compressed),
            packed.count < record.count
        else { return record }
        return packed
    }

    static let deflatedPage: UInt8 = 0x02
    static let plainPage: UInt8 = 0x03
    static let compressedPage: UInt8 = 0x05

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

    /// The body of a row of several entries, received no later than `receivedAt` (the row's): compressed as one frame,
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
        guard plain.count - 1 <= maxRecord, let packed = compress(plain[1...], marker: compressedPage),
            packed.count < plain.count
        else { return plain }
        return packed
    }

    /// The entries of a page's body, or nil when it is damaged (it does not decompress, or an entry runs past its end).
    package static func unpackPage(_ stored: [UInt8], receivedAt: Int64) -> [PageEntry]? {
        var plain: ArraySlice<UInt8>
        switch stored.first {
        case plainPage: plain = stored[1...]
        case compressedPage, deflatedPage:
            guard let out = expand(stored) else { return nil }
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

    /// The record a stored body holds. A compressed body that does not decompress to its length comes back as it is
    /// stored, which no record reader takes (its first byte is no header): the entry is then handled as any damaged
    /// record is, rather than failing the read of its whole partition.
    package static func unpack(_ stored: [UInt8]) -> [UInt8] {
        guard stored.first == compressed || stored.first == deflated else { return stored }
        return expand(stored) ?? stored
    }

    /// The LENGTH bytes a compressed body (0x01, 0x02, 0x04 or 0x05) holds, or nil when it is damaged.
    private static func expand(_ stored: [UInt8]) -> [UInt8]? {
        guard stored.count > 5 else { return nil }
        let length = (1...4).reduce(0) { $0 | Int(stored[$1]) << (8 * ($1 - 1)) }
        guard length <= maxRecord else { return nil }
        switch stored[0] {
        case compressed, compressedPage: return decompress(stored[5...], length: length)
        default: return inflate(stored[5...], length: length)
        }
    }

    /// zstd's dictionaries (made once, read by every thread at once) and its contexts (one thread's at a time: kept
    /// between calls, as making one costs more than compressing a small page).
    private final class Zstd: @unchecked Sendable {
        let compressionDictionary: OpaquePointer?
        let decompressionDictionary: OpaquePointer?
        /// A context, which one thread uses at a time (handed from one to another through `idle`, under its lock).
        struct Context: @unchecked Sendable { let pointer: OpaquePointer }
        private let idle = Mutex<(compress: [Context], decompress: [Context])>(([], []))
        /// Contexts kept idle at most, of each kind (as many as threads pack at once, in practice the cores): a
        /// compression context is up to ~0.6 MB after a page of 256 KB, a decompression one ~0.1 MB.
        static let keep = 8

        init() {
            compressionDictionary = LogBody.dictionary.withUnsafeBytes { ZSTD_createCDict($0.baseAddress, $0.count, 1) }
            decompressionDictionary = LogBody.dictionary.withUnsafeBytes { ZSTD_createDDict($0.baseAddress, $0.count) }
        }

        /// `body` with a compression context that has the dictionary and the frame's checksum set.
        func compressing<T>(_ body: (OpaquePointer) -> T?) -> T? {
            guard let dictionary = compressionDictionary else { return nil }
            var context = idle.withLock { $0.compress.popLast() }?.pointer
            if context == nil, let made = ZSTD_createCCtx() {
                guard ZSTD_isError(ZSTD_CCtx_setParameter(made, ZSTD_c_checksumFlag, 1)) == 0,
                    ZSTD_isError(ZSTD_CCtx_refCDict(made, dictionary)) == 0
                else {
                    ZSTD_freeCCtx(made)
                    return nil
                }
                context = made
            }
            guard let context else { return nil }
            defer { keep(context, compressing: true) }
            return body(context)
        }

        /// `body` with a decompression context.
        func decompressing<T>(_ body: (OpaquePointer, OpaquePointer) -> T?) -> T? {
            guard let dictionary = decompressionDictionary,
                let context = idle.withLock({ $0.decompress.popLast() })?.pointer ?? ZSTD_createDCtx()
            else { return nil }
            defer { keep(context, compressing: false) }
            return body(context, dictionary)
        }

        private func keep(_ context: OpaquePointer, compressing: Bool) {
            let kept = idle.withLock { idle in
                if compressing, idle.compress.count < Self.keep {
                    idle.compress.append(Context(pointer: context))
                    return true
                }
                if !compressing, idle.decompress.count < Self.keep {
                    idle.decompress.append(Context(pointer: context))
                    return true
                }
                return false
            }
            if !kept {
                if compressing { ZSTD_freeCCtx(context) } else { ZSTD_freeDCtx(context) }
            }
        }
    }
    private static let zstd = Zstd()

    /// `marker`, the record's length and its zstd frame; nil when zstd fails.
    private static func compress(_ record: some Collection<UInt8>, marker: UInt8) -> [UInt8]? {
        func run(_ source: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
            zstd.compressing { context in
                let capacity = 5 + ZSTD_compressBound(source.count)
                var failed = false
                let out = [UInt8](unsafeUninitializedCapacity: capacity) { target, count in
                    target[0] = marker
                    for k in 0..<4 { target[1 + k] = UInt8(truncatingIfNeeded: source.count >> (8 * k)) }
                    let n = ZSTD_compress2(context, target.baseAddress! + 5, capacity - 5, source.baseAddress, source.count)
                    if ZSTD_isError(n) != 0 {
                        failed = true
                        count = 0
                    } else {
                        count = 5 + n
                    }
                }
                return failed ? nil : out
            }
        }
        if let done = record.withContiguousStorageIfAvailable(run) { return done }
        return Array(record).withUnsafeBufferPointer(run)
    }

    /// Exactly `length` bytes from one zstd frame with its checksum, and nothing after it; nil otherwise.
    private static func decompress(_ packed: ArraySlice<UInt8>, length: Int) -> [UInt8]? {
        packed.withUnsafeBufferPointer { source in
            zstd.decompressing { context, dictionary in
                guard ZSTD_getFrameContentSize(source.baseAddress, source.count) == UInt64(length) else { return nil }
                var failed = false
                let out = [UInt8](unsafeUninitializedCapacity: length) { target, count in
                    let n = ZSTD_decompress_usingDDict(
                        context, target.baseAddress, length, source.baseAddress, source.count, dictionary)
                    failed = ZSTD_isError(n) != 0 || n != length
                    count = failed ? 0 : n
                }
                return failed ? nil : out
            }
        }
    }

    /// The window of the deflated bodies written before zstd: 2 KB.
    static let windowBits: Int32 = 11

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
