"""The outcome of each scenario, assembled from pytest's setup/call/teardown reports."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# xfail and xpass are never reported by a phase: the baseline turns failed into xfail and passed into
# xpass once the run is over (conformance/reporting/baseline.py).
OUTCOMES = ("passed", "failed", "error", "skipped", "disabled", "xfail", "xpass")
# When phases disagree, the worse outcome wins.
_SEVERITY = {"passed": 0, "disabled": 1, "skipped": 2, "failed": 3, "error": 4}


@dataclass
class ScenarioResult:
    id: str
    name: str
    feature: str
    nodeid: str
    level: str | None
    requirements: list[str]
    capabilities: list[str]
    dialects: list[str]
    outcome: str = "passed"
    duration_s: float = 0.0
    message: str | None = None
    step: str | None = None
    transcript: list[str] = field(default_factory=list)
    transcript_omitted: int = 0
    stderr: str | None = None
    reproduce: str | None = None
    requirement_texts: dict[str, str] = field(default_factory=dict)
    findings: dict[str, dict[str, str]] = field(default_factory=dict)
    outcomes: list[str] = field(default_factory=list)  # --repeat: each repetition's outcome, in order
    phases: set[str] = field(default_factory=set)  # which of setup/call/teardown reported (not written out)

    @property
    def capability(self) -> str | None:
        return self.capabilities[0] if self.capabilities else None

    def absorb(self, phase: str, payload: dict[str, Any]) -> None:
        """Fold one phase's report into the scenario's outcome."""
        self.phases.add(phase)
        self.duration_s = round(self.duration_s + float(payload.get("duration_s", 0.0)), 3)
        self.findings.update(payload.get("findings") or {})
        outcome = payload.get("outcome", "passed")
        if outcome == "passed":
            return
        if _SEVERITY[outcome] > _SEVERITY[self.outcome]:
            previous = self.message
            self.outcome = outcome
            self.message = payload.get("message")
            if previous and phase == "teardown":
                self.message = f"{previous}\n(teardown) {self.message}"
            self.step = payload.get("step") or self.step
        elif payload.get("message") and outcome in ("failed", "error"):
            self.message = f"{self.message}\n({phase}) {payload['message']}" if self.message else payload["message"]
        for key in ("transcript", "stderr", "reproduce", "requirement_texts"):
            if payload.get(key):
                setattr(self, key, payload[key])
        if payload.get("transcript_omitted"):
            self.transcript_omitted = payload["transcript_omitted"]

    def to_dict(self, include_diagnostics: bool) -> dict[str, Any]:
        data = asdict(self)
        data.pop("phases")
        data["capability"] = self.capability
        if not include_diagnostics:
            for key in ("transcript", "transcript_omitted", "stderr", "requirement_texts"):
                data.pop(key)
        if not self.outcomes:
            data.pop("outcomes")
        return data


def summarize(results: list[ScenarioResult]) -> dict[str, int]:
    return summarize_outcomes([result.outcome for result in results])


def summarize_outcomes(outcomes: list[str]) -> dict[str, int]:
    """The summary counts of results.json, from one outcome per scenario."""
    counts = {outcome: 0 for outcome in OUTCOMES}
    for outcome in outcomes:
        counts[outcome] += 1
    return {
        "total": len(outcomes),
        "selected": len(outcomes) - counts["disabled"],
        "passed": counts["passed"],
        "failed": counts["failed"],
        "errors": counts["error"],
        "skipped": counts["skipped"],
        "disabled": counts["disabled"],
        "xfailed": counts["xfail"],
        "xpassed": counts["xpass"],
    }
