"""The layering holds: features → steps → adapter interface → dialect → transport, one direction."""

from __future__ import annotations

import ast
from pathlib import Path

from conformance import bundle

PACKAGE = Path(__file__).resolve().parent.parent / "conformance"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _violations(paths, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{path.name} imports {name}" for path in paths for name in sorted(_imports(path))
            if name.startswith(forbidden)]


def test_steps_use_only_the_adapter_interface() -> None:
    steps = sorted(bundle.steps_dir().glob("*.py"))
    assert steps
    bad = _violations(steps, ("conformance.dialects", "conformance.transports", "conformance.providers",
                              "conformance.session", "conformance.reference", "conformance.pytest_plugin"))
    assert not bad, bad


def test_the_adapter_interface_knows_no_dialect_or_transport() -> None:
    bad = _violations([PACKAGE / "adapter.py", PACKAGE / "errors.py"],
                      ("conformance.dialects", "conformance.transports", "conformance.providers"))
    assert not bad, bad


def test_transports_know_no_dialect_adapter_or_steps() -> None:
    bad = _violations(sorted((PACKAGE / "transports").glob("*.py")),
                      ("conformance.dialects", "conformance.adapter", "conformance.session", "conformance_steps"))
    assert not bad, bad


def test_dialects_know_nothing_above_the_adapter() -> None:
    bad = _violations(sorted((PACKAGE / "dialects").glob("*.py")),
                      ("conformance.session", "conformance.pytest_plugin", "conformance_steps", "pytest", "conformance.reference"))
    assert not bad, bad


def test_reference_providers_are_independent_of_the_suite() -> None:
    """A reference provider is a provider like any other: it must not lean on the suite's internals."""
    paths = sorted((PACKAGE / "reference").rglob("*.py"))
    bad = _violations(paths, ("conformance.dialects", "conformance.adapter", "conformance.session",
                              "conformance.pytest_plugin", "conformance.transports", "pytest"))
    assert not bad, bad


def test_the_package_never_imports_the_suites_own_tests() -> None:
    """Test doubles (``tests/mutants``) stay out of the shipped package: nothing in it imports ``tests``."""
    bad = _violations(sorted(PACKAGE.rglob("*.py")), ("tests",))
    assert not bad, bad
    assert not list(PACKAGE.rglob("*mutant*")), "a mutants module inside the package"
