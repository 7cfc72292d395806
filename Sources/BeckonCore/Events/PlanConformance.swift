/// Whether an event fits the loaded tracking plans (docs/events.md#events-off-the-tracking-plan): a value whose type
/// differs from the plan's is converted when nothing is lost (`"18.50"` for a `number`, `"true"` for a `bool`, `3` for
/// a `string`), and what still does not fit — an event the plans do not list, a value that does not convert — is
/// named, so the event is counted as off the plan. The event is processed either way.
extension PlanNames {
    /// Converts the properties the rules read (by slot) and the traits where the plan's type asks it, and says what
    /// does not fit: the event's name, or one line for each value. `listed`: whether the plans list the event's name,
    /// when the caller knows it (``SegmentDecoder`` does for the names the rules know).
    func conform(
        kind: Event.Kind, name: String, listed: Bool? = nil, properties: borrowing SlotRow,
        traits: inout [(name: String, value: Value)]
    ) -> Conformance {
        var off: [String] = []
        switch kind {
        case .track:
            guard listed ?? events.contains(name) else { return .unlisted }
            for p in propertyTypes[name] ?? [] where p.slot < properties.count {
                guard let v = properties[p.slot] else { continue }
                switch Self.fit(v, p.type) {
                case .fits: break
                case .converted(let c): properties[p.slot] = c
                case .offPlan(let found): off.append("property '\(p.name)' of '\(name)' is \(found), the plan says \(p.type)")
                }
            }
        case .screen, .page:
            if !(listed ?? (screens.isEmpty || screens.contains(name))) { return .unlisted }
        case .identify:
            for i in traits.indices {
                guard let type = traitTypes[traits[i].name] else { continue }
                switch Self.fit(traits[i].value, type) {
                case .fits: break
                case .converted(let c): traits[i].value = c
                case .offPlan(let found): off.append("trait '\(traits[i].name)' is \(found), the plan says \(type)")
                }
            }
        case .group, .alias:
            break
        }
        return off.isEmpty ? .fits : .misfits(off)
    }

    /// What ``conform(kind:name:listed:properties:traits:)`` found. An event the plans do not list is the common way
    /// off them, and is said without a line of text made for each such event (``BoundEvent/offPlan`` makes it).
    enum Conformance {
        case fits
        /// The plans do not list the event's name (a track event, or a screen when they list screens).
        case unlisted
        /// One line for each value that does not fit.
        case misfits([String])
    }

    /// The line for an event of `kind` named `name` that the plans do not list.
    static func unlistedLine(kind: Event.Kind, name: String) -> String {
        kind == .track ? "event '\(name)' is not in the tracking plan" : "screen '\(name)' is not in the tracking plan"
    }

    enum Fit {
        case fits
        case converted(Value)
        /// Of this kind (`a string`, `a list`…).
        case offPlan(String)
    }

    /// How `v` fits `type`: as it is, converted without loss, or not at all. `null` fits anything (no value).
    static func fit(_ v: Value, _ type: PlanType) -> Fit {
        switch (type, v) {
        case (.any, _), (_, .null): return .fits
        case (.string, .string), (.bool, .bool), (.int, .int), (.int, .uint), (.number, .int), (.number, .uint),
            (.number, .double), (.object, .map), (.list, .list), (.timestamp, .timestamp):
            return .fits
        case (.int, .double(let d)):
            // (JSON has one kind of number: 3.0 is an int.)
            if d.rounded() == d, let i = Int64(exactly: d) { return .converted(.int(i)) }
        case (.timestamp, .string(let s)):
            if Timestamp.parse(s) != nil { return .fits }
        case (.number, .string(let s)):
            if let d = Double(s), d.isFinite { return .converted(.double(d)) }
        case (.int, .string(let s)):
            if let i = Int64(s) { return .converted(.int(i)) }
        case (.bool, .string(let s)):
            if s == "true" { return .converted(.bool(true)) }
            if s == "false" { return .converted(.bool(false)) }
        case (.string, .int(let i)): return .converted(.string(String(i)))
        case (.string, .uint(let i)): return .converted(.string(String(i)))
        case (.string, .bool(let b)): return .converted(.string(b ? "true" : "false"))
        default: break
        }
        return .offPlan(kindName(v))
    }

    static func kindName(_ v: Value) -> String {
        switch v {
        case .null: "null"
        case .bool: "a bool"
        case .int, .uint: "an int"
        case .double: "a number"
        case .string: "a string"
        case .bytes: "bytes"
        case .list: "a list"
        case .map: "an object"
        case .timestamp: "a timestamp"
        case .duration: "a duration"
        default: "a value of another kind"
        }
    }
}
