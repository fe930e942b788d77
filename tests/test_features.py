"""The feature files are well-formed: every scenario is identified, traced to a requirement, levelled."""

from __future__ import annotations

import re
from collections import Counter

from conformance import bundle
from conformance.reporting.catalogue import all_scenarios
from conformance.scenario_tags import LEVELS

ENTRIES = all_scenarios()


def test_every_scenario_has_an_id_requirements_and_one_level() -> None:
    problems = [f"{e.feature}:{e.line} {e.name!r}: {p}" for e in ENTRIES for p in e.tags.problems()]
    assert not problems, "\n".join(problems)


def test_scenario_ids_are_unique() -> None:
    duplicates = [sid for sid, count in Counter(e.id for e in ENTRIES).items() if count > 1]
    assert not duplicates, f"duplicate scenario ids (or outline rows whose first cells collide): {duplicates}"


def test_only_known_tags_are_used() -> None:
    for entry in ENTRIES:
        unknown = [t for t in entry.tags.other]
        assert not unknown, f"{entry.feature}: {entry.name!r} uses unknown tags {unknown}"
        assert entry.tags.level in LEVELS


def test_features_carry_no_raw_json() -> None:
    """Features speak the provider author's language; wire shapes belong in the adapter."""
    for path in bundle.features_dir().rglob("*.feature"):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            assert not re.search(r'[{\[]\s*"', line), f"{path.name}:{number} looks like raw JSON: {line.strip()}"


def test_every_feature_file_names_requirements() -> None:
    for path in bundle.features_dir().rglob("*.feature"):
        assert "@req:" in path.read_text(), f"{path} has no @req: tag"
