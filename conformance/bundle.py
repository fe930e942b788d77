"""Where the suite's data (features, steps, schemas) lives: inside the wheel, or at the repository root."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from conformance.errors import HarnessError

_PACKAGE = Path(__file__).resolve().parent


@cache
def root() -> Path:
    """The folder holding ``features/``, ``steps/`` and ``schemas/``.

    A built wheel carries them in ``conformance/_bundle``; a source checkout (editable install) keeps
    them at the top of the repository.
    """
    for candidate in (_PACKAGE / "_bundle", _PACKAGE.parent):
        if (candidate / "features").is_dir() and (candidate / "schemas").is_dir():
            return candidate
    raise HarnessError(f"the suite's features and schemas were not found next to {_PACKAGE}; reinstall the package")


def features_dir() -> Path:
    return root() / "features"


def steps_dir() -> Path:
    return root() / "steps"


def schemas_dir() -> Path:
    return root() / "schemas"


def examples_dir() -> Path:
    """The provider templates ``init --template`` copies (``examples/<template>/``)."""
    return root() / "examples"
