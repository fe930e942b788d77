"""No pass without a check: a scenario never passes when the operation it is about never happened.

(a) Every v1 scenario runs, in this process, against ``RefusingPlugin`` (``tests/no_pass_plugins.py``): the
reference v1 plugin answering the methods a session cannot do without (``CORE_METHODS``: the handshake,
shutdown, health, the handle calls, ``exec/run``) and ``-32601`` to every other one. It runs twice:

- declaring every capability: no ``@cap:`` gate skips anything, so every scenario about an optional
  operation meets its refusal while the provider claims to have it: such a scenario must fail;
- declaring none: the gated scenarios skip at their gate, and the ungated ones about an operation the
  plugin refuses anyway (``exec/stream`` is core in v1, ungated) must fail, or skip saying why.

The plugin records each refusal under the scenario that was running (the scenario frame names its owner
through ``conformance.plugin.fixtures.scenario_owner``, which the test wraps to say which). A passed scenario
with a recorded refusal is a failure of this test: whatever it checked, something it asked for was never done.
A refusal counts only for a method the protocol defines, one with a schema in ``schemas/sandbox-driver-v1/
methods/``: the scenarios whose subject IS a ``-32601`` (an unknown method, the retired checkpoint methods)
send methods the protocol does not define, so their refusal is not one of an operation the provider lacks —
derived from the schema registry, no list of scenarios. The plugin's refusals are ``-32601``, never the
``unsupported`` an undeclared capability calls for, so no capability-honesty scenario may pass on one either.

(b) ``SerialPlugin`` answers one request at a time: a 30 s command holds back the answer to ``shutdown``,
so ``shutdown-while-running`` (answer and exit within 5 s of the request) must fail against it.

The scenarios that once passed without their subject — ``shutdown-while-streaming`` and
``exit-on-input-closed-while-streaming`` (their streamed command was refused) and ``shutdown-while-running``
(the 5 s ran from the answer, not the request) — are named: each must fail, saying why.

Selection: every feature file of v1 (``features/*.feature``; the v2 files under ``features/v2/`` are
another dialect's and skip on v1), both modes, in about 45 s; the serial plugin runs its one scenario
with a short call timeout (a shutdown unanswered for 3 s is unanswered for the scenario's 5 s too).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance import bundle
from conformance.plugin import fixtures
from conformance.providers import ProviderConfig
from tests import inprocess
from tests.no_pass_plugins import CORE_METHODS, RECORDER

REFUSING = "tests.no_pass_plugins:serve_refusing"
SERIAL = "tests.no_pass_plugins:serve_serial"
STREAMED = ("shutdown-while-streaming", "exit-on-input-closed-while-streaming")


def _defined_methods() -> frozenset[str]:
    """Every method the v1 protocol defines: one schema file each, ``group.verb.json`` for ``group/verb``."""
    methods = Path(bundle.schemas_dir()) / "sandbox-driver-v1" / "methods"
    return frozenset(path.stem.replace(".", "/", 1) for path in methods.glob("*.json"))


def _v1_features() -> tuple[str, ...]:
    return tuple(sorted(path.name for path in Path(bundle.features_dir()).glob("*.feature")))


@contextlib.contextmanager
def _attributed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refusals recorded under the scenario whose frame is open."""
    original = fixtures.scenario_owner

    @contextlib.contextmanager
    def owner(adapter, scenario: str) -> Iterator[None]:
        RECORDER.scenario = scenario
        try:
            with original(adapter, scenario):
                yield
        finally:
            RECORDER.scenario = None

    RECORDER.reset()
    monkeypatch.setattr(fixtures, "scenario_owner", owner)
    try:
        yield
    finally:
        RECORDER.reset()


def test_the_refusals_counted_are_of_methods_the_protocol_defines() -> None:
    """The count is not vacuous: the schema registry knows the core methods and the refused ones."""
    defined = _defined_methods()
    assert CORE_METHODS <= defined, sorted(CORE_METHODS - defined)
    assert {"exec/stream", "exec/stdio_open", "pty/open", "logs/follow", "sandbox/pause"} <= defined
    assert "sandbox/checkpoint" not in defined  # a retired method: its -32601 is the rule, not a refusal


@pytest.mark.slow
@pytest.mark.parametrize("declare", ["everything", "nothing"])
def test_no_scenario_passes_whose_subject_was_refused(declare: str, monkeypatch, tmp_path) -> None:
    defined = _defined_methods()
    provider = ProviderConfig(in_process=(REFUSING, "--declare", declare), call_timeout_s=10.0)
    with _attributed(monkeypatch):
        run = inprocess.run_suite(provider, tmp_path / "reports", features=_v1_features())
        refused = {scenario: sorted(set(methods) & defined) for scenario, methods in RECORDER.refused.items()}
    outcomes = run.outcomes()
    assert run.with_outcome("passed"), "nothing passed: the run proves nothing about passes"
    assert any(refused.values()), "the plugin refused nothing the protocol defines: the test is vacuous"
    errors = run.with_outcome("error")
    assert not errors, f"the suite blamed itself instead of the provider: {sorted(errors)}"
    passed_without = {scenario: methods for scenario, methods in refused.items()
                      if methods and outcomes.get(scenario) == "passed"}
    assert not passed_without, (
        f"declaring {declare}, these scenarios passed although the provider refused what they asked for: "
        + "; ".join(f"{scenario} ({', '.join(methods)})" for scenario, methods in sorted(passed_without.items())))
    messages = {s["id"]: s.get("message") or "" for s in run.results["scenarios"]}
    for scenario in STREAMED:
        assert outcomes[scenario] == "failed", f"{scenario}: {outcomes[scenario]} {messages[scenario]}"
        assert "refused the streamed command" in messages[scenario] and "exec/stream" in messages[scenario], \
            messages[scenario]


@pytest.mark.slow
def test_shutdown_while_running_fails_when_the_answer_waits_for_the_command(tmp_path) -> None:
    """The 5 s run from the shutdown request: a provider that can answer it only once its 30 s command ended
    does not answer and exit within them."""
    provider = ProviderConfig(in_process=(SERIAL,), call_timeout_s=3.0)
    run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=("shutdown-while-running",))
    scenario = next(s for s in run.results["scenarios"] if s["id"] == "shutdown-while-running")
    assert scenario["outcome"] == "failed", scenario
    assert "shutdown" in scenario["message"], scenario["message"]
