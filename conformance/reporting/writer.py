"""Writes ``results.json`` (validated against its schema) and, from it, ``junit.xml``, ``summary.md``,
``report.html`` and the badges (``badge.svg``, ``badge.json``)."""

from __future__ import annotations

import json
import platform
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from conformance import __version__, schemas
from conformance.errors import HarnessError
from conformance.inert import inert_tree
from conformance.reporting import counts
from conformance.reporting.badge import write_badges
from conformance.reporting.causes import group_causes
from conformance.reporting.gaps import gap_section
from conformance.reporting.html import write_html
from conformance.reporting.markdown import write_markdown
from conformance.reporting.model import ScenarioResult
from conformance.reporting.verdict import decide

RESULTS_SCHEMA = schemas.SCHEMA_BASE + "report/results.json"

# The reports that can be written beside results.json (always written: every other report is built from it).
# The one list of them: `report-formats` in a configuration file is checked against it.
REPORT_FORMATS = ("junit", "markdown", "html", "badge")


def build_document(
    results: list[ScenarioResult],
    provider: dict[str, Any],
    run_id: str,
    started_at: float,
    unattributed: list[str],
    sandboxes: dict[str, Any],
    seed: int,
    interrupted: bool = False,
    strict: bool = False,
    repeat: int = 1,
    baseline: dict[str, Any] | None = None,
    flaky: list[dict[str, Any]] | None = None,
    shard: tuple[int, int] | None = None,
    processes_left: dict[str, Any] | None = None,
) -> dict[str, Any]:
    results = sorted(results, key=lambda r: (r.feature, r.id))
    document = {
        "schema_version": 1,
        "suite": {"name": "sandbox-conformance", "version": __version__},
        "run": {
            "id": run_id,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
            "duration_s": round(time.time() - started_at, 3),
            "python": platform.python_version(),
            "seed": seed,
            "interrupted": interrupted,
            "repeat": repeat,
            "strict": strict,
            **({"shard": {"index": shard[0], "count": shard[1]}} if shard is not None else {}),
        },
        "provider": provider,
        "summary": {},  # counted from the scenarios by finish_document
        "sandboxes": sandboxes,
        "wire_violations_outside_scenarios": unattributed,
        **({"processes_left": processes_left} if processes_left is not None else {}),
        "gaps": gap_section(results),
        "baseline": baseline,
        "flaky": flaky or [],
        "scenarios": [r.to_dict(include_diagnostics=r.outcome in DIAGNOSED) for r in results],
    }
    return finish_document(document)


# Outcomes whose scenario carries the full diagnostics (transcript, stderr, requirement texts).
DIAGNOSED = ("failed", "error", "xfail")
_FAILURE_ORDER = {"error": 0, "failed": 1, "xpass": 2}


def failures_in_order(scenarios: list[dict[str, Any]], causes: list[dict[str, Any]]) -> list[str]:
    """The failing scenario ids, the basics first: errors, then failures in the order of their causes
    (``causes.group_causes``), then stale baselines (xpass)."""
    place = {sid: cause["rank"] for cause in causes for sid in cause["scenarios"]}
    failing = [s for s in scenarios if s["outcome"] in _FAILURE_ORDER]
    return [s["id"] for s in sorted(failing, key=lambda s: (_FAILURE_ORDER[s["outcome"]], place.get(s["id"], 0)))]


