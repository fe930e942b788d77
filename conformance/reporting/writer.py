"""Writes ``results.json`` (validated against its schema) and ``junit.xml``."""

from __future__ import annotations

import json
import platform
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conformance import __version__, schemas
from conformance.errors import HarnessError
from conformance.reporting.gaps import gap_section
from conformance.reporting.model import ScenarioResult, summarize

DOCUMENT = pytest.StashKey[dict]()
RESULTS_SCHEMA = schemas.SCHEMA_BASE + "report/results.json"


def build_document(
    results: list[ScenarioResult],
    provider: dict[str, Any],
    run_id: str,
    started_at: float,
    unattributed: list[str],
    sandboxes: dict[str, Any],
) -> dict[str, Any]:
    order = {"error": 0, "failed": 1, "skipped": 2, "passed": 3, "disabled": 4}
    results = sorted(results, key=lambda r: (r.feature, r.id))
    return {
        "schema_version": 1,
        "suite": {"name": "sandbox-conformance", "version": __version__},
        "run": {
            "id": run_id,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
            "duration_s": round(time.time() - started_at, 3),
            "python": platform.python_version(),
        },
        "provider": provider,
        "summary": summarize(results),
        "sandboxes": sandboxes,
        "wire_violations_outside_scenarios": unattributed,
        "gaps": gap_section(results),
        "scenarios": [r.to_dict(include_diagnostics=r.outcome in ("failed", "error")) for r in results],
        "failures": [r.id for r in sorted(results, key=lambda r: order[r.outcome]) if r.outcome in ("failed", "error")],
    }


def write_reports(report_dir: Path, results: list[ScenarioResult], **kwargs: Any) -> dict[str, Any]:
    document = build_document(results, **kwargs)
    problems = schemas.problems(RESULTS_SCHEMA, document)
    if problems:
        raise HarnessError(f"results.json would violate its own schema {problems[0]}")
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    write_junit(report_dir / "junit.xml", document)
    return document


def write_junit(path: Path, document: dict[str, Any]) -> None:
    summary = document["summary"]
    suite = ET.Element("testsuite", {
        "name": f"sandbox-conformance ({document['provider'].get('kind', '?')})",
        "tests": str(summary["total"]), "failures": str(summary["failed"]), "errors": str(summary["errors"]),
        "skipped": str(summary["skipped"] + summary["disabled"]), "time": str(document["run"]["duration_s"]),
    })
    properties = ET.SubElement(suite, "properties")
    for key in ("kind", "version", "dialect", "transport"):
        ET.SubElement(properties, "property", {"name": f"provider.{key}", "value": str(document["provider"].get(key, ""))})
    for scenario in document["scenarios"]:
        case = ET.SubElement(suite, "testcase", {
            "classname": scenario["feature"].removesuffix(".feature").replace("/", "."),
            "name": scenario["id"], "time": str(scenario["duration_s"]),
        })
        case_props = ET.SubElement(case, "properties")
        for requirement in scenario["requirements"]:
            ET.SubElement(case_props, "property", {"name": "requirement", "value": requirement})
        ET.SubElement(case_props, "property", {"name": "level", "value": scenario["level"] or ""})
        message = scenario.get("message") or ""
        outcome = scenario["outcome"]
        if outcome in ("failed", "error"):
            element = ET.SubElement(case, "failure" if outcome == "failed" else "error", {"message": message.splitlines()[0] if message else outcome})
            body = [message, "", f"reproduce: {scenario.get('reproduce') or ''}"]
            if scenario.get("transcript"):
                body += ["", "transcript:", *scenario["transcript"]]
            if scenario.get("stderr"):
                body += ["", "provider stderr (tail):", scenario["stderr"]]
            element.text = "\n".join(body)
        elif outcome in ("skipped", "disabled"):
            ET.SubElement(case, "skipped", {"message": f"{outcome}: {message}"})
    ET.indent(suite)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
