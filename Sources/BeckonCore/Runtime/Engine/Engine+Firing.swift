/// Firing: the last checks before actions go out (quiet hours, the global cap), the fire's record, and each action's
/// fields — a rule's constant actions as compact records, the others computed, with their effect on the user's state.
extension Engine {
    /// The last checks before actions go out, shared by immediate rules and delayed actions that came due:
    /// quiet hours (hold or drop) and the global message cap; then the rule fires.
    func deliver(
        _ rule: CompiledRule, profile: UserProfile, now: Int64, triggerKey: TriggerKey, trigger: String, round: inout RoundState,
        out: inout EventOutcome
    ) {
        if rule.hasQuietHours, let q = rule.timing.quietHours, let end = quietUntil(q, profile: profile, now: now) {
            if q.hold {
                schedule(
                    rule, due: end, held: true, profile: profile, now: now, triggerKey: triggerKey, trigger: trigger,
                    change: scope.change, out: &out)
            } else {
                note(rule.index, .quietHours(heldUntil: nil), now: now, userID: profile.userID, trigger: trigger, out: &out)
            }
            return
        }
        if let hit = globalBlock(rule, profile: profile, now: now) {
            note(rule.index, .globalLimited(hit), now: now, userID: profile.userID, trigger: trigger, out: &out)
            return
        }
        let sent = fire(rule, profile: profile, now: now, triggerKey: triggerKey, trigger: trigger, round: &round, out: &out)
        note(rule.index, sent ? .fired : .heldBack, now: now, userID: profile.userID, trigger: trigger, out: &out)
    }

    /// The global cap, or the cap of one of the rule's channels, that blocks `rule` for the user now (`nil`: none does,
    /// or the rule messages no one). The one place both are decided, for immediate and for delayed fires.
    func globalBlock(_ rule: CompiledRule, profile: UserProfile, now: Int64) -> LimitHit? {
        guard !rule.channels.isEmpty else { return nil }
        // (The settings are read field by field: copying them whole would count a reference per field, per fire.)
        if let g = ruleSet.settings.globalLimits,
            let hit = check(
                g, record: profile.messages, series: ruleSet.settings.globalSeries, profile: profile, now: now, occurrence: nil)
        {
            return hit
        }
        guard !ruleSet.settings.channelLimits.isEmpty else { return nil }
        // (A test's variants may message on different channels: the user's own variant's count.)
        let channels = rule.variants.map { $0.channels[$0.index(of: profile.userID)] } ?? rule.channels
        for c in ruleSet.settings.channelLimits where channels.contains(c.channel) {
            if var hit = check(
                c.limits, record: profile.messages, series: c.series, profile: profile, now: now, occurrence: nil,
                perChannel: true)
            {
                hit.channel = c.channel.rawValue
                return hit
            }
        }
        return nil
    }

