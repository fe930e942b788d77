"""The gap section of the report: for each gap requirement, what the provider does about it.

A gap is a requirement with several honest outcomes. Its scenarios record a finding when they pass
(``supported``: the provider does it; ``refused``: it says clearly that it does not). A failed
scenario means the provider violates it (``violated``: ignores it silently, fakes it, or says no wrongly); a scenario the dialect cannot
ask for means the gap is ``not expressible`` there, and ``declared but not expressible`` when the provider's
capabilities say it offers what its dialect gives no way to ask for (the sketch's network modes): the
scenario records that finding before it skips.
"""

from __future__ import annotations

from typing import Any

from conformance import requirements
from conformance.reporting.model import ScenarioResult

STATUSES = ("violated", "supported", "refused", "declared but not expressible", "not expressible", "not declared",
            "not checked")
_EXPLANATION = {
    "violated": "violated (the scenario failed; its detail says how)",
    "supported": "supported, and observably so",
    "refused": "refused honestly",
    "declared but not expressible": "declared by the provider, but its dialect cannot ask for it",
    "not expressible": "cannot be expressed in this provider's dialect",
    "not declared": "not declared by the provider",
    "not checked": "not checked in this run",
}


def scenario_status(result: ScenarioResult, gap: str) -> tuple[str, str]:
    finding = result.findings.get(gap)
    if result.outcome in ("failed", "error"):
        return "violated" if result.outcome == "failed" else "not checked", (result.message or "").splitlines()[0]
    if result.outcome == "passed":
        if finding:
            return finding["status"], finding["detail"]
        return "supported", "the scenario passed"
    message = result.message or ""
    if finding and finding["status"] == "declared but not expressible" and result.skip_cause == "not expressible":
        return finding["status"], finding["detail"]
    if result.skip_cause in ("not expressible", "other dialect"):
        return "not expressible", message
    if result.skip_cause == "not declared":
        return "not declared", message
    return "not checked", message or result.outcome


def gap_section(results: list[ScenarioResult]) -> dict[str, Any]:
    registry = requirements.load()
    section: dict[str, Any] = {}
    for gap_id, requirement in registry.items():
        if not gap_id.startswith("GAP-"):
            continue
        scenarios = []
        for result in results:
            if gap_id in result.requirements and result.outcome != "disabled":
                status, detail = scenario_status(result, gap_id)
                scenarios.append({"id": result.id, "outcome": result.outcome, "status": status, "detail": detail})
        found = [entry["status"] for entry in scenarios]
        overall = next((status for status in STATUSES if status in found), "not checked")
        parts = [f"{_EXPLANATION[status]} ({found.count(status)})" for status in STATUSES if status in found]
        section[gap_id] = {
            "title": requirement.section,
            "requirement": requirement.text,
            "status": overall,
            "summary": "; ".join(parts) or _EXPLANATION["not checked"],
            "scenarios": scenarios,
        }
    return section
