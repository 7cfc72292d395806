/// Beckon's version: `beckon --version`, the `beckon_build_info` metric, and the contract's `info.version`
/// (`/openapi.json`, checked against it by a test).
public enum BeckonRelease {
    public static let version = "0.18.0"
}
