import BeckonCore
import BeckonYAML
import Foundation

extension ReferenceDocs {
    /// One bound: what it bounds, its value (read from the constant that enforces it), what happens beyond it, and
    /// the test that holds it at its edge (`Suite.function`; ReferenceDocsTests checks that each exists).
    struct Limit {
        var what: String
        var limit: String
        var beyond: String
        var tests: [String]
    }

    /// docs/reference/limits.md: every bound on input, per event and per user, from the constants themselves.
    public static func limits() -> String {
        let settings = EngineSettings()
        let playground = Playground.Limits()
        let sections: [(String, String, [Limit])] = [
            (
                "Rule files", "Checked by `validate` and by every command that loads rules; each error has its place.",
                [
                    Limit(
                        what: "a rule, settings, tracking-plan or test file", limit: bytes(YAMLLoader.maxFileBytes),
                        beyond: "`limit_exceeded`; the size is checked before the file is read",
                        tests: ["RulePathTests.filesOverTheSizeLimitAreNotRead"]),
                    Limit(
                        what: "YAML nesting (maps and lists inside one another)", limit: levels(YAMLLoader.maxDepth),
                        beyond: "`limit_exceeded` at the first node too deep, before any of it is built",
                        tests: ["YAMLInputTests.yamlNestedTooDeepIsRefusedBeforeBuildingIt"]),
                    Limit(
                        what: "YAML aliases, anchors, merge keys and tags", limit: "none accepted",
                        beyond: "`yaml_syntax` at the alias, anchor or tag; an alias is never expanded",
                        tests: [
                            "YAMLInputTests.aliasesAreRefusedWithoutExpandingThem",
                            "YAMLInputTests.aValueThatStartsWithABangIsATag",
                        ]),
                    Limit(
                        what: "an expression", limit: "\(number(Parser.maxLength)) characters",
                        beyond: "`limit_exceeded`, before it is parsed", tests: ["BoundTests.expressionsHaveALengthLimit"]),
                    Limit(
                        what: """
                            expression nesting: parentheses, ternaries, field selection, unary operators and each \
                            operator of a chain (`a && b && c` is two levels) count one level; a call, a list, a map \
                            and an index count two (the brackets and what is inside them, which costs the evaluator \
                            more stack): about 30 nested lists or calls
                            """, limit: levels(Parser.maxDepth),
                        beyond: "`limit_exceeded` at the token where the limit is passed",
                        tests: ["NestingLimitTests.deepExpressionsAreRefused"]),
                    Limit(
                        what: "segments used inside segments, counted with the expressions around them",
                        limit: levels(Parser.maxDepth), beyond: "`limit_exceeded` at the use that passes it",
                        tests: ["NestingLimitTests.segmentsCountTowardTheDepthLimit"]),
                    Limit(
                        what: """
                            a duration (`wait`, `within`, `cooldown`, windows, `dedup_window`, `clock_skew`, `--until`; \
                            an `--until` written as a time: after the last event)
                            """,
                        limit: "\(number(Int(DSLDuration.maxMilliseconds / Milliseconds.day))) days (100 years)",
                        beyond: """
                            `invalid_duration` at the value (`--until`: exit 64, before the stream runs when it is no \
                            time at all)
                            """,
                        tests: [
                            "LoadTimeErrorTests.everyDurationKeyRefusesTooLongADuration",
                            "EventFileTests.aHugeUntilIsAnErrorNotACrash",
                            "EventFileTests.anUntilThatIsNoTimeIsRefusedFirst",
                        ]
                    ),
                    Limit(
                        what: "a UTC offset in a time", limit: "−23:59 to +23:59",
                        beyond: "an error at the offset (a bad line in an event)",
                        tests: ["LoadTimeErrorTests.offsetsBeyondTwentyThreeFiftyNineAreRefused"]),
                    Limit(
                        what: """
                            history series: each event name with each property filter that a history function or a \
                            `reprompt` reads, plus each rule with a rolling limit
                            """, limit: number(ValueLimits.maxSeries),
                        beyond: "`limit_exceeded` at the file whose rules pass it",
                        tests: ["LoadTimeErrorTests.historySeriesHaveALimit"]),
                    Limit(
                        what: "a name that gets a \"did you mean\"", limit: "\(Suggest.maxSuggestedLength) characters",
                        beyond: "no suggestion (the comparison costs the product of the lengths)",
                        tests: ["BoundTests.suggestionsAreForNamesUpTo256Characters"]),
                    Limit(
                        what: "problems written out in full (with their line and caret)",
                        limit: number(DiagnosticRenderer.maxRendered),
                        beyond: "counted in one last line (the summary counts every one)",
                        tests: ["RenderBoundTests.aLongLineIsShownAroundTheCaretAndManyProblemsAreCounted"]),
                    Limit(
                        what: "a source line shown under a problem",
                        limit: "\(DiagnosticRenderer.excerptColumns) characters",
                        beyond: "shown around the caret, cut with `…`",
                        tests: ["RenderBoundTests.aLongLineIsShownAroundTheCaretAndManyProblemsAreCounted"]),
                    Limit(
                        what: "events one `repeat:` line of a test expands to", limit: number(TestRunner.maxRepeat),
                        beyond: "an error at the value", tests: ["TestRunnerTests.repeatHasALimit"]),
                    Limit(
                        what: "the events one test case's `events:` lines expand to, all together, as JSON",
                        limit: bytes(TestRunner.maxCaseEventBytes),
                        beyond: "an error at the line that passes it; the lines after it are not expanded",
                        tests: ["TestRunnerTests.repeatHasALimit"]),
                ]
            ),
            (
                "Event lines",
                """
                A line beyond a bound is a bad line, reported as FILE:LINE:COLUMN (see [events](../events.md)). An event \
                a library user builds is held to the same bounds: `Engine.process` refuses it (status `refused`, \
                `BoundEvent.boundProblem` says why) and nothing changes.
                """,
                [
                    Limit(
                        what: "an event line", limit: bytes(SegmentDecoder.maxLineBytes),
                        beyond: "a bad line; the rest of the line is skipped without being held in memory",
                        tests: [
                            "LineReaderTests.aHugeLineWithoutANewlineIsNotBuffered",
                            "HostileLineTests.aLongLineIsRefusedAtTheLimit",
                        ]),
                    Limit(
                        what: """
                            lines `dry-run`, `explain`, `report`, `test` and `bench` read ahead of the engine when they \
                            decode a file on other cores (a pipe, a FIFO or a terminal is decoded line by line)
                            """,
                        limit: """
                            \(number(DecodingPipeline.maxLinesAhead(workers: DecodingPipeline.maxWorkers))) lines that \
                            are not blank: blocks of at most \(DecodingPipeline.blockLines) lines and \
                            \(bytes(DecodingPipeline.blockBytes)) (and one line), two a decoding thread, on at most \
                            \(DecodingPipeline.maxWorkers) threads
                            """,
                        beyond: "reading waits for the engine", tests: ["DecodingPipelineTests.everyLineAsOneThreadReadsIt"]),
                    Limit(
                        what: """
                            actions `dry-run --format jsonl` and `bench` hand to their writing thread and are not yet \
                            written (a file's stream, on more than one core)
                            """,
                        limit: """
                            \(ActionLines.maxRunsOut) runs out, each of \(ActionLines.runActions) actions and the rest of \
                            the event that filled it (and the run being gathered): about \
                            \(number((ActionLines.maxRunsOut + 1) * ActionLines.runActions)) actions
                            """,
                        beyond: "the engine waits for the writer", tests: ["ActionLinesTests.aSlowOutputHoldsTheEngineBack"]),
                    Limit(
                        what: "JSON nesting in a line", limit: levels(SegmentDecoder.maxDepth), beyond: "a bad line",
                        tests: ["SegmentDecoderTests.deepNestingIsRejected"]),
                    Limit(
                        what: "a user id, anonymous id, `messageId`, event, screen or trait name",
                        limit: bytes(SegmentDecoder.maxIDBytes),
                        beyond: "a bad line (an id is never cut, which could merge two users)",
                        tests: ["HostileLineTests.idsAndNamesHaveALimit"]),
                    Limit(
                        what: "U+0000 (`\\u0000`) in a user id, anonymous id, `previousId` or `messageId` (and in a user "
                            + "id, item id or token in a service's path, `%00`)",
                        limit: "never taken",
                        beyond: "a bad line; 400 from the service (a database would cut the id there, the same as "
                            + "another user's)",
                        tests: [
                            "HostileLineTests.idsWithANulAreBadLines",
                            "service_test.test_an_id_holding_nul_is_refused_in_events_and_paths",
                        ]),
                    Limit(
                        what: "an event's time (after Segment's `sentAt` correction)",
                        limit: "1970-01-01 to \(timestampText(SegmentDecoder.maxTimeMs))",
                        beyond: "a bad line, never clamped", tests: ["HostileLineTests.timesOutsideTheRangeAreBadLines"]),
                    Limit(
                        what: "a trait's value in an `identify` line", limit: bytes(ValueLimits.maxAttributeBytes),
                        beyond: "a bad line", tests: ["HostileLineTests.aTraitOverTheAttributeLimitIsABadLine"]),
                    Limit(
                        what: "any of the above in an event built in code", limit: "as above",
                        beyond: "status `refused`; the event changes nothing",
                        tests: ["LibraryEventBoundTests.eventsOutsideTheBoundsAreRefused"]),
                ]
            ),
            (
                "Service requests",
                """
                What `beckon serve` takes in one request to its ingest endpoints (Segment's limits; see \
                [the service](../service.md)). A request beyond a bound gets 400 with a JSON body naming the event and \
                why, and none of it is stored; each event of a request is also held to the bounds of an event line.
                """,
                [
                    Limit(
                        what: "a request body", limit: bytes(SegmentRequest.maxRequestBytes),
                        beyond: "400; the body is not read past the limit",
                        tests: ["SegmentRequestTests.aRequestOverTheLimitIsRefused"]),
                    Limit(
                        what: "an event in a request", limit: bytes(SegmentRequest.maxEventBytes),
                        beyond: "400, naming the event", tests: ["SegmentRequestTests.anEventOverTheLimitIsRefused"]),
                ]
            ),
            (
                "Service connections and clients",
                """
                How `beckon serve` bounds its clients and its own work, whoever sends what (the options that change \
                them are in [operations](../operations.md#connections-and-clients)). Nothing a client sends or \
                withholds can take the service's descriptors, threads or memory.
                """,
                [
                    Limit(
                        what:
                            "a single service's write-ahead log before the committing thread folds it into the database "
                            + "file itself (a thread of its own folds it in while the service runs)",
                        limit: bytes(ServiceLimits.logBackstopBytes),
                        beyond:
                            "SQLite's checkpoint in the commit, as without that thread; the log's file is cut back to "
                            + "this size when the log starts again (it grows past it while a reader holds older pages, "
                            + "as with SQLite's own checkpoint)",
                        tests: ["SQLiteStateTests.aServicesLogIsFoldedInOnAThreadOfItsOwn"]),
                    Limit(
                        what: "a request's head (its request line and header fields)",
                        limit: bytes(ServiceLimits.maxHeadBytes) + " (SwiftNIO's HTTP parser)",
                        beyond: "400 and the connection is closed; the service goes on serving the others",
                        tests: ["hostile_test.test_12_a_request_head_past_80_kib_is_400_and_closed"]),
                    Limit(
                        what: "time to send a request's head, from connecting or from its first byte after a response",
                        limit: seconds(ServiceLimits.headTimeoutSeconds),
                        beyond: "the connection is closed (`--head-timeout`)",
                        tests: ["hostile_test.test_01_head_body_and_keep_alive_timeouts_close_connections"]),
                    Limit(
                        what: "time to send a request's body once its head is in",
                        limit: seconds(ServiceLimits.bodyTimeoutSeconds),
                        beyond: "the connection is closed (`--body-timeout`)",
                        tests: ["hostile_test.test_01_head_body_and_keep_alive_timeouts_close_connections"]),
                    Limit(
                        what: "a kept-alive connection waiting for another request",
                        limit: seconds(ServiceLimits.keepAliveTimeoutSeconds),
                        beyond: "the connection is closed (`--keep-alive-timeout`; above a load balancer's 60 s)",
                        tests: ["hostile_test.test_01_head_body_and_keep_alive_timeouts_close_connections"]),
                    Limit(
                        what: "client connections at once",
                        limit: """
                            the descriptor limit (raised to the hard limit at start) less \
                            \(ServiceLimits.reservedDescriptors), at least \(ServiceLimits.minConnections), at most \
                            \(number(ServiceLimits.maxDefaultConnections))
                            """,
                        beyond: """
                            the connection waiting longest for a request's head is closed for the new one; when every \
                            connection is reading or answering a request, the new one is closed (`--max-connections`)
                            """,
                        tests: ["hostile_test.test_01_silent_connections_past_the_descriptor_limit_do_not_stop_ingest"]),
                    Limit(
                        what: "connections waiting to be accepted (the listen backlog)",
                        limit: "\(number(ServiceLimits.listenBacklog)), or the kernel's `net.core.somaxconn` when lower",
                        beyond: """
                            the kernel drops the handshake and the client tries again a second later; at the connection \
                            cap the service goes on accepting, closing the connection waiting longest
                            """,
                        tests: ["hostile_test.test_01_silent_connections_past_the_descriptor_limit_do_not_stop_ingest"]),
                    Limit(
                        what: """
                            request bodies held at once, all connections together (read, their requests not yet \
                            answered; what comes after an answer is drained and held nowhere)
                            """,
                        limit: bytes(ServiceLimits.bodyMemoryBytes),
                        beyond: """
                            the request whose bytes would pass it is answered 503 (`Retry-After: 1`) and its connection \
                            closed (`--max-body-memory`, in MiB)
                            """,
                        tests: [
                            "hostile_test.test_01_withheld_bodies_on_many_connections_cannot_take_the_memory",
                            "hostile_test.test_01_a_body_drained_after_its_answer_holds_nothing",
                        ]),
                    Limit(
                        what: "requests of one connection let through at once (pipelined requests)",
                        limit: "1, and only while the socket takes its answer",
                        beyond: """
                            the next request waits, and the connection is not read, until the one before is answered \
                            and the client reads; an answer the client does not read closes it after the body timeout
                            """,
                        tests: ["hostile_test.test_01_pipelined_requests_whose_answers_are_not_read_hold_bounded_memory"]),
                    Limit(
                        what: "a compressed request body (`Content-Encoding: gzip` or `deflate`)",
                        limit: "the limits above, on the inflated bytes",
                        beyond: "400 as soon as inflating passes the limit; another encoding is 415",
                        tests: [
                            "hostile_test.test_10_a_gzip_bomb_is_refused_quickly_with_bounded_memory",
                            "hostile_test.test_10_an_event_inflating_past_32_kb_is_refused",
                            "hostile_test.test_10_brotli_is_415",
                        ]),
                    Limit(
                        what: "failed credentials (write key, admin key, user token, console sign-in) from one address",
                        limit: """
                            \(ServiceLimits.credentialBurst) at once, then one each \
                            \(seconds(ServiceLimits.credentialRefillSeconds)); \
                            \(number(ServiceLimits.maxThrottledAddresses)) addresses remembered
                            """,
                        beyond: "429 with `Retry-After` for every request of the address that carries a credential",
                        tests: ["hostile_test.test_09_wrong_credentials_are_rate_limited_per_address"]),
                    Limit(
                        what: """
                            heavy work at once, each on a thread of its own: privacy exports and forgets (which read \
                            the whole input log), the console's playground runs, timelines and reports
                            """,
                        limit: number(ServiceLimits.heavyWorkSlots),
                        beyond: "503 (`busy`, `Retry-After: 1`)",
                        tests: ["hostile_test.test_08_concurrent_exports_are_bounded"]),
                    Limit(
                        what: """
                            users a single service's timers load from the database between two checkpoints (on the \
                            wall clock)
                            """,
                        limit: number(ServiceLimits.coldLoadsPerRound),
                        beyond: """
                            the round stops, writes a checkpoint and lets them go; the next round goes on with the rest \
                            (a broadcast's run keeps memory flat)
                            """,
                        tests: ["BoundedRunTests.aRunDueForMoreUsersThanTheBoundGoesInRounds"]),
                    Limit(
                        what: "delivery attempts in flight",
                        limit: """
                            \(ServiceLimits.maxDeliveriesInFlight), an equal share to each destination (at most \
                            \(ServiceLimits.maxDeliveriesPerDestination))
                            """,
                        beyond: "an entry waits for a slot of its destination; a hanging destination holds only its share",
                        tests: ["hostile_test.test_04_hanging_destinations_do_not_starve_a_healthy_one"]),
                    Limit(
                        what: "resending an entry whose attempt's outcome could not be written",
                        limit: """
                            not before its backoff, and at least \(ServiceLimits.unrecordedDeliveryHoldMs / 1000) s \
                            (doubling while writes fail, up to \(ServiceLimits.maxUnrecordedDeliveryHoldMs / 1000) s)
                            """,
                        beyond: "the entry waits in memory; it is sent again when its time comes",
                        tests: ["hostile_test.test_04_outcomes_that_cannot_be_written_do_not_loop_the_retries"]),
                ]
            ),
            (
                "Console playground",
                """
                What one run of the console's playground takes ([the console](../console.md)): an edited rule file \
                and pasted events, run in an engine of its own. Beyond a bound the page says which and why.
                """,
                [
                    Limit(
                        what: "the edited rule file", limit: bytes(playground.ruleBytes), beyond: "refused, nothing run",
                        tests: ["PlaygroundTests.limitsHold"]),
                    Limit(
                        what: "the pasted events",
                        limit: "\(bytes(playground.eventBytes)), \(number(playground.eventLines)) lines",
                        beyond: "refused, nothing run", tests: ["PlaygroundTests.limitsHold"]),
                    Limit(
                        what: """
                            time running events (checked between events, and within one every \
                            \(number(ValueLimits.stepsPerClockCheck)) steps), and again counting who an edited schedule \
                            reaches (checked between users)
                            """,
                        limit: "\(number(Int(playground.runMilliseconds))) ms",
                        beyond:
                            "stopped at that line (an event under way when it passes: its expressions are errors); what ran is shown",
                        tests: [
                            "PlaygroundTests.limitsHold", "ValueBoundTests.aDeadlineStopsEvaluation",
                            "ReachTests.audienceSizeCountsStoredUsers",
                        ]),
                    Limit(
                        what: "`until` past the last event", limit: DSLDuration.format(playground.untilMs),
                        beyond: "refused, the events' table shown without it", tests: ["PlaygroundTests.limitsHold"]),
                    Limit(
                        what: "rows of the table shown", limit: number(playground.rows),
                        beyond: "not shown, counted (the counts per rule cover every event)",
                        tests: ["PlaygroundTests.limitsHold"]),
                ]
            ),
            (
                "Per user",
                """
                What one user's state may hold. (A user's history keeps their events for the longest window a rule \
                reads, so it grows with their events within that window.)
                """,
                [
                    Limit(
                        what: "an attribute's value written by a `set` action", limit: bytes(ValueLimits.maxAttributeBytes),
                        beyond: "the attribute is left as it was (so is it when the value fails); the action's warning says why",
                        tests: [
                            "ValueBoundTests.aSetThatWouldGrowPastTheLimitIsRefusedWithAWarning",
                            "LibraryEventBoundTests.aSetThatFailsLeavesTheAttribute",
                        ]),
                    Limit(
                        what: "attributes that no loaded rule reads", limit: number(ValueLimits.maxOtherAttributes),
                        beyond: "further new names are not kept, and counted (`attributesNotKept` in the engine's stats)",
                        tests: ["ValueBoundTests.attributesNoRuleReadsAreKeptUpToTheLimit"]),
                    Limit(
                        what: "`messageId`s remembered for de-duplication",
                        limit: "every id within `dedup_window` (default \(days(settings.dedupWindowMs))): 16 bytes each",
                        beyond: """
                            an id older than the window is forgotten (when the user's next id arrives); every duplicate \
                            within it is dropped
                            """,
                        tests: [
                            "DuplicateTests.everyDuplicateWithinTheWindowIsCaughtWhateverTheCount",
                            "DuplicateTests.idsAreForgottenAfterTheWindowAndMemoryFollowsTheWindow",
                            "DuplicateTests.aBurstsMemoryGoesWithItsIDs",
                        ]),
                    Limit(
                        what: "how far one event may move the stream's clock unless another user's event confirms it",
                        limit: "`clock_skew` (default \(days(settings.clockSkewMs)))",
                        beyond: "the event is processed at its own time but brings no other user's delayed action due",
                        tests: [
                            "ClockSkewTests.oneDeviceSetToNextYearFiresNoOtherUsersTimer",
                            "ClockSkewTests.devicesFarAheadAtDifferentTimesDoNotMoveTheClock",
                            "ClockSkewTests.theBoundIsASetting",
                        ]),
                    Limit(
                        what: "items in a user's inbox (`notify`; one without an `id` adds an item each time)",
                        limit: number(Engine.maxInboxItems),
                        beyond: "a new item takes the place of the oldest item read, else of the oldest",
                        tests: ["BoundTests.anInboxKeepsTwoHundredItemsDroppingTheOldestReadFirst"]),
                    Limit(
                        what: "pending actions of one rule with `retrigger: add`", limit: number(Engine.maxPendingPerRule),
                        beyond: "verdict `pending`: the trigger schedules nothing",
                        tests: ["BoundTests.pendingActionsPerRuleStopAtSixteen"]),
                    Limit(
                        what: "correlation keys one `sequence` rule follows", limit: number(Engine.maxSequenceKeys),
                        beyond: "the stalest key is forgotten", tests: ["BoundTests.sequenceKeysPerUserStopAtThirtyTwo"]),
                    Limit(
                        what: "a correlation value a sequence keeps as written", limit: bytes(Engine.maxSequenceKeyBytes),
                        beyond: "kept by its 64-bit hash",
                        tests: ["LibraryEventBoundTests.longCorrelationValuesAreKeptByTheirHash"]),
                ]
            ),
            (
                "Per event", "What one event (or one delayed action coming due) may cost, whatever its data.",
                [
                    Limit(
                        what: "`set` → `on_change` rounds", limit: number(settings.maxCascadeDepth),
                        beyond: "verdict `cascade_limit` for the rules of the next round",
                        tests: ["TriggerTests.cascadesStopAtTheDepthLimit"]),
                    Limit(
                        what: """
                            steps, all rules together: each comprehension iteration (`exists`, `all`, `exists_one`, \
                            `map`, `filter`) is one; each call of a function or operator is charged, before it runs, \
                            one step per \(number(ValueLimits.bytesPerStep)) bytes of each string argument and per \
                            \(ValueLimits.membersPerStep) members of each list argument (a map's keys are found by \
                            their hash; `size` and indexing are free); each `matches` call is its bound of work (pattern instructions × characters) ÷ \
                            \(ValueLimits.matchWorkPerStep). The budget bounds one event to about a second
                            """,
                        limit: number(ValueLimits.maxSteps),
                        beyond: "the expression's value is an error: a condition is false, a field is null with a warning",
                        tests: [
                            "ValueBoundTests.nestedComprehensionsStopAtTheStepBudget",
                            "ValueBoundTests.workInsideIterationsIsCharged",
                            "ValueBoundTests.sizeAndIndexingAreNotChargedByLength",
                            "BoundTests.matchesIsChargedToTheStepBudget",
                        ]),
                    Limit(
                        what: "a string or action field an expression builds", limit: bytes(ValueLimits.maxBuiltBytes),
                        beyond: "the expression's value is an error", tests: ["ValueBoundTests.builtStringsStopAtTheLimit"]),
                    Limit(
                        what: "a list `+` builds", limit: "\(number(ValueLimits.maxBuiltListMembers)) members",
                        beyond: "the expression's value is an error", tests: ["BoundTests.builtListsHaveALimit"]),
                    Limit(
                        what: "an explanation (`explain`, `dry-run --explain`)",
                        limit: "\(ExprTrace.maxEntries) values, each shown in \(ExprTrace.maxValueText) characters",
                        beyond: "the rest is counted, not shown", tests: ["ValueBoundTests.explanationsAreBounded"]),
                    Limit(
                        what: "an expression's error message (one quoting an event's value: a pattern, a string to convert)",
                        limit: "\(EvalError.maxMessageCharacters) characters",
                        beyond: "cut with `…`", tests: ["RegexTests.throughCEL"]),
                ]
            ),
            (
                "Regular expressions (`matches`)",
                """
                RE2 syntax, matched in linear time: at most (instructions + 1) × (characters + 1) steps, charged to the \
                event's step budget (above). A pattern is \
                compiled once (a rule's literal when the rules load; one from event data when first seen); one beyond a bound is \
                refused with an error naming the construct and its position (from event data, `matches` is an error).
                """,
                [
                    Limit(
                        what: "a repeat count `{n,m}`, and nested counts multiplied", limit: number(RegexLimits.maxRepeat),
                        beyond: "the pattern is refused", tests: ["RegexTests.refuses"]),
                    Limit(
                        what: "groups and repetitions nested", limit: levels(RegexLimits.maxNesting),
                        beyond: "the pattern is refused", tests: ["RegexTests.refuses", "RegexTests.deepNestingWithinTheLimit"]),
                    Limit(
                        what: "instructions of a compiled pattern", limit: number(RegexLimits.maxInstructions),
                        beyond: "the pattern is refused", tests: ["RegexTests.refuses", "RegexTests.linearSteps"]),
                    Limit(
                        what: "scalar ranges of all of a pattern's classes", limit: number(RegexLimits.maxClassRanges),
                        beyond: "the pattern is refused", tests: ["BoundTests.regexClassRangesHaveALimit"]),
                    Limit(
                        what: "compiled patterns kept for reuse (all rules and events together)",
                        limit: "\(number(RegexLimits.cacheEntries)) patterns or \(bytes(RegexLimits.cacheBytes))",
                        beyond: "the cache is emptied; patterns compile again when next used",
                        tests: ["BoundTests.theRegexCacheIsBoundedInBytes"]),
                ]
            ),
            (
                "Values in expressions", "As CEL specifies and its implementations do.",
                [
                    Limit(
                        what: "a duration", limit: "±\(number(Int(TimeDuration.maxSeconds))) seconds (about 292 years)",
                        beyond: "evaluation error `duration out of range`", tests: ["ConformanceTests.celSpecSubsetPasses"]),
                    Limit(
                        what: "a timestamp", limit: "years 1 to 9999", beyond: "evaluation error `timestamp out of range`",
                        tests: ["ConformanceTests.celSpecSubsetPasses"]),
                    Limit(
                        what: "message nesting in a cel-spec test file (`beckon conformance`)", limit: levels(TextProto.maxDepth),
                        beyond: "a parse error", tests: ["ConformanceTests.textProtoNestingHasALimit"]),
                ]
            ),
        ]
        var out = """
            # Limits

            <!-- Generated by `beckon reference limits` from the constants that enforce each bound; do not edit. -->

            Every bound on what Beckon reads, keeps and computes, with what happens beyond it. Nothing beyond a bound \
            crashes, hangs or is silently cut: input is refused with an error at its place, a bad event line is \
            reported by line and column, and a cost bound turns one expression's value into an error. The test named \
            beside each bound holds it at its edge.

            """
        for (title, intro, rows) in sections {
            out += "\n## \(title)\n\n\(intro)\n\n| what | limit | beyond it | test |\n|---|---|---|---|\n"
            for r in rows {
                out += "| \(r.what) | \(r.limit) | \(r.beyond) | \(r.tests.map { "`\($0)`" }.joined(separator: ", ")) |\n"
            }
        }
        return out
    }

