/// An incoming event in the shape of the Segment spec: `track`, `identify`, `screen`…
///
/// Services that already hold decoded events build these directly; JSON lines go through ``SegmentDecoder``.
///
/// ```swift
/// let e = Event(kind: .track, name: "E_Opened_App", userID: "u1",
///               timestamp: Timestamp.parse("2026-01-05T09:00:00Z")!.milliseconds,
///               context: ValueMap([("locale", "en_US")]))
/// ```
public struct Event: Sendable {
    public enum Kind: UInt8, Sendable, CustomStringConvertible {
        case track, identify, screen, page, group, alias
        /// The kind a Segment `type` names (its UTF-8, exactly), if any.
        public init?(_ name: some Collection<UInt8>) {
            // (The name's bytes as one little-endian word and its length, compared with each kind's: one pass over at
            // most 8 bytes. The length tells "track" from "track\0".)
            var word: UInt64 = 0
            var shift: UInt64 = 0
            for c in name {
                guard shift < 64 else { return nil }
                word |= UInt64(c) << shift
                shift += 8
            }
            switch (word, shift / 8) {
            case (0x6b_6361_7274, 5): self = .track
            case (0x7966_6974_6e65_6469, 8): self = .identify
            case (0x6e65_6572_6373, 6): self = .screen
            case (0x6567_6170, 4): self = .page
            case (0x70_756f_7267, 5): self = .group
            case (0x73_6169_6c61, 5): self = .alias
            default: return nil
            }
        }

        public var description: String {
            switch self {
            case .track: "track"
            case .identify: "identify"
            case .screen: "screen"
            case .page: "page"
            case .group: "group"
            case .alias: "alias"
            }
        }
    }

    public var kind: Kind
    /// `event` of a track call, `name` of a screen or page call; empty for identify.
    public var name: String
    /// `userId`, or `anonymousId` when there is none.
    public var userID: String
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var timestamp: Int64
    public var messageID: String?
    public var properties: ValueMap
    /// Identify traits: user attributes to set.
    public var traits: ValueMap
    public var context: ValueMap
    /// The id this user was known by before: an identify's `anonymousId` beside its `userId`, or an alias's
    /// `previousId`. The engine merges that user into this one (``Engine/merge(_:into:)``).
    public var previousID: String?

    public init(
        kind: Kind, name: String = "", userID: String, timestamp: Int64, messageID: String? = nil,
        properties: ValueMap = ValueMap(), traits: ValueMap = ValueMap(), context: ValueMap = ValueMap(),
        previousID: String? = nil
    ) {
        self.previousID = previousID
        self.kind = kind
        self.name = name
        self.userID = userID
        self.timestamp = timestamp
        self.messageID = messageID
        self.properties = properties
        self.traits = traits
        self.context = context
    }
}

/// An event bound to a compiled rule set: its name interned, and only the property and context fields
/// the rules read, in slots. This is what the engine evaluates. Immutable, and a class: handing it to the engine and
/// to every expression that reads it costs one reference count, not one per field.
public final class BoundEvent: @unchecked Sendable {
    // @unchecked: the slots are memory the event owns, written only while it is built and freed when it goes.

