/// Identity merge: an anonymous visitor who signs in (an identify with `anonymousId` and `userId`), or an `alias`
/// (`previousId` → `userId`), becomes one user. The earlier id's state is merged into the known user's by
/// ``UserState/merging(_:)``'s rules, and the earlier id keeps only a pointer (``UserProfile/mergedInto``), so its
/// later events reach the merged user. The pointer is state like any other: it is saved, exported and restored.
extension Engine {
    /// How many pointers an id's events follow at most (merges never make a cycle; this bounds a long chain).
    public static let maxMergeHops = 16

    /// Merges the user `fromID` into `toID` (or into the user `toID` was itself merged into).
    ///
    /// - `fromID` has no state yet: it only points to the user from now on.
    /// - `fromID` was merged before (a shared device's second sign-in): it points to the new user from now on, and
    ///   what it brought to the first stays there.
    /// - Otherwise its state is merged in (``UserState/merging(_:)``), its delayed actions move with it, and it is
    ///   emptied to the pointer.
    ///
    /// A known user (an id some event named as its `userId`, ``UserProfile/known``) is never merged into another: the
    /// write key that sends events is in every app, so an `identify` or `alias` naming someone else's id as the earlier
    /// one would otherwise hand that person's inbox, actions and devices to the sender (docs/events.md). The event
    /// then merges nothing; it is counted in ``Engine/Stats/mergesRefused``.
    public func merge(_ fromID: String, into toID: String) {
        // (Loaded first: a saved pointer restores as one, so that `resolve` follows it.)
        _ = loadedProfile(toID, create: false)
        let target = resolve(toID)
        guard fromID != target else { return }
        hasMerges = true
        let source = loadedProfile(fromID, create: true)!
        if let earlier = source.mergedInto {
            // (Already counted when it was first merged.)
            if resolve(earlier) != target {
                source.mergedInto = target
                stored(source)
            }
            return
        }
        guard !source.known else {
            totals.mergesRefused += 1
            return
        }
        let from = state(of: source)
        // (Its queued timers find nothing when they come due: the actions are the known user's now.)
        source.reset()
        source.mergedInto = target
        stored(source)
        mergeState(from, into: target)
    }

    /// Adds a merged id's state to `target`'s (``UserState/merging(_:)``), with its delayed actions.
    private func mergeState(_ from: UserState, into target: String) {
        totals.merges += 1
        let known = loadedProfile(target, create: true)!
        let merged = state(of: known).merging(from)
        known.reset()
        fill(known, from: merged)
        addTimers(of: known)
        stored(known)
        // (The merged id's tokens are the user's now: claimed for them, as of when the id last reported each.)
        for d in from.devices where merged.devices.contains(where: { $0.token == d.token && $0.lastSeen == d.lastSeen }) {
            claim(d, for: target)
        }
    }

    // MARK: Merging across stores

    // A fleet keeps each user in one partition, and the two ids of a sign-in are usually in different ones: the
    // earlier id's partition hands its state over (``handOver(_:to:)``) and the known user's takes it over
    // (``takeOver(_:state:into:)``), which together do what ``merge(_:into:)`` does in one engine.

    /// The first half of a merge across stores: `id`'s state as it is now, for `target`'s store to take over, and `id`
    /// left as a pointer to `target`. `nil` when there is nothing to bring: `id` has no state, or it was merged before
    /// (a shared device's second sign-in: it points to the new user from now on, and what it brought to the first
    /// stays there). A known user is not handed over (``merge(_:into:)``): `nil`, and no pointer.
    public func handOver(_ id: String, to target: String) -> UserState? {
        hasMerges = true
        guard let source = loadedProfile(id, create: false) else {
            let p = loadedProfile(id, create: true)!
            p.mergedInto = target
            stored(p)
            return nil
        }
        if source.mergedInto == nil && source.known {
            totals.mergesRefused += 1
            return nil
        }
        let brought = source.mergedInto == nil ? state(of: source) : nil
        source.reset()
        source.mergedInto = target
        stored(source)
        return brought
    }

