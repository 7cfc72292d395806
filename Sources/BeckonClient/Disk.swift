import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The client's files: written whole to a temporary name and renamed, so a kill at any moment leaves the old file or the
/// new one, never half of one.
enum Disk {
    static func write(_ data: Data, to url: URL) throws {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).tmp")
        try data.write(to: temporary)
        guard rename(temporary.path, url.path) == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path, "errno": errno])
        }
    }

    static func writeJSON<T: Encodable>(_ value: T, to url: URL) throws {
        try write(JSONEncoder.compact.encode(value), to: url)
    }

    /// The file's value; `nil` when there is no file, or when it cannot be read or decoded: then it is moved aside
    /// (`NAME.damaged-SECONDS`) and the error logged, so that what replaces it neither hides the damage nor
    /// overwrites what was there.
    static func readJSON<T: Decodable>(_ type: T.Type, from url: URL, logger: Logger) -> T? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            return try JSONDecoder().decode(type, from: Data(contentsOf: url))
        } catch {
            let aside = url.deletingLastPathComponent().appendingPathComponent(
                "\(url.lastPathComponent).damaged-\(Int(Date().timeIntervalSince1970))")
            let moved = rename(url.path, aside.path) == 0
            logger.error(
                "beckon: \(url.lastPathComponent) could not be read (\(error)); starting without it\(moved ? ", the file kept as \(aside.lastPathComponent)" : "")"
            )
            return nil
        }
    }

    static func makeDirectory(_ url: URL) throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
}
