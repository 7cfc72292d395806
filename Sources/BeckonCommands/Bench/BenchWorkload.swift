import BeckonCore
import BeckonTools
import Foundation

/// The shared benchmark's workload (`../shared/bench/gen_workload.py`): `users.ndjson`, `events.ndjson` (sorted by
/// `ts`, epoch seconds) and `rules.json`, translated to what Beckon reads — rule YAML and Segment-shaped JSON lines.
///
/// The workload's semantics map one to one: `where` terms are CEL comparisons on `user.X` and
/// `event.properties.X`; `count {min, window_s}` is `count(EVENT, "Ns") >= min` (the current event included, the
/// window `(now − N s, now]`); `cap_s` is `cooldown` (a fire needs the last one at or before `now − cap_s`; blocked
/// matches do not count). Every rule emits one event named after its id, so that no two rules compete for a surface.
struct BenchWorkload {
    let dir: String
    /// `rules.json`'s `rules`.
    let rules: [ValueMap]

    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    init(dir: String) throws {
        self.dir = dir
        let path = (dir as NSString).appendingPathComponent("rules.json")
        guard let data = FileManager.default.contents(atPath: path) else { throw Problem(description: "cannot read \(path)") }
        let root: Value
        do throws(DecodeError) {
            root = try JSONValue.parse(String(decoding: data, as: UTF8.self))
        } catch {
            throw Problem(description: "\(path): \(error)")
        }
        guard case .map(let m) = root, case .list(let list)? = m[string: "rules"] else {
            throw Problem(description: "\(path): expected an object with a `rules` list")
        }
        rules = list.compactMap { if case .map(let r) = $0 { r } else { nil } }
        guard rules.count == list.count, !rules.isEmpty else {
            throw Problem(description: "\(path): every rule must be an object")
        }
    }

    var usersPath: String { (dir as NSString).appendingPathComponent("users.ndjson") }
    var eventsPath: String { (dir as NSString).appendingPathComponent("events.ndjson") }

    // MARK: Rules

    /// One rule set with the workload's rules and, for scaling runs, `extra` more: copies of them (cycling) on
    /// event names the stream never sends, five rules a name — what an app with many campaigns on many events has.
    func rulesYAML(extra: Int = 0) throws -> String {
        var out = "version: 1\nruleset: bench\ndescription: The shared benchmark workload's rules, translated.\nrules:\n"
        for r in rules { out += try rule(r, id: nil, event: nil) }
        for i in 0..<extra {
            out += try rule(rules[i % rules.count], id: "x\(i)", event: "bench_extra_\(i / 5)")
        }
        return out
    }

    private func rule(_ r: ValueMap, id newID: String?, event newEvent: String?) throws -> String {
        guard case .string(let id)? = r[string: "id"], case .string(let event)? = r[string: "event"] else {
            throw Problem(description: "a rule lacks `id` or `event`")
        }
        let ruleID = newID ?? id
        let on = newEvent ?? event
        var terms: [String] = []
        if case .list(let whereTerms)? = r[string: "where"] {
            for t in whereTerms {
                guard case .list(let parts) = t, parts.count == 3, case .string(let path) = parts[0],
                    case .string(let op) = parts[1]
                else {
                    throw Problem(description: "rule \(id): a `where` term is not [path, op, literal]")
                }
                terms.append("\(try Self.path(path)) \(op) \(try Self.literal(parts[2]))")
            }
        }
        if case .map(let c)? = r[string: "count"], case .int(let min)? = c[string: "min"],
            case .int(let window)? = c[string: "window_s"]
        {
            terms.append("count(\(Self.quoted(on)), \"\(window)s\") >= \(min)")
        }
        var s = "  - id: \(ruleID)\n    on: \(Self.yamlQuoted(on))\n"
        if !terms.isEmpty { s += "    if: \(Self.yamlQuoted(terms.joined(separator: " && ")))\n" }
        if case .int(let cap)? = r[string: "cap_s"] { s += "    limit: { cooldown: \(cap)s }\n" }
        s += "    do:\n      - emit: { event: \(ruleID) }\n"
        return s
    }

    static func path(_ p: String) throws -> String {
        if p.hasPrefix("user.") { return "user." + p.dropFirst(5) }
        if p.hasPrefix("event.") { return "event.properties." + p.dropFirst(6) }
        throw Problem(description: "path '\(p)' is neither user.X nor event.X")
    }

    static func literal(_ v: Value) throws -> String {
        switch v {
        case .bool(let b): return b ? "true" : "false"
        case .int(let n): return String(n)
        case .double(let d): return d == d.rounded() && abs(d) < 1e15 ? String(format: "%.1f", d) : "\(d)"
        case .string(let s): return quoted(s)
        case .list(let xs): return "[" + (try xs.map(literal)).joined(separator: ", ") + "]"
        default: throw Problem(description: "unsupported literal \(JSONWriter.encode(v))")
        }
    }

