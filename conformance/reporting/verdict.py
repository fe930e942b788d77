"""The run's verdict: whether it passes, and every reason it does not, in one line each.

A MUST violation fails the run; a SHOULD violation is a warning unless ``--strict``; a MAY violation is
information; a failed GAP scenario (backed only by GAP-n requirements, which are proposals rather than
protocol rules) is a finding of the gap section and a warning, never a reason, even with ``--strict``. Errors, stale baselines (``xpass``, entries naming nothing), flaky scenarios and an
interruption fail the run, and so does a run that verified nothing (no scenario selected, or every
selected scenario skipped): a conformance run must never go green by not looking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.leftovers import MARK_VARIABLE as LEFTOVER_MARK
from conformance.reporting.model import HELD_BY_ENDED

LEVELS = ("must", "should", "may", "gap")


@dataclass
class Verdict:
    passed: bool
    reasons: list[str] = field(default_factory=list)  # why the run fails
    warnings: list[str] = field(default_factory=list)  # what a reader should know even when it passes

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "reasons": self.reasons, "warnings": self.warnings}


def _ids(scenarios: list[dict[str, Any]]) -> str:
    shown = ", ".join(s["id"] for s in scenarios[:5])
    return shown + (f" and {len(scenarios) - 5} more" if len(scenarios) > 5 else "")


# The sandbox accounts that warn (never fail a run), each as the warning tells them; their first five ids follow.
_SANDBOX_WARNINGS = (
    ("died_holding", f"were {HELD_BY_ENDED}; only a restarted provider answered their delete, so they may remain"),
    ("unknown_at_delete", "were unknown to the provider when the suite deleted them (answered not_found): nothing "
                          "was left to delete; refusing a delete of an unknown id is the delete-idempotency finding "
                          "(delete-unknown)"),
    ("unknown_fate", "of interrupted scenarios have an unknown fate: their cleanup was abandoned before their delete "
                     "was answered, and the sweep by run label did not find them (`sandbox-conformance sweep` "
                     "deletes any that remain)"),
)


def decide(document: dict[str, Any], strict: bool = False, interrupted: bool = False) -> Verdict:
    scenarios = document["scenarios"]
    verdict = Verdict(passed=True)

    def failing(level: str) -> list[dict[str, Any]]:
        return [s for s in scenarios if s["outcome"] == "failed" and (s["level"] or "must") == level]

    if failing("must"):
        verdict.reasons.append(f"{len(failing('must'))} MUST scenario(s) failed: {_ids(failing('must'))}")
    for level, label in (("should", "SHOULD"), ("may", "MAY")):
        found = failing(level)
        if not found:
            continue
        line = f"{len(found)} {label} scenario(s) failed: {_ids(found)}"
        if level == "should" and strict:
            verdict.reasons.append(line + " (--strict)")
        else:
            verdict.warnings.append(line + (" (a warning; --strict fails the run)" if level == "should"
                                             else " (informational)"))
    gap_findings = failing("gap")
    if gap_findings:
        verdict.warnings.append(f"{len(gap_findings)} GAP finding(s), reported in the gap section: {_ids(gap_findings)} "
                                "(a gap is a proposal, not a protocol rule: it never fails the run, even with --strict)")
    errors = [s for s in scenarios if s["outcome"] == "error"]
    if errors:
        verdict.reasons.append(f"{len(errors)} scenario(s) could not be checked (the suite or its "
                               f"environment broke): {_ids(errors)}")
    xpass = [s for s in scenarios if s["outcome"] == "xpass"]
    if xpass:
        verdict.reasons.append(f"{len(xpass)} baselined failure(s) now pass, so the baseline is stale: {_ids(xpass)}")
    for entry in (document.get("baseline") or {}).get("entries", []):
        if entry["status"] == "names nothing":
            verdict.reasons.append(f"the baseline entry {entry['id']} names no scenario or requirement of this suite")
    flaky = document.get("flaky") or []
    if flaky:
        verdict.reasons.append(f"{len(flaky)} scenario(s) changed outcome between repeats: "
                               f"{', '.join(f['id'] for f in flaky[:5])}")
    selected = [s for s in scenarios if s["outcome"] != "disabled"]
    if not selected:
        verdict.reasons.append("no scenario was selected: nothing was verified")
    elif all(s["outcome"] == "skipped" for s in selected):
        verdict.reasons.append("every selected scenario was skipped or not for this dialect: nothing was verified")
    accounts = document.get("sandboxes") or {}
    leaked = accounts.get("leaked") or []
    if leaked:
        verdict.reasons.append(f"{len(leaked)} sandbox(es) could not be deleted: {', '.join(leaked[:5])}")
    for key, told in _SANDBOX_WARNINGS:
        ids = accounts.get(key) or []
        if ids:
            verdict.warnings.append(f"{len(ids)} sandbox(es) {told}: {', '.join(ids[:5])}")
    silent = accounts.get("workers_unaccounted") or 0
    if silent:
        verdict.warnings.append(f"{silent} xdist worker(s) ended without handing over their sandbox accounts: sandboxes "
                                f"they created may be missing from the count (the sweep by run label found any left)")
    left = list((document.get("processes_left") or {}).get("found") or [])
    if left:
        shown = "; ".join(f"pid {p['pid']}: {p['command']} ({p['fate']})" for p in left[:5])
        more = f"; and {len(left) - 5} more (results.json lists them all)" if len(left) > 5 else ""
        verdict.warnings.append(f"{len(left)} process(es) started by this run were still running after it had closed "
                                f"every plugin (found by {LEFTOVER_MARK} in their environment: detached with setsid, "
                                f"daemonized, or left by an abandoned worker); the suite ended them, each one's fate "
                                f"in brackets: {shown}{more}")
    if interrupted:
        verdict.reasons.append("the run was interrupted: its results are incomplete")
    verdict.passed = not verdict.reasons
    return verdict
