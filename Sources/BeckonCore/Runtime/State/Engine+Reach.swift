extension Engine {
    // MARK: Stored users who send nothing

    /// Makes stored users known to this rule set's schedules, as their next event would: each of `userIDs` that has a
    /// saved state (and is not merged into another id) is loaded, and every `schedule` rule sets its next run for
    /// them. A user whose runs are set already is left as they are; a user loaded here is noted as changed (their
    /// state is written at the next checkpoint). The runs are set from the stream's clock. Returns the ids loaded from
    /// their saved state by this call (the others were held already, or are not stored), which a service lets go once
    /// that checkpoint is written.
    ///
    /// This is how a broadcast reaches everyone stored: a service pages through its stored users with this
    /// (docs/time.md#schedules-schedule). The runs then come due by the clock like any other user's.
    @discardableResult
    public func reach(_ userIDs: some Sequence<String>) -> [String] {
        var loaded: [String] = []
        // (An engine that has seen no time yet has no "next run" to set: its first event or tick sets one.)
        let arms = ruleSet.hasSchedules && clock > 0
        for id in userIDs {
            let held = holds(id)
            guard let p = profile(of: id) else { continue }
            if !held { loaded.append(id) }
            guard arms, p.mergedInto == nil else { continue }
            let before = p.pending.count
            armSchedules(p, now: clock)
            if p.pending.count != before { stored(p) }
        }
        return loaded
    }

    /// Whether `rule`'s `audience` and `if` select `userID` at `now`, judged as a schedule's run judges them: on the
    /// user's state, with no event (so `event.…` reads null). `nil`: the engine has no such user, or they were merged
    /// into another id. Fires nothing and changes nothing.
    public func selects(_ rule: CompiledRule, userID: String, at now: Int64) -> Bool? {
        guard let p = profile(of: userID), p.mergedInto == nil else { return nil }
        let saved = (scope.event, scope.profile, scope.now, scope.change)
        defer { (scope.event, scope.profile, scope.now, scope.change) = saved }
        scope.event = nil
        scope.profile = p
        scope.now = now
        scope.change = nil
        scope.resetSteps()
        scope.invalidateMemo()
        if let a = ruleSet.units[Int(rule.unit)].audience, !a.evaluate(scope).isTrue { return false }
        if let c = rule.ifExpr, !c.evaluate(scope).isTrue { return false }
        return true
    }

    /// Whether the user's profile is in memory now (not to be loaded from a saved state).
    func holds(_ userID: String) -> Bool { store.profile(for: userID, create: false) { newProfile(userID) } != nil }

    /// The users a timer loaded from their saved state since the last call (noted when ``notesColdLoads``).
    public func takeColdLoads() -> [String] {
        defer { coldLoads.removeAll() }
        return coldLoads
    }

    /// Lets go of the live profiles of `userIDs` whose state is saved as it stands (a ``SavedStateStore``'s; other
    /// stores keep everyone): they are loaded again when next needed, their timers still queued. Call it only once
    /// what the engine last took of them (``takeChangedStates()``) is written. Returns how many went.
    @discardableResult
    public func evict(_ userIDs: some Sequence<String>) -> Int {
        guard let saved = store as? SavedStateStore else { return 0 }
        return saved.evict(userIDs)
    }

    /// Users held in memory now.
    public var residentUsers: Int { store.userCount }
}
