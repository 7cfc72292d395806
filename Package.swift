// swift-tools-version:6.1
import PackageDescription

// One set of strict settings for every target, as swift-log does.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Beckon",
    products: [
        // What a service links: the engine and the YAML loader, no CLI.
        .library(name: "Beckon", targets: ["BeckonCore", "BeckonYAML"]),
        // Durable state for a service: users' states in an embedded SQLite database.
        .library(name: "BeckonStore", targets: ["BeckonStore"]),
        // The commands as a library: for the fuzz harnesses in Fuzz/ (their own package), not for services.
        .library(name: "BeckonCommands", targets: ["BeckonCommands"]),
        .executable(name: "beckon", targets: ["beckon"]),
    ],
    dependencies: [
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
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
        // The commands behind the CLI, as a library so they can be tested in-process.
        // Counts malloc calls for `beckon bench` (a C shim over glibc's allocator).
        .target(name: "BeckonAllocCount"),
        .target(
            name: "BeckonCommands",
            dependencies: [
                "BeckonCore", "BeckonYAML", "BeckonAllocCount",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Durable state backends: SQLite through GRDB (write-ahead log, one transaction a batch).
        .target(name: "BeckonStore", dependencies: ["BeckonCore", .product(name: "GRDB", package: "GRDB.swift")]),
        .executableTarget(name: "beckon", dependencies: ["BeckonCommands"]),
        .testTarget(
            name: "BeckonCoreTests",
            dependencies: [
                "BeckonCore", "BeckonYAML", "BeckonStore", .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(name: "BeckonYAMLTests", dependencies: ["BeckonCore", "BeckonYAML"]),
        .testTarget(
            name: "BeckonCommandsTests",
            dependencies: ["BeckonCommands", "BeckonCore", "BeckonYAML"],
            exclude: ["Fixtures", "Snapshots"]
        ),
    ]
)

for target in package.targets where target.name != "BeckonAllocCount" && target.name != "CBeckon" {
    target.swiftSettings = (target.swiftSettings ?? []) + strict
}
