import BeckonCore
import BeckonTools

// What each console page's template reads (ConsoleTemplates): plain values, escaped by the templates.

/// The frame of every page: whether signed in (the menu and the log-out form with its token) and which page it is.
struct Chrome {
    var signedIn = false
    var csrf = ""
    var overview = false
    var user = false
    var playground = false
    var report = false
}

struct LoginPage {
    var chrome = Chrome()
    var token: String
    var failed: Bool
}

struct MessagePage {
    struct Link {
        var href: String
        var label: String
    }
    var chrome: Chrome
    var heading: String
    var text: String
    var link: Link?
}

struct OverviewPage {
    struct File {
        var path: String
        var sha: String
        var bytes: Int
    }
    struct Refused {
        var at: String
        var by: String
        var message: String
        var diagnostics: String
    }
    struct Cells {
        var triggered: Int
        var fired: Int
        var heldBack: Int
        var scheduled: Int
        /// ``RuleCount/notFired(blocked:scheduled:)`` (scheduled has its own column).
        var blocked: String
        /// ``MessageCounts/describe(_:)``: the pushes and emails Beckon sent itself.
        var messages: String

        init(_ c: RuleActivity.Counts) {
            triggered = c.triggered
            fired = c.fired
            heldBack = c.heldBack
            scheduled = c.scheduled
            blocked = RuleCount.notFired(blocked: c.blocked, scheduled: 0)
            messages = MessageCounts.describe(c.messages)
        }
    }
    struct RuleRow {
        var id: String
        var anchor: String
        var hour: Cells
        var day: Cells
        /// SVG of numbers only (inserted unescaped).
        var chart: String
    }
    var chrome: Chrome
    var loadedAt = ""
    var digest = ""
    var ruleCount = 0
    var unitCount = 0
    var refused: Refused?
    var files: [File] = []
    var rules: [RuleRow] = []
    /// The `schedule` rules, each with who it reaches now.
    struct Broadcast {
        var id: String
        var schedule: String
        /// "20 of 30 stored users" (or why it is not counted now).
        var reach: String
    }
    var broadcasts: [Broadcast] = [] {
        didSet { hasBroadcasts = !broadcasts.isEmpty }
    }
    /// (Stored: the templates read stored properties only.)
    var hasBroadcasts = false
    /// When the sizes were counted.
    var reachAt = ""
}

struct UserPage {
    struct Attribute {
        var name: String
        var value: String
    }
    struct Timer {
        var rule: String
        var due: String
        var held: Bool
    }
    struct Item {
        var message: String
        var rule: String
        var created: String
        var read: Bool
    }
    struct Merged {
        var id: String
        var url: String
    }
    struct Step {
        /// `event`, or `time` (time passing).
        var kind: String
        var time: String
        var title: String
        var text: String
    }
    struct Found {
        var id: String
        var known: Bool
        var mergedInto: Merged?
        var attributes: [Attribute] = [] { didSet { hasAttributes = !attributes.isEmpty } }
        var hasAttributes = false
        var pending: [Timer] = [] { didSet { hasPending = !pending.isEmpty } }
        var hasPending = false
        var inbox: [Item] = [] { didSet { hasInbox = !inbox.isEmpty } }
        var hasInbox = false
        var eventCount = 0
        /// Steps before the ones shown (`nil`: none).
        var earlier: Int?
        var steps: [Step] = []
        var pendingText: String?

        init(id: String, known: Bool) {
            self.id = id
            self.known = known
        }
    }
    var chrome: Chrome
    var query = ""
    var found: Found?
}

struct PlaygroundPage {
    struct FileOption {
        var path: String
        var selected: Bool
    }
    struct LimitsView {
        var ruleKiB: Int
        var eventKiB: Int
        var eventLines: Int
        var ms: Int64
        var until: String

        init(_ l: Playground.Limits) {
            ruleKiB = l.ruleBytes / 1024
            eventKiB = l.eventBytes / 1024
            eventLines = l.eventLines
            ms = l.runMilliseconds
            until = DSLDuration.format(l.untilMs)
        }
    }
    struct Row {
        var time: String
        var user: String
        var mark: String
        /// `fired`, `blocked` or `waiting` (the row's class), and the word shown after the mark.
        var css: String
        var word: String
        var rule: String
        var kind: String?
        var detail: String
        var warnings: [String]
    }
    struct ResultView {
        var problems: [Playground.Problem]
        var stopped: String?
        var ran: Bool
        var headline: String
        var badLines: [String]
        var hasBadLines: Bool
        var rows: [Row]
        var rowsLeftOut: Int?
        var perRule: [RuleCount]

        init(_ r: Playground.Result) {
            problems = r.problems
            stopped = r.stopped
            ran = r.ran
            headline = r.headline
            badLines = r.badLines
            hasBadLines = !r.badLines.isEmpty
            rows = r.rows.map { row in
                let (css, word) =
                    switch row.result {
                    case .fired: ("fired", "fired")
                    case .waiting: ("waiting", "waiting")
                    case .notFired: ("blocked", "not fired")
                    }
                return Row(
                    time: Timestamp(milliseconds: row.time).description, user: row.user, mark: row.result.mark, css: css,
                    word: word,
                    rule: row.rule, kind: row.kind, detail: row.detail, warnings: row.warnings)
            }
            rowsLeftOut = r.rowsLeftOut > 0 ? r.rowsLeftOut : nil
            perRule = r.perRule
        }
    }
    var chrome: Chrome
    var limits = LimitsView(Playground.Limits())
    var files: [FileOption] = []
    var user = ""
    var n = 50
    var maxEvents = WebConsole.maxPlaygroundEvents
    var path = ""
    var rules = ""
    var events = ""
    var until = ""
    var result: ResultView?
    /// With an edited `schedule` in the file: "digest/news: this edit would reach 20 of 30 stored users now".
    var reach: [String] = [] {
        didSet { hasReach = !reach.isEmpty }
    }
    var hasReach = false
}

struct ReportPage {
    var chrome: Chrome
    var from = ""
    var to = ""
    var error: String?
    /// `beckon report`'s HTML (it escapes its own text; inserted as is).
    var body: String?
}
