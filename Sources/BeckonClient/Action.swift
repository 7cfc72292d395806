import Foundation

/// One action the rules fired for the user, as the service's pull gives it (the objects `beckon dry-run --format
/// jsonl` prints): the envelope every action has, what it asks of the app as a typed `kind`, and the raw JSON.
public struct BeckonAction: Sendable, Hashable, Identifiable {
    /// Unique: the service never stores an action twice, and the client hands each over once.
    public let id: String
    /// When it fired (the due time of a delayed one).
    public let time: Date?
    public let userId: String
    /// The rule that fired, `ruleset/rule` or `campaign/rule`.
    public let rule: String
    public let kind: Kind
    /// The whole action as the service sent it, for what the typed kind leaves out or a kind newer than this client.
    public let raw: JSONValue

    public enum Kind: Sendable, Hashable {
        /// An in-app message: `surface`, `template`, `title`, `body`, `image`, `buttons`, `data`.
        case message(Message)
        /// A screen to show, with its parameters (an onboarding flow's steps).
        case screen(id: String, params: [String: JSONValue])
        case deepLink(URL?)
        /// An inbox item arrived; `unread` is the inbox's unread count after it.
        case notify(InboxItem, unread: Int?)
        /// An inbox item was marked read by a rule.
        case markRead(id: String, unread: Int?)
        /// A system permission to ask for: `att`, `notifications`, `location`.
        case prompt(permission: String)
        case push(Push)
        case email(template: String?, to: String?, subject: String?)
        /// An outgoing event with its payload.
        case emit(event: String, payload: [String: JSONValue])
        /// Any other kind (`set`, `unset`, `flow`, `skipped`, `held_back`, or one newer than this client): read `raw`.
        case other(String)
    }

    public struct Message: Sendable, Hashable {
        public var surface: String?
        public var template: String?
        public var title: String?
        public var body: String?
        public var image: URL?
        public var buttons: [Button]
        public var data: [String: JSONValue]

        public struct Button: Sendable, Hashable {
            public var label: String
            public var deepLink: URL?
            public var action: String?
        }
    }

    public struct Push: Sendable, Hashable {
        public var title: String?
        public var body: String?
        public var deepLink: URL?
        public var image: URL?
        public var data: [String: JSONValue]
    }

    /// Reads an action object; nil when it has no `id` (not an action).
    public init?(json: JSONValue) {
        guard let id = json["id"]?.stringValue else { return nil }
        self.id = id
        self.raw = json
        self.time = json["time"]?.stringValue.flatMap(ISOTime.date)
        self.userId = json["userId"]?.stringValue ?? ""
        let owner = json["ruleset"]?.stringValue ?? json["campaign"]?.stringValue ?? ""
        self.rule = owner.isEmpty ? (json["rule"]?.stringValue ?? "") : "\(owner)/\(json["rule"]?.stringValue ?? "")"
        self.kind = Kind(json)
    }
}

extension BeckonAction.Kind {
    init(_ json: JSONValue) {
        let name = json["action"]?.stringValue ?? ""
        func text(_ v: JSONValue?, _ key: String) -> String? { v?[key]?.stringValue }
        func url(_ v: JSONValue?, _ key: String) -> URL? { text(v, key).flatMap { URL(string: $0) } }
        func map(_ v: JSONValue?) -> [String: JSONValue] { v?.objectValue ?? [:] }
        func count(_ v: JSONValue?) -> Int? { v?.intValue.map { Int(clamping: $0) } }
        switch name {
        case "message":
            let m = json["message"]
            var buttons: [BeckonAction.Message.Button] = []
            if case .array(let list)? = m?["buttons"] {
                for b in list {
                    buttons.append(.init(label: text(b, "label") ?? "", deepLink: url(b, "deep_link"), action: text(b, "action")))
                }
            }
            self = .message(
                .init(
                    surface: text(m, "surface"), template: text(m, "template"), title: text(m, "title"),
                    body: text(m, "body"), image: url(m, "image"), buttons: buttons, data: map(m?["data"])))
        case "screen":
            if let id = json["screen"]?.stringValue {
                self = .screen(id: id, params: map(json["params"]))
            } else {
                self = .screen(id: text(json["screen"], "id") ?? "", params: map(json["params"] ?? json["screen"]?["params"]))
            }
        case "deep_link":
            self = .deepLink(json["url"]?.stringValue.flatMap { URL(string: $0) })
        case "notify":
            let n = json["notification"]
            let item = InboxItem(
                id: text(n, "id") ?? "", sender: text(n, "sender"), message: text(n, "message"), link: text(n, "link"),
                createdAt: json["time"]?.stringValue.flatMap(ISOTime.date), read: false, rule: nil, data: map(n?["data"]))
            self = .notify(item, unread: count(json["unread"]))
        case "mark_read":
            self = .markRead(
                id: text(json["notification"], "id") ?? json["notification"]?.stringValue ?? "", unread: count(json["unread"]))
        case "prompt":
            self = .prompt(permission: json["permission"]?.stringValue ?? "")
        case "push":
            let p = json["push"]
            self = .push(
                .init(
                    title: text(p, "title"), body: text(p, "body"), deepLink: url(p, "deep_link"), image: url(p, "image"),
                    data: map(p?["data"])))
        case "email":
            let e = json["email"]
            self = .email(template: text(e, "template"), to: text(e, "to"), subject: text(e, "subject"))
        case "emit":
            self = .emit(event: json["event"]?.stringValue ?? "", payload: map(json["payload"]))
        default:
            self = .other(name)
        }
    }

    /// Whether the action changes the inbox (so the client's inbox observers read it again).
    var touchesInbox: Bool {
        switch self {
        case .notify, .markRead: true
        default: false
        }
    }
}
