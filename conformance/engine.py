"""The engine: from what a run observed to the results document — no pytest in here.

The pytest plugin collects ``RunFacts`` while scenarios run and calls ``finish``; ``--repeat`` merges
finished documents (``conformance/reporting/repeat.py``) and decides the verdict again on the merge.
Everything the CLI prints about a run comes from the ``Document`` this returns, in memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance import requirements
from conformance.config import RunConfig
from conformance.reporting import writer
from conformance.reporting.baseline import Baseline, write_baseline
from conformance.reporting.catalogue import CatalogueEntry
from conformance.reporting.model import ScenarioResult
from conformance.transcript import REDACTOR


@dataclass
class Document:
    """A results document (the content of results.json, valid against its schema)."""

    data: dict[str, Any]

    @property
    def passed(self) -> bool:
        return bool(self.data["verdict"]["passed"])

    @property
    def reasons(self) -> list[str]:
        return list(self.data["verdict"]["reasons"])

    def outcomes(self) -> dict[str, str]:
        return {s["id"]: s["outcome"] for s in self.data["scenarios"]}

    def with_outcome(self, *outcomes: str) -> set[str]:
        return {sid for sid, outcome in self.outcomes().items() if outcome in outcomes}

    def scenario(self, scenario_id: str) -> dict[str, Any]:
        return next(s for s in self.data["scenarios"] if s["id"] == scenario_id)


@dataclass
class SweepOutcome:
    deleted: list[str] = field(default_factory=list)
    leaked: dict[str, str] = field(default_factory=dict)


@dataclass
class RunFacts:
    """What a run observed, whatever ran it."""

    provider: dict[str, Any]
    started_at: float = field(default_factory=time.time)
    results: dict[str, ScenarioResult] = field(default_factory=dict)  # by pytest node id
    selected: set[str] = field(default_factory=set)  # scenario ids the selection kept
    created: list[str] = field(default_factory=list)  # every sandbox a scenario created
    leaked: set[str] = field(default_factory=set)  # sandboxes a scenario could not delete
    # sandboxes whose provider died holding them: only a restarted provider answered their delete
    orphaned: set[str] = field(default_factory=set)
    # sandboxes whose delete the provider answered not_found: it no longer knew them (no leak; see delete-unknown)
    forgotten: set[str] = field(default_factory=set)
    unattributed: list[str] = field(default_factory=list)  # violations seen between scenarios
    # sandboxes of an interrupted scenario whose cleanup was abandoned before their delete was answered
    unknown: set[str] = field(default_factory=set)
    silent_workers: int = 0  # xdist workers that ended without handing over their sandbox accounts


def finish(config: RunConfig, facts: RunFacts, catalogue: Iterable[CatalogueEntry], sweep: SweepOutcome,
           baseline: Baseline | None, interrupted: bool,
           owned_by: Callable[[str], list[str]] = lambda owner: [],
           processes_left: dict[str, Any] | None = None) -> Document:
    """Fold every scenario's result, account for sandboxes, apply the baseline, decide the verdict.

    ``owned_by`` names the sandboxes a scenario created (the adapter's ledger): an interrupted
    scenario's teardown deleted them but never reported.
    """
    catalogue = list(catalogue)
    results = list(facts.results.values())
    created = list(facts.created)
    seen = {r.id for r in results}
    for entry in catalogue:
        if entry.id not in seen:
            result = entry.disabled_result()
            if interrupted and entry.id in facts.selected:
                result.message = "not reached: the run was interrupted"
            elif config.selection.shard is not None and config.selection.wants(entry.id, entry.feature,
                                                                                 entry.tags.tag_set()):
                result.message = "selected, but in another shard (--shard {}/{})".format(*config.selection.shard)
            results.append(result)
    baseline_report = None
    if baseline is not None:
        known = {entry.id for entry in catalogue} | {entry.id.split("[", 1)[0] for entry in catalogue}
        known |= set(requirements.load())
        baseline_report = {"source": baseline.source, "entries": baseline.apply(results, known)}
    if interrupted:
        for result in results:
            if result.outcome != "disabled" and "teardown" not in result.phases:
                result.outcome = "error"
                result.message = "the run was interrupted before this scenario finished"
                result.reproduce = REDACTOR.text(config.reproduce(result.id))
                created.extend(sid for sid in owned_by(result.id) if sid not in created)
    leaked = (facts.leaked - set(sweep.deleted)) | set(sweep.leaked)
    unknown = facts.unknown - set(sweep.deleted) - leaked
    data = writer.build_document(
        results, provider=facts.provider, run_id=config.run_id, started_at=facts.started_at,
        unattributed=facts.unattributed,
        sandboxes={"created": len(created),
                   "deleted": len(created) - len((facts.leaked | facts.orphaned | facts.forgotten | unknown)
                                                 & set(created)),
                   "leaked": sorted(leaked), "swept": sorted(sweep.deleted),
                   "died_holding": sorted(facts.orphaned - leaked),
                   "unknown_at_delete": sorted(facts.forgotten - leaked - facts.orphaned), "ids": sorted(created),
                   **({"unknown_fate": sorted(unknown)} if unknown else {}),
                   **({"workers_unaccounted": facts.silent_workers} if facts.silent_workers else {})},
        seed=config.seed, interrupted=interrupted, strict=config.strict, baseline=baseline_report,
        shard=config.selection.shard, processes_left=processes_left,
    )
    data = redact_document(data)
    writer.write_document(Path(config.report_dir), data, config.report_formats)
    if config.update_baseline:
        write_baseline(config.update_baseline, results, previous=baseline)
    return Document(data)


# What the suite itself fills in and a schema constrains (an enum): never a provider's words, and a short
# secret such as `--env MODE=stdio` must not turn it into "[REDACTED]".
_PROVIDER_OWN = ("dialect", "transport", "sandboxes_per_process")
# A scenario's parts that quote the provider; the rest (ids, names, outcomes, levels, texts) is the suite's.
_SCENARIO_QUOTES = ("message", "transcript", "stderr", "reproduce", "findings", "cause")


def redact_document(data: dict[str, Any]) -> dict[str, Any]:
    """Every string where a provider's words land, not only the diagnostics: the negotiation line, its
    identity and capabilities, its sandbox ids, the violations outside scenarios, the verdict's reasons.
    An id holding a secret is recorded redacted (so `sweep --from-results` cannot delete it by id, and
    says so). One ``strings`` call over all of it: a document holding no secret costs one search."""
    quoted = {
        "provider": {k: v for k, v in data["provider"].items() if k not in _PROVIDER_OWN},
        "sandboxes": data["sandboxes"],
        "wire_violations_outside_scenarios": data["wire_violations_outside_scenarios"],
        "verdict": {k: data["verdict"][k] for k in ("reasons", "warnings")},
        "scenarios": [{k: s[k] for k in _SCENARIO_QUOTES if k in s} for s in data["scenarios"]],
        "causes": data.get("causes", []),  # grouped from the scenarios' causes before these were redacted
    }
    redacted = REDACTOR.strings(quoted)
    if redacted is quoted:
        return data
    return {
        **data,
        "provider": {**data["provider"], **redacted["provider"]},
        "sandboxes": redacted["sandboxes"],
        "wire_violations_outside_scenarios": redacted["wire_violations_outside_scenarios"],
        "verdict": {**data["verdict"], **redacted["verdict"]},
        "scenarios": [{**s, **r} for s, r in zip(data["scenarios"], redacted["scenarios"], strict=True)],
        **({"causes": redacted["causes"]} if "causes" in data else {}),
    }


def merge_repetitions(config: RunConfig, documents: list[Document]) -> Document:
    """``--repeat``: one document for every repetition, written at the top of the report directory."""
    from conformance.reporting import repeat

    data = writer.write_document(Path(config.report_dir), repeat.merge([d.data for d in documents]),
                                 config.report_formats)
    return Document(data)
