"""Benchmark: what one small run costs in-process (the runner called directly, the plugin served on a
thread over pipes: how the suite's own tests run mutants) as a ratio to the same run through the CLI
in a subprocess with a real plugin process (the raw baseline, measured in the same run).

    .venv/bin/python benchmarks/inprocess_overhead.py [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import sys
import tempfile
import time

SCENARIOS = ("delete-unknown", "exec-env", "create-describe-delete")


def subprocess_run(scenarios: tuple[str, ...] = SCENARIOS) -> float:
    with tempfile.TemporaryDirectory() as reports:
        selection = [argument for sid in scenarios for argument in ("--scenario", sid)]
        started = time.monotonic()
        completed = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--report-dir", reports,
                                    "--seed", "1", *selection], check=False, capture_output=True, text=True)
        elapsed = time.monotonic() - started
    if completed.returncode != 0:
        sys.exit(f"the subprocess run failed:\n{completed.stdout[-2000:]}{completed.stderr[-2000:]}")
    return elapsed


def in_process_run(scenarios: tuple[str, ...] = SCENARIOS) -> float:
    from conformance import runner
    from conformance.config import RunConfig, Selection
    from conformance.providers import ProviderConfig

    with tempfile.TemporaryDirectory() as reports:
        config = RunConfig(provider=ProviderConfig(in_process=("conformance.reference.host_plugin:serve",)),
                           selection=Selection(scenarios=scenarios), report_dir=reports, seed=1)
        started = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()):
            outcome = runner.run(config)
        elapsed = time.monotonic() - started
    if outcome.exit_code != 0:
        sys.exit(f"the in-process run failed: {outcome.document.reasons if outcome.document else outcome.note}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="interleaved repetitions of each (default 7)")
    parser.add_argument("--scenario", action="append", dest="scenarios", metavar="ID",
                        help=f"a scenario of the run, repeatable (default: {', '.join(SCENARIOS)})")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    scenarios = tuple(args.scenarios or SCENARIOS)
    in_process_run(scenarios)  # the first in-process run imports and parses everything once, as a test worker does
    raw, ours = [], []
    for _ in range(args.repeat):  # interleaved, so a slow moment of the machine hits both alike
        raw.append(subprocess_run(scenarios))
        ours.append(in_process_run(scenarios))

    def spread(values: list[float]) -> str:
        return f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"

    print(f"{len(scenarios)} scenarios, {args.repeat} interleaved repetitions")
    print(f"  subprocess CLI + plugin process (baseline): {spread(raw)}")
    print(f"  in-process runner + plugin on a thread:     {spread(ours)}")
    print(f"  ratio in-process / subprocess: {statistics.median(ours) / statistics.median(raw):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
