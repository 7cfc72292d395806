/// The kinds of action: the keys a rule's `do:` list uses, and the `action` of what fires (a closed set, so that every
/// place that writes or reads a kind names a case). `flow` fires as a `screen` (or as `flow` when it shows nothing),
/// a fire held back from a holdout group as `held_back`, and a `push` or `email` with no address as `skipped`.
public enum ActionKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case message, screen
    case deepLink = "deep_link"
    case notify, push, email
    case markRead = "mark_read"
    case prompt, emit, set, unset, flow
    /// Output only: the fire of a user in a holdout, whose actions were not sent.
    case heldBack = "held_back"
    /// Output only: a `push` or `email` whose `to` had no value when it fired (the reason says which).
    case skipped

    public var description: String { rawValue }

    /// The kinds a rule file can write under `do:`.
    public static let written: [ActionKind] = allCases.filter { $0 != .heldBack && $0 != .skipped }

    /// The channels that reach the user with a message: a rule with any of them counts toward `global_limit`, and each
    /// can have its own cap under `channel_limits`.
    public static let channels: [ActionKind] = [.message, .push, .email]

    /// What a fired action of this kind carries besides the envelope (``envelope``): its fields, each with the keys
    /// of its map when they are fixed (`nil`: a scalar, or the marketer's own keys: `params`, `payload`, `attributes`,
    /// `data`). The one description of an action's output that campaign tests check their expectations against; the
    /// engine writes them (`ActionTemplate.pureFields`, `Engine.perform`), and a test keeps the two in step.
    public var fields: [String: [String]?] {
        switch self {
        case .message: ["message": ["surface", "template", "title", "body", "image", "buttons", "data"]]
        case .screen: ["screen": nil, "params": nil]
        case .deepLink: ["url": nil]
        case .notify: ["notification": ["id", "sender", "message", "link", "data"], "unread": nil]
        case .push: ["push": ["title", "body", "deep_link", "image", "data", "to"]]
        case .email: ["email": ["template", "to", "subject", "data"]]
        case .markRead: ["notification": ["id"], "found": nil, "unread": nil]
        case .prompt: ["permission": nil]
        case .emit: ["event": nil, "payload": nil]
        case .set, .unset: ["attributes": nil]
        case .flow: ["flow": nil, "status": nil]
        case .heldBack: ["actions": nil]
        case .skipped:
            ["channel": nil, "reason": nil].merging(ActionKind.push.fields) { a, _ in a }.merging(ActionKind.email.fields) {
                a, _ in a
            }
        }
    }

    /// The members every fired action has: `id`, `time`, `userId`, `campaign` or `ruleset`, `rule`, `variant`,
    /// `trigger`, `action`, and `warnings`, `late`, `firedAt` when they apply.
    public static let envelope = [
        "id", "time", "userId", "campaign", "ruleset", "rule", "variant", "trigger", "action", "warnings", "late", "firedAt",
    ]
}
