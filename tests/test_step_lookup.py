"""The faster step look-up (conformance/plugin/step_lookup.py) finds exactly what pytest-bdd's own does:
the same step definitions, in the same order, for every step a run executes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conformance.plugin import step_lookup
from tests.inprocess import plugin, run_suite


def test_every_step_finds_the_definitions_pytest_bdd_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    step_lookup.install()
    bdd_scenario = sys.modules["pytest_bdd.scenario"]
    original = step_lookup.original()
    assert original is not None and bdd_scenario.find_fixturedefs_for_step is step_lookup.find_fixturedefs_for_step
    compared: list[str] = []
    differences: list[str] = []

    def both(step, fixturemanager, node):
        fast = list(step_lookup.find_fixturedefs_for_step(step, fixturemanager, node))
        slow = list(original(step=step, fixturemanager=fixturemanager, node=node))
        compared.append(step.name)
        if [d.func for d in fast] != [d.func for d in slow]:
            differences.append(f"{node.nodeid}: {step.type} {step.name!r}: {fast} != {slow}")
        return fast

    monkeypatch.setattr(bdd_scenario, "find_fixturedefs_for_step", both)
    run = run_suite(plugin(), tmp_path, features=("features/exec.feature", "features/fs.feature",
                                                  "features/lifecycle.feature"))
    assert run.exit_code == 0, run.output[-2000:]
    assert len(compared) > 300 and len(set(compared)) > 100
    assert differences == []


def test_a_step_with_no_definition_finds_none_and_a_wrong_keyword_finds_none() -> None:
    from pytest_bdd.parser import Step

    class Context:
        def __init__(self, type_: str | None, text: str) -> None:
            self.type = type_
            self.parser = type("P", (), {"is_matching": staticmethod(lambda name: name == text)})()

    visible = [("given-def", Context("given", "a sandbox")), ("any-def", Context(None, "a sandbox")),
               ("when-def", Context("when", "it runs"))]
    given = Step(name="a sandbox", type="given", indent=0, line_number=1, keyword="Given")
    when = Step(name="a sandbox", type="when", indent=0, line_number=1, keyword="When")
    nothing = Step(name="no such step", type="given", indent=0, line_number=1, keyword="Given")
    assert list(step_lookup._matching(given, visible)) == ["given-def", "any-def"]
    assert list(step_lookup._matching(when, visible)) == ["any-def"]
    assert list(step_lookup._matching(nothing, visible)) == []
