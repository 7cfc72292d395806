import Crypto

/// An action a rule fired, for the app or service to carry out.
///
/// Its ``id`` is derived from the rule, the action's position, the user and the triggering event
/// (its `messageId`, or the user's event count when it has none), so replaying a stream gives the same ids and a
/// consumer can drop an action it has already seen.
public struct FiredAction: Sendable {
    /// Computed when asked for (a SHA-256), so that a service that does not use ids does not pay for them.
    public var id: String {
        var message: [UInt8] = []
        var digits: [UInt8] = []
        FiredAction.appendID(
            rule: origin.qualifiedRule, action: actionIndex, user: userID, trigger: triggerKey, to: &digits,
            scratch: &message)
        return String(decoding: digits, as: UTF8.self)
    }
    /// The rule's names and compiled actions (one object per rule, shared by all its fires), the action's place in
    /// the rule's `do` (-1 for `held_back`), and the trigger's key: what `id` hashes.
    let origin: ActionOrigin
    let actionIndex: Int
    let triggerKey: TriggerKey
    /// Milliseconds since 1970: when it fires (the triggering event's time, or a timer's due time).
    public var time: Int64
    public var userID: String
    /// The campaign or rule set.
    public var unit: String { origin.unit }
    public var unitKind: UnitKind { origin.unitKind }
    public var rule: String { origin.rule }
    /// The A/B test variant the user is in, when the rule or its file has `variants:`.
    public var variant: String? { origin.variant }
    /// What triggered it: the event name, `screen:NAME`, or `change:ATTRIBUTE`.
    public var trigger: String
    /// `message`, `screen`, `deep_link`, `notify`, `mark_read`, `prompt`, `emit`, `set`, `unset`.
    public var kind: String {
        get { ownKind ?? origin.kinds[actionIndex] }
        set { ownKind = newValue }
    }
    /// The kind's own fields, in output order.
    public var fields: [(key: String, value: Value)] {
        get { ownFields ?? origin.constantFields[actionIndex] ?? [] }
        set { ownFields = newValue }
    }
    /// Fields that could not be computed (they are `null`), with why.
    public var warnings: [String] {
        get { ownWarnings ?? [] }
        set { ownWarnings = newValue }
    }
    // The kind, fields and warnings when they are not the compiled action's: most fires share the rule's, and so a
    // fire copies (and counts references to) three fewer things.
    private var ownKind: String?
    private var ownFields: [(key: String, value: Value)]?
    private var ownWarnings: [String]?

    /// A fire of action `actionIndex` of the rule `origin` names, with its compiled kind and fields until they are set.
    init(origin: ActionOrigin, actionIndex: Int, triggerKey: TriggerKey, time: Int64, userID: String, trigger: String) {
        self.origin = origin
        self.actionIndex = actionIndex
        self.triggerKey = triggerKey
        self.time = time
        self.userID = userID
        self.trigger = trigger
    }

    /// A fire whose kind and fields are its own (`held_back`).
    init(
        origin: ActionOrigin, actionIndex: Int, triggerKey: TriggerKey, time: Int64, userID: String, trigger: String,
        kind: String, fields: [(key: String, value: Value)]
    ) {
        self.init(origin: origin, actionIndex: actionIndex, triggerKey: triggerKey, time: time, userID: userID, trigger: trigger)
        ownKind = kind
        ownFields = fields
    }

    public subscript(field: String) -> Value? { fields.first { $0.key == field }?.value }

    /// One JSON object, keys in a fixed order.
    public var json: String {
        var w = JSONWriter()
        write(to: &w)
        return w.output
    }

    /// ``json`` of an action fired after its due time (a timer that came due while the service was down):
    /// `"late": true` and the time it was fired at, `firedAt`, follow its members.
    public func json(firedLateAt firedAt: Int64) -> String {
        var w = JSONWriter()
        write(to: &w, firedLateAt: firedAt)
        return w.output
    }

