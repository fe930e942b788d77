"""Benchmark: the wall time of the whole battery against the reference plugin.

Performance is measured here, never asserted in a test. Each figure is reported as a ratio to a raw
baseline measured in the same run on the same machine: the cost of starting the suite and running one
trivial scenario (interpreter start, plugin start, handshake, collection, reports). The battery's time
above that baseline is what the scenarios themselves cost.

    .venv/bin/python benchmarks/suite_wall_time.py [--repeat N] [--workers N] [--battery-scenario ID ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed_run(*arguments: str) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as reports:
        started = time.monotonic()
        completed = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--report-dir", reports, *arguments],
                                   capture_output=True, text=True, check=False)
        elapsed = time.monotonic() - started
        if completed.returncode != 0:
            sys.exit(f"the run {' '.join(arguments) or '(whole battery)'} failed:\n{completed.stdout[-3000:]}")
        summary = json.loads((Path(reports) / "results.json").read_text())["summary"]
    return elapsed, summary


def median_run(repeat: int, *arguments: str) -> tuple[float, dict]:
    times, summary = [], {}
    for _ in range(repeat):
        elapsed, summary = timed_run(*arguments)
        times.append(elapsed)
    return statistics.median(times), summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration (the median is reported)")
    parser.add_argument("--workers", type=int, default=2,
                        help="xdist workers for the parallel run (0: no parallel run, as CI's smoke run)")
    parser.add_argument("--battery-scenario", action="append", default=[], metavar="ID",
                        help="run only this scenario as the battery, repeatable (default: every scenario)")
    args = parser.parse_args()
    if args.repeat < 1 or args.workers < 0:
        parser.error("--repeat must be at least 1 and --workers at least 0")
    battery = [argument for sid in args.battery_scenario for argument in ("--scenario", sid)]

    baseline, _ = median_run(args.repeat, "--scenario", "delete-unknown")
    serial, summary = median_run(args.repeat, *battery)
    parallel = median_run(args.repeat, "-n", str(args.workers), *battery)[0] if args.workers else None
    selected = summary["selected"]
    print(f"battery: {selected} scenarios ({summary['passed']} passed, {summary['skipped']} skipped)")
    print(f"{'configuration':<28}{'wall time':>12}{'× baseline':>12}")
    print(f"{'baseline (one scenario)':<28}{baseline:>11.2f}s{1.0:>12.2f}")
    print(f"{'battery, 1 process':<28}{serial:>11.2f}s{serial / baseline:>12.2f}")
    if parallel is not None:
        print(f"{f'battery, -n {args.workers}':<28}{parallel:>11.2f}s{parallel / baseline:>12.2f}")
        print(f"parallel speed-up: {serial / parallel:.2f}×")
    print(f"scenario cost above the baseline: {(serial - baseline) / max(selected - 1, 1) * 1000:.0f} ms per scenario")
    return 0


if __name__ == "__main__":
    sys.exit(main())
