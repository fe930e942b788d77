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
from conformance.reporting.model import ScenarioResult
from conformance.scenario_tags import ScenarioTags, example_key


@dataclass(frozen=True)
class CatalogueEntry:
    id: str
    base_id: str
    name: str
    feature: str
    line: int
    tags: ScenarioTags

    def disabled_result(self) -> ScenarioResult:
        return ScenarioResult(
            id=self.id, name=self.name, feature=self.feature, nodeid="", level=self.tags.level,
            requirements=list(self.tags.requirements), capabilities=list(self.tags.capabilities),
            dialects=list(self.tags.dialects), outcome="disabled",
            message="not selected by --scenario, --feature, --tags or -k",
        )


@cache
def all_scenarios() -> tuple[CatalogueEntry, ...]:
    features_dir = bundle.features_dir()
    entries: list[CatalogueEntry] = []
    for path in sorted(features_dir.rglob("*.feature")):
        relative = os.path.relpath(path, features_dir)
        feature = FeatureParser(str(features_dir), relative).parse()
        for template in feature.scenarios.values():
            tags = ScenarioTags.parse(template.tags | feature.tags)
            base = tags.scenario_id or template.name
            rows = [example_key(context) for examples in template.examples for context in examples.as_contexts()]
            ids = [f"{base}[{row}]" for row in rows] or [base]
            entries.extend(
                CatalogueEntry(sid, base, template.name, relative, template.line_number, tags)
                for sid in ids
            )
    return tuple(entries)
