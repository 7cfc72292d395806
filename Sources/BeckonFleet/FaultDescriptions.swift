import BeckonPostgres
import BeckonServer
import PostgresNIO

// How the fleet's database errors read in the fault log (``FaultLog``): the deadline's message, and PostgreSQL's code
// and message, never a statement's text.

extension DeadlineExceeded: FaultDescribing {
    package var faultDescription: String { description }
}

extension PSQLError: FaultDescribing {
    package var faultDescription: String {
        "PostgreSQL: \(code)" + (serverInfo?[.message].map { ": \($0)" } ?? "")
    }
}
