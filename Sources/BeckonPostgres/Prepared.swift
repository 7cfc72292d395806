import Logging
import PostgresNIO
import Synchronization

/// A statement of the fleet's that PostgreSQL parses and plans once a connection rather than at every run: the
/// statements a process runs many times a second with the same text and new values (the append, a partition's read,
/// its users' states, its commit). As unnamed statements, PostgreSQL parsed and planned each run again: at 300
/// single-event requests a second, planning took twice the time of executing (docs/fleet.md, "Capacity").
///
/// PostgresNIO prepares a statement on a connection the first time that connection runs it, under its type's name:
/// here `Name`'s (``Statements``). Its text is that of the first query run under the name; every later query under
/// the name must have the same text, only other values bound to it (``init(_:)`` throws ``TextChanged`` otherwise).
protocol StatementName {
    static var name: String { get }
}

struct Prepared<Name: StatementName>: PostgresPreparedStatement {
    typealias Row = PostgresRow
    static var name: String { Name.name }
    static var sql: String { preparedTexts.withLock { $0[Name.name] } ?? "" }
    let binds: PostgresBindings

    init(_ query: PostgresQuery) throws {
        let known = preparedTexts.withLock { texts in
            if let text = texts[Name.name] { return text == query.sql }
            texts[Name.name] = query.sql
            return true
        }
        guard known else { throw TextChanged(name: Name.name) }
        binds = query.binds
    }

    func makeBindings() -> PostgresBindings { binds }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }

    /// A query run under a statement's name with another text than the name's first (a programming error: the
    /// statement would run with the first text).
    struct TextChanged: Error, CustomStringConvertible {
        var name: String
        var description: String { "the prepared statement \(name) was given another text" }
    }
}

/// Each prepared statement's text, by name.
private let preparedTexts = Mutex<[String: String]>([:])

/// The prepared statements (``Prepared``).
enum Statements {
    enum Append: StatementName { static let name = "beckon_append" }
    enum Read: StatementName { static let name = "beckon_read" }
    enum ReadBefore: StatementName { static let name = "beckon_read_before" }
    enum ReadNext: StatementName { static let name = "beckon_read_next" }
    enum States: StatementName { static let name = "beckon_states" }
    enum Commit: StatementName { static let name = "beckon_commit" }
    enum Positions: StatementName { static let name = "beckon_positions" }
    enum Renew: StatementName { static let name = "beckon_renew" }
}

extension FleetLog {
    /// The rows of `query` run on the pool as the prepared statement `name`.
    ///
    /// PostgresNIO keeps a failed preparation's error for the statement's name on its connection and answers every
    /// later run there with it: a statement that could not be prepared once (its table locked past `lock_timeout` by
    /// a migration, or not there yet) would fail on that connection for good. So a connection on which a statement
    /// fails with the server's error is closed, and the pool makes a new one.
    func prepared<Name: StatementName>(_ name: Name.Type, _ query: PostgresQuery) async throws -> [PostgresRow] {
        let statement = try Prepared<Name>(query)
        return try await client.withConnection { c in
            do {
                return try await allRows(c.execute(statement, logger: logger))
            } catch let error as PSQLError where error.code == .server {
                try? await c.close()
                throw error
            }
        }
    }
}

/// The rows of a query, read to the end: a prepared statement's (``FleetLog/prepared(_:_:)``) or an unnamed one's (on
/// a transaction's connection), given to their callers alike.
func allRows<Rows: AsyncSequence>(_ rows: Rows) async throws -> [PostgresRow] where Rows.Element == PostgresRow {
    var out: [PostgresRow] = []
    for try await row in rows { out.append(row) }
    return out
}
