"""Every scenario can fail: each catalogued mutant turns exactly its scenarios red, and each control
variant (a double that honestly offers what the reference cannot) turns its scenarios green."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from conformance import requirements
from conformance.errors import ConformanceError
from conformance.providers import ProviderConfig
from conformance.reporting.catalogue import all_scenarios
from tests import inprocess
from tests.helpers import mutant_command
from tests.mutants import REGISTRY, catalogue

DOCKER_MUTANT = "tests.mutants.launch:serve_docker_mutant"
V2 = "sandbox-driver-v2"
TOKEN_ENV = "FORKD_TOKEN"  # the built-in forkd profile's token variable

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
        assert entry.get("fails") or entry.get("passes") or entry.get("refused_at_handshake"), \
            f"{entry['name']} names no scenario"
        outside = set(entry.get("sample", [])) - set(entry.get("fails", []))
        assert not outside, f"{entry['name']} samples scenarios it does not fail: {sorted(outside)}"


def test_every_scenario_has_a_mutant_that_fails_it() -> None:
    """Proven by what the catalogue test runs, not by what the catalogue lists: a scenario named only in the
    unsampled part of a `fails` list is never shown to fail."""
    covered = {sid for entry in ENTRIES for sid in set(entry.get("fails", [])) & set(_scenarios_to_run(entry))}
    uncovered = sorted(sid for sid in SCENARIOS if sid not in covered)
    assert not uncovered, f"scenarios no mutant that the catalogue test runs proves can fail: {uncovered}"


def test_every_v2_requirement_has_a_v2_mutant() -> None:
    """Every black-box rule of protocol v2 is shown to be breakable on a v2 provider: a catalogue entry of the
    v2 dialect names it (or the v1 rule it carries) and fails a scenario that verifies it under v2 (citing it,
    or the carried v1 id), among the scenarios the catalogue test runs for that entry. A v1 mutant failing the
    shared scenario against the v1 reference proves the v1 rule, not the v2 one."""
    registry = requirements.load(V2)
    verifying = requirements.coverage(registry, SCENARIOS.values())  # each rule -> its scenarios that run on v2
    proven: set[str] = set()
    for entry in ENTRIES:
        if entry.get("dialect") != V2:
            continue
        failing = set(_scenarios_to_run(entry)) & set(entry.get("fails", []))
        named = set(entry.get("requirements", []))
        proven |= {rid for rid, rule in registry.items()
                   if named & {rid, *rule.carries} and failing & set(verifying[rid])}
    owed = [rid for rid, rule in registry.items() if rule.testability in requirements.BLACK_BOX and not rule.excluded]
    unproven = [rid for rid in owed if rid not in proven]
    without_scenario = [rid for rid in unproven if not verifying[rid]]
    without_mutant = [f"{rid}: none fails {sorted(verifying[rid])}" for rid in unproven if verifying[rid]]
    assert not unproven, (
        f"{len(unproven)} v2 rules no v2 mutant proves.\n"
        f"No scenario verifies these on v2 (test_requirements reports them uncovered): {', '.join(without_scenario)}\n"
        "No v2 catalogue entry names and fails a scenario of these:\n  " + "\n  ".join(without_mutant))


def _provider(entry: dict, request: pytest.FixtureRequest, stack: contextlib.ExitStack) -> ProviderConfig:
    """The variant as a provider served in this process: a host or Docker plugin on a thread, or the
    REST server's variant on a thread on a free loopback port (its token in this process's environment)."""
    timeout = float(entry.get("call_timeout", 30))
    if entry.get("transport") == "rest":
        token = f"mutant-token-{uuid.uuid4().hex}"
        request.getfixturevalue("monkeypatch").setenv(TOKEN_ENV, token)
        url = stack.enter_context(inprocess.rest_server(token, REGISTRY[entry["name"]]))
        return ProviderConfig(rest_url=url, profile="forkd", call_timeout_s=timeout, run_id=_run_id(entry))
    if entry.get("provider") == "docker":
        from conformance.reference.docker_plugin import create_spec

        image = request.getfixturevalue("docker_sandbox_image")
        return ProviderConfig(in_process=(DOCKER_MUTANT, entry["name"]), create_spec=create_spec(image),
                              call_timeout_s=timeout, run_id=_run_id(entry))
    if entry.get("process"):  # its fault shows only in a real process (e.g. a thread keeping it alive)
        return ProviderConfig(plugin=mutant_command(entry["name"]), call_timeout_s=timeout, run_id=_run_id(entry))
    return inprocess.plugin(mutant=entry["name"], call_timeout_s=timeout, run_id=_run_id(entry))


def _run_id(entry: dict) -> str:
    return f"mutant-{entry['name']}-{uuid.uuid4().hex[:6]}"


def _check(entry: dict, run: inprocess.InProcessRun, selected: set[str], exact: bool) -> None:
    expected_fail = set(entry.get("fails", [])) & selected  # a measured `sample` runs only some of them
    summary = run.output[-3000:]
    # a failed @gap scenario is a finding of the gap section, never a verdict reason
    levels = {s["id"]: s["level"] for s in run.results["scenarios"]}
    fails_the_run = {sid for sid in expected_fail if levels.get(sid) != "gap"}
    assert run.exit_code == (1 if fails_the_run else 0), f"exit {run.exit_code}\n{summary}"
    errors = run.with_outcome("error")
    assert not errors, f"the suite blamed itself instead of the provider: {errors}\n{summary}"
    failed = run.with_outcome("failed")
    if entry["catalogue"].startswith("redteam-") and not entry.get("sample") and len(expected_fail) > 1:
        # A blind red team's mutant lists what the whole suite failed against it when it was measured; some
        # of those failures are incidental (timing, a follow left running). What must hold: it stays caught.
        assert failed & expected_fail, f"{entry['name']} is no longer caught: none of {sorted(expected_fail)} " \
                                       f"failed; outcomes: {run.outcomes()}"
    else:
        missing = expected_fail - failed
        assert not missing, f"{entry['name']} should fail {sorted(missing)}; outcomes: {run.outcomes()}"
    not_passed = set(entry.get("passes", [])) - run.with_outcome("passed")
    assert not not_passed, f"{entry['name']} should pass {sorted(not_passed)}; outcomes: {run.outcomes()}"
    if exact:
        unexpected = (failed & selected) - expected_fail - set(entry.get("may_fail", []))
        assert not unexpected, f"{entry['name']} also failed {sorted(unexpected)}"


# A blind red team's mutant must stay caught by one of the scenarios it failed when measured; a sample of
# them shows that as well as all of them would, at a fraction of the time (some failed fifty).
REDTEAM_SAMPLE = 4


def _scenarios_to_run(entry: dict) -> tuple[str, ...]:
    fails = sorted(entry.get("fails", []))
    if entry.get("sample"):  # measured: the scenarios that fail this mutant fastest (others wait on deadlines)
        return tuple(sorted(set(entry["sample"]) | set(entry.get("passes", []))))
    if entry["catalogue"].startswith("redteam-") and len(fails) > REDTEAM_SAMPLE:
        return tuple(sorted(set(fails[:REDTEAM_SAMPLE]) | set(entry.get("passes", []))))
    return tuple(sorted(_named(entry)))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_each_variant_fails_and_passes_exactly_its_scenarios(entry, request, tmp_path) -> None:
    """The scenarios the catalogue names, against the variant served in this process; --strict, so a
    SHOULD scenario the variant breaks fails the run too."""
    scenarios = _scenarios_to_run(entry)
    with contextlib.ExitStack() as stack:
        provider = _provider(entry, request, stack)
        if entry.get("refused_at_handshake"):  # so broken the run cannot start: exit 2, naming why
            with pytest.raises(ConformanceError, match=entry["refused_at_handshake"]):
                inprocess.run_suite(provider, tmp_path / "reports", scenarios=("delete-unknown",))
            return
        run = inprocess.run_suite(provider, tmp_path / "reports", scenarios=scenarios, strict=True)
    _check(entry, run, set(scenarios), exact=entry.get("exact", True))


def _exactness_probes() -> list[dict]:
    """Per catalogue file (an area), one variant whose whole feature files are run, so a variant that
    breaks more than it says is caught somewhere in every area: the entry marked ``exactness_probe``,
    else the area's first exact entry."""
    probes = []
    for area in sorted({entry["catalogue"] for entry in ENTRIES}):
        entries = [e for e in ENTRIES if e["catalogue"] == area and e.get("exact", True) and e.get("fails")
                   and not e.get("process") and not e.get("refused_at_handshake")]
        marked = [e for e in entries if e.get("exactness_probe")]
        if marked or entries:
            probes.append((marked or entries)[0])
    return probes


@pytest.mark.parametrize("entry", _exactness_probes(), ids=lambda e: f"{e['catalogue']}:{e['name']}")
def test_one_variant_per_area_fails_nothing_else_in_its_whole_features(entry, request, tmp_path) -> None:
    features = tuple(sorted({SCENARIOS[sid].feature for sid in _named(entry)}))
    with contextlib.ExitStack() as stack:
        provider = _provider(entry, request, stack)
        run = inprocess.run_suite(provider, tmp_path / "reports", features=features, strict=True)
    selected = {sid for sid, outcome in run.outcomes().items() if outcome != "disabled"}
    _check(entry, run, selected, exact=True)
