"""Expected-failure baselines: known failures become ``xfail``; a baselined failure that now passes
becomes ``xpass`` (the baseline is stale), and so does an entry that names no scenario at all.

The file (``--expected-failures FILE``)::

    expected_failures:
      - id: exec-env                 # a stable scenario id (an outline row: exec-exit-code[42])
        reason: "env is dropped for names with dashes, upstream #123"
      - id: SDP1-059                 # or a requirement id: every scenario verifying it
        reason: "delete is not idempotent yet"
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from conformance.errors import UsageError
from conformance.reporting.model import ScenarioResult


@dataclass(frozen=True)
class BaselineEntry:
    key: str  # a scenario id or a requirement id
    reason: str


@dataclass
class Baseline:
    source: str
    entries: list[BaselineEntry] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path) -> Baseline:
        """Read and check a baseline file; every problem is a one-line ``UsageError`` naming it."""
        where = f"--expected-failures {path}"
        from conformance.user_input import MAX_YAML_BYTES, read_text

        text = read_text(Path(path), where, MAX_YAML_BYTES)
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise UsageError(f"{where} is not valid YAML: {str(exc).splitlines()[0]}") from None
        except RecursionError:
            raise UsageError(f"{where} nests lists or mappings too deeply to read") from None
        if not isinstance(data, dict) or not isinstance(data.get("expected_failures"), list):
            raise UsageError(f"{where} must be a mapping with a list under expected_failures")
        entries: list[BaselineEntry] = []
        for position, raw in enumerate(data["expected_failures"], start=1):
            if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw["id"].strip():
                raise UsageError(f"{where}: entry {position} needs an id (a scenario or requirement id)")
            if not isinstance(raw.get("reason"), str) or not raw["reason"].strip():
                raise UsageError(f"{where}: entry {position} ({raw['id']}) needs a reason")
            unknown = sorted(set(raw) - {"id", "reason"})
            if unknown:
                raise UsageError(f"{where}: entry {position} ({raw['id']}) has unknown key(s) {', '.join(unknown)}")
            entries.append(BaselineEntry(raw["id"].strip(), raw["reason"].strip()))
        keys = [entry.key for entry in entries]
        duplicates = sorted({key for key in keys if keys.count(key) > 1})
        if duplicates:
            raise UsageError(f"{where} lists {', '.join(duplicates)} more than once")
        return cls(str(path), entries)

    def apply(self, results: list[ScenarioResult], known_ids: Iterable[str]) -> list[dict[str, Any]]:
        """Turn baselined failures into ``xfail`` and stale entries' passes into ``xpass``, in place.

        Returns one line per entry: what it matched and whether it still holds.
        """
        known = set(known_ids)
        report = []
        for entry in self.entries:
            by_scenario = [r for r in results if entry.key in (r.id, r.id.split("[", 1)[0])]
            by_requirement = [r for r in results if entry.key in r.requirements]
            matched = by_scenario or by_requirement
            if not matched and entry.key not in known:
                report.append({"id": entry.key, "reason": entry.reason, "status": "names nothing",
                               "scenarios": []})
                continue
            ran = [r for r in matched if r.outcome in ("passed", "failed")]
            failing = [r for r in ran if r.outcome == "failed"]
            for result in failing:
                result.outcome = "xfail"
                result.message = f"expected failure ({entry.reason}): {result.message or ''}".rstrip(": ")
            stale = bool(ran) and not failing
            if stale:
                for result in ran:
                    result.outcome = "xpass"
                    result.message = f"baselined as failing ({entry.reason}), but it passes: remove the entry"
            status = "stale" if stale else ("holds" if failing else "not checked in this run")
            report.append({"id": entry.key, "reason": entry.reason, "status": status,
                           "scenarios": [r.id for r in matched]})
        return report

    def expects(self, scenario_id: str, requirements: Iterable[str]) -> bool:
        """Whether a failure of this scenario would become ``xfail`` (matched as ``apply`` matches), so the
        live display does not announce an expected failure as a new one."""
        keys = {entry.key for entry in self.entries}
        return bool(keys & {scenario_id, scenario_id.split("[", 1)[0], *requirements})


REASON_CHARS = 200  # of the failure's first line, in a reason --update-baseline writes


def shortened(text: str, limit: int) -> str:
    """``text`` whole if it fits in ``limit`` characters, else cut at the last word boundary within it, with an
    ellipsis: a reader edits these reasons, and half a word reads as a typo."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    boundary = cut.rstrip().rfind(" ")
    return (cut[:boundary] if boundary > limit // 2 else cut).rstrip(" ,;:") + "…"


def write_baseline(path: str | Path, results: list[ScenarioResult], previous: Baseline | None = None) -> int:
    """Write every failing scenario of this run as an expected failure; returns how many.

    A scenario the previous baseline already listed keeps its reason; stale entries are dropped.
    """
    today = datetime.date.today().isoformat()
    kept = {entry.key: entry.reason for entry in (previous.entries if previous is not None else [])}
    failing = [r for r in results if r.outcome in ("failed", "xfail")]

    def reason(result: ScenarioResult) -> str:
        for key in (result.id, result.id.split("[", 1)[0], *result.requirements):
            if key in kept:
                return kept[key]
        message = (result.message or "failed").removeprefix("expected failure (").splitlines()[0]
        return f"baselined {today}: {shortened(message, REASON_CHARS)}"

    entries = [{"id": r.id, "reason": reason(r)} for r in sorted(failing, key=lambda r: r.id)]
    header = ("# Known failures: listed scenarios that fail are reported as xfail; a listed scenario that\n"
              "# passes (xpass) or an entry that names nothing fails the run, so the list stays true.\n")
    Path(path).write_text(header + yaml.safe_dump({"expected_failures": entries}, sort_keys=False, width=110),
                          encoding="utf-8")
    return len(entries)
