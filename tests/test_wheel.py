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
    assert "conformance/reference/mutants/catalogue/v1-core.yaml" in names
    assert "conformance/requirements/sandbox-driver-v1.yaml" in names


@pytest.mark.slow
def test_an_installed_wheel_runs_the_suite_from_an_unrelated_directory(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], check=True, timeout=600,
                   capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run([str(venv / "bin" / "sandbox-conformance"), "run"], cwd=elsewhere,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    results = json.loads((elsewhere / "reports" / "results.json").read_text())
    assert results["summary"]["failed"] == results["summary"]["errors"] == 0
    assert results["summary"]["passed"] > 0
    plugin = subprocess.run([str(venv / "bin" / "sandbox-conformance-host-plugin"), "--list-mutants"],
                            capture_output=True, text=True, timeout=60, check=True)
    assert "delete-unknown-errors" in plugin.stdout.split()
