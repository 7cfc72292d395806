import Foundation
import Testing

@testable import BeckonClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client's requests cancelled at every moment of their life, against a real service on loopback.
struct TransportTests {
    /// 1,500 requests, five at a time, each cancelled after 0 to 4 round trips: some before they leave, many while the answer arrives (where
    /// swift-corelibs-foundation's `URLSessionTask.cancel()` can crash the process, issue #3292), some after. Every
    /// call returns: an answer, or `.network("cancelled")` within a second of the cancel.
    @Test func aRequestCancelledAtAnyMomentReturnsAndNeverCrashes() async throws {
        let service = try LiveService()
        try await service.start()
        defer { service.stop() }
        let transport = Transport(
            configuration: .init(
                server: service.url, writeKey: LiveService.writeKey, directory: service.folder.appendingPathComponent("t"),
                tokenProvider: { LiveService.token($0) }))
        let request = URLRequest(url: transport.url("/livez"))

        // Cancels are spread over four times the median round trip (at least 1.5 ms), whatever the machine's load.
        let clock = ContinuousClock()
        var trips: [Duration] = []
        for _ in 0..<20 {
            let start = clock.now
            #expect(try await transport.send(request).status == 200)
            trips.append(clock.now - start)
        }
        let span = max(trips.sorted()[10] * 4, .microseconds(1_500))

        var answered = 0
        var cancelled = 0
        for round in 0..<300 {
            try await withThrowingTaskGroup(of: (answered: Bool, late: Duration).self) { group in
                for i in 0..<5 {
                    let delay = span * Double(round * 5 + i) / 1_500
                    group.addTask {
                        let call = Task { () async -> Result<Transport.Answer, BeckonClientError> in
                            do throws(BeckonClientError) {
                                return .success(try await transport.send(request))
                            } catch {
                                return .failure(error)
                            }
                        }
                        try await Task.sleep(for: delay)
                        call.cancel()
                        let cancelledAt = clock.now
                        switch await call.value {
                        case .success(let answer):
                            #expect(answer.status == 200)
                            return (true, .zero)
                        case .failure(.network(let message)):
                            #expect(message == "cancelled")
                            return (false, clock.now - cancelledAt)
                        case .failure(let other):
                            Issue.record("unexpected \(other)")
                            return (false, .zero)
                        }
                    }
                }
                for try await outcome in group {
                    if outcome.answered { answered += 1 } else { cancelled += 1 }
                    #expect(outcome.late < .seconds(1))
                }
            }
        }
        #expect(answered + cancelled == 1_500)
        // Both ends of the race happened: some answers came first, some cancellations.
        #expect(answered > 0)
        #expect(cancelled > 0)
        // The transport still works.
        #expect(try await transport.send(request).status == 200)
    }
}
