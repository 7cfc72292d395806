import BeckonTools
import Mustache

/// The console's Mustache templates and stylesheet. Every `{{value}}` is HTML-escaped by the library; the only
/// unescaped insertions (`{{{…}}}`) are the charts (SVG made of numbers) and the report (``ReportRunner``, which
/// escapes its own text). No script anywhere: the pages' policy forbids it.
enum ConsoleTemplates {
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in [
            ("layout", layout), ("login", login), ("overview", overview), ("user", user), ("playground", playground),
            ("report", report), ("message", message),
        ] {
            // The templates are constants of this file: one that does not parse is a bug caught by the tests.
            try! library.register(text, named: name)
        }
        return library
    }()

    /// The page `name` over `model` (an unknown name renders nothing).
    static func render(_ model: Any, _ name: String) -> String { library.render(model, withTemplate: name) ?? "" }

    static let layout = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{$title}}Console{{/title}} · Beckon</title>
        <link rel="stylesheet" href="/console/style.css">
        </head>
        <body>
        <a class="skip" href="#main">Skip to content</a>
        <header class="top">
        <span class="brand">Beckon console</span>
        {{#chrome.signedIn}}
        <nav aria-label="Console">
        <ul>
        <li><a href="/console"{{#chrome.overview}} aria-current="page"{{/chrome.overview}}>Overview</a></li>
        <li><a href="/console/user"{{#chrome.user}} aria-current="page"{{/chrome.user}}>Users</a></li>
        <li><a href="/console/playground"{{#chrome.playground}} aria-current="page"{{/chrome.playground}}>Playground</a></li>
        <li><a href="/console/report"{{#chrome.report}} aria-current="page"{{/chrome.report}}>Report</a></li>
        </ul>
        </nav>
        <form method="post" action="/console/logout" class="logout">
        <input type="hidden" name="csrf" value="{{chrome.csrf}}">
        <button type="submit">Log out</button>
        </form>
        {{/chrome.signedIn}}
        </header>
        <main id="main">
        {{$main}}{{/main}}
        </main>
        </body></html>

        """

    static let login = """
        {{<layout}}{{$title}}Sign in{{/title}}{{$main}}
        <h1>Sign in</h1>
        {{#failed}}<p class="alert" role="alert">That is not an admin key of this service.</p>{{/failed}}
        <form method="post" action="/console/login" class="stack narrow">
        <input type="hidden" name="csrf" value="{{token}}">
        <label for="key">Admin key</label>
        <input id="key" name="key" type="password" autocomplete="current-password" required>
        <button type="submit">Sign in</button>
        </form>
        <p class="note">The keys are the service's admin keys (<code>--admin-key</code>, <code>BECKON_ADMIN_KEYS</code>).</p>
        {{/main}}{{/layout}}
        """

    static let overview = """
        {{<layout}}{{$title}}Overview{{/title}}{{$main}}
        <h1>Overview</h1>
        <section aria-labelledby="loaded">
        <h2 id="loaded">Rules served</h2>
        <p>Loaded at <time>{{loadedAt}}</time> · digest <code>{{digest}}</code> · {{ruleCount}} rules in {{unitCount}} rule sets</p>
        {{#refused}}
        <div class="alert" role="alert">
        <h3>The last reload was refused</h3>
        <p>At <time>{{at}}</time>, asked by {{by}}: {{message}}. The rules above are still served.</p>
        <pre>{{diagnostics}}</pre>
        </div>
        {{/refused}}
        <div class="scroll" tabindex="0" role="region" aria-label="Rule files">
        <table>
        <thead><tr><th scope="col">File</th><th scope="col">SHA-256</th><th scope="col" class="num">Bytes</th></tr></thead>
        <tbody>
        {{#files}}<tr><td>{{path}}</td><td><code>{{sha}}</code></td><td class="num">{{bytes}}</td></tr>
        {{/files}}
        </tbody>
        </table>
        </div>
        </section>
        {{#hasBroadcasts}}
        <section aria-labelledby="broadcasts">
        <h2 id="broadcasts">Broadcasts</h2>
        <p class="note">Each <code>schedule</code> rule reaches every stored user its audience and <code>if</code> select
        when its run comes. Who they select now, counted at {{reachAt}} (at most once a minute).</p>
        <div class="scroll" tabindex="0" role="region" aria-label="Broadcasts">
        <table>
        <thead><tr><th scope="col">Rule</th><th scope="col">Schedule</th><th scope="col">Reaches now</th></tr></thead>
        <tbody>
        {{#broadcasts}}<tr><th scope="row">{{id}}</th><td>{{schedule}}</td><td>{{reach}}</td></tr>
        {{/broadcasts}}
        </tbody>
        </table>
        </div>
        </section>
        {{/hasBroadcasts}}
        <section aria-labelledby="live">
        <h2 id="live">Rules, live</h2>
        <p class="note">What became of each rule's trigger matches in the last hour and the last 24 hours (wall clock, counted
        since this process started). Blocked: why a match did not fire, by reason. Messages: the pushes and emails Beckon
        sent itself (sent is a request per device), what became of them, and the email links used. The chart: trigger
        matches (light) and fires (dark) per hour.</p>
        <div class="scroll" tabindex="0" role="region" aria-label="Live counts per rule">
        <table class="live">
        <thead>
        <tr><th scope="col" rowspan="2">Rule</th><th scope="colgroup" colspan="5">Last hour</th><th scope="colgroup" colspan="6">Last 24 hours</th><th scope="col" rowspan="2">Per hour</th></tr>
        <tr><th scope="col">triggered</th><th scope="col">fired</th><th scope="col">held back</th><th scope="col">scheduled</th><th scope="col">blocked</th>
        <th scope="col">triggered</th><th scope="col">fired</th><th scope="col">held back</th><th scope="col">scheduled</th><th scope="col">blocked</th><th scope="col">messages</th></tr>
        </thead>
        <tbody>
        {{#rules}}<tr id="rule-{{anchor}}"><th scope="row">{{id}}</th>
        {{#hour}}<td class="num">{{triggered}}</td><td class="num">{{fired}}</td><td class="num">{{heldBack}}</td><td class="num">{{scheduled}}</td><td>{{blocked}}</td>{{/hour}}
        {{#day}}<td class="num">{{triggered}}</td><td class="num">{{fired}}</td><td class="num">{{heldBack}}</td><td class="num">{{scheduled}}</td><td>{{blocked}}</td><td>{{messages}}</td>{{/day}}
        <td>{{{chart}}}</td></tr>
        {{/rules}}
        </tbody>
        </table>
        </div>
        </section>
        {{/main}}{{/layout}}
        """

    static let user = """
        {{<layout}}{{$title}}Users{{/title}}{{$main}}
        <h1>User timeline</h1>
        <form method="get" action="/console/user" class="inline" role="search">
        <label for="uid">User id</label>
        <input id="uid" name="id" value="{{query}}" required>
        <button type="submit">Show</button>
        </form>
        {{#found}}
        <h2>User <span class="id">{{id}}</span></h2>
        {{^known}}<p>The service holds no state for this user.</p>{{/known}}
        {{#mergedInto}}<p>This id was merged into <a href="/console/user?id={{url}}">{{id}}</a>.</p>{{/mergedInto}}
        <div class="cols">
        <section aria-labelledby="attrs">
        <h3 id="attrs">Attributes</h3>
        {{#hasAttributes}}
        <table><tbody>
        {{#attributes}}<tr><th scope="row">{{name}}</th><td><code>{{value}}</code></td></tr>
        {{/attributes}}
        </tbody></table>
        {{/hasAttributes}}
        {{^attributes}}<p>None.</p>{{/attributes}}
        </section>
        <section aria-labelledby="timers">
        <h3 id="timers">Pending timers</h3>
        {{#hasPending}}<ul>{{#pending}}<li>{{rule}} due at <time>{{due}}</time>{{#held}} (held by quiet hours){{/held}}</li>{{/pending}}</ul>{{/hasPending}}
        {{^pending}}<p>None.</p>{{/pending}}
        </section>
        <section aria-labelledby="inbox">
        <h3 id="inbox">Inbox</h3>
        {{#hasInbox}}<ul>{{#inbox}}<li>{{message}} <span class="note">from {{rule}}, <time>{{created}}</time>, {{#read}}read{{/read}}{{^read}}unread{{/read}}</span></li>{{/inbox}}</ul>{{/hasInbox}}
        {{^inbox}}<p>Empty.</p>{{/inbox}}
        </section>
        </div>
        <section aria-labelledby="events">
        <h3 id="events">Events and verdicts</h3>
        <p class="note">{{eventCount}} events of this id in the input log, replayed under the rules served now as
        <code>beckon explain</code> does{{#earlier}}; the {{earlier}} earliest steps are not shown{{/earlier}}.</p>
        {{^steps}}<p>No events of this id are in the input log.</p>{{/steps}}
        <ol class="timeline">
        {{#steps}}<li class="{{kind}}"><h4><time>{{time}}</time> {{title}}</h4><pre>{{text}}</pre></li>
        {{/steps}}
        </ol>
        {{#pendingText}}<h4>Pending after the replay</h4><pre>{{.}}</pre>{{/pendingText}}
        </section>
        {{/found}}
        {{/main}}{{/layout}}
        """

    static let playground = """
        {{<layout}}{{$title}}Playground{{/title}}{{$main}}
        <h1>Playground</h1>
        <p class="note">Edit a rule file and run events through it, with the other files served now: validate's diagnostics
        and the dry-run table. It runs in an engine of its own: nothing live is read or changed. Limits: the rule file
        {{limits.ruleKiB}} KiB, events {{limits.eventKiB}} KiB and {{limits.eventLines}} lines, {{limits.ms}} ms of running,
        time let run at most {{limits.until}} past the last event.</p>
        <form method="get" action="/console/playground" class="inline">
        <label for="file">Start from</label>
        <select id="file" name="file">{{#files}}<option value="{{path}}"{{#selected}} selected{{/selected}}>{{path}}</option>{{/files}}</select>
        <label for="pu">with the events of user</label>
        <input id="pu" name="user" value="{{user}}">
        <label for="pn">last</label>
        <input id="pn" name="n" type="number" min="1" max="{{maxEvents}}" value="{{n}}">
        <button type="submit">Load</button>
        </form>
        <form method="post" action="/console/playground" class="stack">
        <input type="hidden" name="csrf" value="{{chrome.csrf}}">
        <label for="path">File name</label>
        <input id="path" name="path" value="{{path}}" required>
        <label for="rules">Rule file</label>
        <textarea id="rules" name="rules" rows="22" spellcheck="false">{{rules}}</textarea>
        <label for="events">Events (Segment JSON, one per line)</label>
        <textarea id="events" name="events" rows="8" spellcheck="false">{{events}}</textarea>
        <label for="until">Let time run until (optional: +7d after the last event, or an RFC 3339 time)</label>
        <input id="until" name="until" value="{{until}}">
        <button type="submit">Validate and dry-run</button>
        </form>
        {{#result}}
        <section aria-labelledby="diagnostics">
        <h2 id="diagnostics">Diagnostics</h2>
        {{#problems}}<div class="diag {{severity}}"><p><strong>{{severity}}</strong> <span class="where">{{file}}:{{line}}:{{column}}</span> {{message}}</p><pre>{{rendered}}</pre></div>
        {{/problems}}
        {{^problems}}<p>No problems.</p>{{/problems}}
        </section>
        {{#stopped}}<p class="alert" role="alert">{{.}}</p>{{/stopped}}
        {{#hasReach}}<section aria-labelledby="reach">
        <h2 id="reach">Reach</h2>
        {{#reach}}<p>{{.}}</p>
        {{/reach}}
        </section>{{/hasReach}}
        {{#ran}}
        <section aria-labelledby="dryrun">
        <h2 id="dryrun">Dry run</h2>
        <p>{{headline}}</p>
        {{#hasBadLines}}<pre>{{#badLines}}{{.}}
        {{/badLines}}</pre>{{/hasBadLines}}
        <div class="scroll" tabindex="0" role="region" aria-label="Dry-run table">
        <table class="dryrun">
        <thead><tr><th scope="col">Time</th><th scope="col">User</th><th scope="col">Result</th><th scope="col">Rule</th><th scope="col">Action or reason</th></tr></thead>
        <tbody>
        {{#rows}}<tr class="{{css}}"><td><time>{{time}}</time></td><td>{{user}}</td><td>{{mark}} {{word}}</td><td>{{rule}}</td><td>{{#kind}}<strong>{{.}}</strong> {{/kind}}{{detail}}{{#warnings}} ⚠ {{.}}{{/warnings}}</td></tr>
        {{/rows}}
        </tbody>
        </table>
        </div>
        {{#rowsLeftOut}}<p class="note">{{.}} more rows not shown.</p>{{/rowsLeftOut}}
        <h3>Per rule</h3>
        <div class="scroll" tabindex="0" role="region" aria-label="Counts per rule">
        <table>
        <thead><tr><th scope="col">Rule</th><th scope="col" class="num">Triggered</th><th scope="col" class="num">Fired</th><th scope="col">Not fired</th></tr></thead>
        <tbody>
        {{#perRule}}<tr><td>{{rule}}</td><td class="num">{{triggered}}</td><td class="num">{{fired}}</td><td>{{notFired}}</td></tr>
        {{/perRule}}
        </tbody>
        </table>
        </div>
        </section>
        {{/ran}}
        {{/result}}
        {{/main}}{{/layout}}
        """

    static let report = """
        {{<layout}}{{$title}}Report{{/title}}{{$main}}
        <h1>Report</h1>
        <form method="get" action="/console/report" class="inline">
        <label for="from">From (UTC day)</label>
        <input id="from" name="from" type="date" value="{{from}}" required>
        <label for="to">to (included)</label>
        <input id="to" name="to" type="date" value="{{to}}" required>
        <button type="submit">Show</button>
        </form>
        {{#error}}<p class="alert" role="alert">{{.}}</p>{{/error}}
        {{#body}}<div class="scroll" tabindex="0" role="region" aria-label="Report">{{{.}}}</div>{{/body}}
        {{/main}}{{/layout}}
        """

    static let message = """
        {{<layout}}{{$title}}{{heading}}{{/title}}{{$main}}
        <h1>{{heading}}</h1>
        <p>{{text}}</p>
        {{#link}}<p><a href="{{href}}">{{label}}</a></p>{{/link}}
        {{/main}}{{/layout}}
        """

    static let css = """
        * { box-sizing: border-box; }
        body { font: 15px/1.5 "DejaVu Sans", system-ui, sans-serif; color: #0f172a; background: #fff; margin: 0; }
        a { color: #1d4ed8; }
        .skip { position: absolute; left: -9999px; } .skip:focus { left: 8px; top: 8px; background: #fff; padding: 4px 8px; }
        header.top { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 20px; background: #0f172a; color: #fff; padding: 10px 20px; }
        header.top .brand { font-weight: 700; }
        header.top nav ul { display: flex; flex-wrap: wrap; gap: 4px 16px; list-style: none; margin: 0; padding: 0; }
        header.top nav a { color: #fff; text-decoration: none; padding: 2px 0; }
        header.top nav a[aria-current="page"] { border-bottom: 2px solid #93c5fd; }
        header.top .logout { margin-left: auto; }
        header.top .logout button { background: #fff; color: #0f172a; }
        main { padding: 16px 20px 40px; max-width: 1240px; }
        h1 { font-size: 24px; margin: 4px 0 12px; } h2 { font-size: 19px; margin: 24px 0 8px; } h3 { font-size: 16px; margin: 16px 0 6px; }
        h4 { font-size: 14px; margin: 0 0 4px; }
        .note { color: #475569; }
        code, pre, textarea { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: 13px; }
        pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f1f5f9; padding: 8px 10px; margin: 4px 0 10px; border-radius: 4px; }
        .scroll { overflow-x: auto; max-width: 100%; }
        .scroll:focus { outline: 2px solid #1d4ed8; }
        table { border-collapse: collapse; margin: 6px 0 12px; }
        th, td { padding: 4px 10px; text-align: left; vertical-align: top; border-bottom: 1px solid #cbd5e1; }
        th { font-weight: 600; color: #1e293b; } .num { text-align: right; }
        td code { overflow-wrap: anywhere; }
        table.live td, table.live th { white-space: nowrap; }
        form.inline { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 10px; margin: 8px 0 16px; }
        form.stack { display: flex; flex-direction: column; gap: 6px; margin: 8px 0 16px; }
        form.stack.narrow { max-width: 360px; }
        label { font-weight: 600; }
        input, select, textarea { font-size: 15px; padding: 5px 7px; border: 1px solid #64748b; border-radius: 4px; color: #0f172a; background: #fff; max-width: 100%; }
        textarea { width: 100%; font-size: 13px; }
        button { font-size: 15px; padding: 6px 14px; border: 1px solid #1e3a8a; border-radius: 4px; background: #1d4ed8; color: #fff; cursor: pointer; align-self: flex-start; }
        input:focus, select:focus, textarea:focus, button:focus, a:focus { outline: 2px solid #f59e0b; outline-offset: 1px; }
        .alert { border: 1px solid #b91c1c; background: #fef2f2; color: #7f1d1d; padding: 8px 12px; border-radius: 4px; }
        .diag { border-left: 4px solid #b91c1c; padding-left: 10px; margin: 8px 0; } .diag.warning { border-color: #b45309; }
        .diag p { margin: 0 0 4px; } .where { font-family: "DejaVu Sans Mono", monospace; }
        tr.fired td:nth-child(3) { color: #166534; font-weight: 600; } tr.blocked td:nth-child(3) { color: #991b1b; }
        tr.waiting td:nth-child(3) { color: #92400e; }
        .cols { display: flex; flex-wrap: wrap; gap: 0 32px; } .cols section { min-width: 260px; flex: 1; }
        ol.timeline { list-style: none; padding: 0; } ol.timeline li { border-left: 3px solid #cbd5e1; padding: 2px 0 2px 12px; margin: 0 0 10px; }
        ol.timeline li.time { border-color: #f59e0b; }
        .id { font-family: "DejaVu Sans Mono", monospace; overflow-wrap: anywhere; }
        svg.chart { display: block; }
        @media (max-width: 600px) { main { padding: 12px; } h1 { font-size: 21px; } header.top .logout { margin-left: 0; } }

        """ + ReportRunner.css + "\n"
}
