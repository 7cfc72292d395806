import BeckonCore

/// Counts ``AudienceCounter``s over a store's saved states, a page of ``AudienceCounter/pageSize`` at a time, each
/// page judged on the blocking pool, so memory does not grow with the users counted: what `GET /admin/audience`, the
/// console's overview and its playground answer, over either store.
enum AudienceCount {
    /// Saved states by user id, after a user id (`nil`: from the first), at most `limit` of them.
    typealias Pages = @Sendable (_ after: String?, _ limit: Int) async throws -> [(userID: String, bytes: [UInt8])]

    /// `counters` with every stored state counted: one pass over the states, whatever the number of rules.
    static func count(_ counters: [AudienceCounter], pages: Pages) async throws -> [AudienceCounter] {
        var counters = counters
        var after: String?
        while !counters.contains(where: \.stopped) {
            let page = try await pages(after, AudienceCounter.pageSize)
            guard let last = page.last else { return counters }
            let before = counters
            counters = try await Blocking.run {
                before.map { c in
                    var c = c
                    c.add(page)
                    return c
                }
            }
            after = last.userID
        }
        return counters
    }
}
