"""Every scenario can fail: each catalogued mutant turns exactly its scenarios red, and each control
variant (a double that honestly offers what the reference cannot) turns its scenarios green."""

from __future__ import annotations

import contextlib

import pytest

from conformance.reporting.catalogue import all_scenarios
from tests.helpers import docker_mutant_arguments, mutant_command, run_cli
from tests.mutants import REGISTRY, catalogue
from tests.test_rest import rest_server

ENTRIES = catalogue()
SCENARIOS = {entry.id: entry for entry in all_scenarios()}


def _named(entry: dict) -> set[str]:
    return set(entry.get("fails", [])) | set(entry.get("may_fail", [])) | set(entry.get("passes", []))


def test_catalogue_names_only_registered_mutants_once() -> None:
    names = [entry["name"] for entry in ENTRIES]
    assert len(names) == len(set(names)), "a mutant is catalogued twice"
    assert set(names) <= set(REGISTRY), f"catalogued but not registered: {set(names) - set(REGISTRY)}"
    assert set(REGISTRY) <= set(names), f"registered but not catalogued: {set(REGISTRY) - set(names)}"


def test_catalogue_names_only_existing_scenarios() -> None:
    for entry in ENTRIES:
        unknown = _named(entry) - set(SCENARIOS)
        assert not unknown, f"{entry['name']} names unknown scenarios {sorted(unknown)}"
        assert entry.get("fails") or entry.get("passes"), f"{entry['name']} names no scenario"


def test_every_scenario_has_a_mutant_that_fails_it() -> None:
    covered = {sid for entry in ENTRIES for sid in entry.get("fails", [])}
    uncovered = sorted(sid for sid in SCENARIOS if sid not in covered)
    assert not uncovered, f"scenarios no mutant proves can fail: {uncovered}"


def _docker_provider(entry: dict, request: pytest.FixtureRequest) -> list[str] | None:
    """For `provider: docker` entries, the Docker plugin's mutant on the local sandbox image (the fixture
    skips visibly, or fails under SANDBOX_CONFORMANCE_REQUIRE_DOCKER=1, without an engine)."""
    if entry.get("provider") != "docker":
        return None
    return docker_mutant_arguments(entry["name"], image=request.getfixturevalue("docker_sandbox_image"))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_each_variant_fails_and_passes_exactly_its_scenarios(entry, suite, request, tmp_path) -> None:
    features = sorted({SCENARIOS[sid].feature for sid in _named(entry)})
    # --strict: a SHOULD scenario a mutant breaks must fail the run too.
    selection = ["--strict", *(argument for feature in features for argument in ("--feature", feature))]
    if "call_timeout" in entry:  # a mutant that never answers costs this deadline, not the default 30 s
        selection += ["--call-timeout", str(entry["call_timeout"])]
    with contextlib.ExitStack() as stack:
        if entry.get("transport") == "rest":
            # The reference REST server's mutant, always stopped; the suite gets its token in the environment.
            server = stack.enter_context(rest_server(tmp_path, mutant=entry["name"]))
            run = run_cli("run", "--rest", server.url, "--profile", "forkd", *selection,
                          report_dir=tmp_path / "reports", timeout=300, env=server.env())
        else:
            provider = _docker_provider(entry, request) or ["--plugin", mutant_command(entry["name"])]
            run = suite(*provider, *selection)
    expected_fail = set(entry.get("fails", []))
    assert run.exit_code == (1 if expected_fail else 0), f"exit {run.exit_code}\n{run.stdout[-3000:]}{run.stderr[-2000:]}"
    errors = run.with_outcome("error")
    assert not errors, f"the suite blamed itself instead of the provider: {errors}"
    failed = run.with_outcome("failed")
    missing = expected_fail - failed
    assert not missing, f"{entry['name']} should fail {sorted(missing)}; outcomes: {run.outcomes()}"
    passed = run.with_outcome("passed")
    not_passed = set(entry.get("passes", [])) - passed
    assert not not_passed, f"{entry['name']} should pass {sorted(not_passed)}; outcomes: {run.outcomes()}"
    if entry.get("exact", True):
        unexpected = failed - expected_fail - set(entry.get("may_fail", []))
        assert not unexpected, f"{entry['name']} also failed {sorted(unexpected)}"
