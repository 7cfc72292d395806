/// The kinds of action: the keys a rule's `do:` list uses, and the `action` of what fires (a closed set, so that every
/// place that writes or reads a kind names a case). `flow` fires as a `screen` (or as `flow` when it shows nothing),
/// and a fire held back from a holdout group as `held_back`.
public enum ActionKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case message, screen
    case deepLink = "deep_link"
    case notify
    case markRead = "mark_read"
    case prompt, emit, set, unset, flow
    /// Output only: the fire of a user in a holdout, whose actions were not sent.
    case heldBack = "held_back"

    public var description: String { rawValue }

    /// The kinds a rule file can write under `do:`.
    public static let written: [ActionKind] = allCases.filter { $0 != .heldBack }
}
