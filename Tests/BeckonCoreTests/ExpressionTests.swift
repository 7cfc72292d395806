import BeckonCore
import Testing

/// Same value and same kind (1 and 1.0 differ), NaN equal to NaN.
func same(_ a: Value, _ b: Value) -> Bool {
    switch (a, b) {
    case (.double(let x), .double(let y)): return x == y || (x.isNaN && y.isNaN)
    case (.list(let x), .list(let y)): return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
    default: return a.kindName == b.kindName && Value.equal(a, b)
    }
}

struct ExpressionTests {
    /// Every operator, with a case that holds and one that does not.
    @Test(arguments: [
        ("1 + 2", Value.int(3)), ("1.5 + 1.0", .double(2.5)), ("'a' + 'b'", .string("ab")), ("[1] + [2]", .list([1, 2])),
        ("5 - 7", .int(-2)), ("3u - 1u", .uint(2)), ("6 * 7", .int(42)), ("7 / 2", .int(3)), ("7.0 / 2.0", .double(3.5)),
        ("7 % 3", .int(1)), ("-(3)", .int(-3)), ("--3", .int(3)),
        ("1 < 2", .bool(true)), ("2 < 1", .bool(false)), ("2 <= 2", .bool(true)), ("3 <= 2", .bool(false)),
        ("3 > 2", .bool(true)), ("2 > 3", .bool(false)), ("2 >= 2", .bool(true)), ("1 >= 2", .bool(false)),
        ("'a' == 'a'", .bool(true)), ("'a' == 'b'", .bool(false)), ("1 != 2", .bool(true)), ("1 != 1", .bool(false)),
        ("1 == 1.0", .bool(true)), ("2 < 2.5", .bool(true)), ("'b' > 'a'", .bool(true)),
        ("'de' in ['en_US', 'de']", .bool(true)), ("'fr' in ['en_US', 'de']", .bool(false)),
        ("'k' in {'k': 1}", .bool(true)), ("'j' in {'k': 1}", .bool(false)),
        ("true && true", .bool(true)), ("true && false", .bool(false)), ("false || true", .bool(true)),
        ("false || false", .bool(false)), ("!false", .bool(true)), ("!true", .bool(false)),
        ("1 < 2 ? 'yes' : 'no'", .string("yes")), ("1 > 2 ? 'yes' : 'no'", .string("no")),
        ("[10, 20][1]", .int(20)), ("{'a': 1}['a']", .int(1)), ("{'a': {'b': 2}}.a.b", .int(2)),
        ("{'key with spaces': 3}['key with spaces']", .int(3)),
        ("has({'a': 1}.a)", .bool(true)), ("has({'a': 1}.b)", .bool(false)),
        ("null == null", .bool(true)), ("'x' == null", .bool(false)),
    ])
    func operators(_ text: String, _ expected: Value) {
        let v = eval(text)
        #expect(same(v, expected), "\(text) = \(JSONWriter.encode(v)), expected \(JSONWriter.encode(expected))")
    }

    /// `&&` and `||` absorb errors when the other side decides, in either order, as CEL says.
    @Test(arguments: [
        ("m.missing && false", Value.bool(false)), ("false && m.missing", .bool(false)),
        ("m.missing || true", .bool(true)), ("true || m.missing", .bool(true)),
    ])
    func errorAbsorbing(_ text: String, _ expected: Value) {
        #expect(same(eval(text, ["m": .map(ValueMap())]), expected))
    }

    @Test(arguments: [
        "m.missing && true", "m.missing || false", "!m.missing", "1 / 0", "9223372036854775807 + 1", "[1][5]",
        "m.missing == 1 ? 1 : 2", "int('x')",
    ])
    func errors(_ text: String) {
        #expect(eval(text, ["m": .map(ValueMap())]).isError, "\(text) should fail")
    }

    @Test(arguments: [
        ("'hello'.contains('ell')", Value.bool(true)), ("'hello'.contains('xyz')", .bool(false)),
        ("'hello'.startsWith('he')", .bool(true)), ("'hello'.startsWith('lo')", .bool(false)),
        ("'hello'.endsWith('lo')", .bool(true)), ("'hello'.endsWith('he')", .bool(false)),
        ("'abc123'.matches('^[a-z]+[0-9]+$')", .bool(true)), ("'abc'.matches('^[0-9]+$')", .bool(false)),
        ("size('héllo')", .int(5)), ("'abc'.size()", .int(3)), ("size([1, 2])", .int(2)),
        ("'HeLLo'.lowerAscii()", .string("hello")), ("'hi'.upperAscii()", .string("HI")),
        ("'  a b '.trim()", .string("a b")), ("'a-b-c'.replace('-', '+')", .string("a+b+c")),
        ("'a,b'.split(',')", .list(["a", "b"])), ("['a', 'b'].join('/')", .string("a/b")),
        ("'hello'.substring(1, 3)", .string("el")), ("'hello'.indexOf('l')", .int(2)),
    ])
    func stringFunctions(_ text: String, _ expected: Value) {
        #expect(same(eval(text), expected), "\(text)")
    }

    @Test(arguments: [
        ("[1, 2, 3].all(x, x > 0)", Value.bool(true)), ("[1, -2].all(x, x > 0)", .bool(false)),
        ("[1, 2].exists(x, x == 2)", .bool(true)), ("[1, 2].exists(x, x == 3)", .bool(false)),
        ("[1, 2, 2].exists_one(x, x == 1)", .bool(true)), ("[1, 2, 2].exists_one(x, x == 2)", .bool(false)),
        ("[1, 2].map(x, x * 10)", .list([10, 20])), ("[1, 2, 3].filter(x, x != 2)", .list([1, 3])),
        ("{'a': 1}.all(k, k == 'a')", .bool(true)),
    ])
    func macros(_ text: String, _ expected: Value) {
        #expect(same(eval(text), expected), "\(text)")
    }

