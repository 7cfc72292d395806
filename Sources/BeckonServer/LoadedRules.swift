import BeckonCore
import BeckonYAML
import Crypto
import Foundation

/// What a service has loaded (`GET /admin/rules`): each file with its SHA-256, when, and the rule sets in them.
struct LoadedRules: Sendable {
    var files: [(path: String, sha256: String, bytes: Int)]
    var loadedAt: Int64
    var units: [(name: String, kind: String, rules: Int)]

    init(_ result: LoadResult, at time: Int64) {
        files = result.files.sorted().map { path in
            let bytes = Array((result.sources[path] ?? "").utf8)
            return (path, Hex.encode(SHA256.hash(data: bytes)), bytes.count)
        }
        loadedAt = time
        units =
            result.ruleSet.map { rs in
                rs.units.enumerated().map { i, u in (u.name, "\(u.kind)", rs.rules.count { Int($0.unit) == i }) }
            } ?? []
    }

    /// The first 12 hex digits of a key's SHA-256: enough to tell keys apart in a log, nothing to use.
    static func fingerprint(_ key: String) -> String { String(Hex.encode(SHA256.hash(data: Array(key.utf8))).prefix(12)) }

    var json: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("loadedAt")
        w.string(Timestamp(milliseconds: loadedAt).description)
        w.key("files")
        w.beginArray()
        for f in files {
            w.beginObject()
            w.key("path")
            w.string(f.path)
            w.key("sha256")
            w.string(f.sha256)
            w.key("bytes")
            w.value(.int(Int64(f.bytes)))
            w.endObject()
        }
        w.endArray()
        w.key("rulesets")
        w.beginArray()
        for u in units {
            w.beginObject()
            w.key("name")
            w.string(u.name)
            w.key("kind")
            w.string(u.kind)
            w.key("rules")
            w.value(.int(Int64(u.rules)))
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.output
    }
}
