"""The layering holds, for every file: features → steps → adapter → dialect → transport, one direction,
with the run's machinery (CLI, config, runner, plugin, engine, reporting) beside the stack.

Every Python file under ``conformance/`` and ``steps/`` belongs to exactly one layer below; a new file
that fits none fails ``test_every_file_belongs_to_a_layer``, so the rules never silently stop applying.
ARCHITECTURE.md states these rules and nothing this test does not check.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conformance import bundle

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "conformance"
SUITE = "conformance"

# layer → (the files, as globs relative to the repository; the module prefixes it must never import)
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "steps": (("steps/**/*.py",), (
        # steps speak to the adapter and nothing else of the suite
        "conformance.dialects", "conformance.transports", "conformance.providers", "conformance.connections",
        "conformance.reference", "conformance.pytest_plugin", "conformance.plugin", "conformance.runner",
        "conformance.engine", "conformance.config", "conformance.cli", "conformance.reporting",
        "conformance.containers", "conformance.sweep")),
    "adapter": (("conformance/adapter.py", "conformance/errors.py", "conformance/transcript.py",
                 "conformance/secret_forms.py", "conformance/inert.py", "conformance/user_input.py",
                 "conformance/schemas.py", "conformance/bundle.py", "conformance/__init__.py",
                 "conformance/options.py"), (
        "conformance.dialects", "conformance.transports", "conformance.providers", "conformance.connections",
        "conformance.plugin", "conformance.runner", "conformance.engine", "conformance.reporting",
        "conformance.config", "conformance.cli", "conformance.reference", "pytest")),
    "dialects": (("conformance/dialects/**/*.py",), (
        "conformance.connections", "conformance.providers", "conformance.pytest_plugin", "conformance.plugin",
        "conformance.runner", "conformance.engine", "conformance.reporting", "conformance.config",
        "conformance.cli", "conformance.reference", "conformance_steps", "pytest")),
    "transports": (("conformance/transports/**/*.py",), (
        "conformance.adapter", "conformance.dialects", "conformance.connections", "conformance.providers",
        "conformance.plugin", "conformance.runner", "conformance.engine", "conformance.reporting",
        "conformance.config", "conformance.reference", "conformance_steps", "pytest")),
    # builds adapters from a configuration: the one place above the adapter that names dialects
    "connections": (("conformance/providers.py", "conformance/connections.py", "conformance/leftovers.py"), (
        "conformance.plugin", "conformance.runner", "conformance.engine", "conformance.reporting",
        "conformance.config", "conformance.cli", "conformance.reference", "conformance_steps", "pytest")),
    # the run's machinery: never a dialect or a transport
    "run": (("conformance/config.py", "conformance/config_file.py", "conformance/runner/**/*.py", "conformance/plugin/**/*.py",
             "conformance/pytest_plugin.py", "conformance/interrupts.py", "conformance/scenario_tags.py",
             "conformance/requirements/**/*.py"), (
        "conformance.dialects", "conformance.transports", "conformance.reference")),
    # what the run produces, with no pytest in it
    "engine": (("conformance/engine.py", "conformance/reporting/**/*.py"), (
        "conformance.dialects", "conformance.transports", "conformance.reference", "conformance.plugin",
        "conformance.runner", "conformance.connections", "conformance.providers", "pytest")),
    "commands": (("conformance/cli.py", "conformance/sweep.py", "conformance/containers.py", "conformance/explain.py",
                  "conformance/scaffold.py", "conformance/doctor.py", "conformance/ci_action.py", "conformance/pinning.py",
                  "conformance/toml_lines.py",
                  "conformance/cheatsheet.py", "conformance/schema_shapes.py"), (
        "conformance.transports", "conformance.reference.mutants")),
    # a reference provider is a provider like any other: none of the suite's internals
    "reference": (("conformance/reference/**/*.py",), (
        "conformance.dialects", "conformance.adapter", "conformance.connections", "conformance.providers",
        "conformance.pytest_plugin", "conformance.plugin", "conformance.runner", "conformance.engine",
        "conformance.transports", "conformance.config", "conformance.reporting", "tests", "pytest")),
}


def _files(patterns: tuple[str, ...]) -> set[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        found |= {path for path in REPO.glob(pattern) if path.is_file()}
    return found


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function; relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _python_files() -> set[Path]:
    return {p for p in (PACKAGE.rglob("*.py")) if "_bundle" not in p.parts} | set(bundle.steps_dir().rglob("*.py"))


def test_every_file_belongs_to_a_layer() -> None:
    placed: dict[Path, list[str]] = {}
    for layer, (patterns, _) in LAYERS.items():
        for path in _files(patterns):
            placed.setdefault(path.resolve(), []).append(layer)
    unplaced = sorted(str(p.relative_to(REPO)) for p in _python_files() if p.resolve() not in placed)
    twice = sorted(f"{p.relative_to(REPO)}: {layers}" for p, layers in placed.items() if len(layers) > 1)
    assert not unplaced, f"files in no layer (add them to LAYERS): {unplaced}"
    assert not twice, f"files in more than one layer: {twice}"


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    patterns, forbidden = LAYERS[layer]
    paths = sorted(_files(patterns))
    assert paths, f"layer {layer} matches no file"
    bad = [f"{path.relative_to(REPO)} imports {name}" for path in paths for name in sorted(_imports(path))
           if any(name == f or name.startswith(f + ".") for f in forbidden)]
    assert not bad, "\n".join(bad)


def test_the_runner_starts_providers_only_through_connections() -> None:
    """The plugin, runner and engine hold adapters, never build them: no dialect registry up there."""
    for path in _files(LAYERS["run"][0]) | _files(LAYERS["engine"][0]):
        assert "conformance.dialects.registry" not in _imports(path), path


def test_the_import_scanner_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    """The rules above are only as good as the scanner: it must see what a file really imports."""
    probe = PACKAGE / "plugin" / "__init__.py"
    found = _imports(probe)
    assert "conformance.plugin.fixtures" in found and "pytest" in found
    assert "conformance.providers" in _imports(PACKAGE / "runner" / "__init__.py")  # imported inside a function


STEPS_MAY_IMPORT = ("conformance.adapter", "conformance.errors")


def test_steps_see_only_the_adapter_interface_and_the_error_taxonomy() -> None:
    steps = sorted(_files(LAYERS["steps"][0]))
    beyond = [f"{path.relative_to(REPO)} imports {name}" for path in steps for name in sorted(_imports(path))
              if (name == "conformance" or name.startswith("conformance."))
              and not any(name == allowed or name.startswith(allowed + ".") for allowed in STEPS_MAY_IMPORT)]
    assert not beyond, beyond


def test_step_modules_import_no_other_step_module() -> None:
    """Shared helpers live in helper modules (names starting with ``_``); a step module never reaches
    into another step module."""
    steps = sorted(_files(LAYERS["steps"][0]))
    bad = [f"{path.relative_to(REPO)} imports {name}" for path in steps for name in sorted(_imports(path))
           if name.startswith("steps.") and not name.split(".")[1].startswith("_")]
    assert not bad, bad


def test_the_package_never_imports_the_suites_own_tests() -> None:
    """Test doubles (``tests/mutants``) stay out of the shipped package: nothing in it imports ``tests``."""
    bad = [f"{path.relative_to(REPO)} imports {name}" for path in sorted(PACKAGE.rglob("*.py"))
           for name in sorted(_imports(path)) if name == "tests" or name.startswith("tests.")]
    assert not bad, bad
    assert not list(PACKAGE.rglob("*mutant*")), "a mutants module inside the package"
