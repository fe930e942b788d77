"""Each phase of each scenario becomes a typed ``PhaseReport``; the controller folds them."""

from __future__ import annotations

import pytest

from conformance import requirements
from conformance.errors import (
    CapabilityNotDeclared,
    ConformanceError,
    NotExpressible,
    WireViolation,
    is_provider_fault,
)
from conformance.plugin.keys import INFO, RUN, SKIP_CAUSE, RunState
from conformance.reporting.causes import observed_cause, setup_message
from conformance.reporting.model import PhaseReport
from conformance.transcript import REDACTOR

# The key under which a phase report rides on pytest's report (user_properties cross to the controller).
REPORT_PROPERTY = "sandbox-conformance"


def note_violations(item: pytest.Item) -> None:
    """A scenario failed: the wire violations seen meanwhile go into its transcript."""
    run = item.stash.get(RUN, None)
    if run is not None:
        for violation in run.violations():
            run.transcript.record("suite", "note", f"also: {violation}")


def raise_violations(item: pytest.Item) -> None:
    """A scenario's steps passed: wire violations seen meanwhile fail it."""
    run = item.stash.get(RUN, None)
    violations = run.violations() if run is not None else []
    if violations:
        raise WireViolation.during_scenario(violations)


def skip_not_expressible(item: pytest.Item, gap: NotExpressible) -> None:
    item.stash[SKIP_CAUSE] = "not expressible"
    pytest.skip(str(gap))


def skip_not_declared(item: pytest.Item, undeclared: CapabilityNotDeclared) -> None:
    """A step found the dialect can ask for it but the provider declares it false: as a @cap: gate."""
    item.stash[SKIP_CAUSE] = "not declared"
    pytest.skip(str(undeclared))


def phase_report(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport,
                 state: RunState) -> PhaseReport:
    info = item.stash[INFO]
    phase = PhaseReport(scenario=info, phase=report.when, duration_s=report.duration)
    run = item.stash.get(RUN, None)
    if report.when == "teardown" and run is not None:
        phase.sandboxes_created = list(run.cleanup.created)
        phase.sandboxes_leaked = sorted(run.cleanup.leaked)
        phase.sandboxes_orphaned = sorted(run.cleanup.orphaned)
        phase.sandboxes_forgotten = sorted(run.cleanup.forgotten)
    if report.when == "call" and run is not None:
        phase.findings = dict(run.findings)
    if report.passed:
        return phase
    if report.skipped:
        phase.outcome = "skipped"
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        phase.message = reason.removeprefix("Skipped: ")
        phase.skip_cause = item.stash.get(SKIP_CAUSE, None)
        return phase
    exception = call.excinfo.value if call.excinfo is not None else None
    phase.outcome = "failed" if exception is not None and is_provider_fault(exception) else "error"
    in_steps = run is not None and report.when == "call"  # a teardown's failure is no step's
    phase.cause = observed_cause(exception, run.failed_step_type if in_steps else None,
                                 run.failed_step if in_steps else None)
    phase.message = REDACTOR.text(setup_message(phase.cause, describe(exception)))
    phase.reproduce = REDACTOR.text(state.config.reproduce(info.id))
    phase.requirement_texts = requirement_texts(info.requirements)
    if run is not None:
        phase.step = run.failed_step
        phase.transcript = run.transcript.render()
        phase.transcript_omitted = run.transcript.omitted
        phase.stderr = REDACTOR.text(run.stderr())
    return phase


def fold(report: pytest.TestReport, state: RunState) -> None:
    """On the controller (or the single process): fold a phase report into its scenario's result."""
    text = dict(report.user_properties).get(REPORT_PROPERTY)
    if text is None:
        return
    phase = PhaseReport.from_json(text)
    facts = state.facts
    result = facts.results.get(report.nodeid)
    if result is None:
        result = facts.results[report.nodeid] = phase.scenario.result(report.nodeid)
    result.absorb(phase)
    facts.created.extend(phase.sandboxes_created)
    facts.leaked.update(phase.sandboxes_leaked)
    facts.orphaned.update(phase.sandboxes_orphaned)
    facts.forgotten.update(phase.sandboxes_forgotten)


def requirement_texts(ids: tuple[str, ...]) -> dict[str, str]:
    """What each requirement says, for the people reading a failure."""
    registry = requirements.load()
    return {rid: registry[rid].text for rid in ids if rid in registry}


def describe(exception: BaseException | None) -> str:
    if exception is None:
        return "unknown failure"
    text = str(exception).strip()
    kind = type(exception).__name__
    if not text:
        return kind
    return text if isinstance(exception, AssertionError | ConformanceError) else f"{kind}: {text}"
