#if DEBUG && canImport(Glibc)
    import Glibc
#endif

/// A reference to an object that someone else keeps alive, read without counting a reference.
///
/// Handing a class reference around counts it (an atomic add, and a subtract when it goes), which on the engine's hot
/// path costs more than the work it guards. Where the owner is known to outlive every read — the rule set its rules,
/// the profile table its profiles — the engine holds a `Borrowed` instead. It is plain data (`BitwiseCopyable`), so
/// it can sit in a ``FlatTable``.
///
/// The owner lends an object with ``init(lending:)`` and takes it back with ``reclaim(_:)`` before it lets the object
/// go. In debug builds every read checks that the object is still lent (a ledger counts the loans of each object), so a
/// borrowed reference read after its owner let go traps in the tests instead of reading freed memory.
struct Borrowed<Object: AnyObject>: BitwiseCopyable {
    private let reference: Unmanaged<Object>

    /// Lends `object`: the caller keeps it alive until it calls ``reclaim(_:)``.
    @inline(__always) init(lending object: Object) {
        reference = .passUnretained(object)
        #if DEBUG
            Ledger.lend(Int(bitPattern: reference.toOpaque()))
        #endif
    }

    /// Ends a loan made with ``init(lending:)`` (the owner is about to let the object go).
    @inline(__always) static func reclaim(_ object: Object) {
        #if DEBUG
            Ledger.reclaim(Int(bitPattern: Unmanaged.passUnretained(object).toOpaque()))
        #endif
    }

    /// A reference already lent (the objects of a ``BorrowedList``).
    @inline(__always) fileprivate init(lent reference: Unmanaged<Object>) { self.reference = reference }

    /// Ends a loan made with ``init(lending:)``, by this reference (for a holder that lent an object for a while).
    @inline(__always) func endLoan() {
        #if DEBUG
            Ledger.reclaim(Int(bitPattern: reference.toOpaque()))
        #endif
    }

    /// Runs `body` with the object, counting no reference for the length of the call.
    @inline(__always) func with<R>(_ body: (Object) throws -> R) rethrows -> R {
        check()
        return try reference._withUnsafeGuaranteedRef(body)
    }

    /// The object (counted if the caller keeps it beyond the expression that reads it).
    @inline(__always) var object: Object {
        check()
        return reference.takeUnretainedValue()
    }

    /// Whether two borrowed references name the same object.
    @inline(__always) func refers(to other: Object) -> Bool { reference.toOpaque() == Unmanaged.passUnretained(other).toOpaque() }

    /// Asks the CPU for the first `bytes` bytes of the object, at most four cache lines (a hint: it reads nothing that
    /// could change a result).
    @inline(__always) func prefetch(bytes: Int) { Prefetch.range(reference.toOpaque(), bytes: bytes, maxLines: 4) }

    @inline(__always) private func check() {
        #if DEBUG
            // (By address: making a reference to a freed object would count it.)
            precondition(
                Ledger.isLent(Int(bitPattern: reference.toOpaque())), "a borrowed object was read after its owner let it go")
        #endif
    }
}

#if DEBUG
    /// Debug builds: how many loans each object (by address) has outstanding, shared by every thread (a loan may be
    /// read on another thread: an action's origin). Behind a pthread mutex, not Synchronization's `Mutex`, whose lock
    /// ThreadSanitizer does not see on Linux: it took every test running an engine beside another for a race
    /// (`scripts/sanitize.sh thread`).
    private enum Ledger {
        nonisolated(unsafe) private static var loans: [Int: Int] = [:]
        nonisolated(unsafe) private static let lock: UnsafeMutablePointer<pthread_mutex_t> = {
            let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
            pthread_mutex_init(lock, nil)
            return lock
        }()

        private static func locked<R>(_ body: (inout [Int: Int]) -> R) -> R {
            pthread_mutex_lock(lock)
            defer { pthread_mutex_unlock(lock) }
            return body(&loans)
        }

        static func lend(_ id: Int) { locked { $0[id, default: 0] += 1 } }

        static func reclaim(_ id: Int) {
            locked {
                guard let n = $0[id] else { return }
                $0[id] = n > 1 ? n - 1 : nil
            }
        }

        static func isLent(_ id: Int) -> Bool { locked { $0[id] != nil } }
    }
#endif

/// The objects of a span, read as borrowed references for the length of a call: the span's owner keeps them alive for
/// it (``withBorrowedList(_:_:)``), so reading one counts no reference. A class reference is one pointer, as an
/// `Unmanaged` one is (Swift's stable ABI), so the span's memory is read as a list of them in place.
struct BorrowedList<Object: AnyObject> {
    private let base: UnsafePointer<Unmanaged<Object>>?
    let count: Int

    /// Runs `body` with `span`'s objects as a list of borrowed references, valid only during the call.
    @inline(__always) static func withBorrowedList<R>(_ span: Span<Object>, _ body: (BorrowedList) -> R) -> R {
        span.withUnsafeBufferPointer { buffer in
            let list = BorrowedList(
                base: UnsafeRawPointer(buffer.baseAddress).map { $0.assumingMemoryBound(to: Unmanaged<Object>.self) },
                count: buffer.count)
            #if DEBUG
                for i in 0..<list.count { _ = Borrowed(lending: list.base![i].takeUnretainedValue()) }
                defer { for i in 0..<list.count { Borrowed.reclaim(list.base![i].takeUnretainedValue()) } }
            #endif
            return body(list)
        }
    }

    private init(base: UnsafePointer<Unmanaged<Object>>?, count: Int) {
        self.base = base
        self.count = count
    }

    /// Object `i` (checked: `0 <= i < count`).
    @inline(__always) subscript(_ i: Int) -> Borrowed<Object> {
        precondition(UInt(bitPattern: i) < UInt(count), "list index out of range")
        return Borrowed(lent: base.unsafelyUnwrapped[i])
    }
}

/// A borrowed reference to an immutable, `Sendable` object (a rule, a predicate) may cross threads with its lender.
extension Borrowed: @unchecked Sendable where Object: Sendable {}
