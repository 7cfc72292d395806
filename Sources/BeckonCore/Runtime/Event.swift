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

    public init(
        kind: Kind, name: String = "", userID: String, timestamp: Int64, messageID: String? = nil,
        properties: ValueMap = ValueMap(), traits: ValueMap = ValueMap(), context: ValueMap = ValueMap()
    ) {
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
public final class BoundEvent: Sendable {
    public let kind: Event.Kind
    /// Index in the rule set's event names, or -1 when no rule mentions the event.
    public let nameID: Int32
    public let name: String
    public let userID: String
    public let timestamp: Int64
    public let messageID: String?
    /// By ``CompiledRuleSet/propertySlots``.
    public let properties: ContiguousArray<Value?>
    /// By ``CompiledRuleSet/contextSlots``.
    public let context: ContiguousArray<Value?>
    /// Identify traits, all of them.
    public let traits: [(name: String, value: Value)]
    /// Every property, kept only when a rule reads `event.properties` as a whole.
    public let allProperties: ValueMap?

    public init(
        kind: Event.Kind, nameID: Int32, name: String, userID: String, timestamp: Int64, messageID: String?,
        properties: ContiguousArray<Value?>, context: ContiguousArray<Value?>,
        traits: [(name: String, value: Value)] = [], allProperties: ValueMap? = nil
    ) {
        self.kind = kind
        self.nameID = nameID
        self.name = name
        self.userID = userID
        self.timestamp = timestamp
        self.messageID = messageID
        self.properties = properties
        self.context = context
        self.traits = traits
        self.allProperties = allProperties
    }

    /// The key under which the rule set interns this event's name: the name for track events,
    /// `screen:NAME` for screen and page views.
    public static func internKey(kind: Event.Kind, name: String) -> String {
        switch kind {
        case .screen, .page: "screen:" + name
        default: name
        }
    }
}
