import Logging
import Synchronization

/// An error that says in a short line what went wrong, for ``FaultLog`` (a database's errors: their kind and message,
/// never a statement's text).
package protocol FaultDescribing: Error {
    var faultDescription: String { get }
}

/// Database faults in the log (the fleet's calls, the outbox's reads and writes): one line when calls of a kind start
/// failing (the error's kind and message, never a statement's text), one when they succeed again with how many failed
/// between, and at most one line a minute while they go on failing.
package final class FaultLog: Sendable {
    let logger: Logger
    private let state = Mutex<[String: (since: ContinuousClock.Instant, count: Int, said: ContinuousClock.Instant)]>([:])

    package init(logger: Logger) { self.logger = logger }

    /// A short account of an error for the log: its ``FaultDescribing`` line, else its kind.
    static func describe(_ error: any Error) -> String {
        (error as? any FaultDescribing)?.faultDescription ?? String(describing: type(of: error))
    }

    package func failed(_ what: String, _ error: any Error) {
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

    package func ok(_ what: String) {
        guard let f = state.withLock({ $0.removeValue(forKey: what) }) else { return }
        logger.notice(
            "database calls succeed again",
            metadata: ["calls": "\(what)", "failures": "\(f.count)", "for": "\(ContinuousClock.now - f.since)"])
    }
}
