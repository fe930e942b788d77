"""No pass without a check: a scenario never passes when the operation it is about never happened.

(a) Every v1 scenario runs, in this process, against ``RefusingPlugin`` (``tests/no_pass_plugins.py``): the
reference v1 plugin answering the methods a session cannot do without (``CORE_METHODS``: the handshake,
shutdown, health, the handle calls, ``exec/run``) and refusing every other one. It runs three times:

- declaring every capability, refusing as an unknown method (``-32601``), then as ``unsupported``: no
  ``@cap:`` gate skips anything, so every scenario about an optional operation meets its refusal while the
  provider claims to have it. No scenario may pass after a refusal, whatever its form.
- declaring none, refusing as ``unsupported`` (the honest refusal of an undeclared capability): the gated
  scenarios skip at their gate; the ungated ones about an operation the plugin refuses anyway
  (``exec/stream`` is core in v1, ungated) must fail or skip saying why. Here, and only here, a scenario
  whose subject IS the refusal may pass on one: one citing a requirement whose text says an undeclared
  capability fails ``unsupported`` (SDP1-024, -028, -030, -060, ...), or whose own steps say so ("refused
  as unsupported naming lifecycle.fork when forks are not declared") — derived from the requirement
  registry and the feature files, no list of scenarios. Declaring none and refusing as ``-32601`` adds nothing: that refusal is never the
  honest one, and the first run already holds every scenario to it.

The plugin records each refusal under the scenario that was running (the scenario frame names its owner
through ``conformance.plugin.fixtures.scenario_owner``, which the test wraps to say which). A passed scenario
with a recorded refusal it is not allowed is a failure of this test: whatever it checked, something it asked
for was never done. A refusal counts only for a method the protocol defines, one with a schema in
``schemas/sandbox-driver-v1/methods/``: the scenarios whose subject is a ``-32601`` (an unknown method, the
retired checkpoint methods) send methods the protocol does not define, so their answer is not the refusal
of an operation the provider lacks — derived from the schema registry too.

(b) ``SerialPlugin`` answers one request at a time: a 30 s command holds back the answer to ``shutdown``,
so ``shutdown-while-running`` (answer and exit within 5 s of the request) must fail against it.

The scenarios that once passed without their subject — ``shutdown-while-streaming`` and
``exit-on-input-closed-while-streaming`` (their streamed command was refused) and ``shutdown-while-running``
(the 5 s ran from the answer, not the request) — are named: each must fail, saying why.

Selection: every feature file of v1 (``features/*.feature``; the v2 files under ``features/v2/`` are
another dialect's and skip on v1), 25 to 40 s a run; the second run declaring everything takes only the
scenarios that met a refusal in the first (see its test); the serial plugin runs its one scenario with a
short call timeout (a shutdown unanswered for 3 s is unanswered for the scenario's 5 s too), in about 13 s.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance import bundle, requirements
from conformance.plugin import fixtures
from conformance.providers import ProviderConfig
from conformance.reporting import catalogue
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


@functools.cache
def _steps() -> dict[str, tuple[str, ...]]:
    return {entry.id: tuple(catalogue.gherkin_steps(entry, entry.id if entry.id != entry.base_id else None))
            for entry in catalogue.all_scenarios()}


def _about_the_refusal(scenario: str, cited: list[str]) -> bool:
    """Is a scenario about the refusal of an undeclared capability: does a rule it cites, or one of its own
    steps, say such a call is refused as ``unsupported``?"""
    registry = requirements.load()
    return (any(rid in registry and "unsupported" in registry[rid].text for rid in cited)
            or any("unsupported" in step for step in _steps().get(scenario, ())))


def _refusing_run(declare: str, refuse: str, monkeypatch: pytest.MonkeyPatch, report_dir: Path,
                  scenarios: tuple[str, ...] = ()) -> tuple[inprocess.InProcessRun, dict[str, list[str]]]:
    """A run against ``RefusingPlugin`` (every v1 feature, or ``scenarios``), with the methods the protocol
    defines that it refused, by scenario."""
    defined = _defined_methods()
    provider = ProviderConfig(in_process=(REFUSING, "--declare", declare, "--refuse", refuse), call_timeout_s=10.0)
    with _attributed(monkeypatch):
        run = inprocess.run_suite(provider, report_dir, scenarios=scenarios,
                                  features=() if scenarios else _v1_features())
        refused = {scenario: sorted(set(methods) & defined) for scenario, methods in RECORDER.refused.items()}
    return run, {scenario: methods for scenario, methods in refused.items() if methods}


def _judge(run: inprocess.InProcessRun, refused: dict[str, list[str]], declare: str, refuse: str,
           whole: bool = True) -> None:
    """No scenario passed after a refusal, but one about that very refusal where it is the honest one; and
    the scenarios that once passed without their streamed command fail, naming its refusal. A ``whole`` run
    (every feature) must have passed something, or it proves nothing about passes."""
    outcomes = run.outcomes()
    assert run.with_outcome("passed") or not whole, "nothing passed: the run proves nothing about passes"
    assert refused, "the plugin refused nothing the protocol defines: the test is vacuous"
    errors = run.with_outcome("error")
    assert not errors, f"the suite blamed itself instead of the provider: {sorted(errors)}"
    cited = {s["id"]: s["requirements"] for s in run.results["scenarios"]}
    # Only an honest refusal (unsupported, of what is not declared) can be what a scenario is about.
    honest = declare == "nothing" and refuse == "unsupported"
    allowed = {scenario for scenario in refused if honest and _about_the_refusal(scenario, cited.get(scenario, []))}
    passed_after_refusal = {scenario for scenario in refused if outcomes.get(scenario) == "passed"}
    assert not passed_after_refusal - allowed, (
        f"declaring {declare} and refusing as {refuse}, these scenarios passed although the provider refused "
        "what they asked for: " + "; ".join(f"{scenario} ({', '.join(refused[scenario])})"
                                           for scenario in sorted(passed_after_refusal - allowed)))
    if honest:  # the allowance is not vacuous: scenarios about the refusal pass on it
        assert passed_after_refusal & allowed, "no scenario about an unsupported refusal passed on one"
    messages = {s["id"]: s.get("message") or "" for s in run.results["scenarios"]}
    for scenario in STREAMED:
        assert outcomes[scenario] == "failed", f"{scenario}: {outcomes[scenario]} {messages[scenario]}"
        assert "refused the streamed command" in messages[scenario] and "exec/stream" in messages[scenario], \
            messages[scenario]


@pytest.mark.slow
def test_declaring_everything_no_scenario_passes_after_a_refusal(monkeypatch, tmp_path) -> None:
    """Refused as unknown, then as unsupported. The second run takes only the scenarios that met a refusal in
    the first: with the same declarations and the same answers to every core method, a scenario that asked for
    nothing the plugin refuses asks for the same again."""
    run, refused = _refusing_run("everything", "unknown", monkeypatch, tmp_path / "unknown")
    _judge(run, refused, "everything", "unknown")
    met = tuple(sorted(refused))
    run, refused = _refusing_run("everything", "unsupported", monkeypatch, tmp_path / "unsupported", scenarios=met)
    _judge(run, refused, "everything", "unsupported", whole=False)


@pytest.mark.slow
def test_declaring_nothing_only_a_scenario_about_the_refusal_passes_after_one(monkeypatch, tmp_path) -> None:
    run, refused = _refusing_run("nothing", "unsupported", monkeypatch, tmp_path / "reports")
    _judge(run, refused, "nothing", "unsupported")


@pytest.mark.slow
def test_shutdown_while_running_fails_when_the_answer_waits_for_the_command(tmp_path) -> None:
    """The 5 s run from the shutdown request: a provider that can answer it only once its 30 s command ended
    does not answer and exit within them."""
    provider = ProviderConfig(in_process=(SERIAL,), call_timeout_s=3.0)
    run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=("shutdown-while-running",))
    scenario = next(s for s in run.results["scenarios"] if s["id"] == "shutdown-while-running")
    assert scenario["outcome"] == "failed", scenario
    assert "shutdown" in scenario["message"], scenario["message"]
