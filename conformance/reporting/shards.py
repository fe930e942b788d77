"""``report merge``: the documents of the shards of one run (``run --shard i/n``) joined into the document
of the whole run. Unlike ``--repeat`` (``repeat.py``: one selection N times, worst outcome wins), shards
ran disjoint parts of a selection: each scenario takes the outcome of the one shard that ran it, and the
verdict is decided again on the union. Documents of several providers are grouped by provider first
(``by_provider``), each provider's shards merged, and the runs set side by side in a matrix (``matrix.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.errors import UsageError
from conformance.reporting.writer import finish_document, merge_processes_left

# What must agree for documents to be parts of one provider's run; the rest (run id, timing) may differ.
PROVIDER_FIELDS = ("kind", "version", "dialect", "transport", "command")
# How the run marks a scenario another shard owns, and one an interrupted run never reached (engine.finish).
_IN_ANOTHER_SHARD = "selected, but in another shard"
_NOT_REACHED = "not reached"


def identity_fields(provider: dict[str, Any]) -> dict[str, str]:
    """The recorded fields that make a provider itself. A provider started from a container image (``--image``)
    is that image: its ``command`` is the URL of one container, whose port differs in every shard's job."""
    fields = {key: str(provider.get(key)) for key in PROVIDER_FIELDS}
    if provider.get("image"):
        del fields["command"]
        fields["image"] = str(provider["image"])
    return fields


