/// How many stored users a rule's `audience` and `if` select now: what `GET /admin/audience` and `beckon audience`
/// answer before a broadcast is sent.
public struct AudienceSize: Sendable, Equatable, Codable {
    /// Stored users the rule selects.
    public var users: Int
    /// Stored users (an id merged into another is not counted: it is one of that person's ids).
    public var stored: Int
    /// Saved states that did not decode (in neither count).
    public var undecodable: Int

    public init(users: Int = 0, stored: Int = 0, undecodable: Int = 0) {
        self.users = users
        self.stored = stored
        self.undecodable = undecodable
    }
}

/// Counts an ``AudienceSize`` over saved states, a page at a time: each page is judged in an engine of its own, let
/// go after it, so memory does not grow with the number of users counted.
///
/// A user is selected when the rule's unit `audience` and the rule's `if` hold on their state at the given time, with
/// no event (``Engine/selects(_:userID:at:)``): as a schedule's run judges them. Limits, caps and quiet hours are not
/// applied (they decide when, not who).
public struct AudienceCounter: Sendable {
    public let ruleSet: CompiledRuleSet
    public let rule: CompiledRule
    public let now: Int64
    public private(set) var size = AudienceSize()
    /// When counting stops, whatever is left (`nil`: never): a caller with a time limit of its own (the console's
    /// playground) is not held past it. Expressions stop at it too (``Engine/evaluationDeadline``).
    public var deadline: ContinuousClock.Instant?
    /// Whether counting stopped at ``deadline`` (``size`` then counts the users judged before it).
    public private(set) var stopped = false

    /// `nil` when the rule set has no rule `name` (`CAMPAIGN/RULE`, or a rule id alone when it is unique).
    public init?(ruleSet: CompiledRuleSet, rule name: String, now: Int64) {
        guard let rule = ruleSet.rule(named: name) else { return nil }
        self.init(ruleSet: ruleSet, rule: rule, now: now)
    }

    /// For a rule of `ruleSet`.
    public init(ruleSet: CompiledRuleSet, rule: CompiledRule, now: Int64) {
        self.ruleSet = ruleSet
        self.rule = rule
        self.now = now
    }

    /// Counts a page of saved states (``UserState/encoded()`` bytes by user id).
    public mutating func add(_ page: [(userID: String, bytes: [UInt8])]) {
        let engine = Engine(ruleSet: ruleSet)
        engine.evaluationDeadline = deadline
        for (id, bytes) in page {
            if let deadline, ContinuousClock.now >= deadline {
                stopped = true
                return
            }
            guard let state = try? UserState(decoding: bytes), state.userID == id else {
                size.undecodable += 1
                continue
            }
            guard state.mergedInto == nil, (try? engine.restore(state)) != nil else { continue }
            size.stored += 1
            if engine.selects(rule, userID: id, at: now) == true { size.users += 1 }
        }
    }

    /// Users read per page.
    public static let pageSize = 1000
}
