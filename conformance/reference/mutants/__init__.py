"""Deliberately broken variants of the reference providers.

Each mutant overrides one behaviour of an honest reference plugin and is registered under a stable
name. ``catalogue.yaml`` next to this file says, for each, which requirements it breaks and which
scenarios must turn red; ``tests/test_mutants.py`` runs the suite against every entry.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T", bound=type)

REGISTRY: dict[str, type] = {}
CATALOGUE_PATH = Path(__file__).with_name("catalogue.yaml")


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
    """The catalogue entries, in file order."""
    return yaml.safe_load(CATALOGUE_PATH.read_text(encoding="utf-8"))["mutants"]


for _module in ("v1_core",):
    import_module(f"{__name__}.{_module}")
