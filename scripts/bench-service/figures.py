"""`figure(name, value, unit)` records one figure for scripts/side-by-side.py in BENCH_FIGURES (a no-op unless it is
set) or in `path`, as scripts/bench-figures.sh does for the shell scripts."""
import os


def figure(name, value, unit="", path=None):
    path = path or os.environ.get("BENCH_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(f"{name}\t{value}\t{unit}\n")
