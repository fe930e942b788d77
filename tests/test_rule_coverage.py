"""Each rule on every method that can break it: the matrix of tests/data/rule_coverage.yaml stays complete.

The methods a rule applies to are derived from the schemas, so a method added to a dialect's schemas is a new
cell of every rule that applies to it: the test fails until a scenario covers it (a new row of the rule's
outline, in the dialect's words) or the matrix says why none can.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance import bundle
from conformance.dialects.sandbox_driver_v1.rules import VOCABULARY as V1_VOCABULARY
from conformance.dialects.sandbox_driver_v2.rules import VOCABULARY as V2_VOCABULARY
from conformance.reporting.catalogue import all_scenarios
from conformance.scenario_tags import example_key

MATRIX_FILE = Path(__file__).parent / "data" / "rule_coverage.yaml"
VOCABULARIES = {"sandbox-driver-v1": V1_VOCABULARY, "sandbox-driver-v2": V2_VOCABULARY}
ACKNOWLEDGED = ("not_expressible", "open")


@cache
def _matrix() -> dict[str, Any]:
    return yaml.safe_load(MATRIX_FILE.read_text(encoding="utf-8"))


@cache
def _schema(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _resolve(node: Any, base: Path) -> tuple[Any, Path]:
    """``node`` with its ``$ref`` followed (to its file and JSON pointer), repeatedly."""
    while isinstance(node, dict) and "$ref" in node:
        target, _, pointer = node["$ref"].partition("#")
        base = (base.parent / target).resolve() if target else base
        node = _schema(base)
        for part in filter(None, pointer.split("/")):
            node = node[part]
    return node, base


def _walk(node: Any, base: Path, seen: set[tuple[Path, str]] | None = None) -> Iterator[str]:
    """Every definition name a schema refers to (``CaptureStats``) and every property name it defines,
    following ``$ref``s once each."""
    seen = set() if seen is None else seen
    if isinstance(node, dict):
        if "$ref" in node:
            key = (base, node["$ref"])
            if key in seen:
                return
            seen.add(key)
            yield node["$ref"].rsplit("/", 1)[-1]
            yield from _walk(*_resolve(node, base), seen)
            return
        yield from (name for name in node.get("properties", {}) if isinstance(node.get("properties"), dict))
        for value in node.values():
            yield from _walk(value, base, seen)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value, base, seen)


def _required(node: Any, base: Path) -> set[str]:
    node, base = _resolve(node, base)
    if not isinstance(node, dict):
        return set()
    required = set(node.get("required", []))
    for part in node.get("allOf", []):
        required |= _required(part, base)
    return required


def _properties(node: Any, base: Path) -> set[str]:
    node, base = _resolve(node, base)
    if not isinstance(node, dict):
        return set()
    found = set(node.get("properties", {}))
    for part in node.get("allOf", []):
        found |= _properties(part, base)
    return found


# Each selector sees a method's (required params, params it defines, what its result mentions).
SELECTORS = {
    "params-required": lambda required, params, mentions: bool(required),
    "names-a-sandbox": lambda required, params, mentions: "sandbox_id" in required,
    "takes-events": lambda required, params, mentions: "events" in params,
    "result-termination": lambda required, params, mentions: "termination" in mentions,
    "result-capture": lambda required, params, mentions: "CaptureStats" in mentions,
    "result-capabilities": lambda required, params, mentions: bool({"Capabilities", "HandleInfo"} & mentions),
}


@cache
def _methods(dialect: str) -> dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]]:
    """Every method of ``dialect``'s schemas: (the fields its params require, the fields they define, what its
    result mentions)."""
    found = {}
    for path in sorted((bundle.schemas_dir() / dialect / "methods").glob("*.json")):
        path = path.resolve()
        schema = _schema(path)
        defs = schema.get("$defs", {})
        required = _required(defs["params"], path) if "params" in defs else set()
        params = _properties(defs["params"], path) if "params" in defs else set()
        mentions = set(_walk(defs["result"], path)) if "result" in defs else set()
        found[schema["title"]] = (frozenset(required), frozenset(params), frozenset(mentions))
    return found


def _applies(rule: dict[str, Any], dialect: str) -> set[str]:
    select = SELECTORS[rule["methods"]]
    return {method for method, facts in _methods(dialect).items() if select(*facts)}


def _runs_on(entry: Any, dialect: str) -> bool:
    return not entry.tags.dialects or dialect in entry.tags.dialects


def _covered(rule: dict[str, Any], dialect: str) -> dict[str, list[str]]:
    """Method -> the scenarios that check ``rule`` on it under ``dialect``."""
    scenarios = {entry.id: entry for entry in all_scenarios()}
    methods = VOCABULARIES[dialect].methods
    by_key = {example_key({"row": words}): method for words, method in methods.items()}
    covered: dict[str, list[str]] = {}
    for outline in rule.get("outlines", []):
        rows = [entry for entry in scenarios.values() if entry.base_id == outline]
        assert rows, f"rule {rule['id']}: no outline {outline!r} in the features"
        for entry in rows:
            key = entry.id.removeprefix(f"{outline}[").removesuffix("]")
            if _runs_on(entry, dialect) and key in by_key:
                covered.setdefault(by_key[key], []).append(entry.id)
    for scenario_id, per_dialect in rule.get("scenarios", {}).items():
        entry = scenarios.get(scenario_id)
        assert entry is not None, f"rule {rule['id']} names {scenario_id!r}, which no feature defines"
        for method in per_dialect.get(dialect, []):
            assert _runs_on(entry, dialect), f"rule {rule['id']}: {scenario_id} does not run on {dialect}"
            covered.setdefault(method, []).append(scenario_id)
    return covered


def _acknowledged(rule: dict[str, Any], dialect: str) -> dict[str, str]:
    return {method: f"{kind}: {reason}" for kind in ACKNOWLEDGED
            for method, reason in rule.get(kind, {}).get(dialect, {}).items()}


def cells() -> Iterator[tuple[str, str, str, str]]:
    """Every cell of the matrix: (rule, dialect, method or path, how it is covered)."""
    for rule in _matrix()["rules"]:
        for dialect in _matrix()["dialects"]:
            covered = _covered(rule, dialect)
            acknowledged = _acknowledged(rule, dialect)
            for method in sorted(_applies(rule, dialect)):
                how = ", ".join(covered[method]) if method in covered else acknowledged.get(method, "")
                yield rule["id"], dialect, method, how
            for path, cell in rule.get("paths", {}).get(dialect, {}).items():
                scenario = cell.get("scenario")
                how = scenario or next((f"{kind}: {cell[kind]}" for kind in ACKNOWLEDGED if cell.get(kind)), "")
                yield rule["id"], dialect, path, how


def summary() -> dict[str, int]:
    """How many cells are covered by a scenario, acknowledged (not expressible / open), or neither."""
    counts = {"covered": 0, "not_expressible": 0, "open": 0, "uncovered": 0}
    for _, _, _, how in cells():
        kind = next((k for k in ACKNOWLEDGED if how.startswith(f"{k}:")), "covered" if how else "uncovered")
        counts[kind] += 1
    return counts


RULE_IDS = [rule["id"] for rule in _matrix()["rules"]]


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_every_method_a_rule_applies_to_is_covered_or_says_why_not(rule_id: str) -> None:
    missing = [f"{dialect} {method}" for rule, dialect, method, how in cells() if rule == rule_id and not how]
    assert not missing, (f"rule {rule_id} is checked on no scenario for: {', '.join(missing)} — add a row to its "
                         "outline (the dialect's words for the method) or say in tests/data/rule_coverage.yaml why "
                         "it cannot be checked")


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_the_matrix_lists_nothing_stale(rule_id: str) -> None:
    rule = next(rule for rule in _matrix()["rules"] if rule["id"] == rule_id)
    assert rule["methods"] in SELECTORS, f"{rule_id}: unknown selector {rule['methods']!r}"
    for dialect in _matrix()["dialects"]:
        applies = _applies(rule, dialect)
        covered = _covered(rule, dialect)
        acknowledged = _acknowledged(rule, dialect)
        outside = sorted((set(covered) | set(acknowledged)) - applies)
        assert not outside, f"{rule_id} ({dialect}) lists methods the rule does not apply to: {outside}"
        both = sorted(set(covered) & set(acknowledged))
        assert not both, f"{rule_id} ({dialect}) says these cannot be checked, yet scenarios check them: {both}"
        assert all(reason.split(": ", 1)[1].strip() for reason in acknowledged.values()), f"{rule_id}: a reason is empty"


def test_every_rule_cites_requirements_its_scenarios_carry() -> None:
    """A rule's scenarios cite one of its requirements, so the matrix and the requirement coverage agree."""
    scenarios = {entry.id: entry for entry in all_scenarios()}
    for rule in _matrix()["rules"]:
        named = set(rule.get("scenarios", {})) | {e.id for e in scenarios.values() if e.base_id in rule.get("outlines", [])}
        for scenario_id in named:
            cited = set(scenarios[scenario_id].tags.requirements)
            assert cited & set(rule["requirements"]), (
                f"{scenario_id} covers rule {rule['id']} but cites none of {rule['requirements']} (it cites {sorted(cited)})")


