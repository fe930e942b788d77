"""The requirement registry: every requirement of a protocol, and which scenarios verify it.

The registry (``<name>.yaml`` beside this module) says what a provider must do and whether a
black-box test can check it. It deliberately does not name scenarios: those come from the
``@req:`` tags of the feature files, so the two can never drift apart silently — ``problems()``
reports every gap or contradiction between them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import yaml

from conformance.errors import HarnessError
from conformance.scenario_tags import ScenarioTags

HERE = Path(__file__).resolve().parent
# One pattern per registry: the protocol's numbered items (and suite-derived S items), the sketch's, REST's, the gaps.
ID_PATTERN = re.compile(r"^(SDP1-(\d{3}|S\d{2})|SKETCH-\d{3}|REST-\d{3}|GAP-\d)$")

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
# GAP: a proposal (gaps.yaml) rather than a protocol rule; scenarios backed only by GAP requirements are @gap.
LEVELS = ("MUST", "SHOULD", "MAY", "GAP")
TESTABILITIES = ("BB", "BB+F", "HOST", "N")
BLACK_BOX = ("BB", "BB+F")
NEEDS_REASON = ("HOST", "N")
REQUIRED_KEYS = ("id", "level", "section", "text", "testability")
OPTIONAL_KEYS = ("excluded", "note")


@dataclass(frozen=True)
class Requirement:
    id: str
    level: str
    section: str
    text: str
    testability: str
    excluded: str | None = None
    note: str | None = None


class ScenarioLike(Protocol):
    """What the checks need of a scenario; ``CatalogueEntry`` has it, and so can a test's fake."""

    @property
    def id(self) -> str: ...

    @property
    def feature(self) -> str: ...

    @property
    def tags(self) -> ScenarioTags: ...


def registries() -> list[str]:
    """The names of every registry shipped beside this module."""
    return sorted(path.stem for path in HERE.glob("*.yaml"))


def load(name: str | None = None) -> dict[str, Requirement]:
    """The requirements of registry ``name`` (or of every registry), by id, in file order.
    Raises HarnessError if a file is bad or two registries claim one id."""
    if name is not None:
        return dict(_load(name))
    merged: dict[str, Requirement] = {}
    for registry in registries():
        for rid, requirement in _load(registry):
            if rid in merged:
                raise HarnessError(f"{rid} is defined by more than one registry")
            merged[rid] = requirement
    return merged


@cache
def _load(name: str) -> tuple[tuple[str, Requirement], ...]:
    if not NAME_PATTERN.match(name):
        raise HarnessError(f"requirement registry name {name!r} is not a plain file name")
    path = HERE / f"{name}.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HarnessError(f"requirement registry {name!r} cannot be read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise HarnessError(f"requirement registry {path.name} is not valid YAML: {exc}") from None
    if not isinstance(raw, list):
        raise HarnessError(f"requirement registry {path.name} must be a list of requirements")
    found: dict[str, Requirement] = {}
    for position, entry in enumerate(raw, start=1):
        requirement = _parse(entry, f"{path.name} entry {position}")
        if requirement.id in found:
            raise HarnessError(f"{path.name}: {requirement.id} is listed twice")
        found[requirement.id] = requirement
    return tuple(found.items())


def _parse(entry: Any, where: str) -> Requirement:
    """One validated entry; every message names the id (or the position when there is no usable id)."""
    if not isinstance(entry, dict):
        raise HarnessError(f"{where} is not a mapping")
    ident = entry.get("id")
    label = ident if isinstance(ident, str) and ident else where
    unknown = sorted(str(key) for key in entry if key not in REQUIRED_KEYS + OPTIONAL_KEYS)
    if unknown:
        raise HarnessError(f"{label}: unknown key(s) {', '.join(unknown)}")
    for key in REQUIRED_KEYS:
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise HarnessError(f"{label}: {key} is missing or not a non-empty string")
    for key in OPTIONAL_KEYS:
        if key in entry and (not isinstance(entry[key], str) or not entry[key].strip()):
            raise HarnessError(f"{label}: {key} must be a non-empty string when present")
    if not ID_PATTERN.match(entry["id"]):
        raise HarnessError(f"{label}: id does not match {ID_PATTERN.pattern}")
    if entry["level"] not in LEVELS:
        raise HarnessError(f"{label}: level {entry['level']!r} is not one of {', '.join(LEVELS)}")
    if entry["testability"] not in TESTABILITIES:
        raise HarnessError(f"{label}: testability {entry['testability']!r} is not one of {', '.join(TESTABILITIES)}")
    if entry["testability"] in NEEDS_REASON and "excluded" not in entry:
        raise HarnessError(f"{label}: a {entry['testability']} requirement needs an `excluded` reason")
    return Requirement(**{key: entry.get(key) for key in REQUIRED_KEYS + OPTIONAL_KEYS})


