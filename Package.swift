// swift-tools-version:6.1
import PackageDescription

// One set of strict settings for every target, as swift-log does.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Beckon",
    platforms: [.macOS(.v15), .iOS(.v17)],
    products: [
        // What a service links: the engine and the YAML loader, no CLI.
        .library(name: "Beckon", targets: ["BeckonCore", "BeckonYAML"]),
        // Durable state for a service: users' states in an embedded SQLite database.
        .library(name: "BeckonStore", targets: ["BeckonStore"]),
        // `beckon serve` as a library: HTTP ingest, pull delivery, a live clock, over BeckonStore.
        .library(name: "BeckonServer", targets: ["BeckonServer"]),
        // The fleet's log and leases in PostgreSQL.
        .library(name: "BeckonPostgres", targets: ["BeckonPostgres"]),
        // `beckon serve --postgres` as a library: BeckonServer's HTTP API over the fleet's store.
        .library(name: "BeckonFleet", targets: ["BeckonFleet"]),
        // What the commands and the console share, without command-line parsing: validate, dry-run, explain, test,
        // report, the playground, the reference.
        .library(name: "BeckonTools", targets: ["BeckonTools"]),
        // The commands as a library: for the fuzz harnesses in Fuzz/ (their own package), not for services.
        .library(name: "BeckonCommands", targets: ["BeckonCommands"]),
        // What an app links (docs/client.md): events queued on disk and sent in batches, the user's actions as an
        // AsyncSequence, the inbox, push registration. Foundation and swift-log only: an iOS or macOS app links no NIO.
        .library(name: "BeckonClient", targets: ["BeckonClient"]),
        .executable(name: "beckon", targets: ["beckon"]),
        // The command line with the malloc-counting allocator linked in, for `beckon-bench bench` (scripts/bench.sh).
        .executable(name: "beckon-bench", targets: ["beckon-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
    ],
    targets: [
        // CPU hints the engine's hot loop uses (a prefetch), as static inline C functions Swift inlines.
        .target(name: "CBeckon"),
        // Model, expressions, compiler, evaluator, state, diagnostics. No file or network I/O, no wall clock.
        .target(
            name: "BeckonCore",
            dependencies: [
                "CBeckon",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        // YAML text -> BeckonCore's source tree, keeping every line and column. It reads libyaml's event stream
        // through Yams' CYaml module (built with the Yams product; see Sources/BeckonYAML/YAMLEvents.swift).
        .target(name: "BeckonYAML", dependencies: ["BeckonCore", .product(name: "Yams", package: "Yams")]),
        // The runners behind the commands and the console's pages (validate, dry-run, explain, test, report, the
        // playground, the reference, CEL conformance), with no command-line dependency.
        .target(name: "BeckonTools", dependencies: ["BeckonCore", "BeckonYAML"]),
        // Peak RSS and heap in use for `beckon bench`, and a weak "no allocation count" BeckonAllocCount overrides.
        .target(name: "BeckonMemory"),
        // Counts malloc calls (a C shim that replaces glibc's malloc in the whole process): linked by beckon-bench only.
        .target(name: "BeckonAllocCount"),
        // The command line (ArgumentParser) over BeckonTools, and `beckon bench`; a library so tests run it in-process.
        .target(
            name: "BeckonCommands",
            dependencies: [
                "BeckonCore", "BeckonYAML", "BeckonTools", "BeckonMemory",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Durable state backends: SQLite through GRDB (write-ahead log, one transaction a batch).
        .target(name: "BeckonStore", dependencies: ["BeckonCore", .product(name: "GRDB", package: "GRDB.swift")]),
        // The service: Segment-compatible ingest and pull delivery over HTTP (Hummingbird), one processing thread
        // with group commit into BeckonStore's SQLite, a live clock for delayed actions; the console's pages
        // (Mustache templates over the commands' explain, dry-run and report).
        .target(
            name: "BeckonServer",
            dependencies: [
                "BeckonCore", "BeckonYAML", "BeckonStore", "BeckonTools", "BeckonMemory",
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            // The contract of the HTTP API, served at `GET /openapi.json` (API.swift); in the binary, not beside it.
            resources: [.embedInCode("API/openapi.json")]
        ),
        // A fleet process (docs/fleet.md): BeckonServer's API, processing and delivery over BeckonPostgres' log.
        .target(
            name: "BeckonFleet",
            dependencies: [
                "BeckonCore", "BeckonYAML", "BeckonStore", "BeckonServer", "BeckonPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // The fleet's shared log and partition leases in PostgreSQL (docs/fleet.md).
        .target(
            name: "BeckonPostgres",
            dependencies: [
                "CBeckonZlib", "CBeckonZstd", .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The system's zlib (no package): BeckonClient's gzip bodies, the fleet log's bodies written before zstd.
        .systemLibrary(name: "CBeckonZlib"),
        // The system's zstd (Debian's libzstd-dev, scripts/install-headers.sh): the fleet log's bodies.
        .systemLibrary(name: "CBeckonZstd"),
        .target(name: "BeckonClient", dependencies: ["CBeckonZlib", .product(name: "Logging", package: "swift-log")]),
        // A command-line app over BeckonClient: what BeckonClientTests start and kill -9 mid-batch.
        .executableTarget(name: "beckon-client-probe", dependencies: ["BeckonClient"], path: "Tests/BeckonClientProbe"),
        .executableTarget(
            name: "beckon",
            dependencies: [
                "BeckonCommands", "BeckonServer", "BeckonFleet", "BeckonStore", "BeckonCore", "BeckonPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "beckon-bench",
            dependencies: [
                "BeckonCommands", "BeckonAllocCount", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "BeckonCoreTests",
            dependencies: [
                "BeckonCore", "BeckonYAML", "BeckonStore", .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(name: "BeckonYAMLTests", dependencies: ["BeckonCore", "BeckonYAML"]),
        .testTarget(
            name: "BeckonServerTests",
            dependencies: [
                "BeckonServer", "BeckonCore", "BeckonStore", "BeckonYAML",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
        .testTarget(
            name: "BeckonPostgresTests",
            dependencies: ["BeckonPostgres", .product(name: "PostgresNIO", package: "postgres-nio")]
        ),
        // Against a real `beckon serve` (and beckon-client-probe) started from the build directory: `swift build` first.
        .testTarget(
            name: "BeckonClientTests",
            dependencies: ["BeckonClient", .product(name: "Crypto", package: "swift-crypto")],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "BeckonCommandsTests",
            dependencies: ["BeckonCommands", "BeckonTools", "BeckonCore", "BeckonYAML"],
            exclude: ["Fixtures", "Snapshots"]
        ),
    ]
)

let cTargets = ["BeckonAllocCount", "BeckonMemory", "CBeckon", "CBeckonZlib", "CBeckonZstd"]
for target in package.targets where !cTargets.contains(target.name) {
    target.swiftSettings = (target.swiftSettings ?? []) + strict
}
