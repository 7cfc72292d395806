import BeckonServer
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The `http` target: each input is the raw bytes of a client's side of one connection (request heads and bodies,
/// any number, any garbage), sent to a `beckon serve` running in this process on loopback — through NIO's HTTP parser,
/// the connection guard, the router, authentication, decompression and ingest. The write side is then shut, and the
/// answer read until the service closes (at most a second). A crash or a sanitizer report anywhere in the service is
/// the fuzzer's find.
enum HTTPTarget {
    static let port: Int = {
        let dir = NSTemporaryDirectory() + "beckon-fuzz-http-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let rules = ProcessInfo.processInfo.environment["BECKON_FUZZ_RULES"] ?? "campaigns/firefox"
        guard let port = BeckonService.startForFuzzing(paths: [rules], directory: dir) else { exit(70) }
        return port
    }()

    static func run(_ bytes: UnsafeBufferPointer<UInt8>) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return }
        var sent = 0
        while sent < bytes.count {
            let n = send(fd, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            if n <= 0 { break }
            sent += n
        }
        shutdown(fd, Int32(SHUT_WR))
        var buffer = [UInt8](repeating: 0, count: 65536)
        while buffer.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, 0) }) > 0 {}
    }
}