    /// Writes ``json`` to `w` (a writer kept across actions allocates nothing per action). The members every fire of
    /// the rule shares, and those of an action whose fields are constants, are copied as JSON made once per rule.
    public func write(to w: inout JSONWriter, firedLateAt: Int64? = nil) {
        FiredAction.write(
            origin: origin, actionIndex: actionIndex, triggerKey: triggerKey, time: time, userID: userID, trigger: trigger,
            own: ownKind == nil && ownFields == nil ? nil : (kind, fields), warnings: ownWarnings,
            firedLateAt: firedLateAt, to: &w)
    }

    /// ``write(to:)`` from an action's parts; `own`: its kind and fields when they are not its rule's compiled ones.
    static func write(
        origin: ActionOrigin, actionIndex: Int, triggerKey: TriggerKey, time: Int64, userID: String, trigger: String,
        own: (kind: String, fields: [(key: String, value: Value)])? = nil, warnings: [String]? = nil,
        firedLateAt: Int64? = nil, to w: inout JSONWriter
    ) {
        w.beginObject()
        w.key(static: "id")
        w.plainString { bytes, scratch in
            appendID(
                rule: origin.qualifiedRule, action: actionIndex, user: userID, trigger: triggerKey, to: &bytes,
                scratch: &scratch)
        }
        w.key(static: "time")
        w.plainString { bytes, _ in Timestamp(milliseconds: time).appendRFC3339(to: &bytes) }
        w.key(static: "userId")
        w.string(userID)
        w.members(origin.headJSON)
        w.key(static: "trigger")
        w.string(trigger)
        if let own {
            ActionOrigin.writeKindAndFields(own.kind, own.fields, to: &w)
        } else if let json = origin.constantJSON[actionIndex] {
            w.members(json)
        } else {
            ActionOrigin.writeKindAndFields(origin.kinds[actionIndex], origin.constantFields[actionIndex] ?? [], to: &w)
        }
        if let warnings, !warnings.isEmpty {
            w.key(static: "warnings")
            w.value(.list(warnings.map { .string($0) }))
        }
        if let firedLateAt {
            w.key(static: "late")
            w.value(.bool(true))
            w.key(static: "firedAt")
            w.plainString { bytes, _ in Timestamp(milliseconds: firedLateAt).appendRFC3339(to: &bytes) }
        }
        w.endObject()
    }

    /// A deterministic id: the first 16 bytes of SHA-256 over the parts, as 32 hex digits appended to `digits`. The
    /// parts (`rule`, the action index in decimal, `user`, the trigger key's text), each followed by a 0 byte, are laid
    /// out in `scratch` (emptied first; a writer keeps one across actions, so an id allocates nothing) and hashed at once.
    static func appendID(
        rule: String, action: Int, user: String, trigger: TriggerKey, to digits: inout [UInt8], scratch m: inout [UInt8]
    ) {
        m.removeAll(keepingCapacity: true)
        func decimal(_ n: Int) {
            if n < 0 { m.append(UInt8(ascii: "-")) }
            let v = n.magnitude
            var scale: UInt = 1
            while v / scale >= 10 { scale *= 10 }
            repeat {
                m.append(UInt8(48 + v / scale % 10))
                scale /= 10
            } while scale > 0
        }
        Bytes.append(utf8: rule, to: &m)
        m.append(0)
        decimal(action)
        m.append(0)
        Bytes.append(utf8: user, to: &m)
        m.append(0)
        if let id = trigger.messageID {
            Bytes.append(utf8: id, to: &m)
        } else {
            m.append(UInt8(ascii: "#"))
            decimal(Int(trigger.eventCount))
        }
        Bytes.append(utf8: trigger.suffix, to: &m)
        m.append(0)
        Bytes.appendHex(first: 16, of: SHA256.hash(data: m), to: &digits)
    }
}

/// Where an action comes from: the names and compiled actions every fire of one rule shares, and the JSON of them
/// that every action line repeats.
final class ActionOrigin: Sendable {
    let unit: String
    let unitKind: UnitKind
    let rule: String
    /// `unit/rule`.
    let qualifiedRule: String
    /// Per action of the rule's `do`: its kind, and its fields when they are all constants (computed once).
    let kinds: [String]
    let constantFields: [[(key: String, value: Value)]?]
    /// `"<unit kind>":"<unit>","rule":"<rule>"` (and `"variant":"<id>"`): the members of every action line of the
    /// rule after `userId`.
    let headJSON: [UInt8]
    /// Per action whose fields are constants: `"action":"<kind>"` and its fields, as members.
    let constantJSON: [[UInt8]?]
    /// Bit `i` set: action `i` (of the first 64) has constant fields, so firing it computes nothing (a flag read
    /// without copying `constantFields`).
    let constantMask: UInt64

