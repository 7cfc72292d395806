// A command-line app over BeckonClient: what BeckonClientTests start, and kill -9 in the middle of a batch.
//
//   beckon-client-probe send  SERVER KEY DIR TOKEN USER FIRST COUNT   tracks `Probe` events n = FIRST..<FIRST+COUNT,
//                                                                      printing "queued N" once each is on disk, then
//                                                                      flushes until the queue is empty ("done")
//   beckon-client-probe flush SERVER KEY DIR TOKEN USER               flushes what an earlier run left ("done")
//   beckon-client-probe take  SERVER KEY DIR TOKEN USER COUNT         prints "action ID N" for COUNT actions
import BeckonClient
import Foundation

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let args = CommandLine.arguments
guard args.count >= 7, let server = URL(string: args[2]) else {
    FileHandle.standardError.write(Data("usage: beckon-client-probe send|flush|take SERVER KEY DIR TOKEN USER ...\n".utf8))
    exit(64)
}
let token = args[5]
var configuration = BeckonClient.Configuration(
    server: server, writeKey: args[3], directory: URL(fileURLWithPath: args[4])
) { _ in token }
configuration.flushAt = 10
configuration.flushInterval = .milliseconds(50)
configuration.retry = .init(first: .milliseconds(20), max: .milliseconds(200))
configuration.pollWait = .seconds(2)
let client = try BeckonClient(configuration)
if client.userId != args[6] { client.identify(userId: args[6]) }

switch args[1] {
case "send":
    let first = Int(args[7])!
    for n in first..<first + Int(args[8])! {
        guard client.track("Probe", properties: ["n": .int(Int64(n))]) != nil else { exit(1) }
        say("queued \(n)")
    }
    while await !client.flush() { try await Task.sleep(for: .milliseconds(20)) }
    say("done")
case "flush":
    while await !client.flush() { try await Task.sleep(for: .milliseconds(20)) }
    say("done")
case "take":
    var left = Int(args[7])!
    for try await action in client.actions() {
        if case .emit(_, let payload) = action.kind, let n = payload["n"]?.intValue {
            say("action \(action.id) \(n)")
        } else {
            say("action \(action.id) -")
        }
        left -= 1
        if left == 0 { break }
    }
    say("done")
default:
    exit(64)
}
