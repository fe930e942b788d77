"""Where the plugin keeps its state: stash keys, and the per-process ``RunState``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.adapter import ProviderAdapter
from conformance.config import RunConfig
from conformance.connections import CleanupReport, ProviderConnections
from conformance.engine import Document, RunFacts
from conformance.reporting.baseline import Baseline
from conformance.reporting.model import ScenarioInfo
from conformance.transcript import Transcript

# The serialized RunConfig in an xdist worker's workerinput.
WORKER_CONFIG = "sandbox_conformance_config"
PLUGIN_NAME = "sandbox-conformance"
STEPS_PACKAGE = "conformance_steps"


@dataclass
class ScenarioRun:
    """What happens while one scenario runs: its transcript, the step that broke, its fresh providers."""

    adapter: ProviderAdapter
    stderr_start: int = 0
    transcript: Transcript = field(default_factory=Transcript)
    failed_step: str | None = None
    failed_step_type: str | None = None  # given, when or then: a Given that fails is the scenario's setup
    fresh: list[ProviderAdapter] = field(default_factory=list)
    cleanup: CleanupReport = field(default_factory=CleanupReport)
    findings: dict[str, dict[str, str]] = field(default_factory=dict)  # requirement id → what was found

    def stderr(self) -> str:
        """What the providers of this scenario wrote to stderr while it ran."""
        parts = [self.adapter.stderr_tail(since=self.stderr_start)]
        parts += [f"--- freshly started provider #{number} ---\n{fresh.stderr_tail()}"
                  for number, fresh in enumerate(self.fresh, start=1)]
        return "\n".join(part for part in parts if part.strip())

    def violations(self) -> list[Any]:
        found = list(self.adapter.take_violations())
        for adapter in self.fresh:
            found.extend(adapter.take_violations())
        return found


@dataclass
class RunState:
    """Per-process state of a conformance run (the controller's, or one xdist worker's)."""

    config: RunConfig
    connections: ProviderConnections
    is_worker: bool
    facts: RunFacts
    baseline: Baseline | None = None
    document: Document | None = None
    # A worker's sandbox accounts (``workers.py``): what finished cleanups reported, and the scenarios whose
    # cleanup has not finished (interrupted, or abandoned by a third signal), by scenario id.
    cleaned: CleanupReport = field(default_factory=CleanupReport)
    open_runs: dict[str, ScenarioRun] = field(default_factory=dict)
    workers: list[Any] = field(default_factory=list)  # the controller's xdist nodes, for their accounts


STATE = pytest.StashKey[RunState]()
INFO = pytest.StashKey[ScenarioInfo]()
RUN = pytest.StashKey[ScenarioRun]()
SKIP_CAUSE = pytest.StashKey[str]()


def state_of(config: pytest.Config) -> RunState | None:
    return config.stash.get(STATE, None)
