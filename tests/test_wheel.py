"""The built wheel works outside the repository: features, steps and schemas travel inside it."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    (built,) = out.glob("sandbox_conformance-*.whl")
    return built


def test_the_wheel_carries_features_steps_and_schemas(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for folder in ("features", "steps", "schemas"):
        assert any(n.startswith(f"conformance/_bundle/{folder}/") for n in names), f"{folder} missing from the wheel"
    assert "conformance/_bundle/features/exec.feature" in names
    assert "conformance/_bundle/schemas/sandbox-driver-v1/common.json" in names
    assert "conformance/requirements/sandbox-driver-v1.yaml" in names
    assert "conformance/data/durations.json" in names  # what `run --shard` balances by
    assert "conformance/_bundle/schemas/report/matrix.json" in names
    # the templates `init --template` copies, found beside the features as the bundle finds them
    from conformance.scaffold import TEMPLATES
    for template, entry in TEMPLATES.items():
        assert f"conformance/_bundle/examples/{template}/{entry}" in names, f"template {template} missing from the wheel"


def test_the_wheel_ships_no_test_doubles(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "mutant" in n.lower()], "a mutants module travels in the wheel"
    assert not [n for n in names if "catalogue/" in n and n.endswith((".yaml", ".yml"))], "a mutant catalogue"
    assert not [n for n in names if n.startswith("tests/") or "/tests/" in n], "the suite's own tests"


def test_the_wheels_entry_points_know_no_mutants(wheel: Path, tmp_path: Path) -> None:
    # The code inside the wheel (unpacked, first on sys.path), not the checkout: what an installed entry
    # point runs. The suite's dependencies come from this interpreter's environment.
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(wheel).extractall(unpacked)
    for module, prog in (("conformance.reference.host_plugin", "sandbox-conformance-host-plugin"),
                         ("conformance.reference.docker_plugin", "sandbox-conformance-docker-plugin"),
                         ("conformance.cli", "sandbox-conformance")):
        code = (f"import sys; sys.path.insert(0, {str(unpacked)!r}); import conformance; "
                f"assert conformance.__file__.startswith({str(unpacked)!r}), conformance.__file__; "
                f"sys.argv[0] = {prog!r}; from {module} import main; sys.exit(main(sys.argv[1:]))")
        for args in (["--help"], ["serve", "--help"]) if module == "conformance.cli" else (["--help"],):
            shown = subprocess.run([sys.executable, "-I", "-c", code, *args], cwd=tmp_path, check=False, capture_output=True,
                                   text=True, timeout=60)
            assert shown.returncode == 0, shown.stderr
            assert prog in shown.stdout and "mutant" not in (shown.stdout + shown.stderr).lower(), shown.stdout


@pytest.mark.slow
def test_an_installed_wheel_runs_the_suite_from_an_unrelated_directory(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], check=True, timeout=600,
                   capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The point is that features (top level, gaps/, v2/), steps and both protocols' schemas travel in the
    # wheel, not the run's length: the whole suite runs against both references in test_reference_run.
    host_plugin = str(venv / "bin" / "sandbox-conformance-host-plugin")
    for plugin, features in ((host_plugin, ("handshake.feature", "fs.feature", "delete.feature",
                                            "gaps/snapshots.feature")),
                             (f"{host_plugin} --dialect sandbox-driver-v2", ("v2/files.feature", "exec.feature"))):
        selection = [arg for name in features for arg in ("--feature", name)]
        # two workers: the v1 reference's run through xdist is this one (test_reference_run's is on one)
        run = subprocess.run([str(venv / "bin" / "sandbox-conformance"), "run", "-n", "2", "--plugin", plugin,
                              *selection], cwd=elsewhere, check=False, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        results = json.loads((elsewhere / "reports" / "results.json").read_text())
        assert results["summary"]["failed"] == results["summary"]["errors"] == 0
        assert results["summary"]["passed"] > 0
        assert {s["feature"].split("/")[-1] for s in results["scenarios"] if s["outcome"] == "passed"} \
            == {name.split("/")[-1] for name in features}, "every selected feature ran from the wheel"
    plugin = subprocess.run([str(venv / "bin" / "sandbox-conformance-host-plugin"), "--help"],
                            capture_output=True, text=True, timeout=60, check=True)
    assert "--dialect" in plugin.stdout and "mutant" not in plugin.stdout.lower()
    refused = subprocess.run([str(venv / "bin" / "sandbox-conformance-host-plugin"), "--list-mutants"],
                             check=False, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2, refused.stdout


def test_the_installed_code_finds_its_templates_inside_the_wheel(wheel: Path, tmp_path: Path) -> None:
    """`init --template` copies from conformance/_bundle/examples, as the bundle finds features: not from a
    checkout the installed code knows nothing of."""
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(wheel).extractall(unpacked)
    code = (f"import sys; sys.path.insert(0, {str(unpacked)!r}); from conformance import scaffold; "
            "print(scaffold.template_root())")
    shown = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, check=True, capture_output=True,
                           text=True, timeout=60)
    root = Path(shown.stdout.strip())
    assert root == unpacked / "conformance" / "_bundle" / "examples" and root.is_dir(), shown.stdout
