"""The outcome of each scenario, assembled from typed phase reports (setup, call, teardown).

``PhaseReport`` is what one phase of one scenario produced; it crosses from an xdist worker to the
controller as JSON (``to_json``/``from_json``). ``ScenarioResult.absorb`` folds the phases of a scenario.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

# xfail and xpass are never reported by a phase: the baseline turns failed into xfail and passed into
# xpass once the run is over (conformance/reporting/baseline.py).
OUTCOMES = ("passed", "failed", "error", "skipped", "disabled", "xfail", "xpass")
# When phases disagree, the worse outcome wins.
_SEVERITY = {"passed": 0, "disabled": 1, "skipped": 2, "failed": 3, "error": 4}


# Why a scenario was skipped, kept typed so the gap section never re-reads the message.
SKIP_CAUSES = ("not declared", "not expressible", "other dialect", "no rule")
# How the skip message of a scenario written for another dialect begins. The document keeps no skip cause,
# so its readers (the counts of conformance/reporting/counts.py, the skip lists) recognise those by this.
OTHER_DIALECT_SKIP = "applies to dialect "


# Sandboxes whose provider process ended before it deleted them (results.json → sandboxes.died_holding). Whether it
# crashed or the suite ended it (a wedged call, a scenario that closed its input), their fate is the same.
HELD_BY_ENDED = "held by a provider process that ended before deleting them (it died, or the suite ended it)"


def seed_words(run: dict[str, Any]) -> str:
    """The run's seed as the reports show it: one seed, or — shards merged that each drew their own — each
    shard's (``run.shard_seeds``), since no one seed replays the whole run."""
    shard_seeds = run.get("shard_seeds")
    if shard_seeds:
        count = run.get("shards") or len(shard_seeds)
        return "seeds per shard " + ", ".join(f"{s['index']}/{count}: {s['seed']}" for s in shard_seeds)
    return f"seed {run.get('seed')}"


def is_other_dialect_skip(scenario: dict[str, Any]) -> bool:
    """A scenario of another dialect: not this provider's skip, so the summaries count it apart."""
    return scenario["outcome"] == "skipped" and (scenario.get("message") or "").startswith(OTHER_DIALECT_SKIP)


@dataclass(kw_only=True)
class Diagnostics:
    """What a reader of a failure needs; a phase report carries it, and so does the scenario's result."""

    message: str | None = None
    skip_cause: str | None = None  # one of SKIP_CAUSES when skipped (typed; never written out)
    step: str | None = None
    transcript: list[str] = field(default_factory=list)
    transcript_omitted: int = 0
    stderr: str | None = None
    reproduce: str | None = None
    requirement_texts: dict[str, str] = field(default_factory=dict)
    findings: dict[str, dict[str, str]] = field(default_factory=dict)
    # what failed, as facts (``reporting/causes.py``: method, answer, expected, setup, step); None otherwise
    cause: dict[str, Any] | None = None


@dataclass(frozen=True)
class ScenarioInfo:
    """What the suite knows about a scenario before it runs."""

    id: str
    name: str
    feature: str
    level: str | None
    requirements: tuple[str, ...]
    capabilities: tuple[str, ...]
    dialects: tuple[str, ...]

    def result(self, nodeid: str = "") -> ScenarioResult:
        return ScenarioResult(id=self.id, name=self.name, feature=self.feature, nodeid=nodeid, level=self.level,
                              requirements=list(self.requirements), capabilities=list(self.capabilities),
                              dialects=list(self.dialects))


@dataclass
class PhaseReport(Diagnostics):
    """One phase of one scenario, as the process that ran it saw it."""

    scenario: ScenarioInfo
    phase: str  # setup, call or teardown
    duration_s: float
    outcome: str = "passed"  # passed, skipped, failed or error
    sandboxes_created: list[str] = field(default_factory=list)
    sandboxes_leaked: list[str] = field(default_factory=list)
    sandboxes_orphaned: list[str] = field(default_factory=list)  # the provider died holding them
    sandboxes_forgotten: list[str] = field(default_factory=list)  # their delete was answered not_found

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> PhaseReport:
        data = json.loads(text)
        info = data.pop("scenario")
        scenario = ScenarioInfo(**{k: tuple(v) if isinstance(v, list) else v for k, v in info.items()})
        return cls(scenario=scenario, **data)


@dataclass
class ScenarioResult(Diagnostics):
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
    outcomes: list[str] = field(default_factory=list)  # --repeat: each repetition's outcome, in order
    phases: set[str] = field(default_factory=set)  # which of setup/call/teardown reported (not written out)

    @property
    def capability(self) -> str | None:
        return self.capabilities[0] if self.capabilities else None

    def absorb(self, report: PhaseReport) -> None:
        """Fold one phase's report into the scenario's outcome."""
        phase = report.phase
        self.phases.add(phase)
        self.duration_s = round(self.duration_s + float(report.duration_s), 3)
        self.findings.update(report.findings)
        outcome = report.outcome
        if outcome == "passed":
            return
        if _SEVERITY[outcome] > _SEVERITY[self.outcome]:
            previous = self.message
            self.outcome = outcome
            self.message = report.message
            self.skip_cause = report.skip_cause
            if previous and phase == "teardown":
                self.message = f"{previous}\n(teardown) {self.message}"
            self.step = report.step or self.step
            self.cause = report.cause or self.cause
        elif report.message and outcome in ("failed", "error"):
            self.message = f"{self.message}\n({phase}) {report.message}" if self.message else report.message
        for key in ("transcript", "stderr", "reproduce", "requirement_texts"):
            if getattr(report, key):
                setattr(self, key, getattr(report, key))
        if report.transcript_omitted:
            self.transcript_omitted = report.transcript_omitted

    def to_dict(self, include_diagnostics: bool) -> dict[str, Any]:
        flat = asdict(self)
        shared = [f.name for f in fields(Diagnostics)]
        data = {key: flat[key] for key in [*(k for k in flat if k not in shared), *shared]}  # who first, then why
        data.pop("phases")
        data.pop("skip_cause")
        data["capability"] = self.capability
        if not include_diagnostics:
            for key in ("transcript", "transcript_omitted", "stderr", "requirement_texts"):
                data.pop(key)
        if not self.outcomes:
            data.pop("outcomes")
        if self.cause is None:
            data.pop("cause")
        return data
