import BeckonCore
import BeckonYAML
import Testing

/// Variables bound by name, for expression tests.
final class TestEnvironment: ExpressionEnvironment {
    let names: [String: CELType]
    init(_ names: [String: CELType] = [:]) { self.names = names }
    func variable(_ name: String) -> VariableBinding? { names[name].map { VariableBinding.binding(name, type: $0) } }
    func function(_ name: String) -> CustomFunction? { nil }
    var variableNames: [String] { Array(names.keys) }
    var functionNames: [String] { [] }
}

/// Compiles and evaluates `text` with `bindings`; a compile problem is returned as an error value.
func eval(_ text: String, _ bindings: [String: Value] = [:]) -> Value {
    let env = TestEnvironment(bindings.mapValues { _ in CELType.dyn })
    let c = ExprCompiler(environment: env)
    guard let e = c.compile(text) else {
        return .error(EvalError("compile: " + c.problems.map(\.message).joined(separator: "; ")))
    }
    let scope = EvalScope()
    scope.bindings = bindings
    return e.evaluate(scope)
}

/// The problems compiling `text` reports (empty when it compiles).
func problems(_ text: String, _ names: [String: CELType] = [:]) -> [ExprProblem] {
    let c = ExprCompiler(environment: TestEnvironment(names))
    _ = c.compile(text)
    return c.problems
}

/// Loads rule files given as YAML texts; fails the test with the rendered diagnostics when they do not load.
func load(
    _ yaml: String, settings: String? = nil, sourceLocation: Testing.SourceLocation = #_sourceLocation
) throws -> CompiledRuleSet {
    var texts: [(path: String, text: String)] = [("rules.yaml", yaml)]
    if let settings { texts.append(("settings.yaml", settings)) }
    let r = RuleLoader.load(texts: texts)
    guard let set = r.ruleSet else {
        Issue.record("rules did not load:\n\(r.rendered())", sourceLocation: sourceLocation)
        throw LoadFailed()
    }
    return set
}

struct LoadFailed: Error {}

/// A settings file with one push destination (APNs): with it, the decoder reads an event's `context.device`.
let pushSettings = """
    version: 1
    settings: push
    destinations:
      - name: ios
        url: https://api.push.apple.com
        apns: { topic: com.example, team_id: T, key_id: K, key_env: APNS_KEY }
    """

/// Diagnostics of loading `yaml` (and an optional settings file).
func diagnostics(_ yaml: String, settings: String? = nil) -> [Diagnostic] {
    var texts: [(path: String, text: String)] = [("rules.yaml", yaml)]
    if let settings { texts.append(("settings.yaml", settings)) }
    return RuleLoader.load(texts: texts).diagnostics
}

/// Milliseconds of an RFC 3339 time.
func t(_ s: String) -> Int64 { Timestamp.parse(s)!.milliseconds }

func track(
    _ name: String, _ user: String = "u1", at time: String, id: String? = nil, props: [(String, Value)] = [],
    context: [(String, Value)] = []
) -> Event {
    Event(
        kind: .track, name: name, userID: user, timestamp: t(time), messageID: id, properties: ValueMap(props),
        context: ValueMap(context))
}

func identify(_ user: String = "u1", at time: String, _ traits: [(String, Value)]) -> Event {
    Event(kind: .identify, userID: user, timestamp: t(time), traits: ValueMap(traits))
}

func screen(_ name: String, _ user: String = "u1", at time: String) -> Event {
    Event(kind: .screen, name: name, userID: user, timestamp: t(time))
}

/// Runs events through rules and returns every fired action in order.
func fired(_ ruleSet: CompiledRuleSet, _ events: [Event]) -> [FiredAction] {
    let engine = Engine(ruleSet: ruleSet)
    return events.flatMap { engine.process($0).actions }
}

/// Runs events and returns the verdict codes of each event, for rules whose trigger matched.
func verdicts(_ ruleSet: CompiledRuleSet, _ events: [Event]) -> [[String]] {
    let engine = Engine(ruleSet: ruleSet, options: .init(recordVerdicts: true))
    return events.map { engine.process($0).verdicts.map { $0.qualifiedID.split(separator: "/").last! + ":" + $0.verdict.code } }
}

/// A one-rule campaign around a trigger, condition and limit, with a simple message.
func campaign(
    on trigger: String = "on: Opened", where w: String? = nil, if c: String? = nil, limit: String? = nil,
    extra: String = "", actions: String? = nil
) -> String {
    var s = """
        version: 1
        campaign: c
        rules:
          - id: r
            \(trigger)

        """
    if let w { s += "    where: '\(w)'\n" }
    if let c { s += "    if: '\(c)'\n" }
    if let limit { s += "    limit: \(limit)\n" }
    if !extra.isEmpty { s += extra }
    s +=
        actions ?? """
                do:
                  - message: { surface: launch, title: Hi }

            """
    return s
}
