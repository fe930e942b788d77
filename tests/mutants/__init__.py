"""Deliberately broken variants of the reference providers: test doubles of the suite's own tests,
never shipped in the wheel.

Each mutant subclasses an honest reference provider (``conformance.reference``), overrides one small
method (the reference servers' seams, listed in their class docstrings) and is registered under a
stable name. The YAML files in ``catalogue/`` say, for each, which requirements it breaks and which
scenarios must turn red; ``tests/test_mutants.py`` runs the suite against every entry, starting each
through ``launch.py`` (``python -m tests.mutants.launch host|docker|rest NAME ...``). Every module of
this package but the launcher is imported, so a new module of mutants needs no registration here.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T", bound=type)

REGISTRY: dict[str, type] = {}
CATALOGUE_DIR = Path(__file__).with_name("catalogue")


def mutant(name: str) -> Callable[[T], T]:
    """Register a broken variant under ``name``."""

    def register(cls: T) -> T:
        if name in REGISTRY:
            raise ValueError(f"mutant {name!r} is registered twice")
        cls.mutant_name = name  # type: ignore[attr-defined]
        REGISTRY[name] = cls
        return cls

    return register


def catalogue() -> list[dict[str, Any]]:
    """Every catalogue entry, file by file (sorted by name), in file order."""
    entries: list[dict[str, Any]] = []
    for path in sorted(CATALOGUE_DIR.glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text(encoding="utf-8"))["mutants"]:
            entries.append({**entry, "catalogue": path.name})
    return entries


for _module in pkgutil.iter_modules(__path__):
    if _module.name != "launch":
        import_module(f"{__name__}.{_module.name}")