    /// Every test the limits page names, for ReferenceDocsTests.
    public static func limitTests() -> [String] {
        limits().split(separator: "\n").filter { $0.hasPrefix("| ") }.flatMap { row in
            (row.split(separator: "|").last ?? "").split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "`", with: "")
            }
        }.filter { $0.contains(".") }
    }

    private static func number(_ n: Int) -> String {
        let digits = Array(String(n))
        return String(
            digits.enumerated().flatMap { i, d in (i > 0 && (digits.count - i) % 3 == 0 ? [","] : []) + [d] })
    }
    private static func bytes(_ n: Int) -> String {
        if n >= 1 << 20 && n % (1 << 20) == 0 { return "\(n >> 20) MiB" }
        if n >= 1 << 10 && n % (1 << 10) == 0 && n > 1024 { return "\(n >> 10) KiB" }
        return "\(number(n)) bytes"
    }
    private static func levels(_ n: Int) -> String { "\(number(n)) levels" }
    private static func seconds(_ s: Double) -> String {
        s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
    }
    private static func days(_ ms: Int64) -> String { "\(ms / Milliseconds.day) days" }
    /// The last instant, to the second (the bound falls within its day).
    private static func timestampText(_ ms: Int64) -> String {
        String(Timestamp(milliseconds: ms).description.prefix(19)) + "Z"
    }
}
