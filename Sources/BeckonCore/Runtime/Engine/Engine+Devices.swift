/// Users' push devices (docs/push.md): registered by the app, removed when the provider says a token is no longer
/// valid. An id merged into another user is that user's: its devices are theirs.
extension Engine {
    /// Why a device was not kept.
    public enum DeviceRefusal: Error, Equatable, CustomStringConvertible {
        case emptyToken
        case tokenTooLong(Int)
        case controlCharacter
        public var description: String {
            switch self {
            case .emptyToken: "the token is empty"
            case .tokenTooLong(let n): "the token is \(n) bytes long; the limit is \(Device.maxTokenBytes)"
            case .controlCharacter: "the token holds a control character (providers' tokens are printable text)"
            }
        }
    }

    /// Checks a device before it is stored anywhere (the service answers 400 with this).
    public static func check(_ device: Device) throws(DeviceRefusal) {
        if let refusal = tokenProblem(device.token) { throw refusal }
    }

    /// What is wrong with a push token, `nil` when nothing is: a registration's and a removal's (the API's 400).
    public static func tokenProblem(_ token: String) -> DeviceRefusal? {
        if token.isEmpty { return .emptyToken }
        if token.utf8.count > Device.maxTokenBytes { return .tokenTooLong(token.utf8.count) }
        // (A NUL would also be refused by PostgreSQL's text, where a fleet records the token's holder: a commit that
        // could never be written would stop the user's partition.)
        if token.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return .controlCharacter }
        return nil
    }

    /// Keeps `device` among the user's (``Device/reporting(_:in:)``); a device that fails ``check(_:)`` is not kept.
    public func report(_ device: Device, for userID: String) {
        guard (try? Self.check(device)) != nil else { return }
        withProfile(of: userID, create: true) { p in
            p.devices = Device.reporting(device, in: p.devices)
            claim(device, for: p.userID)
        }
    }

    /// Removes the device with `token` from the user's: returns whether they had it. With `seenBy`, only when the
    /// user last reported it no later than then: a token another user reported at `seenBy` (``DeviceClaim``) has
    /// moved to them, unless this user reported it again since.
    @discardableResult
    public func removeDevice(token: String, of userID: String, seenBy: Int64? = nil) -> Bool {
        withProfile(of: userID, create: false) { p in
            guard let i = p.devices.firstIndex(where: { $0.token == token }) else { return false }
            if let seenBy, p.devices[i].lastSeen > seenBy { return false }
            p.devices.remove(at: i)
            return true
        } ?? false
    }

    /// The push tokens users reported since the last call (the latest report of each token), for the store's record
    /// of who holds each one; empty unless ``collectsDeviceClaims``.
    public func takeDeviceClaims() -> [DeviceClaim] {
        defer { deviceClaims.removeAll(keepingCapacity: true) }
        return deviceClaims.values.sorted { $0.token < $1.token }
    }

    /// Notes that `userID` (an id no other one's events resolve past) holds `device`'s token as of its last report.
    func claim(_ device: Device, for userID: String) {
        guard collectsDeviceClaims else { return }
        if let earlier = deviceClaims[device.token], earlier.at > device.lastSeen { return }
        deviceClaims[device.token] = DeviceClaim(token: device.token, userID: userID, at: device.lastSeen)
    }

    /// Calls `body` with the profile of the user `userID`'s events go to, and notes it changed.
    private func withProfile<R>(of userID: String, create: Bool, _ body: (UserProfile) -> R) -> R? {
        if let t = memoryTable {
            let id = hasMerges ? resolve(userID) : userID
            let h = t.with { $0.hash(of: id) }
            if let p = t.with({ $0.profile(for: id, hash: h) }) { return p.with(body) }
            guard create else { return nil }
            return t.with { $0.insert(newProfile(id), hash: h) }.with(body)
        }
        _ = loadedProfile(userID, create: false)
        guard let p = loadedProfile(resolve(userID), create: create) else { return nil }
        defer { stored(p) }
        return body(p)
    }
}

/// A user's report of a push token (docs/push.md): a token is its latest reporter's. The service's store keeps the
/// latest claim of each token, and a push to an earlier holder leaves that token out (and removes it from them).
public struct DeviceClaim: Sendable, Hashable {
    public var token: String
    public var userID: String
    /// When the user last reported it (the device's last seen time).
    public var at: Int64
    public init(token: String, userID: String, at: Int64) {
        self.token = token
        self.userID = userID
        self.at = at
    }
}