def merge(documents: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One document from ``(source, document)`` pairs; ``UsageError`` naming the first problem: different
    providers, shards of different partitions, a shard given twice or missing, a scenario two ran."""
    if not documents:
        raise UsageError("report merge needs at least one results.json")
    first = documents[0][1]
    _check_same_provider(documents)
    _check_same_suite(documents)
    _check_shards(documents)
    ran_in: dict[str, str] = {}
    by_id: dict[str, dict[str, Any]] = {}
    for source, document in documents:
        for scenario in document["scenarios"]:
            scenario_id = scenario["id"]
            if scenario["outcome"] == "disabled":
                by_id.setdefault(scenario_id, scenario)
                continue
            if scenario_id in ran_in:
                raise UsageError(f"scenario {scenario_id} ran in both {ran_in[scenario_id]} and {source}: "
                                 "the documents are not disjoint shards")
            ran_in[scenario_id] = source
            by_id[scenario_id] = scenario
    _check_one_partition(documents, ran_in)
    scenarios = sorted(by_id.values(), key=lambda s: (s["feature"], s["id"]))
    run = {key: value for key, value in first["run"].items() if key != "shard"}
    run["duration_s"] = round(sum(d["run"]["duration_s"] for _, d in documents), 3)  # CPU time, not wall time
    run["interrupted"] = any(d["run"]["interrupted"] for _, d in documents)
    run["strict"] = any(d["run"].get("strict", False) for _, d in documents)
    run["shards"] = len(documents)
    seeds = sorted((d["run"]["shard"]["index"], d["run"]["seed"]) for _, d in documents if d["run"].get("shard"))
    if len({seed for _, seed in seeds}) > 1:  # each shard drew its own: the first's is not the run's
        run["shard_seeds"] = [{"index": index, "seed": seed} for index, seed in seeds]
    merged = {**first, "run": run, "scenarios": scenarios}
    merged["sandboxes"] = {
        "created": sum(d["sandboxes"]["created"] for _, d in documents),
        "deleted": sum(d["sandboxes"]["deleted"] for _, d in documents),
        **{key: sorted({sid for _, d in documents for sid in d["sandboxes"].get(key, [])})
           for key in ("leaked", "swept", "died_holding", "unknown_at_delete", "ids", "unknown_fate")},
    }
    processes_left = merge_processes_left([d for _, d in documents])
    if processes_left is not None:
        merged["processes_left"] = processes_left
    merged["wire_violations_outside_scenarios"] = [
        v for _, d in documents for v in d.get("wire_violations_outside_scenarios", [])]
    merged["flaky"] = [entry for _, d in documents for entry in d.get("flaky", [])]
    merged["gaps"] = _merge_gaps([d.get("gaps") or {} for _, d in documents])
    merged["baseline"] = _merge_baseline([d.get("baseline") for _, d in documents])
    return finish_document(merged)


def _check_same_provider(documents: list[tuple[str, dict[str, Any]]]) -> None:
    first_source, first = documents[0]
    mine = identity_fields(first["provider"])
    for source, document in documents[1:]:
        theirs = identity_fields(document["provider"])
        for key in sorted(mine.keys() | theirs.keys(), key=lambda key: (key not in PROVIDER_FIELDS, key)):
            if mine.get(key) != theirs.get(key):
                raise UsageError(f"{source} is another provider than {first_source} (provider {key}: "
                                 f"{theirs.get(key)!r} vs {mine.get(key)!r}); merging providers is not supported")


def _check_same_suite(documents: list[tuple[str, dict[str, Any]]]) -> None:
    """Shards of one run were written by one suite version: another version may have other scenarios, and
    its shards would partition another catalogue."""
    first_source, first = documents[0]
    for source, document in documents[1:]:
        if document["suite"]["version"] != first["suite"]["version"]:
            raise UsageError(f"{source} was written by suite version {document['suite']['version']}, {first_source} "
                             f"by {first['suite']['version']}: shards of one run come from one suite version")


def _check_one_partition(documents: list[tuple[str, dict[str, Any]]], ran_in: dict[str, str]) -> None:
    """Every scenario a shard left to another shard was run (or, in an interrupted shard, not reached) by some
    shard. Shards of different selections would otherwise merge into a run that silently lacks it."""
    accounted = set(ran_in) | {
        scenario["id"] for _, document in documents for scenario in document["scenarios"]
        if scenario["outcome"] == "disabled" and (scenario.get("message") or "").startswith(_NOT_REACHED)}
    for source, document in documents:
        for scenario in document["scenarios"]:
            if (scenario["outcome"] == "disabled" and (scenario.get("message") or "").startswith(_IN_ANOTHER_SHARD)
                    and scenario["id"] not in accounted):
                raise UsageError(f"scenario {scenario['id']} is in another shard according to {source}, but no shard "
                                 "given ran it: the documents are not shards of one selection")


def _check_shards(documents: list[tuple[str, dict[str, Any]]]) -> None:
    """Shard documents must be the parts of one partition, each once and none missing: a missing shard
    would make its scenarios look not selected, and the merged verdict would be about less than the run."""
    shards = [(source, d["run"].get("shard")) for source, d in documents]
    if all(shard is None for _, shard in shards):
        return
    unsharded = next((source for source, shard in shards if shard is None), None)
    if unsharded is not None:
        raise UsageError(f"{unsharded} is not a shard (no run.shard) but others are")
    counts = {shard["count"] for _, shard in shards}
    if len(counts) > 1:
        raise UsageError(f"the documents are shards of different partitions (of {', '.join(map(str, sorted(counts)))})")
    count = counts.pop()
    seen: dict[int, str] = {}
    for source, shard in shards:
        if shard["index"] in seen:
            raise UsageError(f"shard {shard['index']}/{count} is given twice ({seen[shard['index']]} and {source})")
        seen[shard["index"]] = source
    missing = [f"{index}/{count}" for index in range(1, count + 1) if index not in seen]
    if missing:
        raise UsageError(f"shard(s) {', '.join(missing)} missing: merge needs every shard of the run")


def _merge_gaps(sections: list[dict[str, Any]]) -> dict[str, Any]:
    """Each gap's scenarios from every shard; its status is recomputed as ``gap_section`` decides it."""
    from conformance.reporting.gaps import _EXPLANATION, STATUSES

    merged: dict[str, Any] = {}
    for section in sections:
        for gap_id, gap in section.items():
            entry = merged.setdefault(gap_id, {**gap, "scenarios": []})
            entry["scenarios"] = entry["scenarios"] + gap["scenarios"]
    for gap in merged.values():
        found = [scenario["status"] for scenario in gap["scenarios"]]
        gap["status"] = next((status for status in STATUSES if status in found), "not checked")
        parts = [f"{_EXPLANATION[status]} ({found.count(status)})" for status in STATUSES if status in found]
        gap["summary"] = "; ".join(parts) or _EXPLANATION["not checked"]
    return merged


# A baseline entry's status in one shard, from least to most telling: a shard that did not run the
# entry's scenario says nothing about it.
_BASELINE_RANK = {"not checked in this run": 0, "holds": 1, "names nothing": 2, "stale": 3}


def _merge_baseline(baselines: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    present = [baseline for baseline in baselines if baseline]
    if not present:
        return None
    entries: dict[str, dict[str, Any]] = {}
    for baseline in present:
        for entry in baseline.get("entries", []):
            known = entries.get(entry["id"])
            if known is None or _BASELINE_RANK.get(entry["status"], 0) > _BASELINE_RANK.get(known["status"], 0):
                entries[entry["id"]] = entry
    return {**present[0], "entries": list(entries.values())}


def read_documents(paths: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """``(path, document)`` for each results.json; ``UsageError`` for one that is unreadable or not a results
    document (checked against its schema, so the merge never reads a field that is not there)."""
    from pathlib import Path

    from conformance import schemas, user_input
    from conformance.reporting.writer import RESULTS_SCHEMA

    documents = []
    for path in paths:
        document = user_input.load_json(user_input.read_text(Path(path), path, user_input.MAX_RESULTS_BYTES), path)
        problems = schemas.problems(RESULTS_SCHEMA, document)
        if problems:
            raise UsageError(f"{path} is not a results.json {problems[0]}")
        documents.append((path, document))
    return documents


def provider_identity(document: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """What makes two documents the same provider's: its ``identity_fields`` (every field of
    ``PROVIDER_FIELDS``, the image instead of the command for an image run). Providers differing in any of them
    are never merged into one run."""
    return tuple(sorted(identity_fields(document["provider"]).items()))


def by_provider(documents: list[tuple[str, dict[str, Any]]]) -> list[list[tuple[str, dict[str, Any]]]]:
    """The documents grouped by provider, the groups and the documents within each in the order given."""
    groups: dict[tuple[str, ...], list[tuple[str, dict[str, Any]]]] = {}
    for source, document in documents:
        groups.setdefault(provider_identity(document), []).append((source, document))
    return list(groups.values())


def write_run(out_dir: Path, document: dict[str, Any]) -> dict[str, Any]:
    """A merged run's reports (results.json, junit.xml, summary.md, badges) in ``out_dir``."""
    from conformance.reporting.writer import write_document

    try:
        return write_document(out_dir, document)
    except OSError as exc:
        raise UsageError(f"--out {out_dir} is not writable: {exc.strerror}") from None


def merge_files(paths: list[str], out_dir: str) -> dict[str, Any]:
    """The documents of one provider's shards merged, and the whole run's reports written to ``out_dir``."""
    return write_run(Path(out_dir), merge(read_documents(paths)))
