"""The examples a provider author starts from (examples/v2, v1, sketch, rest) pass the whole suite as the
READMEs say to run them: each a real plugin process (or server) through the CLI, ending PASS with 0 failed,
nothing leaked, and every skip one that hides nothing — a capability the example does not declare, a
scenario of another dialect, or a limit of the example's own dialect."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, SuiteRun, run_cli, untruthful_skips

EXAMPLES = REPO / "examples"


def dialect_limits(dialect: str) -> tuple[str, ...]:
    """Skips that name what the dialect itself cannot ask for, or has no rule about."""
    return (f"the {dialect} dialect cannot express: ", f"on the {dialect} dialect, ",
            f"the {dialect} dialect states no rule this scenario checks")


def run_example(*args: str, report_dir: Path, env: dict[str, str] | None = None) -> tuple[SuiteRun, float]:
    started = time.monotonic()
    run = run_cli("run", *args, "--strict", report_dir=report_dir, timeout=900, cwd=REPO,
                  env=None if env is None else {**os.environ, **env})
    elapsed = time.monotonic() - started
    print(f"{shlex.join(args)}: {elapsed:.1f} s")  # the wall time CI pays for this example (pytest -s shows it)
    return run, elapsed


def assert_passes_what_it_declares(run: SuiteRun, kind: str, dialect: str, *also_truthful: str,
                                   xfailed: int = 0) -> dict[str, Any]:
    results = run.results
    failures = {s["id"]: s["message"] for s in results["scenarios"] if s["outcome"] in ("failed", "error")}
    assert run.exit_code == 0 and results["verdict"]["passed"] and not failures, (failures, run.stdout[-3000:])
    assert (results["provider"]["kind"], results["provider"]["dialect"]) == (kind, dialect)
    summary = results["summary"]
    assert summary["failed"] == summary["errors"] == summary["xpassed"] == 0 and summary["xfailed"] == xfailed
    assert summary["passed"] > 0
    assert not untruthful_skips(results, *dialect_limits(dialect), *also_truthful)
    sandboxes = results["sandboxes"]
    assert sandboxes["leaked"] == [] and sandboxes["created"] == sandboxes["deleted"] > 0, sandboxes
    assert results["processes_left"]["found"] == [], results["processes_left"]
    return results


def plugin(example: str) -> str:
    return f"{sys.executable} {EXAMPLES / example / 'plugin.py'}"


@pytest.mark.slow
def test_the_v2_example_passes_everything_it_declares(tmp_path) -> None:
    root = tmp_path / "sandboxes"  # the example's shared sandbox registry, here private to this test
    run, _ = run_example("--plugin", plugin("v2"), "--env", f"EXAMPLE_PLUGIN_ROOT={root}",
                         "-n", "2",
                         report_dir=tmp_path / "reports")
    # it declares neither exec.stdin nor exec.stop: v2-control-carries-no-bytes and v2-transport-diagnostics pass
    # without them (each once asked one of it without a gate)
    assert_passes_what_it_declares(run, "example-v2", "sandbox-driver-v2",
                                   "no runtime directory: ")  # its handles name none
    assert list(root.iterdir()) == []  # every sandbox's directory and record is gone


@pytest.mark.slow
def test_the_v1_example_passes_everything_it_declares(tmp_path) -> None:
    run, _ = run_example("--plugin", plugin("v1"), "-n", "2", report_dir=tmp_path / "reports")
    assert_passes_what_it_declares(run, "example-v1", "sandbox-driver-v1", "no runtime directory: ")


@pytest.mark.slow
def test_the_sketch_example_passes_everything_it_declares(tmp_path) -> None:
    run, _ = run_example("--plugin", plugin("sketch"), report_dir=tmp_path / "reports")
    assert_passes_what_it_declares(run, "example-sketch", "fabro-sketch")


@pytest.mark.slow
def test_the_rest_example_passes_everything_it_declares(tmp_path) -> None:
    token = "example-token-" + tmp_path.name
    env = {"EXAMPLE_REST_TOKEN": token}
    server = subprocess.Popen([sys.executable, str(EXAMPLES / "rest" / "server.py"), "--port", "0"],
                              env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = server.stdout.readline().strip().removeprefix("listening on ")  # blocks until it listens
        assert url.startswith("http://127.0.0.1:"), url
        run, _ = run_example("--rest", url, "--profile", str(EXAMPLES / "rest" / "profile.yaml"),
                             report_dir=tmp_path / "reports", env=env)
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0  # SIGTERM is a clean stop: its sandboxes and their processes end
    assert_passes_what_it_declares(run, "example-rest", "rest")
