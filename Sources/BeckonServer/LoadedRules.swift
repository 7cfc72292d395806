import BeckonCore
import BeckonYAML
import Crypto
import Foundation
import Logging
import Synchronization

/// What a service has loaded (`GET /admin/rules`): each file with its SHA-256, when, and the rule sets in them.
package struct LoadedRules: Sendable {
    package var files: [(path: String, sha256: String, bytes: Int)]
    package var loadedAt: Int64
    package var units: [(name: String, kind: String, rules: Int)]
    /// The destinations, with the environment variables that are not set (a paused one's).
    package var destinations: [(name: String, url: String, unset: [String])] = []

    package init(_ result: LoadResult, at time: Int64) {
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
    package static func fingerprint(_ key: String) -> String { String(Hex.encode(SHA256.hash(data: Array(key.utf8))).prefix(12)) }
}

/// A rule set as the service runs it: compiled, its events' decoder, what was loaded (files, hashes, time), its
/// version in the database and its destinations with their secrets read from the environment. Immutable; a reload
/// makes a new one.
package final class ServingRules: @unchecked Sendable {
    // @unchecked: every property is a constant, and the decoder's tables are never changed after it is made.
    package let ruleSet: CompiledRuleSet
    package let decoder: SegmentDecoder
    package let loaded: LoadedRules
    /// SHA-256 over the files' paths and texts in load order: equal digests, equal rule sets.
    package let digest: String
    package let files: [(path: String, text: String)]
    /// The version number the database stores the files under (``SQLiteStateBackend/ruleVersion(digest:files:at:)``).
    package let version: Int64
    /// By name, with secret headers resolved.
    package let destinations: [String: ResolvedDestination]

    package struct ResolvedDestination: Sendable {
        var spec: Destination
        /// Every header to send (static and secret), in order.
        var headers: [(name: String, value: String)]
        /// Environment variables of secret headers that are not set: while there are any, the destination is paused
        /// (its actions wait in the outbox).
        var missing: [String]
        /// The provider of a push destination (`apns`, `fcm`), once its credentials are read.
        var push: (any PushProvider)? = nil
        /// The sender of an email destination, once its API key and link secret are read.
        package var email: EmailSender? = nil
    }

    /// Why a rule set cannot be served: its diagnostics as `beckon validate` prints them.
    package struct Refused: Error, CustomStringConvertible {
        package var message: String
        package var diagnostics: String
        package var description: String { diagnostics.isEmpty ? message : diagnostics + message }
    }

    private init(
        _ ruleSet: CompiledRuleSet, _ loaded: LoadedRules, _ digest: String, _ files: [(path: String, text: String)],
        _ version: Int64, _ destinations: [String: ResolvedDestination]
    ) {
        self.ruleSet = ruleSet
        decoder = SegmentDecoder(ruleSet: ruleSet)
        self.loaded = loaded
        self.digest = digest
        self.files = files
        self.version = version
        self.destinations = destinations
    }

    /// Logs each paused destination (a secret's variable unset) with the variables it lacks.
    package func warnPaused(_ logger: Logger) {
        for d in destinations.values.sorted(by: { $0.spec.name < $1.spec.name }) where !d.missing.isEmpty {
            logger.warning(
                "a destination is paused until its secrets are set (its actions wait in the outbox)",
                metadata: ["destination": "\(d.spec.name)", "unset": "\(d.missing.joined(separator: ", "))"])
        }
    }

    /// Why a load cannot be served (its errors), `nil` when it can.
    package static func refusal(of result: LoadResult) -> Refused? {
        guard result.ruleSet == nil || result.errorCount > 0 else { return nil }
        return Refused(message: "\(result.errorCount) error(s) in the rules", diagnostics: result.rendered())
    }

    /// A load's files in load order, and their digest.
    package static func files(of result: LoadResult) -> (files: [(path: String, text: String)], digest: String) {
        let files = result.files.map { ($0, result.sources[$0] ?? "") }
        var bytes: [UInt8] = []
        for (path, text) in files {
            bytes += path.utf8
            bytes.append(0)
            bytes += text.utf8
            bytes.append(0)
        }
        return (files, Hex.encode(SHA256.hash(data: bytes)))
    }

    /// A load's rule set ready to serve, or why not (errors in the rules). Secret headers are read from
    /// `environment`; `version` gives the database's version of the files.
    package static func make(
        _ result: LoadResult, environment: [String: String], at time: Int64,
        version: (_ digest: String, _ files: [(path: String, text: String)]) throws -> Int64
    ) throws -> ServingRules {
        if let refused = refusal(of: result) { throw refused }
        guard let ruleSet = result.ruleSet else { throw Refused(message: "no rule set", diagnostics: "") }
        var destinations: [String: ResolvedDestination] = [:]
        for d in ruleSet.settings.destinations {
            var headers = d.headers.map { ($0.name, $0.value) }
            var missing: [String] = []
            for h in d.secretHeaders {
                if let value = environment[h.value], !value.isEmpty {
                    headers.append((h.name, value))
                } else {
                    missing.append(h.value)
                }
            }
            var sender: (any PushProvider)?
            var emailSender: EmailSender?
            // A push destination's credentials: a file named in the rules, or a variable (unset: paused).
            func secret(file: String?, variable: String?) throws -> String? {
                if let file {
                    guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                        throw Refused(message: "destination \(d.name): \(file) cannot be read", diagnostics: "")
                    }
                    return text
                }
                if let variable, let value = environment[variable], !value.isEmpty { return value }
                missing.append(variable ?? "")
                return nil
            }
            do {
                if let a = d.apns, let pem = try secret(file: a.keyFile, variable: a.keyVariable) {
                    sender = try APNsSender(a, keyPEM: pem)
                }
                if let f = d.fcm, let json = try secret(file: f.serviceAccountFile, variable: f.serviceAccountVariable) {
                    sender = try FCMSender(f, serviceAccount: json)
                }
                if let e = d.email {
                    // (Both read, so that a pause names every variable that is unset.)
                    let key = try secret(file: nil, variable: e.apiKeyVariable)
                    let linkSecret = try secret(file: nil, variable: e.linkSecretVariable)
                    if let key, let linkSecret {
                        emailSender = try EmailSender(e, destination: d.name, apiKey: key, linkSecret: linkSecret)
                    }
                }
            } catch let refused as Refused {
                throw refused
            } catch {
                throw Refused(message: "destination \(d.name): \(error)", diagnostics: "")
            }
            destinations[d.name] = ResolvedDestination(
                spec: d, headers: headers, missing: missing, push: sender, email: emailSender)
        }
        let (files, digest) = Self.files(of: result)
        var loaded = LoadedRules(result, at: time)
        loaded.destinations = destinations.values.sorted { $0.spec.name < $1.spec.name }.map {
            ($0.spec.name, $0.spec.url, $0.missing)
        }
        return ServingRules(ruleSet, loaded, digest, files, try version(digest, files), destinations)
    }
}

/// The rule set being served, for the request handlers (a reload replaces it; the processing thread owns its own
/// reference and re-decodes events decoded under an older one).
package final class CurrentRules: Sendable {
    private let rules: Mutex<ServingRules>
    package init(_ r: ServingRules) { rules = Mutex(r) }
    package var value: ServingRules { rules.withLock { $0 } }
    package func set(_ r: ServingRules) { rules.withLock { $0 = r } }
}
