"""Every scenario can fail: each catalogued mutant turns exactly its scenarios red."""

from __future__ import annotations

import pytest

from conformance.reference.mutants import REGISTRY, catalogue
from conformance.reporting.catalogue import all_scenarios

from tests.helpers import plugin_command

ENTRIES = catalogue()


def test_catalogue_names_only_registered_mutants_once() -> None:
    names = [entry["name"] for entry in ENTRIES]
    assert len(names) == len(set(names)), "a mutant is catalogued twice"
    assert set(names) <= set(REGISTRY), f"catalogued but not registered: {set(names) - set(REGISTRY)}"
    assert set(REGISTRY) <= set(names), f"registered but not catalogued: {set(REGISTRY) - set(names)}"


def test_catalogue_names_only_existing_scenarios() -> None:
    known = {entry.id for entry in all_scenarios()}
    for entry in ENTRIES:
        named = set(entry["fails"]) | set(entry.get("may_fail", []))
        assert named <= known, f"{entry['name']} names unknown scenarios {named - known}"


def test_every_scenario_has_a_mutant_that_fails_it() -> None:
    covered = {sid for entry in ENTRIES for sid in entry["fails"]}
    uncovered = sorted(entry.id for entry in all_scenarios() if entry.id not in covered)
    assert not uncovered, f"scenarios no mutant proves can fail: {uncovered}"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_mutant_fails_exactly_its_scenarios(entry, suite) -> None:
    run = suite("--plugin", plugin_command("--mutant", entry["name"]))
    assert run.exit_code == 1, f"expected exit 1, got {run.exit_code}\n{run.stderr[-2000:]}"
    errors = run.with_outcome("error")
    assert not errors, f"the suite blamed itself instead of the provider: {errors}"
    failed = run.with_outcome("failed")
    expected = set(entry["fails"])
    missing = expected - failed
    assert not missing, f"{entry['name']} should fail {sorted(missing)}; outcomes: {run.outcomes()}"
    if entry.get("exact", True):
        unexpected = failed - expected - set(entry.get("may_fail", []))
        assert not unexpected, f"{entry['name']} also failed {sorted(unexpected)}"