    public let kind: Event.Kind
    /// Index in the rule set's event names, or -1 when no rule mentions the event.
    public let nameID: Int32
    public let name: String
    public let userID: String
    public let timestamp: Int64
    /// The `messageId`, `nil` when there is none or it is empty.
    public let messageID: String?
    /// By ``CompiledRuleSet/propertySlots``, in memory the event owns (read in place: no reference counting).
    let propertySlots: SlotRow
    /// By ``CompiledRuleSet/contextSlots``.
    let contextSlots: SlotRow
    /// Identify traits, all of them.
    public let traits: [(name: String, value: Value)]
    /// Every property, kept only when a rule reads `event.properties` as a whole.
    public let allProperties: ValueMap?
    /// The id the user was known by before (see ``Event/previousID``); `nil` when none, or the same as ``userID``.
    public let previousID: String?
    /// Whether ``userID`` came as a `userId` (a signed-in user), not as an `anonymousId`: such an id is never merged
    /// into another user (``Engine/merge(_:into:)``). Events a library builds itself say so when they mean it.
    public let identified: Bool
    /// Whether the tracking plans do not list the event (``offPlan`` says so).
    let unlisted: Bool
    /// The push device the event's `context.device.token` reports (read only when the rule set has a push
    /// destination: docs/push.md), and what of it does not fit the tracking plan. Boxed: the event stays within the
    /// lines the engine prefetches.
    private let extra: Box?
    public var device: Device? { extra?.device }
    /// What does not fit the loaded tracking plans, one line each
    /// (``PlanNames/conform(kind:name:listed:properties:traits:)``); empty when it fits, or no plan is loaded.
    public var offPlan: [String] {
        unlisted ? [PlanNames.unlistedLine(kind: kind, name: name)] : extra?.offPlan ?? []
    }
    /// Whether ``offPlan`` names anything.
    @inline(__always) public var isOffPlan: Bool { unlisted || extra.map { !$0.offPlan.isEmpty } ?? false }
    final class Box: Sendable {
        let device: Device?
        let offPlan: [String]
        init(_ d: Device?, offPlan: [String]) {
            device = d
            self.offPlan = offPlan
        }
    }

    /// The property in `slot` (by ``CompiledRuleSet/propertySlots``).
    @inline(__always) public func property(_ slot: Int) -> Value? { propertySlots[slot] }
    /// The properties the rules read, by ``CompiledRuleSet/propertySlots`` (a copy).
    public var properties: ContiguousArray<Value?> { ContiguousArray(propertySlots.values) }
    /// The context fields the rules read, by ``CompiledRuleSet/contextSlots`` (a copy).
    public var context: ContiguousArray<Value?> { ContiguousArray(contextSlots.values) }

    public convenience init(
        kind: Event.Kind, nameID: Int32, name: String, userID: String, timestamp: Int64, messageID: String?,
        properties: ContiguousArray<Value?>, context: ContiguousArray<Value?>,
        traits: [(name: String, value: Value)] = [], allProperties: ValueMap? = nil, previousID: String? = nil,
        identified: Bool = false
    ) {
        self.init(
            kind: kind, nameID: nameID, name: name, userID: userID, timestamp: timestamp, messageID: messageID,
            propertySlots: SlotRow(copying: properties), contextSlots: SlotRow(copying: context), traits: traits,
            allProperties: allProperties, previousID: previousID, identified: identified)
    }

    /// Takes `propertySlots` and `contextSlots` over: the event frees them.
    init(
        kind: Event.Kind, nameID: Int32, name: String, userID: String, timestamp: Int64, messageID: String?,
        propertySlots: consuming SlotRow, contextSlots: consuming SlotRow, traits: [(name: String, value: Value)],
        allProperties: ValueMap?, previousID: String? = nil, identified: Bool = false, device: Device? = nil,
        fit: PlanNames.Conformance = .fits
    ) {
        var misfits: [String] = []
        if case .misfits(let lines) = fit { misfits = lines }
        unlisted = if case .unlisted = fit { true } else { false }
        extra = device == nil && misfits.isEmpty ? nil : Box(device, offPlan: misfits)
        self.identified = identified
        self.previousID = previousID?.isEmpty == false && previousID != userID ? previousID : nil
        self.kind = kind
        self.nameID = nameID
        self.name = name
        self.userID = userID
        self.timestamp = timestamp
        // An empty id is no id: it would make events with nothing in common duplicates, and their actions one id.
        self.messageID = messageID?.isEmpty == false ? messageID : nil
        self.propertySlots = propertySlots
        self.contextSlots = contextSlots
        self.traits = traits
        self.allProperties = allProperties
    }

    /// Asks the CPU for the property slots' memory (a hint).
    @inline(__always) func prefetchProperties() { propertySlots.prefetch() }

    /// The key under which the rule set interns this event's name: the name for track events,
    /// `screen:NAME` for screen and page views.
    public static func internKey(kind: Event.Kind, name: String) -> String {
        switch kind {
        case .screen, .page: "screen:" + name
        default: name
        }
    }
}
