import BeckonCore
import BeckonStore
import Logging
import Prometheus
import ServiceLifecycle

/// A broadcast over the stored users (docs/time.md#schedules-schedule): while the rule set served has `schedule`
/// rules, the stored users are paged through in id order and each page is handed to the processing thread
/// (``Job/reach(_:)``), which loads those it does not hold, sets their schedules' next runs and writes them in a
/// checkpoint; then lets them go again (``Job/evict(_:)``), so memory does not grow with the users reached. The runs
/// come due by the clock like any user's.
///
/// How far it has got is stored per rule set version (``SQLiteStateBackend/recordReach(version:after:done:)``): a
/// restart goes on from the last page written; a reload starts again from the first user (a new or edited schedule
/// must reach everyone). Reaching a user twice sets nothing twice, and each run's id is its time, so a user gets at
/// most one action per run.
struct ScheduleReach: Service {
    let processor: Processor
    let backend: SQLiteStateBackend
    let current: CurrentRules
    let metrics: ServiceMetrics
    let logger: Logger
    /// Users handed to the processing thread at once: one round, one checkpoint.
    static let pageSize = 500
    /// How often it looks again when every stored user is reached (or it could not go on).
    static let idle: Duration = .seconds(1)

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            var more = false
            do { more = try await step() } catch {
                logger.warning("a schedule's broadcast could not go on; trying again", metadata: ["error": "\(error)"])
            }
            if !more { try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.idle) } }
        }
    }

    /// Reaches one page of stored users for the rule set served; whether there may be more to do at once.
    func step() async throws -> Bool {
        let rules = current.value
        guard rules.ruleSet.hasSchedules else { return false }
        let progress = try backend.reachProgress(version: rules.version)
        guard !progress.done else { return false }
        let page = try backend.userIDs(after: progress.after, limit: Self.pageSize)
        guard let last = page.last else {
            try backend.recordReach(version: rules.version, after: progress.after, done: true)
            logger.info("the schedules have reached every stored user", metadata: ["rules": "\(rules.version)"])
            return false
        }
        guard case .reached(let loaded) = try await processor.submit(.reach(page)) else { return false }
        metrics.reachedUsers.increment(by: Int64(loaded.count))
        if !loaded.isEmpty { _ = try await processor.submit(.evict(loaded)) }
        try backend.recordReach(version: rules.version, after: last, done: false)
        return true
    }
}
