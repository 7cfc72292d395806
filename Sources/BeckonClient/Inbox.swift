import Foundation

/// One item of the user's inbox (a `notify` action's notification), as `GET /v1/users/{id}/inbox` gives it.
public struct InboxItem: Sendable, Hashable, Identifiable {
    public var id: String
    public var sender: String?
    public var message: String?
    public var link: String?
    public var createdAt: Date?
    public var read: Bool
    public var readAt: Date?
    /// `unit/rule` of the rule that put it there.
    public var rule: String?
    public var data: [String: JSONValue]

    public init(
        id: String, sender: String? = nil, message: String? = nil, link: String? = nil, createdAt: Date? = nil,
        read: Bool = false, readAt: Date? = nil, rule: String? = nil, data: [String: JSONValue] = [:]
    ) {
        self.id = id
        self.sender = sender
        self.message = message
        self.link = link
        self.createdAt = createdAt
        self.read = read
        self.readAt = readAt
        self.rule = rule
        self.data = data
    }

    init(json: JSONValue) {
        func date(_ key: String) -> Date? { json[key]?.stringValue.flatMap(ISOTime.date) }
        self.init(
            id: json["id"]?.stringValue ?? "", sender: json["sender"]?.stringValue,
            message: json["message"]?.stringValue, link: json["link"]?.stringValue, createdAt: date("createdAt"),
            read: json["read"]?.boolValue ?? false, readAt: date("readAt"), rule: json["rule"]?.stringValue,
            data: json["data"]?.objectValue ?? [:])
    }
}

/// The user's inbox, newest last.
public struct Inbox: Sendable, Hashable {
    public var userId: String
    public var unread: Int
    public var items: [InboxItem]

    public init(userId: String, unread: Int = 0, items: [InboxItem] = []) {
        self.userId = userId
        self.unread = unread
        self.items = items
    }

    init(json: JSONValue, userId: String) {
        var items: [InboxItem] = []
        if case .array(let list)? = json["items"] { items = list.map(InboxItem.init(json:)) }
        self.init(
            userId: json["userId"]?.stringValue ?? userId,
            unread: json["unread"]?.intValue.map { Int(clamping: $0) } ?? items.filter { !$0.read }.count, items: items)
    }
}
