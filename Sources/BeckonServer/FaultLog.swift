import BeckonPostgres
import Logging
import PostgresNIO
import Synchronization

/// Database faults in the log (the fleet's calls, the outbox's reads and writes): one line when calls of a kind start
/// failing (the error's kind and message, never a statement's text), one when they succeed again with how many failed
/// between, and at most one line a minute while they go on failing.
final class FaultLog: Sendable {
    let logger: Logger
    private let state = Mutex<[String: (since: ContinuousClock.Instant, count: Int, said: ContinuousClock.Instant)]>([:])

    init(logger: Logger) { self.logger = logger }

    /// A short account of an error for the log: its kind, and the message of ours and of the deadline.
    static func describe(_ error: any Error) -> String {
        if let e = error as? DeadlineExceeded { return e.description }
        if let e = error as? PSQLError { return "PostgreSQL: \(e.code)" + (e.serverInfo?[.message].map { ": \($0)" } ?? "") }
        return String(describing: type(of: error))
    }

    func failed(_ what: String, _ error: any Error) {
        let now = ContinuousClock.now
        let line: (first: Bool, count: Int)? = state.withLock { s in
            if var f = s[what] {
                f.count += 1
                defer { s[what] = f }
                guard now - f.said >= .seconds(60) else { return nil }
                f.said = now
                return (false, f.count)
            }
            s[what] = (now, 1, now)
            return (true, 1)
        }
        guard let line else { return }
        logger.error(
            line.first ? "database calls failing" : "database calls still failing",
            metadata: ["calls": "\(what)", "failures": "\(line.count)", "error": "\(Self.describe(error))"])
    }

    func ok(_ what: String) {
        guard let f = state.withLock({ $0.removeValue(forKey: what) }) else { return }
        logger.notice(
            "database calls succeed again",
            metadata: ["calls": "\(what)", "failures": "\(f.count)", "for": "\(ContinuousClock.now - f.since)"])
    }
}
