"""Binds every scenario of every feature to a pytest test named after its stable id.

Generated test names (``test_<id>``) never change when a scenario's title does, so node ids,
baselines and reports stay stable.
"""

from __future__ import annotations

import re

from pytest_bdd import scenario
from pytest_bdd.feature import get_features

from conformance import bundle
from conformance.errors import HarnessError
from conformance.scenario_tags import ScenarioTags


def _python_name(scenario_id: str) -> str:
    return "test_" + re.sub(r"[^0-9a-zA-Z_]", "_", scenario_id)


def _bind_all() -> None:
    seen: dict[str, str] = {}
    for feature in sorted(get_features([str(bundle.features_dir())]), key=lambda f: f.filename):
        for title, template in feature.scenarios.items():
            tags = ScenarioTags.parse(template.tags | feature.tags)
            problems = tags.problems()
            where = f"{feature.rel_filename}: scenario {title!r}"
            if problems:
                raise HarnessError(f"{where} {'; '.join(problems)}")
            name = _python_name(tags.scenario_id or "")
            if name in seen:
                raise HarnessError(f"{where} reuses id {tags.scenario_id!r} of {seen[name]}")
            seen[name] = where

            def _test() -> None:
                """Runs the scenario's steps."""

            globals()[name] = scenario(feature.filename, title)(_test)


_bind_all()
