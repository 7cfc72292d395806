import BeckonCore
import BeckonStore
import BeckonYAML
import Foundation
import HTTPTypes
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Where a reload stores a new rule set and how it is swapped in: the single service's database and processing
/// thread (``SingleRuleStore``), or a fleet's database and every partition's log.
package protocol RuleStore: Sendable {
    /// The version number under which the store keeps these files (stored if new).
    func version(digest: String, files: [(path: String, text: String)], at time: Int64) async throws -> Int64
    /// Makes `rules` the rule set processed from now on.
    func swap(to rules: ServingRules) async throws
    /// Brings the served rule set up to date with what the store holds before a reload compares with it (a fleet:
    /// another process's reload).
    func refresh() async throws
}

extension RuleStore {
    package func refresh() async throws {}
}

/// The single service's: versions in its SQLite database; the processing thread swaps between events, after a
/// checkpoint.
struct SingleRuleStore: RuleStore {
    let backend: SQLiteStateBackend
    let processor: Processor

    func version(digest: String, files: [(path: String, text: String)], at time: Int64) async throws -> Int64 {
        try backend.ruleVersion(digest: digest, files: files, at: time)
    }

    func swap(to rules: ServingRules) async throws { _ = try await processor.submit(.reload(rules)) }
}

/// Loads the rule folders again and swaps the served rule set between events (docs/operations.md, "Changing
/// campaigns live"): rules with errors change nothing (their diagnostics come back as `beckon validate` prints
/// them); valid ones are stored as a new version and swapped in by the store (``RuleStore``), every user's state
/// carried over by their rules' names (fire counts, limits, pending delayed actions, flows). The same for both
/// stores, for `POST /admin/reload`, SIGHUP and `--watch`.
package struct Reloader: Sendable {
    let paths: [String]
    let store: any RuleStore
    let current: CurrentRules
    let metrics: ServiceMetrics
    let logger: Logger
    /// The last reload refused, for the console.
    let lastRefused = LastRefusedReload()
    /// One reload at a time (`POST /admin/reload`, SIGHUP and `--watch` may come together): the rule set version each
    /// stores is the newest when it is swapped in, so pruning the older ones never takes one still to be swapped in.
    let oneAtATime = SerialGate()

    package init(paths: [String], store: any RuleStore, current: CurrentRules, metrics: ServiceMetrics, logger: Logger) {
        self.paths = paths
        self.store = store
        self.current = current
        self.metrics = metrics
        self.logger = logger
    }

    package enum Outcome {
        case changed(ServingRules)
        /// The files are what is served already.
        case unchanged(ServingRules)
        case refused(ServingRules.Refused)
        /// Valid rules that the processing thread could not swap in (the database failed).
        case failed
    }

    /// The HTTP API's answer to an outcome: what is served, or the refusal.
    package static func answer(_ outcome: Outcome) throws -> Reloaded {
        switch outcome {
        case .changed(let r): return Reloaded(changed: true, rules: r.loaded)
        case .unchanged(let r): return Reloaded(changed: false, rules: r.loaded)
        case .refused(let why):
            var e = APIError(.unprocessableContent, why.message + "; the rules loaded before are still served")
            e.body.diagnostics = why.diagnostics
            throw e
        case .failed:
            throw APIError.unavailable("the rules could not be swapped; the rules loaded before are still served")
        }
    }

    package func reload(by who: String) async -> Outcome {
        await oneAtATime.enter()
        defer { oneAtATime.leave() }
        let started = ContinuousClock.now
        let result = RuleLoader.load(paths: paths)
        let now = Processor.nowMs()
        let serving: ServingRules
        do {
            try await store.refresh()
            let running = current.value
            if result.errorCount == 0, ServingRules.files(of: result).digest == running.digest {
                metrics.reload("unchanged").increment()
                logger.info("reload: the rules are unchanged", metadata: ["by": "\(who)"])
                return .unchanged(running)
            }
            if let refused = ServingRules.refusal(of: result) { throw refused }
            let (files, digest) = ServingRules.files(of: result)
            let version = try await store.version(digest: digest, files: files, at: now)
            serving = try ServingRules.make(result, environment: ProcessInfo.processInfo.environment, at: now) { _, _ in
                version
            }
        } catch let refused as ServingRules.Refused {
            metrics.reload("refused").increment()
            lastRefused.set(.init(at: now, by: who, refused: refused))
            logger.error(
                "reload refused; the rules loaded before are still served",
                metadata: ["by": "\(who)", "error": "\(refused.message)", "diagnostics": "\(refused.diagnostics)"])
            return .refused(refused)
        } catch {
            logger.error("reload failed", metadata: ["by": "\(who)", "error": "\(error)"])
            return .failed
        }
        do {
            try await store.swap(to: serving)
        } catch {
            logger.error("reload failed", metadata: ["by": "\(who)", "error": "\(error)"])
            return .failed
        }
        metrics.reload("changed").increment()
        logger.notice(
            "reloaded the rules",
            metadata: [
                "by": "\(who)", "files": "\(serving.files.count)", "digest": "\(serving.digest.prefix(12))",
                "took": "\(ContinuousClock.now - started)",
            ])
        serving.warnPaused(logger)
        if !result.diagnostics.isEmpty {
            logger.warning("the reloaded rules have warnings", metadata: ["diagnostics": "\(result.rendered())"])
        }
        return .changed(serving)
    }
}

