"""Benchmark: how long `sandbox-conformance --version` and `sandbox-conformance run --help` take, as a
ratio to `pytest --version` (the baseline, a command line tool of the same environment) measured
interleaved in the same run: a fresh process each, wall time from start to exit. The bound of issue 25
is --version under 1 s; tests/test_startup.py checks it and that the CLI's import brings in no heavy
module.

    .venv/bin/python benchmarks/startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import interleaved, ratio, timed, write_figures

BIN = Path(sys.executable).parent
COMMANDS = {
    "pytest --version": [str(BIN / "pytest"), "--version"],
    "sandbox-conformance --version": [str(BIN / "sandbox-conformance"), "--version"],
    "sandbox-conformance run --help": [str(BIN / "sandbox-conformance"), "run", "--help"],
}
BASELINE = "pytest --version"


def started_and_ended(argv: list[str]) -> float:
    def run() -> None:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if completed.returncode != 0:
            sys.exit(f"{' '.join(argv)} exited {completed.returncode}: {completed.stderr[-2000:]}")
    return timed(run)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="interleaved repetitions of each (default 15)")
    parser.add_argument("--output", type=Path, help="where the JSON figures go (default reports/benchmarks/)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    for argv in COMMANDS.values():  # once each, unmeasured: the first start reads the files from disk
        started_and_ended(argv)
    figures = interleaved({name: (lambda argv=argv: started_and_ended(argv)) for name, argv in COMMANDS.items()},
                          args.repeat)
    print(f"{args.repeat} interleaved repetitions, wall time of a fresh process (median, min–max):")
    for name, figure in figures.items():
        low, high = figure.spread
        label = f"{name} (baseline)" if name == BASELINE else name
        print(f"  {label:<34} median {figure.median:.3f} s ({low:.3f}–{high:.3f})")
    ratios = {name: ratio(figure, figures[BASELINE]) for name, figure in figures.items() if name != BASELINE}
    for name, of in ratios.items():
        print(f"ratio {name} / {BASELINE}: median {of['median']:.2f} (paired {of['min']:.2f}–{of['max']:.2f})")
    path = write_figures("startup", {"repeat": args.repeat, "figures": figures, "ratio_to_pytest": ratios},
                         args.output)
    print(f"figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
