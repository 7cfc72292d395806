/// A value that one thread reads and changes in place, without Swift's run-time exclusivity checks in release builds.
///
/// A class's `var` is checked at run time on every access (a call that records the access and looks for a conflicting
/// one), which on the engine's per-event path costs more than the work. The engine and its evaluation scope keep their
/// hot state in a cell instead and forward to it through computed properties. The invariant (folder invariant 5): no
/// access to `value` starts while another is under way. Debug builds keep the checks, so an overlap traps in the tests.
final class ExclusiveCell<Value: ~Copyable> {
    #if DEBUG
        var value: Value
    #else
        @exclusivity(unchecked) var value: Value
    #endif

    init(_ value: consuming Value) { self.value = value }
}