    @Test(arguments: [
        ("timestamp('2026-01-05T09:00:00Z') + duration('24h') == timestamp('2026-01-06T09:00:00Z')", Value.bool(true)),
        ("timestamp('2026-01-05T09:00:00Z') - timestamp('2026-01-04T09:00:00Z')", .duration(try! TimeDuration(seconds: 86400))),
        ("timestamp('2026-01-05T09:00:00Z').getHours('Europe/Berlin')", .int(10)),
        ("timestamp('2026-07-05T09:00:00Z').getHours('Europe/Berlin')", .int(11)),
        ("timestamp('2026-01-05T09:00:00Z').getDayOfWeek()", .int(1)),
        ("duration('1h30m') > duration('90m')", .bool(false)), ("duration('1h30m') == duration('90m')", .bool(true)),
        ("string(timestamp('2026-01-05T09:00:00.250Z'))", .string("2026-01-05T09:00:00.25Z")),
    ])
    func time(_ text: String, _ expected: Value) {
        #expect(same(eval(text), expected), "\(text) = \(JSONWriter.encode(eval(text)))")
    }

    @Test(arguments: [
        ("version_compare('10.2', '9.12')", Value.int(1)), ("version_compare('1.0', '1.0.0')", .int(0)),
        ("version_compare('55.0a1', '55.0')", .int(-1)), ("version_compare('3.1.9', '3.2.0')", .int(-1)),
        ("url_param('https://x.io/go?fbclid=abc&utm_source=facebook', 'utm_source')", .string("facebook")),
        ("url_param('https://x.io/go?email=a%40b.com&x=1', 'email')", .string("a@b.com")),
        ("url_param('https://x.io/go?q=a+b', 'q')", .string("a b")),
        ("url_param('https://x.io/go?a=1#frag', 'frag')", .null), ("url_param('https://x.io/go', 'a')", .null),
        ("url_param(null, 'a')", .null),
        ("url_param('https://x.io/go?&&utm%5fsource=fb%2Bx&b', 'utm_source')", .string("fb+x")),
        ("url_param('https://x.io/go?a=1&b', 'b')", .string("")), ("url_param('https://x.io/go?a=1&b=', 'b')", .string("")),
        ("url_param('https://x.io/go?a=%zz%4%', 'a')", .string("%zz%4%")),
        ("url_param('https://x.io/go?a=%+f', 'a')", .string("% f")),
        ("url_param('https://x.io/go?a=x=y', 'a')", .string("x=y")), ("url_param('https://x.io/go#?a=1', 'a')", .null),
        ("url_param('https://x.io/go?a=1&a=2', 'a')", .string("1")), ("url_param('https://x.io/go?ab=1', 'a')", .null),
        ("url_param('https://x.io/go?a=1', 'ab')", .null), ("url_param('https://x.io/go?a=caf%C3%A9', 'a')", .string("café")),
        ("sha256('user@example.com')", .string("b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514")),
    ])
    func beckonFunctions(_ text: String, _ expected: Value) {
        #expect(same(eval(text), expected), "\(text) = \(JSONWriter.encode(eval(text)))")
    }

    /// Mistakes found when loading, each with a message that names the problem.
    @Test(arguments: [
        ("1 + 'a'", "no version of '+' accepts (int, string)"),
        ("'a' > 1", "cannot compare a string with a number (int) using '>'"),
        ("1 == 'a'", "cannot compare a number (int) with a string"),
        ("!1", "'!' needs a true/false value"),
        ("1 && true", "'&&' needs true/false values"),
        ("sise('a')", "unknown function 'sise'; did you mean 'size'?"),
        ("usr", "unknown name 'usr'; did you mean 'user'?"),
        ("'a'.matches('[')", "invalid regular expression"),
        ("size()", "takes 1 argument"),
        ("user.plan = 'pro'", "'=' is not an operator; use '=='"),
        ("'abc", "unterminated string literal"),
        ("(1 + 2", "expected ')'"),
        ("1 +", "expression ends too early"),
        ("[1, 2].all(1, true)", "all() takes a variable name"),
    ])
    func compileProblems(_ text: String, _ message: String) {
        let ps = problems(text, ["user": .dyn])
        #expect(ps.contains { $0.message.contains(message) }, "\(text): \(ps.map(\.message))")
    }

    @Test func problemsPointAtTheirPlace() throws {
        let ps = problems("count > 1 && user.plan = 'pro'", ["user": .dyn, "count": .int])
        let p = try #require(ps.first)
        #expect(p.span.start == 23)  // the '='
    }

    @Test func nestingIsLimited() {
        let deep = String(repeating: "(", count: 100) + "1" + String(repeating: ")", count: 100)
        #expect(problems(deep).contains { $0.id == .limitExceeded })
        let ok = String(repeating: "(", count: 32) + "1" + String(repeating: ")", count: 32)
        #expect(problems(ok).isEmpty)
    }

    @Test func constantsAreFoldedAtLoadTime() {
        let c = ExprCompiler(environment: TestEnvironment())
        let e = c.compile("size('abc') * 2 + 1")
        #expect(e?.constant.map { same($0, .int(7)) } == true)
    }

    @Test func unicodeIsNotNormalised() {
        #expect(same(eval("'Am\\u00E9lie' == 'Ame\\u0301lie'"), .bool(false)))
    }
}
