#!/usr/bin/env bash
# Fuzzes Beckon's front doors with libFuzzer (Swift's -sanitize=fuzzer, with AddressSanitizer): the YAML loader and
# compiler (rules), the expression parser, checker and evaluator (expression), the event decoder and engine (events),
# the cel-spec text-format reader (textproto), a user's saved state decoded, restored and run on (state), and the
# request bodies of `beckon serve`'s ingest (requests). Each
# target starts from a seed corpus made of the shipped files (for state: states the engine wrote, and the golden
# version-1 state) and from every input that once crashed it (Fuzz/regressions/TARGET/), and stops at the first crash,
# at an input slower than 1 s (-timeout=1) or over 2 GB of memory, or when its time or run count is spent.
#
# Usage: scripts/fuzz.sh [--seconds N | --runs N] [--jobs N] [--debug] [TARGET...]   (default: 30 s each, every target)
# --debug builds without optimization: fewer executions a second, and a shorter first build (CI's smoke, which builds
# from nothing, is mostly that build: 15.5 minutes in release on 2 cores).
# Prints per target: executions, crashes (0 or 1: libFuzzer stops at the first) and where the crash input was saved.
# Exit status 1 if any target crashed, timed out or ran out of memory.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time=30)
jobs=1
config=release
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) limit=(-max_total_time="$2"); shift ;;
    --runs) limit=(-runs="$2" -max_total_time=1800); shift ;;
    --jobs) jobs="$2"; shift ;;
    --debug) config=debug ;;
    rules|expression|events|textproto|state|requests|http) targets+=("$1") ;;
    *) echo "usage: scripts/fuzz.sh [--seconds N | --runs N] [--jobs N] [--debug] [rules|expression|events|textproto|state|requests|http]..." >&2; exit 64 ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || targets=(rules expression events textproto state requests http)

echo "== building the fuzz harness (Fuzz/, -sanitize=fuzzer,address)"
build_log=$(mktemp)
build() {
  swift build -c "$config" --package-path Fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -g -Xcc -DBECKON_NO_ALLOC_COUNT \
    "$@" > "$build_log" 2>&1
}
# (On stderr: scripts/test.sh keeps only the summary of stdout.) A build tool that crashed rather than failed, which a
# CI machine did once ("Aborted", its log unseen), gets one more try with two jobs, its log printed first; a compile
# error fails both.
if ! build; then
  echo "scripts/fuzz.sh: building the fuzz harness failed; the end of its log ($build_log):" >&2
  tail -n 60 "$build_log" >&2
  echo "scripts/fuzz.sh: building it once more with -j 2" >&2
  build -j 2 || { tail -n 60 "$build_log" >&2; exit 1; }
fi
bin="Fuzz/.build/$config"
work="Fuzz/.build/fuzz"

# Seed corpora from what ships: rule files, the expressions in them and in the cel-spec tests, event lines and streams,
# cel-spec files. Rebuilt every run; a target's own finds stay in $work/TARGET/found.
seed() {
  local t="$1" dir="$work/$t/seeds"
  rm -rf "$dir" "$work/$t/artifacts"; mkdir -p "$dir" "$work/$t/found" "$work/$t/artifacts"
  case "$t" in
    rules)
      find rules campaigns examples Tests/BeckonCommandsTests/Fixtures -name '*.yaml' | while read -r f; do
        cp "$f" "$dir/$(echo "$f" | tr '/' '_')"; done ;;
    expression)
      python3 -W ignore - "$dir" <<'PY'
import glob, hashlib, os, re, sys
out = sys.argv[1]
exprs = set()
for f in glob.glob("rules/**/*.yaml", recursive=True) + glob.glob("campaigns/**/*.yaml", recursive=True):
    for line in open(f, encoding="utf-8"):
        m = re.match(r"\s*(?:-\s*)?(?:if|where|audience|recheck_if|[a-z_]+):\s*['\"]?(.*[a-z_]\(.*|.*(?:==|>=|<=|&&|\|\|).*?)['\"]?\s*$", line)
        if m: exprs.add(m.group(1))
for f in glob.glob("Tests/Conformance/cel-spec/*.textproto"):
    for m in re.finditer(r'expr:\s*"((?:[^"\\]|\\.)*)"', open(f, encoding="utf-8").read()):
        exprs.add(bytes(m.group(1), "utf-8").decode("unicode_escape", errors="ignore"))
for e in exprs:
    open(os.path.join(out, hashlib.sha1(e.encode()).hexdigest()), "w", encoding="utf-8").write(e)
PY
      ;;
    events)
      for f in samples/*/*.jsonl examples/*/*.jsonl; do
        head -c 65536 "$f" > "$dir/$(echo "$f" | tr '/' '_')"
        split -l 1 -a 4 "$f" "$dir/$(echo "$f" | tr '/' '_').line."
      done ;;
    textproto)
      cp Tests/Conformance/cel-spec/*.textproto "$dir/" ;;
    requests)
      # Each sample stream as batch bodies of up to 20 events, and single events.
      python3 - "$dir" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
for f in glob.glob("samples/*/*.jsonl"):
    events = [json.loads(l) for l in open(f, encoding="utf-8") if l.strip()]
    name = f.replace("/", "_")
    for i in range(0, len(events), 20):
        open(os.path.join(out, f"{name}.batch{i}"), "w").write(json.dumps({"batch": events[i:i + 20], "sentAt": "2026-03-02T10:00:00Z"}))
    for i, e in enumerate(events[:5]):
        open(os.path.join(out, f"{name}.one{i}"), "w").write(json.dumps(e))
