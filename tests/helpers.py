"""Helpers for the suite's own tests: run the CLI as a user would, read what it wrote."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def plugin_command(*args: str) -> str:
    """The reference plugin as a --plugin command line, optionally with extra arguments."""
    return shlex.join([sys.executable, "-m", "conformance.reference.host_plugin", *args])


@dataclass
class SuiteRun:
    exit_code: int
    stdout: str
    stderr: str
    report_dir: Path

    @property
    def results(self) -> dict[str, Any]:
        return json.loads((self.report_dir / "results.json").read_text())

    def outcomes(self) -> dict[str, str]:
        return {s["id"]: s["outcome"] for s in self.results["scenarios"]}

    def with_outcome(self, *outcomes: str) -> set[str]:
        return {sid for sid, outcome in self.outcomes().items() if outcome in outcomes}


def run_cli(*args: str, report_dir: Path | None = None, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> SuiteRun:
    command = [sys.executable, "-m", "conformance.cli", *args]
    if report_dir is not None:
        command += ["--report-dir", str(report_dir)]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    return SuiteRun(completed.returncode, completed.stdout, completed.stderr, report_dir or Path("reports"))


