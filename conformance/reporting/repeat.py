"""``--repeat N``: the selection runs N times with the same seed; one report says what each scenario did
each time, and a scenario whose outcome changed is flaky — which fails the run: a verdict that depends
on the attempt cannot be trusted either way."""

from __future__ import annotations

from typing import Any

from conformance.reporting.model import _SEVERITY
from conformance.reporting.writer import finish_document, merge_processes_left

# xfail and xpass sit beside failed: a baselined failure that passes once is as worrying as a failure.
_RANK = {**_SEVERITY, "xfail": _SEVERITY["failed"], "xpass": _SEVERITY["failed"]}


def merge(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """One document for N repetitions: each scenario keeps its worst outcome (with that repetition's
    diagnostics) and the list of outcomes in order; counts, sandboxes and the verdict cover every run."""
    first = documents[0]
    merged = {**first, "run": {**first["run"], "repeat": len(documents)}}
    merged["run"]["duration_s"] = round(sum(d["run"]["duration_s"] for d in documents), 3)
    merged["run"]["interrupted"] = any(d["run"]["interrupted"] for d in documents)
    by_id: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        for scenario in document["scenarios"]:
            by_id.setdefault(scenario["id"], []).append(scenario)
    scenarios, flaky = [], []
    for scenario_id, runs in by_id.items():
        outcomes = [run["outcome"] for run in runs]
        worst = max(runs, key=lambda run: _RANK[run["outcome"]])
        # A scenario no repetition selected has nothing to tell per repetition.
        scenarios.append(worst if set(outcomes) == {"disabled"} else {**worst, "outcomes": outcomes})
        if len(set(outcomes)) > 1:
            flaky.append({"id": scenario_id, "outcomes": outcomes})
    merged["scenarios"] = scenarios
    merged["flaky"] = flaky
    merged["sandboxes"] = {
        "created": sum(d["sandboxes"]["created"] for d in documents),
        "deleted": sum(d["sandboxes"]["deleted"] for d in documents),
        "leaked": sorted({sid for d in documents for sid in d["sandboxes"]["leaked"]}),
        "swept": sorted({sid for d in documents for sid in d["sandboxes"].get("swept", [])}),
        "died_holding": sorted({sid for d in documents for sid in d["sandboxes"].get("died_holding", [])}),
        "unknown_at_delete": sorted({sid for d in documents for sid in d["sandboxes"].get("unknown_at_delete", [])}),
        "ids": sorted({sid for d in documents for sid in d["sandboxes"].get("ids", [])}),
        "unknown_fate": sorted({sid for d in documents for sid in d["sandboxes"].get("unknown_fate", [])}),
    }
    processes_left = merge_processes_left(documents)
    if processes_left is not None:
        merged["processes_left"] = processes_left
    merged["wire_violations_outside_scenarios"] = [
        v for d in documents for v in d.get("wire_violations_outside_scenarios", [])]
    stale = {}
    for document in documents:
        for entry in (document.get("baseline") or {}).get("entries", []):
            stale.setdefault(entry["id"], entry)
            if entry["status"] in ("stale", "names nothing"):
                stale[entry["id"]] = entry
    if first.get("baseline"):
        merged["baseline"] = {**first["baseline"], "entries": list(stale.values())}
    return finish_document(merged)