    /// The second half: merges what `id`'s store handed over into `target` (or the user `target` was merged into), and
    /// makes `id` point there in this engine. The pointer is not stored here (`id`'s own store holds it): it is what
    /// lets ``point(_:to:)``'s events and this engine's later events under `id` reach the merged user.
    public func takeOver(_ id: String, state brought: UserState?, into target: String) {
        _ = loadedProfile(target, create: false)
        let to = resolve(target)
        guard to != id else { return }
        point(id, to: to)
        if let brought { mergeState(brought, into: to) }
    }

    /// Makes `id` point to `target` in this engine only (not stored: `id` belongs to another store, which holds the
    /// pointer), so that an event under `id` that store sent on is `target`'s.
    public func point(_ id: String, to target: String) {
        hasMerges = true
        let p = store.profile(for: id, create: true) { newProfile(id) }!
        if p.mergedInto != target {
            p.reset()
            p.mergedInto = target
        }
    }

    /// The user another id's events go to, when it was merged into one (the end of its chain), else `nil`.
    public func mergedTarget(of id: String) -> String? {
        guard loadedProfile(id, create: false)?.mergedInto != nil else { return nil }
        let to = resolve(id)
        return to == id ? nil : to
    }

    /// Whether the event's messageId is in the window of the user its id resolves to (a copy already processed).
    func alreadySeen(_ e: BoundEvent) -> Bool {
        guard let mid = e.messageID else { return false }
        _ = loadedProfile(e.userID, create: false)
        return profile(of: resolve(e.userID))?.messageIDs.contains(ByteHash.hash(mid)) ?? false
    }

    /// The user whose events `userID`'s are: itself, or the end of its chain of merges.
    func resolve(_ userID: String) -> String {
        guard hasMerges else { return userID }
        var id = userID
        for _ in 0..<Engine.maxMergeHops {
            guard let into = profile(of: id)?.mergedInto else { break }
            id = into
        }
        return id
    }

    /// An event of an id merged into `userID`, processed as that user's.
    func processMerged(_ e: BoundEvent, as userID: String, into out: inout EventOutcome) {
        let id = resolve(userID)
        let profile = loadedProfile(id, create: true)!
        process(e, profile: profile, user: id, into: &out)
        stored(profile)
    }
}

