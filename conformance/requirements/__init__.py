"""The requirement registry: every requirement of a protocol, and which scenarios verify it.

The registry (``<name>.yaml`` beside this module) says what a provider must do and whether a
black-box test can check it. It deliberately does not name scenarios: those come from the
``@req:`` tags of the feature files, so the two can never drift apart silently — ``problems()``
reports every gap or contradiction between them.

A v2 requirement may carry v1 rules (``carries: SDP1-059``): it restates them for protocol v2, so a
scenario citing the v1 id is judged by the v2 entry on a v2 provider (``cited_under``) and counts as
covering it (``coverage``). A v1 rule no v2 entry carries is not a rule of v2.
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
ID_PATTERN = re.compile(r"^(SDP[12]-(\d{3}|S\d{2})|SKETCH-\d{3}|REST-\d{3}|GAP-\d)$")

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
# GAP: a proposal (gaps.yaml) rather than a protocol rule; scenarios backed only by GAP requirements are @gap.
LEVELS = ("MUST", "SHOULD", "MAY", "GAP")
TESTABILITIES = ("BB", "BB+F", "HOST", "N")
BLACK_BOX = ("BB", "BB+F")
NEEDS_REASON = ("HOST", "N")
REQUIRED_KEYS = ("id", "level", "section", "text", "testability")
OPTIONAL_KEYS = ("excluded", "note")
CARRIES_KEY = "carries"  # "SDP1-059" or "SDP1-105, SDP1-106": the rules of CARRIED_REGISTRY an entry restates
# "never issued, unknown": the case a requirement's text is about, in words; the title of every scenario citing
# it names one of them (lint), so a rule about ids never issued is not cited by a scenario about deleted ones
SCOPE_KEY = "scope"
CARRIED_REGISTRY = "sandbox-driver-v1"


@dataclass(frozen=True)
class Requirement:
    id: str
    level: str
    section: str
    text: str
    testability: str
    excluded: str | None = None
    note: str | None = None
    carries: tuple[str, ...] = ()  # ids of CARRIED_REGISTRY this requirement restates
    registry: str = ""  # the registry (file stem) defining it; a dialect's registry is named like the dialect
    scope: tuple[str, ...] = ()  # words naming the case the text is about (SCOPE_KEY); empty: any case


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


# libyaml's safe loader where PyYAML was built with it: the same documents, read ~8x faster (the registries
# are read at every run's start, ~0.2 s with the pure-Python loader).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def _load(name: str) -> tuple[tuple[str, Requirement], ...]:
    if not NAME_PATTERN.match(name):
        raise HarnessError(f"requirement registry name {name!r} is not a plain file name")
    path = HERE / f"{name}.yaml"
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except OSError as exc:
        raise HarnessError(f"requirement registry {name!r} cannot be read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise HarnessError(f"requirement registry {path.name} is not valid YAML: {exc}") from None
    if not isinstance(raw, list):
        raise HarnessError(f"requirement registry {path.name} must be a list of requirements")
    found: dict[str, Requirement] = {}
    for position, entry in enumerate(raw, start=1):
        requirement = _parse(entry, f"{path.name} entry {position}", name)
        if requirement.id in found:
            raise HarnessError(f"{path.name}: {requirement.id} is listed twice")
        found[requirement.id] = requirement
    _check_carries(name, found)
    return tuple(found.items())


def _check_carries(name: str, found: Mapping[str, Requirement]) -> None:
    """Every carried id is a rule of CARRIED_REGISTRY at the same level, and no rule has two carriers: the
    projection of a v1 citation must land on exactly one rule that asks the same."""
    carrying = [r for r in found.values() if r.carries]
    if not carrying:
        return
    if name == CARRIED_REGISTRY:
        raise HarnessError(f"{carrying[0].id}: {CARRIED_REGISTRY} cannot carry its own rules")
    source = dict(_load(CARRIED_REGISTRY))
    carrier_of: dict[str, str] = {}
    for requirement in carrying:
        for carried in requirement.carries:
            if carried not in source:
                raise HarnessError(f"{requirement.id} carries {carried}, which {CARRIED_REGISTRY} does not define")
            if source[carried].level != requirement.level:
                raise HarnessError(f"{requirement.id} is {requirement.level} but carries {carried}, which is "
                                   f"{source[carried].level}: a restated rule keeps its level")
            if carried in carrier_of:
                raise HarnessError(f"{carried} is carried by both {carrier_of[carried]} and {requirement.id}")
            carrier_of[carried] = requirement.id


def _parse(entry: Any, where: str, registry: str) -> Requirement:
    """One validated entry; every message names the id (or the position when there is no usable id)."""
    if not isinstance(entry, dict):
        raise HarnessError(f"{where} is not a mapping")
    ident = entry.get("id")
    label = ident if isinstance(ident, str) and ident else where
    unknown = sorted(str(key) for key in entry
                     if key not in (*REQUIRED_KEYS, *OPTIONAL_KEYS, CARRIES_KEY, SCOPE_KEY))
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
    return Requirement(**{key: entry.get(key) for key in REQUIRED_KEYS + OPTIONAL_KEYS},
                       carries=_parse_carries(entry, label), registry=registry, scope=_parse_scope(entry, label))


def _parse_scope(entry: dict[str, Any], label: str) -> tuple[str, ...]:
    """``scope`` is one string of words or phrases separated by commas, matched case-insensitively."""
    if SCOPE_KEY not in entry:
        return ()
    value = entry[SCOPE_KEY]
    words = tuple(part.strip().lower() for part in value.split(",")) if isinstance(value, str) else ()
    if not words or not all(words):
        raise HarnessError(f"{label}: scope must be a non-empty string of words separated by commas")
    return words


def _parse_carries(entry: dict[str, Any], label: str) -> tuple[str, ...]:
    """``carries`` is one string of requirement ids separated by commas (whether they exist is checked once
    the whole registry is read)."""
    if CARRIES_KEY not in entry:
        return ()
    value = entry[CARRIES_KEY]
    if not isinstance(value, str) or not value.strip():
        raise HarnessError(f"{label}: carries must be a non-empty string of ids separated by commas")
    ids = tuple(part.strip() for part in value.split(","))
    bad = [rid for rid in ids if not ID_PATTERN.match(rid)]
    if bad:
        raise HarnessError(f"{label}: carries names {', '.join(map(repr, bad))}, not requirement ids")
    if len(set(ids)) != len(ids):
        raise HarnessError(f"{label}: carries names an id twice")
    if label in ids:
        raise HarnessError(f"{label}: a requirement cannot carry itself")
    return ids


GAPS = "gaps"  # the gap proposals: no dialect's rules, but asked of every provider (at their own level)


def cited_under(ids: Iterable[str], dialect: str) -> tuple[str, ...]:
    """The requirements among ``ids`` that a provider speaking ``dialect`` is held to: the rules of the
    dialect's own registry (named like the dialect), the gap proposals, and — projected onto the rule
    that carries it — a rule of another registry that the dialect restates (a v1 rule carried by a v2
    one). A v1 rule cited by a scenario never judges a sketch or REST provider, nor a v2 provider unless
    v2 carries it. Order is kept; a rule cited twice (directly and through a carry) counts once."""
    own = dict(_load(dialect)) if dialect in registries() else {}
    gaps = {rid for rid, _ in _load(GAPS)}
    carrier_of = {carried: rid for rid, requirement in own.items() for carried in requirement.carries}
    found: list[str] = []
    for rid in ids:
        held = rid if rid in own or rid in gaps else carrier_of.get(rid)
        if held is not None and held not in found:
            found.append(held)
    return tuple(found)


def level_under(level: str | None, cited: Iterable[str]) -> str | None:
    """A scenario's level once its citations are those of one dialect: backed by gap proposals alone,
    it reports findings at the gap level; otherwise its own tag decides."""
    cited = list(cited)
    gaps = {rid for rid, _ in _load(GAPS)}
    return "gap" if cited and all(rid in gaps for rid in cited) else level


def coverage(requirements: Mapping[str, Requirement], scenarios: Iterable[ScenarioLike]) -> dict[str, list[str]]:
    """Each requirement id → the ids of the scenarios verifying it (empty list when none do): those tagging
    it, and those tagging a rule it carries — unless their @dialect: tags keep them off its registry's
    dialect, where they never run."""
    covered: dict[str, list[str]] = {rid: [] for rid in requirements}
    carrier_of = {carried: rid for rid, requirement in requirements.items() for carried in requirement.carries}
    for scenario in scenarios:
        for cited in scenario.tags.requirements:
            verified = [cited] if cited in covered else []
            carrier = carrier_of.get(cited)
            if carrier is not None and _runs_under(scenario, requirements[carrier].registry):
                verified.append(carrier)
            for rid in verified:
                if scenario.id not in covered[rid]:
                    covered[rid].append(scenario.id)
    return covered


def _runs_under(scenario: ScenarioLike, dialect: str) -> bool:
    dialects = scenario.tags.dialects
    return not dialects or not dialect or dialect in dialects


@dataclass(frozen=True)
class Problem:
    """One disagreement between a registry and the scenario tags: its readable line, what kind it is
    (``unknown``, ``excluded``, ``uncovered``, ``level``) and the requirement it is about, if one."""

    text: str
    kind: str
    requirement: str | None = None

    def __str__(self) -> str:
        return self.text


def findings(requirements: Mapping[str, Requirement], scenarios: Iterable[ScenarioLike]) -> list[Problem]:
    """Every disagreement between the registry and the scenario tags, with what it is about."""
    scenarios = list(scenarios)
    found = [
        Problem(f"scenario {s.id} ({s.feature}) tags unknown requirement {rid}", "unknown")
        for s in scenarios for rid in s.tags.requirements if rid not in requirements
    ]
    for rid, scenario_ids in coverage(requirements, scenarios).items():
        requirement = requirements[rid]
        if requirement.excluded and scenario_ids:
            found.append(Problem(f"{rid} is excluded ({requirement.excluded}) yet tagged by {', '.join(scenario_ids)}",
                                 "excluded", rid))
        elif requirement.testability in BLACK_BOX and not requirement.excluded and not scenario_ids:
            found.append(Problem(f"{rid} ({requirement.testability}, {requirement.level}) has no scenario and no "
                                 "`excluded` reason", "uncovered", rid))
    found += _backing(requirements, scenarios)
    for s in scenarios:
        levels = {requirements[rid].level for rid in s.tags.requirements if rid in requirements}
        if not levels or s.tags.level is None:
            continue
        only_gaps = levels == {"GAP"}
        if only_gaps and s.tags.level != "gap":
            found.append(Problem(f"scenario {s.id} ({s.feature}) is backed only by GAP requirements, so its level "
                                 f"is @gap, not @{s.tags.level}", "level"))
        elif s.tags.level == "gap" and not only_gaps:
            found.append(Problem(
                f"scenario {s.id} ({s.feature}) is @gap but verifies a protocol rule too "
                f"({', '.join(r for r in s.tags.requirements if requirements.get(r) and requirements[r].level != 'GAP')}): "
                "it keeps that rule's level", "level"))
    return found


# The requirement levels that may back a scenario of each level, in every registry it cites: a @must scenario
# is judged at MUST under each dialect whose rules it cites, so each of those must give it a MUST rule.
BACKING_LEVELS = {"must": {"MUST"}, "should": {"MUST", "SHOULD"}}


def _backing(requirements: Mapping[str, Requirement], scenarios: list[ScenarioLike]) -> list[Problem]:
    """Whether each scenario's citations back it: a @must or @should scenario cites a requirement; in every
    registry it cites, one at its level (or stronger, for @should); and each cited requirement with a
    ``scope`` is about the scenario's case (its title names a scope word)."""
    found: list[Problem] = []
    for s in scenarios:
        level = s.tags.level
        if level in BACKING_LEVELS and not s.tags.requirements:
            found.append(Problem(f"scenario {s.id} ({s.feature}) is @{level} but cites no requirement (@req:)",
                                 "unbacked"))
        by_registry: dict[str, list[Requirement]] = {}
        for rid in s.tags.requirements:
            if rid in requirements and requirements[rid].level != "GAP":
                by_registry.setdefault(requirements[rid].registry, []).append(requirements[rid])
        for name, cited in by_registry.items():
            if level in BACKING_LEVELS and not any(r.level in BACKING_LEVELS[level] for r in cited):
                found.append(Problem(
                    f"scenario {s.id} ({s.feature}) is @{level}, but of {name}'s rules it cites only "
                    f"{', '.join(f'{r.id} ({r.level})' for r in cited)}: under that dialect it would be judged "
                    f"at {level.upper()} by a rule that is not", "level"))
        title = str(getattr(s, "name", "") or "").lower()
        for rid in s.tags.requirements:
            requirement = requirements.get(rid)
            if title and requirement is not None and requirement.scope \
                    and not any(word in title for word in requirement.scope):
                found.append(Problem(
                    f"scenario {s.id} ({s.feature}) cites {rid}, whose text is about {' / '.join(requirement.scope)}, "
                    f"but its title names none of them: {getattr(s, 'name', '')!r}", "scope", rid))
    return found


def problems(requirements: Mapping[str, Requirement], scenarios: Iterable[ScenarioLike]) -> list[str]:
    """Every disagreement between the registry and the scenario tags, one readable line each."""
    return [problem.text for problem in findings(requirements, scenarios)]


def status(requirement: Requirement, scenario_ids: list[str]) -> str:
    """``excluded``, ``covered`` or ``uncovered`` — the one word the listing and its counts use."""
    if requirement.excluded:
        return "excluded"
    return "covered" if scenario_ids else "uncovered"