    /// The A/B test variant whose actions these are (`nil`: the rule has no test).
    let variant: String?

    init(unit: String, unitKind: UnitKind, rule: String, actions: [ActionTemplate], variant: String? = nil) {
        self.unit = unit
        self.unitKind = unitKind
        self.rule = rule
        self.variant = variant
        qualifiedRule = unit + "/" + rule
        kinds = actions.map(\.kind.rawValue)
        constantFields = actions.map(\.constantFields)
        constantMask = constantFields.prefix(64).enumerated().reduce(0) { $0 | ($1.element == nil ? 0 : 1 << $1.offset) }
        headJSON = ActionOrigin.members { w in
            w.key(unitKind.rawValue)
            w.string(unit)
            w.key(static: "rule")
            w.string(rule)
            if let variant {
                w.key(static: "variant")
                w.string(variant)
            }
        }
        constantJSON = zip(kinds, constantFields).map { kind, fields in
            fields.map { fields in ActionOrigin.members { ActionOrigin.writeKindAndFields(kind, fields, to: &$0) } }
        }
    }

    /// The members `body` writes into an object, as JSON without the braces (for ``JSONWriter/members(_:)``).
    private static func members(_ body: (inout JSONWriter) -> Void) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        body(&w)
        w.endObject()
        return Array(w.bytes.dropFirst().dropLast())
    }

    func isConstant(_ action: Int) -> Bool { action < 64 && constantMask & (1 << UInt64(action)) != 0 }

    /// `"action":"<kind>"` and the fields, as members of the open object.
    static func writeKindAndFields(_ kind: String, _ fields: [(key: String, value: Value)], to w: inout JSONWriter) {
        w.key(static: "action")
        w.string(kind)
        for (k, v) in fields {
            w.key(k)
            w.value(v)
        }
    }
}

/// The trigger part of an action id: the event's messageId, or `#N` (the user's event count) when it has none, then
/// `|depth` for attribute-change rounds and `|tK` for timers. Made into text only when an id is asked for.
struct TriggerKey: Sendable {
    var messageID: String?
    var eventCount: UInt32
    var suffix = ""

    var text: String { (messageID ?? "#\(eventCount)") + suffix }

    func appending(_ s: String) -> TriggerKey {
        var k = self
        k.suffix += s
        return k
    }
}