def test_other_dialects_name_existing_scenarios() -> None:
    ids = {entry.id for entry in all_scenarios()}
    for dialect, rules in _matrix().get("other_dialects", {}).items():
        for rule, scenario_ids in rules.items():
            assert rule in RULE_IDS, f"{dialect}: unknown rule {rule!r}"
            unknown = sorted(set(scenario_ids) - ids)
            assert not unknown, f"{dialect} {rule}: no such scenarios {unknown}"


def test_the_selectors_find_the_methods_the_protocol_names() -> None:
    """The derivation itself: a few methods every reader of the protocol knows each selector must find."""
    v1, v2 = (_methods(dialect) for dialect in ("sandbox-driver-v1", "sandbox-driver-v2"))
    rule = {"methods": "names-a-sandbox"}
    assert {"sandbox/describe", "exec/run", "fs/read", "sandbox/pause"} <= _applies(rule, "sandbox-driver-v1")
    assert {"sandbox/environment", "git/clone", "one_shot/run"} <= _applies(rule, "sandbox-driver-v2")
    assert {"exec/stream", "one_shot/run"} == _applies({"methods": "result-capture"}, "sandbox-driver-v2")
    assert {"initialize", "sandbox/create", "sandbox/attach", "sandbox/fork", "sandbox/undelete"} == \
        _applies({"methods": "result-capabilities"}, "sandbox-driver-v1")
    assert "shutdown" not in _applies({"methods": "params-required"}, "sandbox-driver-v1") and v1 and v2
