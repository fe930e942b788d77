"""What the tags of a Gherkin scenario mean to the suite.

    @id:<slug>           the scenario's stable id (never changes when the title does); required
    @req:<REQ-ID>        a requirement the scenario verifies; one or more
    @must @should @may   the requirement level (RFC 2119); exactly one
    @gap                 ...or, for a scenario backed only by GAP-n requirements (proposals, not protocol
                         rules), the gap level: a failure is a finding of the gap section, never a verdict reason
    @cap:<dotted>        a capability the provider must declare for the scenario to apply
    @dialect:<name>      the scenario only applies to providers speaking this dialect
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

LEVELS = ("must", "should", "may", "gap")
ID_PATTERN = re.compile(r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$")
REQ_PATTERN = re.compile(r"^[A-Z][A-Z0-9]*-[0-9A-Z]+$")


@dataclass(frozen=True)
class ScenarioTags:
    scenario_id: str | None
    requirements: tuple[str, ...]
    level: str | None
    capabilities: tuple[str, ...]
    dialects: tuple[str, ...]
    other: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, tags: Iterable[str]) -> ScenarioTags:
        scenario_id = None
        requirements: list[str] = []
        levels: list[str] = []
        capabilities: list[str] = []
        dialects: list[str] = []
        other: list[str] = []
        for tag in sorted(tags):
            prefix, sep, value = tag.partition(":")
            if sep and prefix == "id":
                scenario_id = value
            elif sep and prefix == "req":
                requirements.append(value)
            elif sep and prefix == "cap":
                capabilities.append(value)
            elif sep and prefix == "dialect":
                dialects.append(value)
            elif tag in LEVELS:
                levels.append(tag)
            else:
                other.append(tag)
        return cls(scenario_id, tuple(requirements), levels[0] if len(levels) == 1 else None,
                   tuple(capabilities), tuple(dialects), tuple(other))

    def problems(self) -> list[str]:
        found = []
        if not self.scenario_id:
            found.append("has no @id:<slug> tag")
        elif not ID_PATTERN.match(self.scenario_id):
            found.append(f"id {self.scenario_id!r} is not a lowercase slug")
        if not self.requirements:
            found.append("has no @req:<id> tag")
        found.extend(f"requirement tag {r!r} is malformed" for r in self.requirements if not REQ_PATTERN.match(r))
        if self.level is None:
            found.append("needs exactly one of @must, @should, @may, @gap")
        return found

    def tag_set(self) -> set[str]:
        """The names a --tags expression can test."""
        names = {f"req:{r}" for r in self.requirements} | {f"cap:{c}" for c in self.capabilities}
        names |= {f"dialect:{d}" for d in self.dialects} | set(self.other)
        if self.scenario_id:
            names.add(f"id:{self.scenario_id}")
        if self.level:
            names.add(self.level)
        return names


def example_key(row: dict[str, str]) -> str:
    """The stable key of a Scenario Outline's example row: its first cell, as a slug.

    ``optional-operation[refresh-activity]`` reads better than every cell joined, and survives
    edits to the other columns.
    """
    first = next(iter(row.values()), "")
    return re.sub(r"[^a-z0-9.]+", "-", first.lower()).strip("-")


def row_tags(scenario_tags: Iterable[str], examples: Iterable[Any], row: dict[str, str] | None) -> set[str]:
    """The tags of one scenario, or of one row of a Scenario Outline: the scenario's (with its feature's) and
    those of the Examples block holding the row (pytest-bdd's ``Examples``: ``tags``, ``as_contexts()``). An
    outline groups its rows in tagged blocks so each row cites its own requirements, never another block's."""
    tags = set(scenario_tags)
    if row is not None:
        block = next((block for block in examples if row in block.as_contexts()), None)
        if block is not None:
            tags |= set(block.tags or ())
    return tags


def scenario_identity(tags: ScenarioTags, title: str, example: dict[str, str] | None = None) -> str:
    """A scenario's stable id — the one place it is computed: its ``@id:`` tag (its title when it has
    none), and for an outline row the row's key in brackets."""
    base = tags.scenario_id or title
    return f"{base}[{example_key(example)}]" if example is not None else base


_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


class TagExpression:
    """A boolean expression over tag names: ``must and not (cap:exec.stdin or dialect:fabro-sketch)``.

    A name matches when the scenario carries it; a name ending in ``*`` matches any tag with that
    prefix (``req:SDP1-0*``).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._tokens = [t for t in _TOKEN.findall(text) if t]
        self._pos = 0
        if not self._tokens:
            raise ValueError("the tag expression is empty")
        self._tree = self._or()
        if self._pos != len(self._tokens):
            raise ValueError(f"unexpected {self._tokens[self._pos]!r} in tag expression {text!r}")

    def _peek(self) -> str | None:
        return self._tokens[self._pos] if self._pos < len(self._tokens) else None

    def _take(self) -> str:
        token = self._peek()
        if token is None:
            raise ValueError(f"tag expression {self.text!r} ends too early")
        self._pos += 1
        return token

    def _or(self) -> tuple:
        node = self._and()
        while self._peek() == "or":
            self._take()
            node = ("or", node, self._and())
        return node

    def _and(self) -> tuple:
        node = self._not()
        while self._peek() == "and":
            self._take()
            node = ("and", node, self._not())
        return node

    def _not(self) -> tuple:
        token = self._take()
        if token == "not":
            return ("not", self._not())
        if token == "(":
            node = self._or()
            if self._take() != ")":
                raise ValueError(f"missing ')' in tag expression {self.text!r}")
            return node
        if token in ("and", "or", ")"):
            raise ValueError(f"unexpected {token!r} in tag expression {self.text!r}")
        return ("name", token.lstrip("@"))

    def matches(self, tags: set[str]) -> bool:
        def evaluate(node: tuple) -> bool:
            kind = node[0]
            if kind == "name":
                name = node[1]
                if name.endswith("*"):
                    return any(t.startswith(name[:-1]) for t in tags)
                return name in tags
            if kind == "not":
                return not evaluate(node[1])
            left = evaluate(node[1])
            return (left and evaluate(node[2])) if kind == "and" else (left or evaluate(node[2]))

        return evaluate(self._tree)
