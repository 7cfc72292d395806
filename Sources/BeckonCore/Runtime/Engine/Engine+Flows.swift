/// A user's place in a flow, kept in the attribute named like the flow:
/// `{version, step, completed: [...], done, started_at}`.
struct FlowState {
    var version: Int
    var step: String?
    var completed: [String]
    var done: Bool
    var startedAt: Int64

    init(version: Int, startedAt: Int64) {
        self.version = version
        step = nil
        completed = []
        done = false
        self.startedAt = startedAt
    }

    init?(_ v: Value?) {
        guard case .map(let m)? = v else { return nil }
        switch m[string: "version"] {
        case .int(let i)?: version = Int(i)
        case .double(let d)?: version = Int(d)
        default: version = 1
        }
        step = m[string: "step"]?.stringValue
        if case .list(let xs)? = m[string: "completed"] { completed = xs.compactMap(\.stringValue) } else { completed = [] }
        done = m[string: "done"]?.isTrue ?? false
        if case .timestamp(let t)? = m[string: "started_at"] { startedAt = t.milliseconds } else { startedAt = 0 }
    }

    var value: Value {
        .map(
            ValueMap([
                ("version", .int(Int64(version))), ("step", step.map(Value.string) ?? .null),
                ("completed", .list(completed.map(Value.string))), ("done", .bool(done)),
                ("started_at", .timestamp(Timestamp(milliseconds: startedAt))),
            ]))
    }
}

extension Engine {
    /// Runs a `flow` action: moves the user's state and shows the step they land on as a `screen` action.
    func performFlow(
        _ verb: FlowActionSpec.Verb, id: String, step: String?, profile: UserProfile, now: Int64, action fa: inout FiredAction,
        warnings w: inout [String], round: inout RoundState
    ) {
        guard let index = ruleSet.flowIndex[id] else {
            w.append("flow: no flow named '\(id)'")
            fa.kind = ActionKind.flow.rawValue
            fa.fields = [("flow", .string(id)), ("status", .string("unknown"))]
            return
        }
        let flow = ruleSet.flows[index]
        var state = FlowState(profile.attributes[flow.stateSlot])
        if let s = state, s.version < flow.version { state = migrate(s, flow) }
        switch verb {
        case .start:
            state = FlowState(version: flow.version, startedAt: now)
        case .resume:
            break
        case .complete:
            if state == nil {
                // Completing a step of a flow the user was never placed in starts it there.
                state = FlowState(version: flow.version, startedAt: now)
            }
            if let step, flow.steps.contains(where: { $0.id == step }) {
                if !state!.completed.contains(step) { state!.completed.append(step) }
            } else {
                w.append("flow: '\(step ?? "")' is not a step of \(id)")
            }
        }
        guard var s = state, !s.done else {
            fa.kind = ActionKind.flow.rawValue
            fa.fields = [("flow", .string(id)), ("status", .string(state == nil ? "not_started" : "done"))]
            return
        }
        // Steps that apply now (skip_if is evaluated each time: a company id can arrive mid-flow).
        let applicable = flow.steps.filter { st in !(st.skipIf.map { $0.evaluate(scope).isTrue } ?? false) }
        if let next = applicable.firstIndex(where: { !s.completed.contains($0.id) }) {
            let st = applicable[next]
            s.step = st.id
            var params = ValueMap()
            params[string: "flow"] = .string(flow.id)
            params[string: "version"] = .int(Int64(flow.version))
            params[string: "step"] = .int(Int64(next + 1))
            params[string: "total"] = .int(Int64(applicable.count))
            params[string: "back"] = .bool(!st.noBackFromHere)
            for (k, v) in flow.params { params[string: k] = v.evaluate(scope, field: "params." + k, warnings: &w) }
            for (k, v) in st.params { params[string: k] = v.evaluate(scope, field: "params." + k, warnings: &w) }
            fa.kind = ActionKind.screen.rawValue
            fa.fields = [("screen", .string(st.id)), ("params", .map(params))]
        } else {
            s.step = nil
            s.done = true
            if let finish = flow.finish {
                var params = ValueMap()
                params[string: "flow"] = .string(flow.id)
                params[string: "version"] = .int(Int64(flow.version))
                params[string: "back"] = .bool(false)
                for (k, v) in flow.params { params[string: k] = v.evaluate(scope, field: "params." + k, warnings: &w) }
                fa.kind = ActionKind.screen.rawValue
                fa.fields = [("screen", .string(finish)), ("params", .map(params))]
            } else {
                fa.kind = ActionKind.flow.rawValue
                fa.fields = [("flow", .string(id)), ("status", .string("done"))]
            }
        }
        applyAttribute(profile, name: flow.id, slot: flow.stateSlot, value: s.value, changes: &round.changes)
        scope.invalidateMemo()
    }

    /// Places a user whose state is from an older version: their current step through the migration table
    /// (or its `otherwise`, or the first step); every step before it counts as done.
    func migrate(_ old: FlowState, _ flow: CompiledFlow) -> FlowState {
        var s = FlowState(version: flow.version, startedAt: old.startedAt)
        let ids = flow.stepIDs
        let m = flow.migrations[old.version]
        var target = old.step.flatMap { m?.table[$0] } ?? m?.otherwise ?? ids.first
        if old.done { target = nil }
        if let target, let i = ids.firstIndex(of: target) {
            s.completed = Array(ids[..<i])
            s.step = target
        } else if old.done {
            s.completed = ids
            s.done = true
        }
        return s
    }
}