PY
      ;;
    http)
      # Raw requests a client could send: every route with and without its credentials, gzip, chunked bodies,
      # pipelined requests, a half-sent head.
      python3 - "$dir" <<'PY'
import base64, gzip, json, os, sys
out = sys.argv[1]
basic = "Basic " + base64.b64encode(b"fuzz-write-key:").decode()
ev = json.dumps({"type": "track", "event": "E_Opened_App", "userId": "u1", "timestamp": "2026-03-02T09:00:00Z",
                 "context": {"locale": "de"}, "messageId": "m1"}).encode()
batch = json.dumps({"batch": [json.loads(ev)], "sentAt": "2026-03-02T09:00:01Z"}).encode()
def req(method, path, headers=(), body=b""):
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    if body: head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body
seeds = {
    "track": req("POST", "/v1/track", [("Authorization", basic)], ev),
    "batch": req("POST", "/v1/batch", [("Authorization", basic), ("Content-Type", "application/json")], batch),
    "gzip": req("POST", "/v1/batch", [("Authorization", basic), ("Content-Encoding", "gzip")], gzip.compress(batch)),
    "chunked": f"POST /v1/track HTTP/1.1\r\nHost: x\r\nAuthorization: {basic}\r\nTransfer-Encoding: chunked\r\n\r\n{len(ev):x}\r\n".encode() + ev + b"\r\n0\r\n\r\n",
    "pipelined": req("GET", "/livez") + req("GET", "/readyz") + req("POST", "/v1/track", [("Authorization", basic)], ev),
    "actions": req("GET", "/v1/users/u1/actions?after=0&wait=0", [("Authorization", "Bearer x.y.z")]),
    "admin": req("GET", "/admin/rules", [("Authorization", "Bearer fuzz-admin-key")]),
    "export": req("GET", "/v1/users/u1/export", [("Authorization", "Bearer fuzz-admin-key")]),
    "forget": req("DELETE", "/v1/users/u%2F1", [("Authorization", "Bearer wrong")]),
    "console": req("POST", "/console/login", [("Content-Type", "application/x-www-form-urlencoded")], b"csrf=a&key=b"),
    "half": b"POST /v1/track HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\"",
    "metrics": req("GET", "/metrics"),
}
for name, data in seeds.items():
    open(os.path.join(out, name), "wb").write(data)
PY
      ;;
    state)
      # (Leaks unchecked here as in the runs below: the static schema graph reads as one.)
      BECKON_FUZZ_WRITE_STATE_SEEDS="$dir" ASAN_OPTIONS=detect_leaks=0 "$bin/beckon-fuzz"
      python3 -c 'import sys; open(sys.argv[2], "wb").write(bytes.fromhex(open(sys.argv[1]).read().strip()))' \
        Tests/BeckonCoreTests/Fixtures/user-state-v1.hex "$dir/golden-v1" ;;
  esac
  if [ -d "Fuzz/regressions/$t" ]; then cp Fuzz/regressions/"$t"/* "$dir/" 2>/dev/null || true; fi
}

status=0
summary=""
for t in "${targets[@]}"; do
  seed "$t"
  log="$work/$t/log.txt"
  echo "== fuzz-$t ${limit[*]}"
  set +e
  parallel=()
  [ "$jobs" -le 1 ] || parallel=(-jobs="$jobs" -workers="$jobs")
  # Leaks are not checked (-detect_leaks=0): LeakSanitizer reports the rule set's static schema graph, built once, as
  # a leak; memory that grows with inputs still stops the run at -rss_limit_mb. Swift's backtracer is off: its memory
  # server confuses AddressSanitizer after a Swift runtime failure (libFuzzer's own report names the input).
  (cd "$work/$t" && BECKON_FUZZ_RULES="$OLDPWD/campaigns/firefox" BECKON_FUZZ_TARGET="$t" SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 "$OLDPWD/$bin/beckon-fuzz" "${limit[@]}" ${parallel[@]+"${parallel[@]}"} -timeout=1 -rss_limit_mb=2048 \
    -detect_leaks=0 -print_final_stats=1 -artifact_prefix=artifacts/ found seeds > log.txt 2>&1)
  rc=$?
  set -e
  if [ "$jobs" -gt 1 ]; then cat "$work/$t"/fuzz-*.log >> "$log" 2>/dev/null || true; rm -f "$work/$t"/fuzz-*.log; fi
  runs=$(grep -h "stat::number_of_executed_units" "$log" | awk '{s += $2} END {print s + 0}')
  crash=$(ls "$work/$t/artifacts" 2>/dev/null | head -n 1)
  if [ "$rc" -ne 0 ] || [ -n "$crash" ]; then
    status=1
    summary+="fuzz-$t: $runs executions, 1 crash: $work/$t/artifacts/$crash (log: $log)"$'\n'
    grep -E "ERROR|SUMMARY|Fatal|==[0-9]+==|deadly signal|timeout" "$log" | head -n 12
  else
    summary+="fuzz-$t: $runs executions, 0 crashes"$'\n'
  fi
done
echo "== fuzz summary"
printf "%s" "$summary"
exit $status
