import BeckonCore
import Testing

/// "Did you mean" stays in proportion to the names it compares.
struct SuggestTests {
    @Test func nearNamesAreSuggested() {
        #expect(Suggest.nearest("prioirty", in: ["priority", "enabled"]) == "priority")
        #expect(Suggest.nearest("stamp", in: ["stamp_id", "user"]) == "stamp_id")
    }

    /// The edit distance costs the product of the lengths: a name of 100,000 characters against one as long would
    /// take 10^10 cells. Long names get no suggestion, and names whose lengths differ too much are not compared.
    @Test func longNamesAreNotCompared() {
        let long = String(repeating: "a", count: 100_000)
        #expect(Suggest.nearest(long, in: [long + "b"]) == nil)
        #expect(Suggest.nearest("plan", in: [long]) == nil)
    }
}