def merge_processes_left(documents: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The leftover processes of several runs (repetitions, shards) as one run's: every one found; checked
    only if every run checked. None when no run recorded the check (documents of an older suite)."""
    recorded = [d["processes_left"] for d in documents if "processes_left" in d]
    if not recorded:
        return None
    merged: dict[str, Any] = {"checked": all(r["checked"] for r in recorded),
                              "found": [entry for r in recorded for entry in r["found"]]}
    why_not = sorted({r["why_not"] for r in recorded if not r["checked"] and r.get("why_not")})
    if why_not:
        merged["why_not"] = "; ".join(why_not)
    return merged


def finish_document(document: dict[str, Any]) -> dict[str, Any]:
    """Make every text in it inert (provider text reaches every report and the terminal from here), then derive
    what follows from the scenarios: the counts (``counts.summarize``), the failure list, the verdict."""
    make_inert(document)
    scenarios = document["scenarios"]
    document["summary"] = counts.summarize(scenarios)
    document["causes"] = group_causes(scenarios)
    document["failures"] = failures_in_order(scenarios, document["causes"])
    run = document["run"]
    document["verdict"] = decide(document, strict=run.get("strict", False),
                                 interrupted=run.get("interrupted", False)).as_dict()
    return document


def make_inert(document: dict[str, Any]) -> None:
    """Every text of the document inert (``conformance.inert``), in place: whatever bytes a provider sent,
    every report stays valid for its format and the terminal shows them escaped."""
    for key, value in list(document.items()):
        document[key] = inert_tree(value)


def write_document(report_dir: Path, document: dict[str, Any],
                   formats: tuple[str, ...] = REPORT_FORMATS) -> dict[str, Any]:
    make_inert(document)  # a document may come from elsewhere than finish_document: no report takes raw text
    problems = schemas.problems(RESULTS_SCHEMA, _checked_part(document))
    if problems:
        raise HarnessError(f"results.json would violate its own schema {problems[0]}")
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if "junit" in formats:
        write_junit(report_dir / "junit.xml", document)
    if "markdown" in formats:
        write_markdown(report_dir, document)
    if "badge" in formats:
        write_badges(report_dir, document)
    if "html" in formats:
        write_html(report_dir, document)
    return document


def _checked_part(document: dict[str, Any]) -> dict[str, Any]:
    """What the self-check validates: the whole document, except that of the scenarios left out of the run
    (``disabled``, built by one code path from the catalogue) one stands for all. A one-scenario run has
    five hundred of them, and validating each cost a tenth of a second of CPU per run."""
    scenarios = document.get("scenarios")
    if not isinstance(scenarios, list):
        return document
    disabled = [s for s in scenarios if isinstance(s, dict) and s.get("outcome") == "disabled"]
    if len(disabled) <= 1:
        return document
    kept = [s for s in scenarios if not (isinstance(s, dict) and s.get("outcome") == "disabled")]
    return {**document, "scenarios": [*kept, disabled[0]]}


def write_reports(report_dir: Path, results: list[ScenarioResult], **kwargs: Any) -> dict[str, Any]:
    return write_document(report_dir, build_document(results, **kwargs))


def write_junit(path: Path, document: dict[str, Any]) -> None:
    """One test case per selected scenario. Scenarios left out of the run (``disabled``) are not cases: a
    one-scenario run would otherwise show five hundred skips; their number is a suite property."""
    summary = document["summary"]
    suite = ET.Element("testsuite", {
        "name": f"sandbox-conformance ({document['provider'].get('kind', '?')})",
        "tests": str(summary["selected"]), "failures": str(summary["failed"] + summary["xpassed"]),
        # every <skipped/> case: this provider's skips, the scenarios not for its dialect, the expected failures
        "errors": str(summary["errors"]),
        "skipped": str(summary["skipped"] + summary.get("other_dialect", 0) + summary["xfailed"]),
        "time": str(document["run"]["duration_s"]),
    })
    properties = ET.SubElement(suite, "properties")
    for key in ("kind", "version", "dialect", "transport", "negotiation"):
        ET.SubElement(properties, "property", {"name": f"provider.{key}", "value": str(document["provider"].get(key, ""))})
    ET.SubElement(properties, "property", {"name": "scenarios.not_selected", "value": str(summary["disabled"])})
    ET.SubElement(properties, "property", {"name": "scenarios.not_for_this_dialect",
                                           "value": str(summary.get("other_dialect", 0))})
    for scenario in document["scenarios"]:
        outcome = scenario["outcome"]
        if outcome == "disabled":
            continue
        case = ET.SubElement(suite, "testcase", {
            "classname": scenario["feature"].removesuffix(".feature").replace("/", "."),
            "name": scenario["id"], "time": str(scenario["duration_s"]),
        })
        case_props = ET.SubElement(case, "properties")
        for requirement in scenario["requirements"]:
            ET.SubElement(case_props, "property", {"name": "requirement", "value": requirement})
        ET.SubElement(case_props, "property", {"name": "level", "value": scenario["level"] or ""})
        ET.SubElement(case_props, "property", {"name": "outcome", "value": outcome})
        message = scenario.get("message") or ""
        # CI tools show `type` beside the message: what kind of failure, at which level, without opening it
        kind = f"{outcome} {(scenario['level'] or 'must').upper()}"
        if outcome == "xpass":  # a stale baseline fails the run, so CI shows it as a failure
            ET.SubElement(case, "failure", {"message": message or "xpass", "type": kind}).text = message
        elif outcome == "xfail":
            ET.SubElement(case, "skipped", {"message": f"xfail: {message.splitlines()[0] if message else ''}"})
        elif outcome in ("failed", "error"):
            element = ET.SubElement(case, "failure" if outcome == "failed" else "error",
                                    {"message": message.splitlines()[0] if message else outcome, "type": kind})
            element.text = "\n".join(_failure_body(scenario))
        elif outcome == "skipped":
            ET.SubElement(case, "skipped", {"message": f"skipped: {message}"})
    ET.indent(suite)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def _failure_body(scenario: dict[str, Any]) -> list[str]:
    """What a reader of a CI failure needs, rule first: the requirement(s) broken, then what happened."""
    texts = scenario.get("requirement_texts") or {}
    # no level per requirement: the scenario's level (in `type`) is not that of each rule it cites (GAP-n)
    body = [f"requirement {requirement}" + (f": {texts[requirement]}" if texts.get(requirement) else "")
            for requirement in scenario["requirements"]]
    body += [*([""] if body else []), scenario.get("message") or "", "",
             f"reproduce: {scenario.get('reproduce') or ''}"]
    if scenario.get("transcript"):
        body += ["", "transcript:", *scenario["transcript"]]
    if scenario.get("stderr"):
        body += ["", "provider stderr (tail):", scenario["stderr"]]
    return body