/// A value in an action, compiled: constants, expressions, interpolated text, and lists and maps of them.
indirect enum CompiledValue: Sendable {
    enum Piece: Sendable {
        case text(String)
        case expr(CompiledExpr)
    }
    case constant(Value)
    case expr(CompiledExpr)
    case text([Piece])
    case list([CompiledValue])
    case map([(key: String, value: CompiledValue)])

    /// The value when it needs no evaluation (constants, plain text, lists and maps of them).
    var constantValue: Value? {
        switch self {
        case .constant(let v): return v
        case .expr: return nil
        case .text(let pieces):
            var out = ""
            for p in pieces {
                guard case .text(let t) = p else { return nil }
                out += t
            }
            return .string(out)
        case .list(let items):
            var out: [Value] = []
            for i in items {
                guard let v = i.constantValue else { return nil }
                out.append(v)
            }
            return .list(out)
        case .map(let pairs):
            var out: [(String, Value)] = []
            for (k, v) in pairs {
                guard let c = v.constantValue else { return nil }
                out.append((k, c))
            }
            return .map(ValueMap(out))
        }
    }

    /// Evaluates; an expression that fails becomes `null` (or empty text) and a warning naming `field`, and so does
    /// one whose value is larger than ``ValueLimits/maxBuiltBytes``. (`field` is made only for a warning.)
    func evaluate(_ s: EvalScope, field: @autoclosure () -> String, warnings: inout [String]) -> Value {
        func checked(_ v: Value, _ e: CompiledExpr) -> Value {
            var v = v
            if v.byteSize(upTo: ValueLimits.maxBuiltBytes) > ValueLimits.maxBuiltBytes { v = .error(ValueLimits.builtTooLarge) }
            if case .error(let err) = v {
                warnings.append("\(field()): \(err.message) (in '\(e.source)')")
                return .null
            }
            return v
        }
        switch self {
        case .constant(let v): return v
        case .expr(let e): return checked(e.evaluate(s), e)
        case .text(let pieces):
            var out = ""
            for p in pieces {
                switch p {
                case .text(let t): out += t
                case .expr(let e):
                    let v = checked(e.evaluate(s), e)
                    if out.utf8.count > ValueLimits.maxBuiltBytes - v.byteSize(upTo: ValueLimits.maxBuiltBytes) {
                        warnings.append("\(field()): \(ValueLimits.builtTooLarge.message) (in '\(e.source)')")
                        continue
                    }
                    switch v {
                    case .null, .error: break
                    case .string(let str): out += str
                    case .list, .map: out += JSONWriter.encode(v)
                    default:
                        if case .string(let str) = Conversions.toString(v) { out += str }
                    }
                }
            }
            return .string(out)
        case .list(let items):
            return .list(items.enumerated().map { $1.evaluate(s, field: "\(field())[\($0)]", warnings: &warnings) })
        case .map(let pairs):
            return .map(
                ValueMap(pairs.map { ($0.key, $0.value.evaluate(s, field: field() + "." + $0.key, warnings: &warnings)) }))
        }
    }
}

/// An action of a rule, compiled.
enum ActionTemplate: Sendable {
    struct Button: Sendable {
        var label: CompiledValue
        var deepLink: CompiledValue?
        var action: CompiledValue?
    }
    case message(
        surface: String, template: String?, title: CompiledValue?, body: CompiledValue?, image: CompiledValue?,
        buttons: [Button], data: [(key: String, value: CompiledValue)])
    case screen(id: CompiledValue, params: [(key: String, value: CompiledValue)])
    case deepLink(CompiledValue)
    case notify(
        id: CompiledValue?, sender: CompiledValue?, message: CompiledValue, link: CompiledValue?,
        data: [(key: String, value: CompiledValue)])
    case push(
        title: CompiledValue?, body: CompiledValue, deepLink: CompiledValue?, image: CompiledValue?,
        data: [(key: String, value: CompiledValue)], to: CompiledValue?)
    case email(template: CompiledValue, to: CompiledValue, subject: CompiledValue?, data: [(key: String, value: CompiledValue)])
    case markRead(CompiledValue)
    case prompt(String)
    case emit(event: String, payload: [(key: String, value: CompiledValue)])
    case set([(slot: Int?, name: String, value: CompiledValue)])
    case unset([(slot: Int?, name: String)])
    case flow(verb: FlowActionSpec.Verb, flow: CompiledValue, step: CompiledValue?)

