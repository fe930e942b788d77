"""Loading ``steps/`` (from the repository or the wheel's bundle) as the package ``conformance_steps``."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from conformance import bundle
from conformance.plugin.keys import STEPS_PACKAGE


def load(config: pytest.Config) -> None:
    """Import every public step module and register it as a plugin of this pytest run (the modules are
    imported once per process; a later in-process run registers the same modules again)."""
    steps_dir = bundle.steps_dir()
    pytest.register_assert_rewrite(STEPS_PACKAGE)
    package = sys.modules.get(STEPS_PACKAGE)
    if package is None:
        package = types.ModuleType(STEPS_PACKAGE)
        package.__path__ = [str(steps_dir)]
        package.__file__ = str(steps_dir / "__init__.py")
        sys.modules[STEPS_PACKAGE] = package
    for path in sorted(steps_dir.glob("*.py")):
        if path.name.startswith("_"):
            continue
        name = f"{STEPS_PACKAGE}.{path.stem}"
        module = importlib.import_module(name)
        if not config.pluginmanager.is_registered(module):
            config.pluginmanager.register(module, name)
