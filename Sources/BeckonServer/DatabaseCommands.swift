import BeckonCore
import BeckonStore
import BeckonYAML
import Logging

/// Privacy requests on a service's database with the service stopped (`beckon user export|forget --db FILE USER`):
/// the same work as the service's endpoints. The database is opened as a start of the service opens it — the rule
/// set of its last checkpoint, read from the database itself, and the inputs logged since replayed — so that the
/// answer is what the service would give.
public enum DatabaseCommands {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Everything held about `user`, as JSON (the shape of `GET /v1/users/{id}/export`).
    public static func export(database: String, user: String) throws -> String {
        let (lock, backend, rules) = try open(database)
        defer { withExtendedLifetime(lock) {} }
        let (engine, _) = try Processor.open(rules, backend, logger: Logger(label: "beckon"))
        let (person, merged) = try Privacy.person(of: user, engine: engine, backend: backend)
        return try Privacy.export(
            person, state: engine.state(of: person), merged: merged.map { (id: $0, state: engine.state(of: $0)) },
            backend: backend, at: Processor.nowMs())
    }

    /// Forgets `user` as `DELETE /v1/users/{id}` does. Returns whether anything of them was held.
    public static func forget(database: String, user: String) throws -> Bool {
        let (lock, backend, rules) = try open(database)
        defer { withExtendedLifetime(lock) {} }
        let (engine, _) = try Processor.open(rules, backend, logger: Logger(label: "beckon"))
        let (known, ids) = try Privacy.forget(user, in: engine, under: rules.version, backend: backend)
        _ = try Privacy.scrub(ids, backend: backend)
        return known
    }

    static func open(_ path: String) throws -> (DatabaseLock, SQLiteStateBackend, ServingRules) {
        let lock = try DatabaseLock(database: path)
        let backend = try SQLiteStateBackend(path: path)
        guard let version = try backend.checkpoint().rulesVersion ?? backend.latestRuleVersion() else {
            throw Failure(description: "\(path) holds no rule set: it was not written by beckon serve")
        }
        let result = RuleLoader.load(texts: try backend.ruleFiles(version: version))
        guard result.ruleSet != nil, result.errorCount == 0 else {
            throw Failure(description: "the rule set stored in \(path) no longer compiles:\n" + result.rendered())
        }
        let rules = try ServingRules.make(result, environment: [:], at: Processor.nowMs()) { _, _ in version }
        return (lock, backend, rules)
    }
}
