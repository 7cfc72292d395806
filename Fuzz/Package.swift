// swift-tools-version:6.1
import PackageDescription

// The libFuzzer harness for Beckon's front doors (FuzzEntry in BeckonCommands, and `beckon serve` itself for raw
// HTTP), in a package of its own so that the project's builds are untouched. Built by scripts/fuzz.sh with
// -sanitize=fuzzer,address into Fuzz/.build; one program, the target chosen by BECKON_FUZZ_TARGET.
let package = Package(
    name: "BeckonFuzz",
    dependencies: [.package(name: "Beckon", path: "..")],
    targets: [
        .executableTarget(
            name: "beckon-fuzz",
            dependencies: [
                .product(name: "BeckonCommands", package: "Beckon"), .product(name: "BeckonServer", package: "Beckon"),
            ],
            path: "Sources/beckon-fuzz",
            swiftSettings: [.unsafeFlags(["-parse-as-library"])])
    ]
)
