# Sourced by the benchmark scripts: `figure NAME VALUE [UNIT]` records one figure for scripts/side-by-side.sh (a no-op
# unless BENCH_FIGURES is set); with BEFORE=PATH set, the script runs itself through side-by-side.sh instead.
figure() {
  [ -n "${BENCH_FIGURES:-}" ] && printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >> "$BENCH_FIGURES"
  return 0
}
if [ -n "${BEFORE:-}" ] && [ -z "${BENCH_FIGURES:-}" ]; then
  exec bash scripts/side-by-side.sh "scripts/$(basename "$0")" "$@"
fi
