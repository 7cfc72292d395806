#!/usr/bin/env bash
# The test command (README, .ci/run): builds, starts a throw-away PostgreSQL (scripts/postgres.sh), runs the Swift
# tests, checks formatting, runs CEL conformance, the service and fleet tests,
# validates and dry-runs everything shipped in rules/, campaigns/ and samples/, and fuzzes each fuzz target briefly.
set -euo pipefail
cd "$(dirname "$0")/.."

# say TEXT: a section's heading, after the minutes and seconds since the start (where a slow run spends its time).
say() { printf '== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

scripts/install-headers.sh
say "swift build --build-tests"
swift build --build-tests
say "a throw-away PostgreSQL on loopback for the fleet's tests"
pg_dir=$(mktemp -d)/postgres
trap 'scripts/postgres.sh stop "$pg_dir"' EXIT
BECKON_TEST_POSTGRES=$(scripts/postgres.sh start "$pg_dir")
export BECKON_TEST_POSTGRES
echo "$BECKON_TEST_POSTGRES"
say "swift test"
log=$(mktemp)
# (Bounded: the run takes about 2 minutes on 2 cores. On a hang the test process is killed, not `swift test`, which
# then writes out the last of what it holds and fails: a test that hung shows as one that started and did not end.)
swift test --skip-build > "$log" 2>&1 &
tests=$!
(
  trap 'kill "$nap" 2> /dev/null; exit 0' TERM
  sleep 1200 & nap=$!
  wait "$nap"
  echo "swift test passed its 1,200 s: its test process is killed"
  pkill -KILL -f "BeckonPackageTests.xctest"
) &
watchdog=$!
status=0
wait "$tests" || status=$?
kill "$watchdog" 2> /dev/null || true
if [ "$status" -ne 0 ]; then
  grep -E "✘|error:|fatal" "$log" | grep -v "^◇" | head -n 80
  awk '/^◇ Test [^ ]+ started\.$/ && $3 != "run" { open[$3] = 1 } /^(✔|✘) Test [^ ]+ / { delete open[$3] }
    END { for (t in open) print "started and not ended: " t }' "$log"
  echo "swift test failed (full log: $log)"
  exit 1
fi
grep -E "^✔ Test run|Executed .* tests" "$log" || true
# (The fleet's tests are skipped without a database: here there is one, so they must have run.)
grep -q "✔ Suite FleetLogTests passed" "$log" || { echo "the PostgreSQL tests did not run"; exit 1; }
# (The app client's tests start .build/debug/beckon and beckon-client-probe, built above.)
grep -q "✔ Suite ClientTests passed" "$log" || { echo "the client tests against beckon serve did not run"; exit 1; }
say "beckon fleet on that database"
.build/debug/beckon fleet status --postgres "$BECKON_TEST_POSTGRES" 2> /dev/null && { echo "status of a database not set up"; exit 1; }
.build/debug/beckon fleet migrate --postgres "$BECKON_TEST_POSTGRES"
status=$(.build/debug/beckon fleet status --postgres "$BECKON_TEST_POSTGRES" | tail -n 1)
echo "$status"
[ "$status" = "64 partitions, 0 held by 0 process(es), lag 0 events, 0 users' timers due" ] || { echo "unexpected fleet status"; exit 1; }

say "swift format lint"
swift format lint --strict -r Sources Tests Package.swift

say "raw memory only where it is allowed"
scripts/check-unsafe.sh

beckon=".build/debug/beckon"

# suite NAME SECONDS no-skips|skips-allowed FILE...: the Python tests of FILEs against $beckon, bounded in time; the
# whole log when they fail, their last lines otherwise. With no-skips a skipped test fails the run as well.
suite() {
  local name=$1 seconds=$2 skips=$3 log
  shift 3
  log=$(mktemp)
  if ! BECKON="$beckon" timeout "$seconds" python3 -m unittest "$@" > "$log" 2>&1; then
    cat "$log"
    echo "$name tests failed"
    exit 1
  fi
  tail -n 3 "$log"
  if [ "$skips" = no-skips ] && grep -qE "skipped=|skipped '" "$log"; then
    grep -i "skip" "$log"
    echo "the $name tests were skipped"
    exit 1
  fi
}
say "CEL conformance"
"$beckon" conformance cel Tests/Conformance/cel-spec/*.textproto | tail -n 1

say "campaign tests"
"$beckon" test rules campaigns examples | tail -n 1

say "beckon serve on loopback: replays, kill -9 under load, the live clock, bad requests; destinations with"
echo "   retries, live reload, privacy requests, admin keys"
suite service 900 skips-allowed Tests/Service/service_test.py Tests/Service/operations_test.py

say "hostile clients: silent connections past the descriptor limit, timeouts, bytes that are not UTF-8 during"
echo "   reloads, forget of merged ids, redirects and hanging destinations, a full disk, a costly event, concurrent"
echo "   exports, guessed keys, gzip bombs and the real Segment and RudderStack clients"
scripts/install-python-clients.sh
# (A test skips only where a tmpfs cannot be mounted or a client is missing: here both must run.)
suite hostile 600 no-skips Tests/Service/hostile_test.py

say "the commands' output where it cannot be written: a full disk, a reader gone with SIGPIPE ignored, a slow"
echo "   non-blocking pipe; an events file that cannot be opened says why"
suite output 300 no-skips Tests/Service/output_test.py

say "push and email, against local TLS doubles of APNs (ES256 provider tokens verified), FCM (RS256 OAuth"
echo "   assertions verified) and a SendGrid-shaped email API: fan-out to devices, invalid tokens removed, 429 retried,"
echo "   refused credentials renewed, send rates, kill -9; signed unsubscribe and click links; both stores"
suite "push and email" 600 no-skips Tests/Service/push_test.py Tests/Service/email_test.py
BECKON_TEST_STORE=postgres suite "push and email (PostgreSQL)" 600 no-skips Tests/Service/push_test.py \
  Tests/Service/email_test.py

say "the contract: /openapi.json is valid OpenAPI 3.1; schemathesis against a single service and a fleet process"
echo "   (no 5xx, every answer as documented, every protected route refusing a missing or wrong credential)"
suite contract 600 no-skips Tests/Service/contract_test.py

say "the console in headless Chromium (Selenium, axe-core): sign-in, live counts, a timeline, the playground,"
echo "   sign-out at 1280 and 390 px; no page without a session, CSRF refused, hostile text inert, playground limits"
scripts/install-chromium.sh > /dev/null
suite console 600 skips-allowed Tests/Service/console_test.py

say "the same service, operations and console tests against a fleet process (beckon serve --postgres): those of"
echo "   what only a single service has (its SQLite file and its CLI, one event clock) are skipped"
BECKON_TEST_STORE=postgres suite "service, operations and console (PostgreSQL)" 1200 skips-allowed \
  Tests/Service/service_test.py Tests/Service/operations_test.py Tests/Service/console_test.py

say "a fleet of three beckon serve --postgres: equal to a dry-run of 100,000 events, through kill -9 and SIGSTOP;"
echo "   timers of a stopped owner fire once elsewhere and are delivered"
suite fleet 1200 no-skips Tests/Service/fleet_test.py

say "the fleet under database faults (its own PostgreSQL): restarts and killed backends under ingest, three rounds"
echo "   each; PostgreSQL stopped 20 s (ingest 503 within 2 s, /readyz 503, both back within 5 s); SIGTERM in an outage"
suite "fleet fault" 900 no-skips Tests/Service/fleet_fault_test.py

say "validate shipped rule sets and dry-run the samples"
scripts/run-samples.sh --debug --quiet

say "fuzz smoke (every target 12 s, a debug build; full runs: scripts/fuzz.sh --runs 10000000)"
scripts/fuzz.sh --seconds 12 --debug | sed -n '/== fuzz summary/,$p'
echo "all checks passed"
