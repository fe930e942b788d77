"""The interop tier (tests/interop): the whole suite against upstream's v1 and v2 host plugins and fabro's
forkd plugin (against serve forkd, both compat modes), and upstream's v1 battery against our reference.

Each run must agree with its target's expected findings: no MUST failure that is not listed with the
sentence it breaks, no listed finding that stopped failing, no suite error, every sandbox accounted for.
Without a third-party build these skip, saying why — unless SANDBOX_CONFORMANCE_REQUIRE_INTEROP=1 (.ci/run).
The static checks of the expected-findings files always run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conformance import requirements
from tests.interop import __main__ as tier
from tests.interop import findings, third_party


@pytest.fixture(scope="session")
def third_party_build() -> Path:
    try:
        return third_party.built()
    except third_party.Unavailable as why:
        if os.environ.get(third_party.REQUIRE_ENV) == "1":
            pytest.fail(f"interop tier: {why} ({third_party.REQUIRE_ENV}=1 requires it)", pytrace=False)
        pytest.skip(f"interop tier: {why}")


@pytest.mark.slow
@pytest.mark.parametrize("target", third_party.TARGETS, ids=lambda target: target.name)
def test_a_third_party_provider_fails_exactly_its_listed_findings(target: third_party.Target,
                                                                   third_party_build: Path, tmp_path: Path) -> None:
    judgement = tier.judge(target, third_party_build, tmp_path / target.name)
    assert judgement.ok, judgement.table()


def _normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_every_target_has_one_expected_findings_file() -> None:
    named = [target for path in findings.files() for target in findings.raw(path)["targets"]]
    assert sorted(named) == sorted(third_party.BY_NAME), "each target is named by exactly one file"


def test_every_listed_finding_quotes_the_sentence_of_a_requirement_its_scenario_cites() -> None:
    """A true finding is a scenario, the requirement it cites, and that requirement's words, verbatim."""
    from conformance.reporting.catalogue import all_scenarios

    registry = requirements.load()
    scenarios = {entry.id: entry.tags.requirements for entry in all_scenarios()}
    for target in third_party.TARGETS:
        wanted = findings.expected(target.name)
        for finding in [*wanted.findings.values(), *wanted.advisories.values()]:
            where = f"{wanted.path.name}: {finding.scenario}"
            assert finding.cause.strip(), f"{where}: no cause"
            if target.is_battery:
                continue
            assert finding.scenario in scenarios, f"{where}: no such scenario"
            assert finding.requirement in requirements.cited_under(scenarios[finding.scenario], target.dialect), \
                f"{where}: the scenario does not cite {finding.requirement}"
            if finding.level != "must":
                continue  # an advisory names its rule; only a finding that fails the tier quotes it
            requirement = registry[finding.requirement]
            assert requirement.level == "MUST", f"{where}: {finding.requirement} is no MUST"
            assert finding.section == requirement.section, f"{where}: {finding.requirement} is in {requirement.section}"
            assert _normalised(finding.sentence) and _normalised(finding.sentence) in _normalised(requirement.text), \
                f"{where}: the quoted sentence is not {finding.requirement}'s text"
