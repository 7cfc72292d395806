import BeckonCommands
import Foundation

/// The target this process fuzzes, named by BECKON_FUZZ_TARGET (an environment variable, so that the workers
/// libFuzzer starts for -jobs inherit it): one of FuzzEntry.targets.
let target: @Sendable (UnsafeBufferPointer<UInt8>) -> Void = {
    // BECKON_FUZZ_WRITE_STATE_SEEDS=DIR writes the state target's seeds there (scripts/fuzz.sh) and exits.
    if let dir = ProcessInfo.processInfo.environment["BECKON_FUZZ_WRITE_STATE_SEEDS"] {
        for (i, seed) in FuzzEntry.stateSeeds().enumerated() {
            FileManager.default.createFile(atPath: "\(dir)/state-\(i)", contents: Data(seed))
        }
        exit(0)
    }
    let name = ProcessInfo.processInfo.environment["BECKON_FUZZ_TARGET"] ?? ""
    if name == "http" {
        _ = HTTPTarget.port
        return HTTPTarget.run
    }
    guard let t = FuzzEntry.targets.first(where: { $0.name == name }) else {
        let names = (FuzzEntry.targets.map(\.name) + ["http"]).joined(separator: ", ")
        FileHandle.standardError.write(Data("set BECKON_FUZZ_TARGET to one of: \(names)\n".utf8))
        exit(64)
    }
    return t.run
}()

/// One input, run through the chosen target (libFuzzer calls it for every input it tries).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    target(UnsafeBufferPointer(start: data, count: size))
    return 0
}

/// The program's entry: SwiftPM names an executable's entry point after its module, so libFuzzer's own `main` is
/// not the one linked; this hands the arguments to libFuzzer's driver.
@_cdecl("beckon_fuzz_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    _ = target
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzOne)
}

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32
