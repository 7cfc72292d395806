#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An exclusive lock on a database file for the life of the process, so that two services never run on one SQLite
/// file, and commands that must not run beside a service (`beckon user forget`) can tell. The lock is an advisory
/// `flock` on the database file itself (SQLite's own locks are `fcntl` locks, which `flock` does not touch): a
/// symbolic link, another spelling of the path or a deleted file beside it reach the same file and the same lock.
/// The operating system releases it when the process ends, however it ends.
public final class DatabaseLock: Sendable {
    private let fd: Int32

    public struct Held: Error, CustomStringConvertible {
        public var path: String
        public var description: String { "another process (a running beckon serve?) holds the database \(path)" }
    }

    public struct CannotOpen: Error, CustomStringConvertible {
        public var path: String
        public var errno: Int32
        public var description: String { "cannot open the database file \(path) (errno \(errno))" }
    }

    /// Takes the lock of the database at `path`, creating the (empty) file if there is none yet.
    public init(database path: String) throws {
        let fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw CannotOpen(path: path, errno: errno) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw Held(path: path)
        }
        self.fd = fd
    }

    /// Lets the lock go and leaves the descriptor open: closing any descriptor of the database file would drop the
    /// `fcntl` locks SQLite holds on it in this process (POSIX's rule), should a connection still be open. The
    /// descriptor goes with the process.
    deinit { flock(fd, LOCK_UN) }
}
