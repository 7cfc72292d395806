/// Users' push devices (docs/push.md): registered by the app, removed when the provider says a token is no longer
/// valid. An id merged into another user is that user's: its devices are theirs.
extension Engine {
    /// Why a device was not kept.
    public enum DeviceRefusal: Error, Equatable, CustomStringConvertible {
        case emptyToken
        case tokenTooLong(Int)
        public var description: String {
            switch self {
            case .emptyToken: "the token is empty"
            case .tokenTooLong(let n): "the token is \(n) bytes long; the limit is \(Device.maxTokenBytes)"
            }
        }
    }

    /// Checks a device before it is stored anywhere (the service answers 400 with this).
    public static func check(_ device: Device) throws(DeviceRefusal) {
        if device.token.isEmpty { throw .emptyToken }
        if device.token.utf8.count > Device.maxTokenBytes { throw .tokenTooLong(device.token.utf8.count) }
    }

    /// Keeps `device` among the user's (``Device/reporting(_:in:)``); a device that fails ``check(_:)`` is not kept.
    public func report(_ device: Device, for userID: String) {
        guard (try? Self.check(device)) != nil else { return }
        withProfile(of: userID, create: true) { $0.devices = Device.reporting(device, in: $0.devices) }
    }

    /// Removes the device with `token` from the user's: returns whether they had it.
    @discardableResult
    public func removeDevice(token: String, of userID: String) -> Bool {
        withProfile(of: userID, create: false) { p in
            guard let i = p.devices.firstIndex(where: { $0.token == token }) else { return false }
            p.devices.remove(at: i)
            return true
        } ?? false
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