    /// A CEL string literal (JSON's escapes are CEL's).
    static func quoted(_ s: String) -> String { JSONWriter.encode(.string(s)) }

    /// A YAML single-quoted scalar.
    static func yamlQuoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "''") + "'" }

    // MARK: Events

    /// Writes the workload as Segment JSON lines: one `identify` per user (with all its fields as traits, at the first
    /// event's time), then one `track` per event. Returns the number of users and events written. A line of the
    /// workload that is not a user or an event is a bad line, under the one policy (``BadLinePolicy/goOn``): counted,
    /// reported on `console`, skipped.
    func writeSegment(to path: String, console: any Console) throws -> (users: Int, events: Int) {
        guard let events = EventStream(path: eventsPath, badLines: .goOn),
            let users = EventStream(path: usersPath, badLines: .goOn)
        else {
            throw Problem(description: "cannot read \(eventsPath) or \(usersPath)")
        }
        guard FileManager.default.createFile(atPath: path, contents: nil), let out = FileHandle(forWritingAtPath: path) else {
            throw Problem(description: "cannot write \(path)")
        }
        defer { try? out.close() }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 20)
        func flush(force: Bool = false) {
            if force || buffer.count >= 1 << 20 {
                out.write(Data(buffer))
                buffer.removeAll(keepingCapacity: true)
            }
        }
        // The first event's time, for the identifies (its bad lines are met again below).
        var firstTS: Int64?
        EventStream(path: eventsPath, badLines: .goOn)?.lines(console: StringConsole()) { line in
            firstTS = try? SegmentLine.parse(line).ts
            return firstTS == nil
        }
        guard let start = firstTS else { throw Problem(description: "\(eventsPath) has no event") }
        let startText = Timestamp(milliseconds: start * 1000).description
        var nUsers = 0
        users.lines(console: console) { line in
            let text = String(decoding: line, as: UTF8.self)
            guard case .map(var m)? = try? JSONValue.parse(text), case .string(let id)? = m[string: "id"] else {
                return users.badLine(DecodeError("not a user object"), console: console)
            }
            m = ValueMap(m.entries.filter { if case .string("id") = $0.key { false } else { true } })
            let identify = ValueMap([
                ("type", .string("identify")), ("userId", .string(id)), ("timestamp", .string(startText)), ("traits", .map(m)),
            ])
            buffer.append(contentsOf: JSONWriter.encode(.map(identify)).utf8)
            buffer.append(10)
            nUsers += 1
            flush()
            return true
        }
        if users.finish(console: console) { throw Problem(description: "cannot read \(usersPath)") }
        var nEvents = 0
        var lastTS: Int64 = .min
        var lastText = ""
        events.lines(console: console) { line in
            guard let e = try? SegmentLine.parse(line) else {
                return events.badLine(DecodeError("not a workload event"), console: console)
            }
            if e.ts != lastTS {
                lastTS = e.ts
                lastText = Timestamp(milliseconds: e.ts * 1000).description
            }
            buffer.append(contentsOf: #"{"type":"track","userId":"#.utf8)
            buffer.append(contentsOf: e.uid)
            buffer.append(contentsOf: #","event":"#.utf8)
            buffer.append(contentsOf: e.name)
            buffer.append(contentsOf: #","timestamp":""#.utf8)
            buffer.append(contentsOf: lastText.utf8)
            buffer.append(contentsOf: #"","properties":"#.utf8)
            buffer.append(contentsOf: e.props)
            buffer.append(contentsOf: "}\n".utf8)
            nEvents += 1
            flush()
            return true
        }
        if events.finish(console: console) { throw Problem(description: "cannot read \(eventsPath)") }
        flush(force: true)
        return (nUsers, nEvents)
    }
}

/// The fields of one workload event line, as raw JSON: `{"uid":…,"name":…,"ts":N,"props":{…}}` (any key order).
struct SegmentLine {
    var uid: ArraySlice<UInt8>
    var name: ArraySlice<UInt8>
    var ts: Int64
    var props: ArraySlice<UInt8>

    static func parse(_ line: UnsafeBufferPointer<UInt8>) throws -> SegmentLine {
        let bytes = Array(line)
        var uid: Range<Int>?
        var name: Range<Int>?
        var props: Range<Int>?
        var ts: Int64?
        for (key, range) in try JSONValue.members(line) {
            switch key {
            case "uid": uid = range
            case "name": name = range
            case "props": props = range
            case "ts": ts = Int64(String(decoding: bytes[range], as: UTF8.self))
            default: break
            }
        }
        guard let uid, let name, let ts else {
            throw BenchWorkload.Problem(description: "an event needs uid, name and whole-second ts")
        }
        return SegmentLine(uid: bytes[uid], name: bytes[name], ts: ts, props: props.map { bytes[$0] } ?? ArraySlice("{}".utf8))
    }
}
