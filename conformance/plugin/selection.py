"""Which collected tests are scenarios, who each one is, and whether the selection keeps it."""

from __future__ import annotations

import os

import pytest

from conformance import bundle
from conformance.config import Selection
from conformance.plugin.keys import INFO
from conformance.reporting.model import ScenarioInfo
from conformance.scenario_tags import ScenarioTags, row_tags, scenario_identity


def scenario_info(item: pytest.Item) -> ScenarioInfo | None:
    """The scenario a collected test binds, or ``None`` for a test that is not a scenario."""
    from pytest_bdd.scenario import scenario_wrapper_template_registry

    function = getattr(item, "function", None)
    template = scenario_wrapper_template_registry.get(function) if function is not None else None
    if template is None:
        return None
    example = _example(item)
    tags = ScenarioTags.parse(row_tags(template.tags | template.feature.tags, template.examples, example))
    feature = os.path.relpath(template.feature.filename, bundle.features_dir())
    return ScenarioInfo(scenario_identity(tags, template.name, example), template.name, feature, tags.level,
                        tuple(tags.requirements), tuple(tags.capabilities), tuple(tags.dialects))


def select(items: list[pytest.Item], selection: Selection) -> tuple[list[pytest.Item], list[pytest.Item], set[str]]:
    """Split the items into kept and left out; also the ids of the kept scenarios. With --shard, kept is
    this shard's part of what the selection wants (the partition is ``Selection.shard_of``)."""
    wanted: list[tuple[pytest.Item, str | None]] = []
    left_out: list[pytest.Item] = []
    for item in items:
        info = scenario_info(item)
        if info is None:
            wanted.append((item, None))
            continue
        item.stash[INFO] = info
        tags = ScenarioTags.parse(_raw_tags(item)).tag_set()
        if selection.wants(info.id, info.feature, tags):
            wanted.append((item, info.id))
        else:
            left_out.append(item)
    kept_ids = selection.shard_of(scenario_id for _, scenario_id in wanted if scenario_id is not None)
    kept = [item for item, scenario_id in wanted if scenario_id is None or scenario_id in kept_ids]
    left_out += [item for item, scenario_id in wanted if scenario_id is not None and scenario_id not in kept_ids]
    return kept, left_out, kept_ids


def _raw_tags(item: pytest.Item) -> set[str]:
    from pytest_bdd.scenario import scenario_wrapper_template_registry

    template = scenario_wrapper_template_registry[item.function]  # type: ignore[attr-defined]
    return row_tags(template.tags | template.feature.tags, template.examples, _example(item))


def _example(item: pytest.Item) -> dict[str, str] | None:
    """The outline row a test runs (pytest-bdd's parameter), or None for a plain scenario."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("_pytest_bdd_example") if callspec is not None else None