GAPS = "gaps"  # the gap proposals: no dialect's rules, but asked of every provider (at their own level)


def cited_under(ids: Iterable[str], dialect: str) -> tuple[str, ...]:
    """The requirements among ``ids`` that a provider speaking ``dialect`` is held to: the rules of the
    dialect's own registry (named like the dialect) and the gap proposals. A v1 rule cited by a scenario
    never judges a sketch or REST provider."""
    own = {rid for rid, _ in _load(dialect)} if dialect in registries() else set()
    gaps = {rid for rid, _ in _load(GAPS)}
    return tuple(rid for rid in ids if rid in own or rid in gaps)


def level_under(level: str | None, cited: Iterable[str]) -> str | None:
    """A scenario's level once its citations are those of one dialect: backed by gap proposals alone,
    it reports findings at the gap level; otherwise its own tag decides."""
    cited = list(cited)
    gaps = {rid for rid, _ in _load(GAPS)}
    return "gap" if cited and all(rid in gaps for rid in cited) else level


def coverage(requirements: Mapping[str, Requirement], scenarios: Iterable[ScenarioLike]) -> dict[str, list[str]]:
    """Each requirement id → the ids of the scenarios tagging it (empty list when none do)."""
    covered: dict[str, list[str]] = {rid: [] for rid in requirements}
    for scenario in scenarios:
        for rid in scenario.tags.requirements:
            if rid in covered and scenario.id not in covered[rid]:
                covered[rid].append(scenario.id)
    return covered


def problems(requirements: Mapping[str, Requirement], scenarios: Iterable[ScenarioLike]) -> list[str]:
    """Every disagreement between the registry and the scenario tags, one readable line each."""
    scenarios = list(scenarios)
    found = [
        f"scenario {s.id} ({s.feature}) tags unknown requirement {rid}"
        for s in scenarios for rid in s.tags.requirements if rid not in requirements
    ]
    for rid, scenario_ids in coverage(requirements, scenarios).items():
        requirement = requirements[rid]
        if requirement.excluded and scenario_ids:
            found.append(f"{rid} is excluded ({requirement.excluded}) yet tagged by {', '.join(scenario_ids)}")
        elif requirement.testability in BLACK_BOX and not requirement.excluded and not scenario_ids:
            found.append(f"{rid} ({requirement.testability}, {requirement.level}) has no scenario and no `excluded` reason")
    for s in scenarios:
        levels = {requirements[rid].level for rid in s.tags.requirements if rid in requirements}
        if not levels or s.tags.level is None:
            continue
        only_gaps = levels == {"GAP"}
        if only_gaps and s.tags.level != "gap":
            found.append(f"scenario {s.id} ({s.feature}) is backed only by GAP requirements, so its level is @gap, "
                         f"not @{s.tags.level}")
        elif s.tags.level == "gap" and not only_gaps:
            found.append(f"scenario {s.id} ({s.feature}) is @gap but verifies a protocol rule too "
                         f"({', '.join(r for r in s.tags.requirements if requirements.get(r) and requirements[r].level != 'GAP')}): "
                         "it keeps that rule's level")
    return found


def status(requirement: Requirement, scenario_ids: list[str]) -> str:
    """``excluded``, ``covered`` or ``uncovered`` — the one word the listing and its counts use."""
    if requirement.excluded:
        return "excluded"
    return "covered" if scenario_ids else "uncovered"
