"""Every scenario the suite defines, read straight from the feature files (no pytest needed).

Used for the coverage table, for reporting scenarios a filter left out as ``disabled``, by the
feature lint, and for the Gherkin steps ``explain`` and the HTML report show.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

from pytest_bdd.parser import Feature, FeatureParser

from conformance import bundle
from conformance.reporting.model import ScenarioInfo, ScenarioResult
from conformance.scenario_tags import ScenarioTags, row_tags, scenario_identity


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
def _parsed_feature(relative: str) -> Feature:
    """One feature file, parsed once per process: the catalogue and every scenario's steps read it."""
    return FeatureParser(str(bundle.features_dir()), relative).parse()


@cache
def all_scenarios() -> tuple[CatalogueEntry, ...]:
    features_dir = bundle.features_dir()
    entries: list[CatalogueEntry] = []
    for path in sorted(features_dir.rglob("*.feature")):
        relative = os.path.relpath(path, features_dir)
        feature = _parsed_feature(relative)
        for template in feature.scenarios.values():
            tags = ScenarioTags.parse(template.tags | feature.tags)
            base = scenario_identity(tags, template.name)
            rows = [context for examples in template.examples for context in examples.as_contexts()]
            if not rows:
                entries.append(CatalogueEntry(base, base, template.name, relative, template.line_number, tags))
            for row in rows:  # each row with its own Examples block's tags (its own requirements)
                own = ScenarioTags.parse(row_tags(template.tags | feature.tags, template.examples, row))
                entries.append(CatalogueEntry(scenario_identity(own, template.name, row), base, template.name,
                                              relative, template.line_number, own))
    return tuple(entries)


def gherkin_steps(entry: CatalogueEntry, row_id: str | None = None) -> list[str]:
    """The scenario's Gherkin steps (its feature's Background first), as written in the feature file; for
    one outline row, with that row's values filled in."""
    template = next(t for t in _parsed_feature(entry.feature).scenarios.values() if t.line_number == entry.line)
    steps = template.steps
    if row_id is not None:
        for examples in template.examples:
            for row in examples.as_contexts():
                if scenario_identity(entry.tags, template.name, row) == row_id:
                    steps = template.render(row).steps
    lines: list[str] = []
    for step in steps:
        lines.append(f"{step.keyword} {step.name}")
        if step.docstring:
            lines += ['    """', *(f"    {line}" for line in step.docstring.splitlines()), '    """']
        if step.datatable:
            lines += [f"    | {' | '.join(cell.value for cell in row.cells)} |" for row in step.datatable.rows]
    return lines
