import BeckonCore
import BeckonPostgres
import BeckonServer
import BeckonYAML
import Foundation
import Logging
import Synchronization

/// A fleet's rule sets (docs/fleet.md, "Reloads"): every version is stored in PostgreSQL (`beckon_rules`), and a
/// reload appends a `V VERSION` entry to every partition's log; each partition switches when its runner reaches that
/// entry and records the version with its position, so a replay after a failover runs each entry under the rule set
/// it was first processed under. This process's compiled versions are kept here; `current` is the newest it knows
/// (the one ingest decodes under and `GET /admin/rules` shows).
final class FleetRules: RuleStore, Sendable {
    let log: FleetLog
    let current: CurrentRules
    let logger: Logger
    private let compiled = Mutex<[Int64: ServingRules]>([:])

    init(log: FleetLog, current: CurrentRules, logger: Logger) {
        self.log = log
        self.current = current
        self.logger = logger
    }

    /// At start, once the schema is in place: a new fleet stores this process's files as its first version; a fleet
    /// that has versions runs its latest, whatever this process's files are (a reload makes them the fleet's).
    func start() async throws {
        let mine = current.value
        guard let latest = try await log.rules(version: nil) else {
            let v = try await log.storeRules(digest: mine.digest, files: mine.files, at: Processor.nowMs())
            let serving = try compile(FleetLog.StoredRules(version: v, digest: mine.digest, files: mine.files))
            current.set(serving)
            return
        }
        if latest.digest != mine.digest {
            logger.warning(
                "this process's rule files are not the fleet's current rule set; it serves the fleet's (a reload makes its files the fleet's)",
                metadata: ["version": "\(latest.version)", "digest": "\(latest.digest.prefix(12))"])
        }
        current.set(try compile(latest))
    }

    /// Follows a reload made by another process: the latest version, compiled, becomes `current`.
    func refresh() async throws {
        let latest = try await log.latestRulesVersion()
        guard latest > current.value.version else { return }
        current.set(try await serving(latest))
    }

    /// A stored version compiled (`0`: the first stored), from this process's cache or the database.
    func serving(_ version: Int64) async throws -> ServingRules {
        if version != 0, let r = compiled.withLock({ $0[version] }) { return r }
        guard let stored = try await log.rules(version: version) else { throw Missing(version: version) }
        if let r = compiled.withLock({ $0[stored.version] }) { return r }
        return try compile(stored)
    }

    struct Missing: Error, CustomStringConvertible {
        var version: Int64
        var description: String { "rule set version \(version) is not stored" }
    }

    private func compile(_ stored: FleetLog.StoredRules) throws -> ServingRules {
        let result = RuleLoader.load(texts: stored.files)
        let serving = try ServingRules.make(result, environment: ProcessInfo.processInfo.environment, at: Processor.nowMs()) {
            _, _ in stored.version
        }
        compiled.withLock { $0[stored.version] = serving }
        return serving
    }

    // MARK: RuleStore (a reload)

    func version(digest: String, files: [(path: String, text: String)], at time: Int64) async throws -> Int64 {
        try await log.storeRules(digest: digest, files: files, at: time)
    }

    /// Every partition switches at the entry appended now; this process serves the new version at once. A version
    /// that another process's reload superseded meanwhile is not switched to (the reload fails: ask again).
    func swap(to rules: ServingRules) async throws {
        compiled.withLock { $0[rules.version] = rules }
        var record = InputLog()
        record.rules(version: rules.version)
        guard try await log.switchRules(to: rules.version, body: record.bytes, receivedAt: Processor.nowMs()) else {
            throw Superseded(version: rules.version)
        }
        current.set(rules)
    }

    struct Superseded: Error, CustomStringConvertible {
        var version: Int64
        var description: String { "rule set version \(version) was superseded by another process's reload" }
    }
}
