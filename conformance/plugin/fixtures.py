"""The fixtures steps use, and the per-scenario frame around them: gating on ``@dialect:`` and
``@cap:``, the transcript, the owner of every sandbox created meanwhile, and the cleanup."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import replace

import pytest
from faker import Faker

from conformance import requirements
from conformance.adapter import ProviderAdapter
from conformance.connections import ProviderConnections, scenario_owner
from conformance.errors import NotExpressible
from conformance.plugin.keys import INFO, RUN, SKIP_CAUSE, ScenarioRun, state_of
from conformance.reporting.model import OTHER_DIALECT_SKIP
from conformance.transcript import REDACTOR


@pytest.fixture(scope="session")
def conformance_connections(request: pytest.FixtureRequest) -> ProviderConnections:
    return state_of(request.config).connections


@pytest.fixture(autouse=True)
def _conformance_scenario(request: pytest.FixtureRequest) -> Iterator[None]:
    item = request.node
    state = state_of(request.config)
    if state is None or INFO not in item.stash:
        yield
        return
    info = item.stash[INFO]
    connections: ProviderConnections = request.getfixturevalue("conformance_connections")
    adapter = connections.shared()
    if info.dialects and adapter.dialect not in info.dialects:
        item.stash[SKIP_CAUSE] = "other dialect"
        pytest.skip(f"{OTHER_DIALECT_SKIP}{', '.join(info.dialects)} only; the provider speaks {adapter.dialect}")
    cited = requirements.cited_under(info.requirements, adapter.dialect)
    if not cited:
        item.stash[SKIP_CAUSE] = "no rule"
        pytest.skip(f"the {adapter.dialect} dialect states no rule this scenario checks (it checks "
                    f"{', '.join(info.requirements)}, rules of another dialect)")
    # The scenario is judged by the rules of the dialect it runs against, and reported under them.
    info = item.stash[INFO] = replace(info, requirements=cited, level=requirements.level_under(info.level, cited))
    for capability in info.capabilities:
        missing = adapter.capabilities_without_method.get(capability)
        if missing is not None and adapter.capabilities.declares(capability):
            # declared, yet the dialect has no message to exercise it with
            item.stash[SKIP_CAUSE] = "not expressible"
            pytest.skip(str(NotExpressible(adapter.dialect, missing)))
    for capability in info.capabilities:
        if capability not in adapter.core_capabilities and not adapter.capabilities.declares(capability):
            item.stash[SKIP_CAUSE] = "not declared"
            pytest.skip(f"capability {capability} not declared")
    state.facts.unattributed.extend(REDACTOR.text(str(v)) for v in adapter.take_violations())
    run = ScenarioRun(adapter, stderr_start=adapter.stderr_position())
    item.stash[RUN] = run
    state.open_runs[info.id] = run  # until its cleanup is done: an interrupted one is accounted from here
    with adapter.recording(run.transcript), scenario_owner(adapter, info.id):
        yield
        for fresh in run.fresh:
            run.cleanup.merge(connections.cleanup(fresh, info.id))
            connections.end(fresh)
        run.cleanup.merge(connections.cleanup(adapter, info.id))
    state.cleaned.merge(run.cleanup)
    del state.open_runs[info.id]
    if run.cleanup.leaked:
        detail = "; ".join(f"{sid}: {why}" for sid, why in run.cleanup.leaked.items())
        raise AssertionError(f"could not delete the scenario's sandboxes: {detail}")


@pytest.fixture
def conformance_provider(request: pytest.FixtureRequest) -> ProviderAdapter:
    """The shared adapter, recording into this scenario's transcript."""
    return request.node.stash[RUN].adapter


@pytest.fixture
def conformance_fresh_provider(request: pytest.FixtureRequest):
    """A factory for newly started providers that record into this scenario's transcript."""
    run: ScenarioRun = request.node.stash[RUN]
    connections: ProviderConnections = request.getfixturevalue("conformance_connections")
    owner = request.node.stash[INFO].id

    def start(handshake: bool = True, ahead: bool = False) -> ProviderAdapter:
        """``ahead``: a provider started in the background before this scenario may do (one that reads a
        durable registry at start would not see what happened since: only the scenario's first step asks)."""
        adapter = connections.fresh(handshake=False, ahead=ahead)
        adapter.owner = owner
        adapter.add_transcript(run.transcript)
        run.fresh.append(adapter)
        if handshake:
            adapter.handshake(strict=False)
        return adapter

    return start


@pytest.fixture
def conformance_finding(request: pytest.FixtureRequest):
    """Records what a scenario found out about a requirement with several honest outcomes (a gap:
    ``supported`` or ``refused``), for the gap section of the report."""
    run: ScenarioRun = request.node.stash[RUN]

    def note(requirement: str, status: str, detail: str) -> None:
        run.findings[requirement] = {"status": status, "detail": detail}

    return note


@pytest.fixture
def conformance_faker(request: pytest.FixtureRequest) -> Faker:
    """Generated data for this scenario: the same run seed and scenario id give the same values."""
    seed = state_of(request.config).config.seed
    faker = _process_faker()
    faker.seed_instance(f"{seed}:{request.node.stash[INFO].id}")
    return faker


@functools.cache
def _process_faker() -> Faker:
    """One Faker per process, re-seeded for each scenario: building one loads every provider of its locale
    (tens of milliseconds), and scenarios run one at a time in a process."""
    return Faker()
