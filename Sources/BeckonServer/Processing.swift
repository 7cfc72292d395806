import BeckonCore
import Prometheus

/// What one round of inputs did to an engine: each event processed and counted by outcome, the actions fired (a
/// delayed one marked late when it fired more than ``Processor/lateAfterMs`` after its due time), the due times of
/// the timers that came due. The one place "decode, process, count, collect" happens, for the single service's
/// rounds and replays and a fleet partition's batches.
package struct Processing {
    /// Events by what became of them (`beckon_ingest_events_total`).
    package struct Tally: Sendable {
        package var accepted = 0
        package var duplicates = 0
        package var refused = 0
        /// Of ``accepted``, those that do not fit the tracking plans (``BoundEvent/offPlan``).
        package var offPlan = 0

        /// Adds the counts to `beckon_ingest_events_total`.
        package func count(in metrics: ServiceMetrics) {
            metrics.ingest(.accepted).increment(by: Int64(accepted))
            metrics.ingest(.duplicate).increment(by: Int64(duplicates))
            metrics.ingest(.refused).increment(by: Int64(refused))
            if offPlan > 0 { metrics.ingest(.offPlan).increment(by: Int64(offPlan)) }
        }
    }
    package var tally = Tally()
    /// Logged events that no longer decode (never expected: whether a line decodes does not depend on the rules).
    package var undecodable = 0
    package var fired: [(FiredAction, late: Bool)] = []
    /// Due times of the delayed actions that came due, for the timer lag.
    package var dues: [Int64] = []
    private var out = EventOutcome()

    package init() {}

    /// Processes an event.
    @inline(__always)
    package mutating func process(_ e: BoundEvent, on engine: Engine) {
        engine.process(e, into: &out)
        switch out.status {
        case .processed:
            tally.accepted += 1
            if e.isOffPlan { tally.offPlan += 1 }
        case .duplicate: tally.duplicates += 1
        case .refused: tally.refused += 1
        }
        for a in out.actions { fired.append((a, false)) }
        dues += out.dueTimes
    }

    /// Does what a logged input did the first time (an event decoded under `decoder`, an inbox read, the clock's
    /// tick). A fleet's forgets, reloads and merges across partitions are done by its runner; here they do nothing.
    package mutating func apply(_ input: InputLog.Input, to engine: Engine, decoder: SegmentDecoder) {
        switch input {
        case .event(let json, let arrival):
            guard let e = try? decoder.decode(json, arrival: arrival) else {
                undecodable += 1
                return
            }
            process(e, on: engine)
        case .markRead(let user, let item, let time):
            _ = engine.markRead(userID: user, itemID: item, at: time)
        case .tick(let time):
            let due = engine.advance(to: time)
            dues += due.dueTimes
            for a in due.actions { fired.append((a, false)) }
        case .device(let user, let d):
            engine.report(d, for: user)
        case .deviceRemoved(let user, let token, let seenBy):
            engine.removeDevice(token: token, of: user, seenBy: seenBy)
        case .forget, .rules, .handOver, .takeOver, .merged:
            break
        }
    }

    /// Moves the engine's clock to `now` on the wall clock: what came due fires.
    @discardableResult
    package mutating func advance(_ engine: Engine, to now: Int64) -> EventOutcome {
        let due = engine.advance(to: now)
        dues += due.dueTimes
        for a in due.actions { fired.append((a, now - a.time > Processor.lateAfterMs)) }
        return due
    }

    /// Forgets the actions and due times collected (a replay keeps none: they were stored the first time).
    package mutating func dropFired() {
        fired.removeAll(keepingCapacity: true)
        dues.removeAll(keepingCapacity: true)
    }

    /// Adds the counts to `beckon_ingest_events_total` (with the events that did not decode again) and the fired
    /// actions to `beckon_actions_total`.
    package func count(in metrics: ServiceMetrics) {
        if undecodable > 0 { metrics.ingest(.undecodable).increment(by: Int64(undecodable)) }
        tally.count(in: metrics)
        for (a, _) in fired { metrics.action(a).increment() }
    }
}
