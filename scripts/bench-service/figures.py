"""`figure(name, value, unit)` records one figure for scripts/side-by-side.sh (a no-op unless BENCH_FIGURES is set),
as scripts/bench-figures.sh does for the shell scripts."""
import os


def figure(name, value, unit=""):
    path = os.environ.get("BENCH_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(f"{name}\t{value}\t{unit}\n")
