/// Beckon's storage layer: the only place in the engine that touches raw memory.
///
/// The engine reads and writes a user's state for every event, and most of that state is small plain data. The types
/// in this folder keep that data where one read finds it — flat tables, rows of slots, sorted vectors, an
/// open-addressing table of profiles — and let the rest of the engine reach it through small typed APIs in plain
/// Swift. `Unmanaged`, unsafe pointers and unchecked exclusivity appear here and nowhere else in the engine
/// (`scripts/check-unsafe.sh`, which CI runs, lists every file that holds such a construct and fails on one outside
/// this folder and the event decoder's byte scanner).
///
/// ## Invariants
///
/// Every type here keeps these; a change to one of them keeps them too.
///
/// 1. **One owner frees.** Each buffer is allocated and freed by exactly one owner: a noncopyable struct
///    (``FlatTable``, ``SlotRow``, ``SparseRow``, ``RawVector``, ``CounterTable``) frees it in its `deinit`, a final class
///    (``ProfileTable``) in its own. Nothing is freed by hand elsewhere.
/// 2. **Plain entries.** Generic storage holds `BitwiseCopyable` entries only, so nothing with a reference count can be
///    put where it would be copied without being counted. The exceptions, ``SlotRow`` and ``SparseRow``, hold
///    `Value?` and initialize, move, replace and deinitialize each one as Swift would; a ``SlotRef`` into either is read
///    at once, before the row is next written.
/// 3. **Indices are checked where they come in.** An index that comes from outside the engine's own tables — an
///    event's name id, a slot of a row a store handed over, anything a library user passes — is checked
///    (`precondition`, in release builds too). An index the engine derives from what it built itself — a loop over a
///    table's own count, a rule or series index of the same compiled rule set, a counter's place in a rule's row, a
///    frame of its scratch stack — is read with the `inRange` accessors (``FlatTable``, ``RawVector``,
///    ``ScratchStack``, ``CounterTable/add(_:at:)``), which check in debug builds only: the tests run every such read
///    checked, and release builds do not pay a check per read on the hottest path.
/// 4. **Borrowed references live inside their lender's life.** A ``Borrowed`` reference counts nothing, so whoever made
///    it must keep the object alive while it is read: the rule set keeps its rules, their action origins and their
///    predicates; the profile table keeps its profiles; the engine keeps its store; a caller keeps the events of a
///    batch for the call. Debug builds check each read against a ledger of lent objects.
/// 5. **One thread, no overlapping access.** Nothing here is thread-safe: an engine and everything it owns is used
///    by one thread at a time (the engine is not `Sendable`). Values that skip Swift's run-time exclusivity checks
///    (``ExclusiveCell`` and the profile's hot fields) are never accessed while another access to them is under way;
///    debug builds keep the checks on, so the test suite would trap on an overlap.
/// 6. **No private layouts.** Nothing here depends on how the standard library lays out its types (a `String`'s
///    bits, an object's size): strings are read through public API, and prefetch hints fetch whole cache lines from
///    an object's start without claiming to know its size.
///
/// Immutable tables (``FlatTable``) are `Sendable`: they are written only while they are built.
enum Storage {
}
