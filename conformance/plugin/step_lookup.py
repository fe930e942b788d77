"""Finding the step definition for a Gherkin step, without asking pytest about every fixture each time.

pytest-bdd (9.x) finds a step's definition by walking every fixture name the session knows and asking
pytest which of its definitions the scenario's test item can see (``getfixturedefs``), then matching
the step text against each step definition's parser. With our ~350 step definitions that is ~350
visibility look-ups per step, ~2,900 steps per run: about a tenth of a one-process run's wall time,
spent on the main thread.

What a test item can see of *step definitions* depends only on where it was collected: step
definitions are registered by modules and plugins (ours: the step modules, registered as plugins),
never per test item (per-item fixtures are the values pytest-bdd injects for ``target_fixture``, which
are not step functions). So the visible step definitions are computed once per collector (the item's
parent) and reused by every item under it; the parser match stays per step, as pytest-bdd does it.
The result — which definitions, in which order — is pytest-bdd's own (``tests/test_step_lookup.py``
compares both over every step three features run), and pytest-bdd still decides, from that list, which one runs.

When the fixture names change (a plugin registered mid-session), the cache is dropped. When pytest-bdd
no longer has the function this replaces, nothing is replaced.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

_ORIGINAL = "_conformance_original_find_fixturedefs_for_step"


class _VisibleSteps:
    """Per fixture manager: for each collector, the step definitions its items can see, in the order
    pytest-bdd would meet them (fixture name order, then pytest's order of a name's definitions)."""

    def __init__(self) -> None:
        self.names: tuple[str, ...] = ()
        self.by_collector: dict[str, list[tuple[Any, Any]]] = {}

    def visible(self, fixturemanager: Any, node: Any, names: list[str]) -> list[tuple[Any, Any]]:
        from pytest_bdd.compat import getfixturedefs
        from pytest_bdd.steps import step_function_context_registry

        if tuple(names) != self.names:
            self.names = tuple(names)
            self.by_collector.clear()
        key = _collector_key(node)
        found = self.by_collector.get(key)
        if found is None:
            found = []
            for name in names:
                for fixturedef in getfixturedefs(fixturemanager, name, node) or ():
                    context = step_function_context_registry.get(fixturedef.func)
                    if context is not None:
                        found.append((fixturedef, context))
            self.by_collector[key] = found
        return found


def _collector_key(node: Any) -> str:
    parent = getattr(node, "parent", None)
    return parent.nodeid if parent is not None else node.nodeid


# Keyed weakly by the session's fixture manager: an in-process run after this one starts afresh.
_CACHES: weakref.WeakKeyDictionary[Any, _VisibleSteps] = weakref.WeakKeyDictionary()


def find_fixturedefs_for_step(step: Any, fixturemanager: Any, node: Any) -> Iterable[Any]:
    """pytest-bdd's ``find_fixturedefs_for_step``, with the visibility look-ups done once per collector."""
    from pytest_bdd.compat import get_fixture_names

    cache = _CACHES.setdefault(fixturemanager, _VisibleSteps())
    return list(_matching(step, cache.visible(fixturemanager, node, get_fixture_names(fixturemanager))))


def _matching(step: Any, visible: list[tuple[Any, Any]]) -> Iterator[Any]:
    for fixturedef, context in visible:
        if context.type is not None and context.type != step.type:
            continue
        if context.parser.is_matching(step.name):
            yield fixturedef


def install() -> None:
    """Replace pytest-bdd's look-up with this one (once per process); a pytest-bdd without it is left alone."""
    try:
        import pytest_bdd.scenario  # noqa: F401  (the module; the package exports a function of that name)
        bdd_scenario = sys.modules["pytest_bdd.scenario"]
    except ImportError:
        return
    if getattr(bdd_scenario, _ORIGINAL, None) is not None or not hasattr(bdd_scenario, "find_fixturedefs_for_step"):
        return
    setattr(bdd_scenario, _ORIGINAL, bdd_scenario.find_fixturedefs_for_step)
    bdd_scenario.find_fixturedefs_for_step = find_fixturedefs_for_step


def original() -> Any:
    """pytest-bdd's own look-up (for comparing), or None when it was not replaced."""
    bdd_scenario = sys.modules["pytest_bdd.scenario"]

    return getattr(bdd_scenario, _ORIGINAL, None)