/// A lock for async work: one holder at a time, the others waiting in order.
final class SerialGate: Sendable {
    private struct State {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func enter() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let go = state.withLock { s in
                if s.busy {
                    s.waiting.append(c)
                    return false
                }
                s.busy = true
                return true
            }
            if go { c.resume() }
        }
    }

    func leave() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard !s.waiting.isEmpty else {
                s.busy = false
                return nil
            }
            return s.waiting.removeFirst()
        }
        next?.resume()
    }
}

/// The last reload that was refused: when, asked by whom, and its diagnostics (`beckon validate`'s text).
final class LastRefusedReload: Sendable {
    struct Entry: Sendable {
        var at: Int64
        var by: String
        var refused: ServingRules.Refused
    }
    private let entry = Mutex<Entry?>(nil)
    var value: Entry? { entry.withLock { $0 } }
    func set(_ e: Entry) { entry.withLock { $0 = e } }
}

/// Reloads on SIGHUP, until the service stops.
package struct HangupReloads: Service {
    let reloader: Reloader
    package init(reloader: Reloader) { self.reloader = reloader }

    package func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            _ = await reloader.reload(by: "SIGHUP")
        }
    }
}

/// Reloads when a rule file changes (`--watch`): the files under the folders are looked at every ``every`` (their
/// paths, sizes and modification times), and a change is a reload as any other — refused with its diagnostics while
/// the edit has errors, swapped in once it has none. A half-saved file is only a refused reload.
package struct WatchReloads: Service {
    let reloader: Reloader
    /// The files as they were when the service was set up: a change made before this runs (a fleet process starts it
    /// once it is ready) is still a change.
    let initial: [String]
    static let every: Duration = .seconds(1)
    package init(reloader: Reloader) {
        self.reloader = reloader
        initial = Self.look(reloader.paths)
    }

    package func run() async throws {
        var last = initial
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.every) }
            let now = Self.look(reloader.paths)
            if now != last {
                last = now
                _ = await reloader.reload(by: "--watch")
            }
        }
    }

    /// Each file's path, size and modification time.
    static func look(_ paths: [String]) -> [String] {
        RuleLoader.files(under: paths).map { path in
            let a = try? FileManager.default.attributesOfItem(atPath: path)
            let size = (a?[.size] as? NSNumber)?.int64Value ?? -1
            let modified = (a?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? -1
            return "\(path)\u{0}\(size)\u{0}\(modified)"
        }
    }
}

/// Housekeeping in the background: input log records past the retention period are deleted (only those a
/// checkpoint includes), and forgets interrupted by a crash finish scrubbing their user's events.
struct Maintenance: Service {
    let backend: SQLiteStateBackend
    let current: CurrentRules
    /// How long input log records are kept (`nil`: for ever).
    let retention: Retention?
    let logger: Logger

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let once = self
            try? await Blocking.run { once.runOnce() }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Retention.every) }
        }
    }

    func runOnce() {
        do {
            let pending = try backend.pendingScrubs()
            if !pending.isEmpty { _ = try Privacy.scrub(pending, backend: backend) }
            if let retention { retention.deleted(try backend.deleteOlder(than: retention.cutoff(at: Processor.nowMs()))) }
        } catch {
            logger.error("maintenance failed", metadata: ["error": "\(error)"])
        }
    }
}

/// Retention (`--retention-days`, docs/operations.md): input log records (a fleet's log entries) received more than
/// `days` days ago are deleted once what they did is stored (a checkpoint includes them; their partition has processed
/// them), and delivered actions' outbox entries as old. The same period, cutoff and account for both stores; each
/// store deletes its own way, every ``every``.
package struct Retention: Sendable {
    package let days: Int
    package let logger: Logger
    package static let every: Duration = .seconds(60)

    package init(days: Int, logger: Logger) {
        self.days = days
        self.logger = logger
    }

    /// What was received before this is old.
    package func cutoff(at now: Int64) -> Int64 { now - Int64(days) * Milliseconds.day }

    /// Logs what a pass deleted (nothing: nothing logged).
    package func deleted(_ n: (inputs: Int, delivered: Int)) {
        guard n.inputs + n.delivered > 0 else { return }
        logger.info(
            "retention: deleted old records", metadata: ["inputRecords": "\(n.inputs)", "deliveredActions": "\(n.delivered)"])
    }
}