    /// Records the fire and runs the actions; `false` when the user is held back (nothing was sent).
    @discardableResult
    func fire(
        _ rule: CompiledRule, profile: UserProfile, now: Int64, triggerKey: TriggerKey, trigger: String,
        round: inout RoundState, out: inout EventOutcome
    ) -> Bool {
        let sessionID = profile.session.id
        // Only limits and re-prompts read a rule's record: a rule with neither keeps no state per user.
        if rule.keepsRecord { profile.withRecord(rule.index) { $0.noteFire(at: now, session: sessionID) } }
        if rule.fireSeries >= 0 {
            profile.history.record(
                series: rule.fireSeries, at: now, now: now,
                retentionMs: ruleSet.seriesTable[rule.fireSeries].retentionMs, keepsLifetime: false)
        }
        if !rule.channels.isEmpty {
            profile.messages.noteFire(at: now, session: sessionID)
            let g = ruleSet.settings.globalSeries
            if g >= 0 {
                profile.history.record(
                    series: g, at: now, now: now, retentionMs: ruleSet.seriesTable[g].retentionMs, keepsLifetime: false)
            }
        }
        // The control group (a holdout, or a test's control variant): the fire is recorded (and counts for limits and
        // reports), nothing is sent.
        func heldBack(_ origin: ActionOrigin, channels: [ActionKind]) -> Bool {
            // (A held-back fire counts toward the channel caps as toward the other limits: both groups are measured
            // on the same occasions.)
            recordChannels(channels, profile: profile, now: now)
            out.actions.append(
                FiredAction(
                    origin: origin, actionIndex: -1, triggerKey: triggerKey, time: now, userID: profile.userID,
                    trigger: trigger, kind: ActionKind.heldBack.rawValue,
                    fields: [("actions", .list(rule.actions.map { .string($0.kind.rawValue) }))]))
            return false
        }
        if ruleSet.hasHoldouts, ruleSet.units[Int(rule.unit)].isHeldOut(profile.userID) {
            return heldBack(rule.origin, channels: rule.channels)
        }
        var variantActions: [ActionTemplate]?
        var skipped: [ActionKind] = []
        if let v = rule.variants {
            // A test's fires are kept whole, with the variant's origin (its JSON names the variant).
            let k = v.index(of: profile.userID)
            if k == v.controlIndex { return heldBack(v.origins[k], channels: rule.channels) }
            let actions = v.actions[k]
            variantActions = actions
            for i in actions.indices {
                var fa = FiredAction(
                    origin: v.origins[k], actionIndex: i, triggerKey: triggerKey, time: now, userID: profile.userID,
                    trigger: trigger)
                if !v.origins[k].isConstant(i) {
                    perform(actions[i], rule: rule, profile: profile, now: now, action: &fa, round: &round)
                    if fa.kind == ActionKind.skipped.rawValue { skipped.append(actions[i].kind) }
                }
                out.actions.append(fa)
            }
        } else {
            let origin = rule.originReference
            for i in 0..<origin.with({ $0.kinds.count }) {
                if origin.with({ $0.isConstant(i) }) {
                    out.actions.append(
                        origin: origin, action: i, time: now, userID: profile.userID, key: triggerKey, trigger: trigger)
                } else {
                    var fa = FiredAction(
                        origin: origin.object, actionIndex: i, triggerKey: triggerKey, time: now, userID: profile.userID,
                        trigger: trigger)
                    perform(rule.actions[i], rule: rule, profile: profile, now: now, action: &fa, round: &round)
                    if fa.kind == ActionKind.skipped.rawValue { skipped.append(rule.actions[i].kind) }
                    out.actions.append(fa)
                }
            }
        }
        // A channel's cap counts the fires that reached the user on it: not a push or email skipped for no address.
        if !ruleSet.settings.channelLimits.isEmpty && !rule.channels.isEmpty {
            let actions = variantActions ?? rule.actions
            let sent = ActionKind.channels.filter { c in
                actions.count(where: { $0.kind == c }) > skipped.count(where: { $0 == c })
            }
            recordChannels(sent, profile: profile, now: now)
        }
        if !skipped.isEmpty {
            totals.skippedActions += skipped.count
            if skipped.count == (variantActions ?? rule.actions).count { count(rule.index, RuleCounter.skipped) }
        }
        return true
    }

    /// Counts a fire on each of `channels` that has a cap.
    func recordChannels(_ channels: [ActionKind], profile: UserProfile, now: Int64) {
        guard !ruleSet.settings.channelLimits.isEmpty else { return }
        for c in ruleSet.settings.channelLimits where channels.contains(c.channel) {
            let s = ruleSet.seriesTable[c.series]
            profile.history.record(
                series: c.series, at: now, now: now, retentionMs: s.retentionMs, keepsLifetime: s.keepsLifetime)
        }
    }

