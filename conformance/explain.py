"""``sandbox-conformance explain ID``: what a requirement or a scenario asks, and what checks it.

Everything comes from what the suite ships: the requirement registries (``conformance/requirements``),
the feature files (titles, tags and Gherkin steps, read with pytest-bdd's parser), and — asked with
``--mutants``, in a source checkout only, as the wheel carries no test doubles — the mutant catalogue
(``tests/mutants/catalogue``), which names the broken providers each scenario is proven to catch. Those names
mean something to the suite's own developers, nothing to a provider author, so they are shown only when asked.

One explanation is built as a plain dict (what ``--json`` prints) and the text is rendered from it, so
the two never disagree.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from conformance import bundle
from conformance import requirements as registry
from conformance.config import closest_hint
from conformance.errors import UsageError
from conformance.inert import inert
from conformance.reporting.catalogue import CatalogueEntry, all_scenarios, gherkin_steps

NOT_INSTALLED = ("--mutants needs the suite's source checkout: the mutant catalogue (tests/mutants/catalogue) is "
                 "not installed with the package")


# -- the mutant catalogue ------------------------------------------------------------------------


def mutant_catalogue_dir() -> Path:
    """Where a source checkout keeps the catalogue; an installed wheel has no such folder."""
    return bundle.root() / "tests" / "mutants" / "catalogue"


@cache
def mutant_catalogue() -> tuple[dict[str, Any], ...] | None:
    """Every catalogue entry (name, file, what it breaks, the scenarios it fails), or None when the
    catalogue is not installed."""
    folder = mutant_catalogue_dir()
    if not folder.is_dir():
        return None
    entries: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.yaml")):
        for entry in yaml.load(path.read_text(encoding="utf-8"), Loader=registry.SAFE_LOADER).get("mutants") or []:
            entries.append({"name": entry["name"], "catalogue": path.name,
                            "breaks": " ".join(str(entry.get("breaks", "")).split()),
                            "fails": list(entry.get("fails") or [])})
    return tuple(entries)


def _mutants_failing(scenario_ids: list[str]) -> list[dict[str, Any]] | None:
    catalogue = mutant_catalogue()
    if catalogue is None:
        return None
    wanted = set(scenario_ids)
    return [{**entry, "fails": [sid for sid in entry["fails"] if sid in wanted]}
            for entry in catalogue if wanted.intersection(entry["fails"])]


# -- scenarios -----------------------------------------------------------------------------------


def _scenario_rows(scenario_id: str) -> list[CatalogueEntry]:
    """The catalogue entries an id names: one scenario or outline row, or every row of an outline."""
    entries = all_scenarios()
    exact = [entry for entry in entries if entry.id == scenario_id]
    return exact or [entry for entry in entries if entry.base_id == scenario_id]


def explain_scenario(scenario_id: str, with_requirements: bool = True, with_mutants: bool = False) -> dict[str, Any]:
    rows = _scenario_rows(scenario_id)
    first = rows[0]
    tags = first.tags
    explained: dict[str, Any] = {
        "kind": "scenario", "id": scenario_id, "name": first.name, "feature": first.feature, "line": first.line,
        "level": tags.level, "capabilities": list(tags.capabilities), "dialects": list(tags.dialects),
        "other_tags": list(tags.other),
        # an outline explained whole lists its rows; one row names the outline it belongs to
        "rows": [row.id for row in rows] if scenario_id == first.base_id and first.id != first.base_id else [],
        "outline": first.base_id if scenario_id != first.base_id else None,
        "requirements": list(tags.requirements),
        "steps": gherkin_steps(first, scenario_id if scenario_id != first.base_id else None),
    }
    if with_mutants:
        explained["mutants"] = _mutants_failing([row.id for row in rows])
    if with_requirements:
        known = registry.load()
        explained["requirements"] = [
            {"id": rid, **({"level": known[rid].level, "set": known[rid].registry, "text": known[rid].text}
                           if rid in known else {"unknown": True})}
            for rid in tags.requirements]
    return explained


# -- requirements --------------------------------------------------------------------------------


def explain_requirement(rid: str, with_mutants: bool = False) -> dict[str, Any]:
    requirements = registry.load()
    requirement = requirements[rid]
    covering = registry.coverage(requirements, all_scenarios())[rid]
    # one explanation per scenario, not per outline row: the rows share the steps
    bases: list[str] = []
    for entry in all_scenarios():
        if entry.id in covering and entry.base_id not in bases:
            bases.append(entry.base_id)
    carried_by = [other.id for other in requirements.values() if rid in other.carries]
    source = registry.HERE / f"{requirement.registry}.yaml"
    return {
        "kind": "requirement", "id": rid, "level": requirement.level, "set": requirement.registry,
        "section": requirement.section, "testability": requirement.testability, "text": requirement.text,
        "excluded": requirement.excluded, "note": requirement.note, "carries": list(requirement.carries),
        "carried_by": carried_by, "source": str(source.relative_to(registry.HERE.parent.parent)),
        "scenarios": [_covering_scenario(base, covering, with_mutants) for base in bases],
    }


def _covering_scenario(base: str, covering: list[str], with_mutants: bool) -> dict[str, Any]:
    """A scenario citing the requirement; of an outline, only the rows that verify it (all rows do unless
    a row's @dialect: keeps it off the requirement's dialect)."""
    explained = explain_scenario(base, with_requirements=False, with_mutants=with_mutants)
    if explained["rows"]:
        explained["rows"] = [sid for sid in explained["rows"] if sid in covering]
        if explained.get("mutants") is not None:
            explained["mutants"] = [m for m in explained["mutants"]
                                    if set(m["fails"]) & set(explained["rows"])]
    return explained


# -- the command ---------------------------------------------------------------------------------


def explanation(identifier: str, with_mutants: bool = False) -> dict[str, Any]:
    """The explanation of a requirement or scenario id; ``UsageError`` with the closest ids otherwise, or for
    ``with_mutants`` where the mutant catalogue is not installed."""
    if with_mutants and mutant_catalogue() is None:
        raise UsageError(NOT_INSTALLED)
    requirements = registry.load()
    if identifier in requirements or identifier.upper() in requirements:
        return explain_requirement(identifier if identifier in requirements else identifier.upper(), with_mutants)
    if _scenario_rows(identifier):
        return explain_scenario(identifier, with_mutants=with_mutants)
    known = set(requirements) | {e.id for e in all_scenarios()} | {e.base_id for e in all_scenarios()}
    raise UsageError(f"{identifier!r} is neither a requirement nor a scenario id{closest_hint(identifier, known)}")


def print_explanation(identifier: str, as_json: bool = False, with_mutants: bool = False) -> None:
    explained = explanation(identifier, with_mutants)
    if as_json:
        print(json.dumps(explained, indent=2))
        return
    width = min(shutil.get_terminal_size().columns, 120)
    render = _render_requirement if explained["kind"] == "requirement" else _render_scenario
    print(inert("\n".join(render(explained, width))))


def _wrap(text: str, width: int, indent: str, hanging: str = "") -> list[str]:
    """``text`` on lines of at most ``width``, continuation lines indented by ``hanging`` more."""
    return textwrap.wrap(" ".join(text.split()), width=width, initial_indent=indent,
                         subsequent_indent=indent + hanging, break_on_hyphens=False) or [indent]


def _render_requirement(r: dict[str, Any], width: int) -> list[str]:
    lines = [f"{r['id']}  {r['level']}  ({r['set']}, section {r['section']}, testability {r['testability']})",
             *_wrap(r["text"], width, "  ")]
    if r["excluded"]:
        lines += _wrap(f"excluded: {r['excluded']}", width, "  ")
    if r["note"]:
        lines += _wrap(f"note: {r['note']}", width, "  ")
    if r["carries"]:
        lines.append(f"  restates (carries): {', '.join(r['carries'])}")
    if r["carried_by"]:
        lines.append(f"  restated for protocol v2 by: {', '.join(r['carried_by'])}")
    lines += [f"  source: {r['source']}", ""]
    if not r["scenarios"]:
        lines.append("No scenario verifies it.")
        return lines
    lines.append(f"Scenarios verifying it ({len(r['scenarios'])}):")
    for scenario in r["scenarios"]:
        lines += [""] + _render_scenario(scenario, width, indent="  ")
    return lines


def _render_scenario(s: dict[str, Any], width: int, indent: str = "") -> list[str]:
    tags = [f"@{s['level']}"] if s["level"] else []
    tags += [f"@cap:{c}" for c in s["capabilities"]] + [f"@dialect:{d}" for d in s["dialects"]]
    tags += [f"@{t}" for t in s["other_tags"]]
    lines = [f"{indent}{s['id']}: {s['name']}",
             f"{indent}  {s['feature']}:{s['line']}  {' '.join(tags)}"]
    if s["rows"]:
        lines += _wrap(f"rows: {', '.join(s['rows'])}", width, f"{indent}  ", "  ")
    if s.get("outline"):
        lines.append(f"{indent}  one row of the outline {s['outline']}")
    if s["requirements"] and isinstance(s["requirements"][0], dict):  # a scenario explained on its own
        lines.append(f"{indent}  requirements:")
        for r in s["requirements"]:
            head = f"{r['id']} {r['level']} ({r['set']}): " if not r.get("unknown") else f"{r['id']} (unknown): "
            lines += _wrap(head + r.get("text", "not in any requirement registry"), width, f"{indent}    ", "  ")
    lines.append(f"{indent}  steps:")
    lines += [f"{indent}    {step}" for step in s["steps"]]
    if "mutants" not in s:  # not asked for (--mutants)
        return lines
    if not s["mutants"]:
        lines.append(f"{indent}  mutants: no catalogued mutant fails it")
    else:
        lines.append(f"{indent}  mutants that fail it:")
        for mutant in s["mutants"]:
            rows = f" [{', '.join(mutant['fails'])}]" if s["rows"] else ""
            lines += _wrap(f"{mutant['name']} ({mutant['catalogue']}){rows}: {mutant['breaks']}", width,
                           f"{indent}    ", "  ")
    return lines


__all__ = ["NOT_INSTALLED", "explanation", "print_explanation"]
