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


LAUNCHER = REPO / "tests" / "mutants" / "launch.py"


def launch_argv(kind: str, name: str, *args: str) -> list[str]:
    """``python /abs/tests/mutants/launch.py KIND NAME ARGS``: a mutant as a process, from any cwd."""
    return [sys.executable, str(LAUNCHER), kind, name, *args]


def mutant_command(name: str, *args: str) -> str:
    """The host-plugin mutant ``name`` (v1 or sketch) as a --plugin command line, like ``plugin_command``."""
    return shlex.join(launch_argv("host", name, *args))


def docker_mutant_arguments(name: str, *args: str, image: str | None = None) -> list[str]:
    """``sandbox-conformance run`` arguments that test the Docker-plugin mutant ``name`` on ``image``
    (default: the local sandbox image), like ``docker_plugin.suite_arguments``."""
    from conformance.reference.docker_plugin import create_spec
    from conformance.reference.images import SANDBOX_TAG

    spec = create_spec(image or SANDBOX_TAG)
    return ["--plugin", shlex.join(launch_argv("docker", name, *args)),
            "--create-spec", json.dumps(spec, separators=(",", ":"))]


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
    completed = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    return SuiteRun(completed.returncode, completed.stdout, completed.stderr, report_dir or Path("reports"))


# A skip that hides nothing: the provider does not declare the capability, or the scenario belongs to another
# dialect (or dialect version). Anything else a caller allows it names itself (its dialect's own limits).
TRUTHFUL_SKIP_STARTS = ("capability ", "applies to dialect")


def untruthful_skips(results: dict[str, Any], *also_truthful: str) -> dict[str, str]:
    """The skipped scenarios of a results.json whose reason starts neither with one of TRUTHFUL_SKIP_STARTS
    nor with one of ``also_truthful``, by id: each one a skip that may hide a failure."""
    truthful = TRUTHFUL_SKIP_STARTS + also_truthful
    return {s["id"]: s["message"] for s in results["scenarios"]
            if s["outcome"] == "skipped" and not s["message"].startswith(truthful)}


USAGE_LINE = "sandbox-conformance: error: "


def cli_main(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """The CLI run in this process: its exit code and what it printed (pytest's ``capsys`` captures it)."""
    from conformance import cli

    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_usage_line(code: int, err: str) -> str:
    """Bad input's answer: exit 2 and one line naming the problem, never a traceback; that line."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (code, err)
    assert lines[0].startswith(USAGE_LINE) and "Traceback" not in err, lines[0]
    return lines[0]
