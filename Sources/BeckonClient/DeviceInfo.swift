import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `context` of every event: the app, the device (with its push token), the OS, locale and time zone, and this
/// library, in Segment's shapes.
struct DeviceInfo: Sendable {
    var model: String
    var manufacturer: String
    var type: String
    var osName: String
    var osVersion: String

    static var current: DeviceInfo {
        let v = ProcessInfo.processInfo.operatingSystemVersion
        var system = utsname()
        uname(&system)
        // (A fixed C array is a tuple in Swift: read it through reflection, with no raw memory.)
        let bytes = Mirror(reflecting: system.machine).children.compactMap { $0.value as? CChar }
        let machine = String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #if os(iOS)
            let (os, type) = ("iOS", "ios")
        #elseif os(macOS)
            let (os, type) = ("macOS", "macos")
        #elseif os(tvOS)
            let (os, type) = ("tvOS", "tvos")
        #elseif os(watchOS)
            let (os, type) = ("watchOS", "watchos")
        #elseif os(visionOS)
            let (os, type) = ("visionOS", "visionos")
        #else
            let (os, type) = ("Linux", "linux")
        #endif
        #if canImport(Darwin)
            let manufacturer = "Apple"
        #else
            let manufacturer = "unknown"
        #endif
        return DeviceInfo(
            model: machine, manufacturer: manufacturer, type: type, osName: os,
            osVersion: "\(v.majorVersion).\(v.minorVersion).\(v.patchVersion)")
    }

    func context(app: BeckonClient.AppInfo, identity: BeckonClient.Identity) -> JSONValue {
        var appInfo: [String: JSONValue] = [:]
        if let n = app.name { appInfo["name"] = .string(n) }
        if let v = app.version { appInfo["version"] = .string(v) }
        if let b = app.build { appInfo["build"] = .string(b) }
        if let ns = app.namespace { appInfo["namespace"] = .string(ns) }
        var device: [String: JSONValue] = [
            "id": .string(identity.deviceId), "model": .string(model), "manufacturer": .string(manufacturer),
            "type": .string(type),
        ]
        if let token = identity.pushToken {
            device["token"] = .string(token)
            device["pushEnabled"] = .bool(identity.pushEnabled ?? true)
        }
        return .object([
            "app": .object(appInfo),
            "device": .object(device),
            "os": .object(["name": .string(osName), "version": .string(osVersion)]),
            "locale": .string(Locale.current.identifier.replacingOccurrences(of: "_", with: "-")),
            "timezone": .string(TimeZone.current.identifier),
            "library": .object(["name": .string("beckon-client-swift"), "version": .string(BeckonClient.version)]),
        ])
    }
}

extension BeckonClient {
    /// This library's version, in `context.library`.
    public static let version = "0.1.0"
}
