"""Blind red-team mutants of the reference sandbox-driver v1 host plugin.

Each mutant is a ``HostPlugin`` subclass with one realistic fault, registered with ``@redteam``.
``REGISTRY`` maps a mutant's name to its record (``.cls``, ``.requirement``, ``.bug``);
``load()`` imports the modules that define mutants so the registry is complete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    cls: type
    requirement: str
    bug: str


REGISTRY: dict[str, Mutant] = {}


def redteam(name: str, requirement: str, bug: str) -> Callable[[type], type]:
    """Register ``cls`` as the mutant ``name``, violating ``requirement`` (SDP1 ids) with ``bug``."""

    def register(cls: type) -> type:
        if name in REGISTRY:
            raise ValueError(f"duplicate mutant name {name!r}")
        REGISTRY[name] = Mutant(name, cls, requirement, bug)
        cls.mutant_name = name
        return cls

    return register


def load() -> dict[str, Mutant]:
    """Import every module that registers mutants; the complete registry."""
    from tests.redteam import (
        blind_1,  # noqa: F401
        blind_2,  # noqa: F401
        blind_3,  # noqa: F401
        blind_4,  # noqa: F401
        blind_5,  # noqa: F401
        blind_6,  # noqa: F401
        blind_net_1,  # noqa: F401
        blind_pairs_1,  # noqa: F401
        blind_rest_1,  # noqa: F401
        blind_v2_1,  # noqa: F401
    )

    return REGISTRY
