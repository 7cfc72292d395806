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
}