    func perform(
        _ a: ActionTemplate, rule: CompiledRule, profile: UserProfile, now: Int64, action fa: inout FiredAction,
        round: inout RoundState
    ) {
        var w: [String] = []
        defer { fa.warnings = w }
        func eval(_ v: CompiledValue?, _ field: String) -> Value? { v.map { $0.evaluate(scope, field: field, warnings: &w) } }
        func text(_ v: Value?) -> String? {
            guard let v else { return nil }
            if case .string(let s) = v { return s }
            if case .null = v { return nil }
            if case .string(let s) = Conversions.toString(v) { return s }
            return JSONWriter.encode(v)
        }
        if let fields = a.pureFields({ $0.evaluate(scope, field: $1(), warnings: &w) }) {
            if let reason = a.skipReason(fields) {
                // A visible skip, not a silent drop: the dry-run, the pull and the report all see it.
                fa.kind = ActionKind.skipped.rawValue
                fa.fields = [("channel", .string(a.kind.rawValue)), ("reason", .string(reason))] + fields
            } else {
                fa.fields = fields
            }
            return
        }
        switch a {
        case .message, .screen, .deepLink, .push, .email, .prompt, .emit: break  // pure: done above
        case .notify(let idT, let senderT, let messageT, let linkT, let data):
            let id = text(eval(idT, "id")) ?? fa.id
            let sender = text(eval(senderT, "sender"))
            let message = text(eval(messageT, "message")) ?? ""
            let link = text(eval(linkT, "link"))
            let item = InboxItem(
                id: id, sender: sender, message: message, link: link, createdAt: now, read: false, readAt: nil,
                rule: rule.qualifiedID)
            if let i = profile.inbox.firstIndex(where: { $0.id == id }) {
                profile.inbox[i] = item
            } else {
                // At the bound the oldest item read goes first, else the oldest (a `notify` without an `id` adds one
                // item a fire: unbounded, each fire would cost the length of the inbox).
                while profile.inbox.count >= Engine.maxInboxItems {
                    profile.inbox.remove(at: profile.inbox.firstIndex(where: \.read) ?? 0)
                }
                profile.inbox.append(item)
            }
            var n = ValueMap()
            n[string: "id"] = .string(id)
            if let sender { n[string: "sender"] = .string(sender) }
            n[string: "message"] = .string(message)
            if let link { n[string: "link"] = .string(link) }
            if !data.isEmpty {
                n[string: "data"] = .map(
                    ValueMap(data.map { ($0.key, $0.value.evaluate(scope, field: "data." + $0.key, warnings: &w)) }))
            }
            fa.fields = [("notification", .map(n)), ("unread", .int(Int64(profile.unreadCount)))]
            scope.invalidateMemo()
        case .markRead(let idT):
            let id = text(eval(idT, "mark_read")) ?? ""
            let found = Self.markRead(profile, id, now)
            fa.fields = [
                ("notification", .map(ValueMap([("id", .string(id))]))), ("found", .bool(found)),
                ("unread", .int(Int64(profile.unreadCount))),
            ]
            scope.invalidateMemo()
        case .set(let attrs):
            // Every value is computed before any is applied, so `set: {a: …, b: ${user.a}}` reads the old `a`. A value
            // whose expression failed (it has a warning) or that is too large leaves the attribute as it was.
            let values = attrs.map { a -> (Int?, String, Value?) in
                let warned = w.count
                let v = a.value.evaluate(scope, field: a.name, warnings: &w)
                return (a.slot, a.name, w.count == warned ? v : nil)
            }
            var m = ValueMap()
            for (k, (slot, name, value)) in values.enumerated() {
                guard let v = value else {
                    w.append("'\(name)' not set: its value failed")
                    continue
                }
                let size = v.byteSize(upTo: ValueLimits.maxAttributeBytes)
                guard size <= ValueLimits.maxAttributeBytes else {
                    w.append("'\(name)' not set: its value is over \(ValueLimits.maxAttributeBytes) bytes (the limit)")
                    continue
                }
                applyAttribute(
                    profile, name: name, slot: slot, value: v.isNullValue ? nil : v, changes: &round.changes,
                    more: values.count - k - 1)
                m[string: name] = v
            }
            profile.attributes.trim()
            fa.fields = [("attributes", .map(m))]
            scope.invalidateMemo()
        case .flow(let verb, let flowT, let stepT):
            let id = text(eval(flowT, "flow")) ?? ""
            let step = stepT.flatMap { text(eval($0, "step")) }
            performFlow(verb, id: id, step: step, profile: profile, now: now, action: &fa, warnings: &w, round: &round)
        case .unset(let names):
            var m = ValueMap()
            for (slot, name) in names {
                applyAttribute(profile, name: name, slot: slot, value: nil, changes: &round.changes)
                m[string: name] = .null
            }
            fa.fields = [("attributes", .map(m))]
            scope.invalidateMemo()
        }
    }
}

extension Engine {
    /// Marks a user's inbox item read at `time` (the `read` endpoint of `beckon serve`; a rule does the same with a
    /// `mark_read` action). `nil`: the engine has no such user; `false`: the user has no item `itemID`.
    public func markRead(userID: String, itemID: String, at time: Int64) -> Bool? {
        let found: Bool?
        if let t = memoryTable {
            guard let p = t.with({ $0.profile(for: userID, hash: $0.hash(of: userID)) }) else { return nil }
            found = p.with { Self.markRead($0, itemID, time) }
        } else {
            guard let p = loadedProfile(userID, create: false) else { return nil }
            found = Self.markRead(p, itemID, time)
            stored(p)
        }
        return found
    }

    static func markRead(_ profile: UserProfile, _ itemID: String, _ time: Int64) -> Bool {
        guard let i = profile.inbox.firstIndex(where: { $0.id == itemID }) else { return false }
        if !profile.inbox[i].read {
            profile.inbox[i].read = true
            profile.inbox[i].readAt = time
        }
        return true
    }
}