    /// The fields of an action that only shows or sends something (message, screen, deep_link, push, email, prompt, emit), each
    /// value computed by `value(template, field name)` (the name made only when asked for: a warning's); `nil` for the
    /// kinds that read or change the user's state.
    func pureFields(_ evaluate: (CompiledValue, () -> String) -> Value) -> [(key: String, value: Value)]? {
        func value(_ v: CompiledValue, _ field: @autoclosure () -> String) -> Value {
            withoutActuallyEscaping(field) { evaluate(v, $0) }
        }
        func eval(_ v: CompiledValue?, _ field: @autoclosure () -> String) -> Value? { v.map { value($0, field()) } }
        switch self {
        case .message(let surface, let template, let title, let body, let image, let buttons, let data):
            var m = ValueMap()
            m[string: "surface"] = .string(surface)
            if let template { m[string: "template"] = .string(template) }
            if let v = eval(title, "title") { m[string: "title"] = v }
            if let v = eval(body, "body") { m[string: "body"] = v }
            if let v = eval(image, "image") { m[string: "image"] = v }
            if !buttons.isEmpty {
                m[string: "buttons"] = .list(
                    buttons.enumerated().map { i, b in
                        var bm = ValueMap()
                        bm[string: "label"] = eval(b.label, "buttons[\(i)].label") ?? .null
                        if let v = eval(b.deepLink, "buttons[\(i)].deep_link") { bm[string: "deep_link"] = v }
                        if let v = eval(b.action, "buttons[\(i)].action") { bm[string: "action"] = v }
                        return .map(bm)
                    })
            }
            if !data.isEmpty { m[string: "data"] = .map(ValueMap(data.map { ($0.key, value($0.value, "data." + $0.key)) })) }
            return [("message", .map(m))]
        case .screen(let id, let params):
            return [
                ("screen", eval(id, "screen") ?? .null),
                ("params", .map(ValueMap(params.map { ($0.key, value($0.value, "params." + $0.key)) }))),
            ]
        case .deepLink(let url):
            return [("url", eval(url, "url") ?? .null)]
        case .push(let title, let body, let deepLink, let image, let data, let to):
            var m = ValueMap()
            if let v = eval(title, "title") { m[string: "title"] = v }
            m[string: "body"] = value(body, "body")
            if let v = eval(deepLink, "deep_link") { m[string: "deep_link"] = v }
            if let v = eval(image, "image") { m[string: "image"] = v }
            if !data.isEmpty { m[string: "data"] = .map(ValueMap(data.map { ($0.key, value($0.value, "data." + $0.key)) })) }
            if let v = eval(to, "to") { m[string: "to"] = v }
            return [("push", .map(m))]
        case .email(let template, let to, let subject, let data):
            var m = ValueMap()
            m[string: "template"] = value(template, "template")
            m[string: "to"] = value(to, "to")
            if let v = eval(subject, "subject") { m[string: "subject"] = v }
            if !data.isEmpty { m[string: "data"] = .map(ValueMap(data.map { ($0.key, value($0.value, "data." + $0.key)) })) }
            return [("email", .map(m))]
        case .prompt(let p):
            return [("permission", .string(p))]
        case .emit(let event, let payload):
            // Fields that come out null (an unknown email, a missing click id) are left out of the payload.
            let m = ValueMap(payload.map { ($0.key, value($0.value, "payload." + $0.key)) })
            return [("event", .string(event)), ("payload", Value.map(m).withoutNulls)]
        case .notify, .markRead, .set, .unset, .flow:
            return nil
        }
    }

    /// The fields, computed once, of a pure action whose values are all constants.
    var constantFields: [(key: String, value: Value)]? {
        var constant = true
        let fields = pureFields { v, _ in
            if let c = v.constantValue { return c }
            constant = false
            return .null
        }
        return constant ? fields : nil
    }

    /// The kind its fires carry (a flow's is the screen it shows).
    var kind: ActionKind {
        switch self {
        case .message: .message
        case .screen, .flow: .screen
        case .deepLink: .deepLink
        case .notify: .notify
        case .push: .push
        case .email: .email
        case .markRead: .markRead
        case .prompt: .prompt
        case .emit: .emit
        case .set: .set
        case .unset: .unset
        }
    }

    /// The channels (``ActionKind/channels``, in their order) that some of `actions` message the user on.
    static func channels(of actions: [ActionTemplate]) -> [ActionKind] {
        ActionKind.channels.filter { c in actions.contains { $0.kind == c } }
    }

    /// Why a `push` or `email` whose fields are `fields` cannot go out: its `to` has no value (`nil`: it can).
    func skipReason(_ fields: [(key: String, value: Value)]) -> String? {
        let channel: String
        switch self {
        case .push(_, _, _, _, _, let to): guard to != nil else { return nil }; channel = "push"
        case .email: channel = "email"
        default: return nil
        }
        guard case .map(let m) = fields.first?.value else { return nil }
        switch m[string: "to"] {
        case .string(let s) where !s.trimmingWhitespace().isEmpty: return nil
        case .none, .null?: return "no address: the \(channel)'s `to` has no value for this user"
        case .string?: return "no address: the \(channel)'s `to` is empty for this user"
        case let v?: return "no address: the \(channel)'s `to` is \(JSONWriter.encode(v)), not text"
        }
    }
}
