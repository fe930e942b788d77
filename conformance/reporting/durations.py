"""The scenarios' recorded durations, and the ``--shard`` partition balanced by them.

``conformance/data/durations.json`` maps scenario ids to the seconds a reference run spent on each. It is
produced from reference runs' ``results.json`` documents (``make durations``, which calls
``python -m conformance.reporting.durations RESULTS_JSON... --out conformance/data/durations.json``); only
scenarios that ran count: a skip lasts no time against the reference and says nothing about a provider
that does run the scenario, so an id skipped everywhere stays unknown.

The partition is greedy longest-processing-time: the ids, longest first and by id among equals, each go to
the shard with the least time so far (the lowest shard number among equals). An unknown id weighs the
median of the recorded durations. It depends on nothing but the ids and the shipped file, so every
machine and every xdist worker computes the same partition; and since each id joins the lightest shard,
no shard ends more than the longest scenario's weight above another.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

DURATIONS_FILE = Path(__file__).resolve().parent.parent / "data" / "durations.json"
# Outcomes of a scenario that ran against the provider; a skip or a left-out scenario took no real time.
_RAN = ("passed", "failed", "error", "xfail", "xpass")
# Weights are whole milliseconds: integer sums are exact, so the partition cannot depend on float rounding.
_FALLBACK_MS = 1000


@cache
def recorded() -> dict[str, float]:
    """The shipped durations (seconds by scenario id); empty if the file is missing."""
    try:
        data = json.loads(DURATIONS_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {str(scenario_id): float(seconds) for scenario_id, seconds in data["seconds"].items()}


def weights_ms(ids: Iterable[str], durations: Mapping[str, float]) -> dict[str, int]:
    """Each id's weight in whole milliseconds (at least 1): its recorded duration, else the median."""
    known = sorted(durations.values())
    median_ms = max(1, round(statistics.median(known) * 1000)) if known else _FALLBACK_MS
    return {scenario_id: max(1, round(durations[scenario_id] * 1000)) if scenario_id in durations else median_ms
            for scenario_id in ids}


def balanced_partition(ids: Iterable[str], count: int, durations: Mapping[str, float]) -> list[list[str]]:
    """``count`` disjoint parts whose union is ``ids``, balanced by duration (see the module docstring)."""
    weights = weights_ms(set(ids), durations)
    parts: list[list[str]] = [[] for _ in range(count)]
    loads = [0] * count
    for scenario_id in sorted(weights, key=lambda i: (-weights[i], i)):
        lightest = min(range(count), key=lambda shard: (loads[shard], shard))
        parts[lightest].append(scenario_id)
        loads[lightest] += weights[scenario_id]
    return [sorted(part) for part in parts]


def from_documents(documents: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Seconds by scenario id from results documents: each scenario's longest duration among the runs
    that ran it (several dialects' reference runs each run a part of the catalogue)."""
    seconds: dict[str, float] = {}
    for document in documents:
        for scenario in document["scenarios"]:
            if scenario["outcome"] in _RAN:
                seconds[scenario["id"]] = max(seconds.get(scenario["id"], 0.0), float(scenario["duration_s"]))
    return {scenario_id: round(seconds[scenario_id], 3) for scenario_id in sorted(seconds)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.reporting.durations",
        description="record the scenarios' durations from reference runs, for the balanced --shard partition")
    parser.add_argument("results", nargs="+", metavar="RESULTS_JSON", help="results.json of a reference run")
    parser.add_argument("--out", default=str(DURATIONS_FILE), metavar="FILE",
                        help=f"where to write them (default: {DURATIONS_FILE})")
    args = parser.parse_args(argv)
    from conformance import schemas
    from conformance.reporting.writer import RESULTS_SCHEMA

    documents = []
    for path in args.results:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"error: {path} is not a readable results.json: {exc}", file=sys.stderr)
            return 2
        problems = schemas.problems(RESULTS_SCHEMA, document)
        if problems:
            print(f"error: {path} is not a results.json {problems[0]}", file=sys.stderr)
            return 2
        documents.append(document)
    seconds = from_documents(documents)
    about = ("seconds each scenario took in a reference run (the longest over the runs given), for "
             "`run --shard`; regenerate with `make durations`")
    Path(args.out).write_text(json.dumps({"about": about, "seconds": seconds}, indent=1) + "\n", encoding="utf-8")
    print(f"{len(seconds)} scenario durations written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
