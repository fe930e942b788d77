"""The one vocabulary for counting a run's scenarios.

Every scenario of the suite lands in exactly one category, so the categories add up to the total, and every
sink — the terminal table and its last line, summary.md, report.html, results.json's ``summary`` (and pytest's
closing line, which the plugin replaces with ``closing_line``) — counts and names them from here:

    passed                 it ran and met its requirements
    failed                 it ran and a requirement was violated
    errors                 it could not be judged: the suite or the environment broke
    xfail                  it failed as the baseline expects
    xpass                  it passed although the baseline expects it to fail (a stale baseline)
    skipped                this provider's skip: a capability it does not declare, something its dialect
                           cannot express, a condition the scenario names
    not for this dialect   written for another dialect, or citing no rule of the provider's: never this
                           provider's to run, so never counted as its skip
    not selected           left out by --scenario, --feature, --tags, -k, --shard (or not reached)

A scenario's ``outcome`` in results.json stays what the run recorded (``skipped`` for a scenario of another
dialect, ``disabled`` for one not selected); ``category`` reads the category from it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from conformance.reporting.model import is_other_dialect_skip

LEVELS = ("must", "should", "may", "gap")


@dataclass(frozen=True)
class Category:
    word: str  # what every human-facing sink calls it
    key: str  # its key in results.json's per-level counts (summary.levels.<level>)
    summary_key: str  # its key in results.json's summary
    meaning: str  # one line for a legend


CATEGORIES = (
    Category("passed", "passed", "passed", "ran and met its requirements"),
    Category("failed", "failed", "failed", "ran and violated a requirement"),
    Category("errors", "error", "errors", "could not be judged: the suite or the environment broke"),
    Category("xfail", "xfail", "xfailed", "failed as the baseline expects"),
    Category("xpass", "xpass", "xpassed", "passed although the baseline expects a failure"),
    Category("skipped", "skipped", "skipped",
             "this provider's skip: a capability not declared, or not expressible in its dialect"),
    Category("not for this dialect", "other_dialect", "other_dialect",
             "written for another dialect, or citing no rule of this provider's: never its to run"),
    Category("not selected", "disabled", "disabled", "left out by the selection (--scenario, --tags, --shard, ...)"),
)
BY_KEY = {category.key: category for category in CATEGORIES}
WORD = {category.key: category.word for category in CATEGORIES}

# The plugin's skip of a scenario citing no rule of the running dialect (conformance/plugin/fixtures.py).
_NO_RULE_SKIP = re.compile(r"the \S+ dialect states no rule this scenario checks")


def is_not_for_this_dialect(scenario: dict[str, Any]) -> bool:
    """A skip that was never this provider's: a scenario of another dialect, or one citing no rule of its."""
    return scenario["outcome"] == "skipped" and (
        is_other_dialect_skip(scenario) or bool(_NO_RULE_SKIP.match(scenario.get("message") or "")))


def category(scenario: dict[str, Any]) -> str:
    """The category key of one scenario of a results document."""
    return "other_dialect" if is_not_for_this_dialect(scenario) else scenario["outcome"]


def level_counts(scenarios: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Category counts per requirement level (a scenario without one counts as MUST)."""
    counts: dict[str, Counter[str]] = {level: Counter() for level in LEVELS}
    for scenario in scenarios:
        counts.setdefault(scenario["level"] or "must", Counter())[category(scenario)] += 1
    return {level: dict(sorted(counter.items())) for level, counter in counts.items()}


def summarize(scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    """results.json's ``summary``: one count per category (they add up to ``total``), ``selected`` (every
    scenario but the not selected ones) and the per-level counts."""
    tally = Counter(category(scenario) for scenario in scenarios)
    summary: dict[str, Any] = {"total": len(scenarios), "selected": len(scenarios) - tally["disabled"]}
    summary.update({c.summary_key: tally[c.key] for c in CATEGORIES})
    summary["levels"] = level_counts(scenarios)
    return summary


def rows(summary: dict[str, Any]) -> list[tuple[str, list[int], int]]:
    """The count table every sink shows: (level, one count per category in ``CATEGORIES`` order, total) for each
    level holding a scenario, then ``all``."""
    table = [(level.upper(), [counts.get(c.key, 0) for c in CATEGORIES], sum(counts.values()))
             for level, counts in (summary.get("levels") or {}).items() if sum(counts.values())]
    return [*table, ("all", [summary.get(c.summary_key, 0) for c in CATEGORIES], summary.get("total", 0))]


def tally(summary: dict[str, Any]) -> list[tuple[str, int]]:
    """(word, count) of every category that holds a scenario, in ``CATEGORIES`` order: the closing line."""
    return [(c.word, summary.get(c.summary_key, 0)) for c in CATEGORIES if summary.get(c.summary_key, 0)]


def tally_text(summary: dict[str, Any]) -> str:
    """``529 passed, 32 skipped, 150 not for this dialect``: the run in one line."""
    return ", ".join(f"{count} {word}" for word, count in tally(summary)) or "no scenarios"
