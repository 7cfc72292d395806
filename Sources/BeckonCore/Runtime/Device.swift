/// A device a user gets push notifications on, as the app registered it (docs/push.md): its push token, platform,
/// app, when it was first and last reported, and whether the user allows push on it.
public struct Device: Sendable, Hashable {
    public enum Platform: String, Sendable, CaseIterable {
        /// Apple's platforms, reached through APNs.
        case ios
        /// Android, reached through FCM.
        case android
    }

    /// The provider's push token, kept exactly as sent (APNs: 64 hex digits; FCM: about 160 characters).
    public var token: String
    public var platform: Platform
    /// The app's bundle id or package name, if the app said it.
    public var app: String?
    public var firstSeen: Int64
    public var lastSeen: Int64
    /// Whether the user allows push on it (the OS permission the app reports).
    public var pushEnabled: Bool

    public init(token: String, platform: Platform, app: String?, firstSeen: Int64, lastSeen: Int64, pushEnabled: Bool) {
        self.token = token
        self.platform = platform
        self.app = app
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.pushEnabled = pushEnabled
    }

    /// Devices a user keeps at most: a new one beyond it replaces the one reported least recently.
    public static let maxPerUser = 10
    /// The longest token kept, in UTF-8 bytes.
    public static let maxTokenBytes = 512

    /// `devices` with `device` reported: a token already there is updated (first seen and a known app kept), a new one
    /// added; beyond
    /// ``maxPerUser``, the one reported least recently goes.
    public static func reporting(_ device: Device, in devices: [Device]) -> [Device] {
        var out = devices
        if let i = out.firstIndex(where: { $0.token == device.token }) {
            var d = device
            // (A report that does not say the app keeps the one known.)
            d.app = device.app ?? out[i].app
            d.firstSeen = min(out[i].firstSeen, device.firstSeen)
            d.lastSeen = max(out[i].lastSeen, device.lastSeen)
            out[i] = d
            return out
        }
        out.append(device)
        if out.count > maxPerUser, let oldest = out.indices.min(by: { out[$0].lastSeen < out[$1].lastSeen }) {
            out.remove(at: oldest)
        }
        return out
    }

    /// Both users' devices (an identity merge): a token both have keeps the one reported later.
    public static func merging(_ a: [Device], _ b: [Device]) -> [Device] {
        var out = a
        for d in b.sorted(by: { $0.lastSeen < $1.lastSeen }) {
            if let i = out.firstIndex(where: { $0.token == d.token }) {
                if d.lastSeen > out[i].lastSeen { out[i] = reporting(d, in: [out[i]])[0] }
            } else {
                out = reporting(d, in: out)
            }
        }
        return out
    }
}