extension UserState {
    /// This (the known) user's state with `other`'s (the anonymous one's) merged in. For each part:
    ///
    /// | part | merged |
    /// |---|---|
    /// | clock | the later |
    /// | event count | the sum (action ids stay distinct) |
    /// | session | the one with the later activity: the merge happens mid-session, on the device that signed in |
    /// | attributes (and flows' progress, kept in them) | both; on a conflict the known user's value wins |
    /// | context fields | both; on a conflict the value of the one seen later |
    /// | fire records (limits, re-prompts), the global cap's record | counts add; the last fire is the later; fires in the session kept are that side's |
    /// | history (counts, sums, channel caps) | times and values of both, in order; lifetime counts add |
    /// | messageIds (duplicates) | both |
    /// | inbox | both; an item id both have: the known user's |
    /// | delayed actions | both (they fire for the known user); a rule pending for both: the later scheduled |
    /// | partial sequences | both; a rule and key both have: the later start at each step |
    public func merging(_ other: UserState) -> UserState {
        var m = self
        m.mergedInto = nil
        m.clock = max(clock, other.clock)
        m.eventCount = eventCount &+ other.eventCount
        let otherSession = other.session.lastActivity > session.lastActivity
        if otherSession { m.session = other.session }
        m.attributes = UserState.union(attributes, other.attributes, preferFirst: true)
        m.context = UserState.union(context, other.context, preferFirst: clock >= other.clock)

        func merged(_ a: Record?, _ b: Record?, rule: String) -> Record {
            let kept = otherSession ? b : a
            return Record(
                rule: rule, occurrences: (a?.occurrences ?? 0) &+ (b?.occurrences ?? 0),
                fires: (a?.fires ?? 0) &+ (b?.fires ?? 0),
                sessionFires: kept?.sessionID == m.session.id ? kept!.sessionFires : 0, sessionID: m.session.id,
                lastFire: max(a?.lastFire ?? Int64.min, b?.lastFire ?? Int64.min))
        }
        let rules = Set(records.map(\.rule)).union(other.records.map(\.rule)).sorted()
        m.records = rules.map { r in
            merged(records.first { $0.rule == r }, other.records.first { $0.rule == r }, rule: r)
        }
        if messages != nil || other.messages != nil { m.messages = merged(messages, other.messages, rule: "") }

        var series = self.series
        for s in other.series {
            guard let i = series.firstIndex(where: { $0.key == s.key }) else {
                series.append(s)
                continue
            }
            var x = series[i]
            x.times = (x.times + s.times).sorted()
            x.values = (x.values + s.values).sorted { $0.time < $1.time }
            switch (x.lifetime, s.lifetime) {
            case (let a?, let b?): x.lifetime = (a.count &+ b.count, min(a.first, b.first), max(a.last, b.last))
            case (nil, let b?): x.lifetime = b
            default: break
            }
            series[i] = x
        }
        m.series = series
        var seen = Set(messageIDs.map(\.hash))
        m.messageIDs = (messageIDs + other.messageIDs.filter { seen.insert($0.hash).inserted }).sorted { $0.time < $1.time }
        // (What either had forgotten stays forgotten: the merged window keeps only ids within it.)
        m.expiredMessageIDs = []
        m.inbox = inbox + other.inbox.filter { item in !inbox.contains { $0.id == item.id } }
        m.devices = Device.merging(devices, other.devices)
        // A rule pending for both: the later-scheduled action (the newer cart, the latest activity) wins.
        m.pending =
            pending.filter { p in !other.pending.contains { $0.rule == p.rule && $0.scheduledAt > p.scheduledAt } }
            + other.pending.filter { p in !pending.contains { $0.rule == p.rule && $0.scheduledAt >= p.scheduledAt } }
        for q in other.sequences {
            if let i = m.sequences.firstIndex(where: { $0.rule == q.rule && $0.key == q.key }) {
                if m.sequences[i].best.count == q.best.count {
                    m.sequences[i].best = zip(m.sequences[i].best, q.best).map { max($0, $1) }
                }
            } else {
                m.sequences.append(q)
            }
        }
        return m
    }

    /// Name-sorted pairs of both lists; on a name both have, the first list's value when `preferFirst`.
    static func union(
        _ a: [(name: String, value: Value)], _ b: [(name: String, value: Value)], preferFirst: Bool
    ) -> [(name: String, value: Value)] {
        var out = preferFirst ? a : b
        let other = preferFirst ? b : a
        for x in other where !out.contains(where: { $0.name == x.name }) { out.append(x) }
        return out.sorted { $0.name < $1.name }
    }
}

extension Engine {
    /// The ids merged into `userID`, directly or through others: among `candidates` (what a backend's index lists)
    /// and the users in memory, those whose chain of pointers, as this engine holds them now, ends at `userID`.
    public func idsMerged(into userID: String, candidates: [String]) -> [String] {
        var out: [String] = []
        var seen: Set<String> = [userID]
        let inMemory = store.allProfiles().filter { $0.mergedInto != nil }.map(\.userID)
        for id in candidates + inMemory where seen.insert(id).inserted {
            var at = id
            for _ in 0..<Engine.maxMergeHops {
                guard let into = loadedProfile(at, create: false)?.mergedInto else { break }
                at = into
            }
            if at == userID && at != id { out.append(id) }
        }
        return out
    }
}
