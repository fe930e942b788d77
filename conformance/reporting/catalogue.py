"""Every scenario the suite defines, read straight from the feature files (no pytest needed).

Used for the coverage table, for reporting scenarios a filter left out as ``disabled``, and by the
feature lint.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

from pytest_bdd.parser import FeatureParser

from conformance import bundle
from conformance.reporting.model import ScenarioInfo, ScenarioResult
from conformance.scenario_tags import ScenarioTags, scenario_identity


@dataclass(frozen=True)
class CatalogueEntry:
    id: str
    base_id: str
    name: str
    feature: str
    line: int
    tags: ScenarioTags

    @property
    def info(self) -> ScenarioInfo:
        return ScenarioInfo(self.id, self.name, self.feature, self.tags.level, tuple(self.tags.requirements),
                            tuple(self.tags.capabilities), tuple(self.tags.dialects))

    def disabled_result(self) -> ScenarioResult:
        result = self.info.result()
        result.outcome = "disabled"
        result.message = "not selected by --scenario, --feature, --tags or -k"
        return result


@cache
def all_scenarios() -> tuple[CatalogueEntry, ...]:
    features_dir = bundle.features_dir()
    entries: list[CatalogueEntry] = []
    for path in sorted(features_dir.rglob("*.feature")):
        relative = os.path.relpath(path, features_dir)
        feature = FeatureParser(str(features_dir), relative).parse()
        for template in feature.scenarios.values():
            tags = ScenarioTags.parse(template.tags | feature.tags)
            rows = [context for examples in template.examples for context in examples.as_contexts()]
            ids = [scenario_identity(tags, template.name, row) for row in rows] or [scenario_identity(tags, template.name)]
            base = scenario_identity(tags, template.name)
            entries.extend(
                CatalogueEntry(sid, base, template.name, relative, template.line_number, tags)
                for sid in ids
            )
    return tuple(entries)
