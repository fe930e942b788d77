"""Where the third-party providers come from, and how each interop target is run.

The executables are built by ``../shared/third-party/build.sh`` (a folder keyed by the tarballs' digest:
cold ~5-20 min on 2 cores, warm instant). ``.ci/run`` starts that build first, in the background, under the
same lock this module takes, so a test that needs it waits for that build instead of starting a second one.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "third-party"
BUILT_ENV = "SANDBOX_CONFORMANCE_THIRD_PARTY"  # a folder that already holds the four executables
REQUIRE_ENV = "SANDBOX_CONFORMANCE_REQUIRE_INTEROP"
LOCK = Path(tempfile.gettempdir()) / "sandbox-conformance-third-party.lock"
EXECUTABLES = ("sandbox-driver-host-v1", "sandbox-driver-host-v2", "upstream-v1-battery", "fabro-sandbox-forkd")
BUILD_TIMEOUT_S = 45 * 60
# One seed for every interop run: a finding list is compared scenario by scenario, so the data each
# scenario generates is the same from run to run (a run's seed is in its results and its reproduce lines).
SEED = "2323"


class Unavailable(Exception):
    """The third-party build cannot be had here (no sources, no cargo, the build failed); says why."""


def built() -> Path:
    """The folder holding the built executables, building them (or waiting for the build) if needed."""
    given = os.environ.get(BUILT_ENV)
    if given:
        folder = Path(given)
    else:
        script = SHARED / "build.sh"
        if not script.is_file():
            raise Unavailable(f"no third-party sources at {SHARED} (or set {BUILT_ENV} to a built folder)")
        try:
            completed = subprocess.run(["flock", str(LOCK), "bash", str(script)], capture_output=True, text=True,
                                       timeout=BUILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise Unavailable(f"the third-party build did not finish: {error}") from None
        lines = completed.stdout.strip().splitlines()
        if completed.returncode != 0 or not lines:
            tail = " | ".join(completed.stderr.strip().splitlines()[-3:])
            raise Unavailable(f"the third-party build failed (exit {completed.returncode}): {tail}")
        folder = Path(lines[-1])
    missing = [name for name in EXECUTABLES if not os.access(folder / name, os.X_OK)]
    if missing:
        raise Unavailable(f"{folder} lacks {', '.join(missing)}")
    return folder


@dataclass(frozen=True)
class Target:
    """One provider the whole suite runs against (or, for the battery, the battery run against ours)."""

    name: str
    what: str
    executable: str
    dialect: str  # the dialect its runs speak (a scenario cites requirements under it)
    compat: str | None = None  # forkd plugin: the mode of the controller it drives

    @property
    def is_battery(self) -> bool:
        return self.executable == "upstream-v1-battery"


TARGETS = (
    Target("upstream-v1-host", "upstream sandbox-driver v1 host plugin", "sandbox-driver-host-v1",
           "sandbox-driver-v1"),
    Target("upstream-v2-host", "upstream sandbox-driver v2 host plugin", "sandbox-driver-host-v2",
           "sandbox-driver-v2"),
    Target("forkd-plugin", "fabro forkd plugin against serve forkd (the proposed controller)", "fabro-sandbox-forkd",
           "fabro-sketch", compat="patched"),
    Target("forkd-plugin-052", "fabro forkd plugin against serve forkd --compat forkd-0.5.2", "fabro-sandbox-forkd",
           "fabro-sketch", compat="forkd-0.5.2"),
    Target("upstream-v1-battery", "upstream's v1 battery against our reference plugin (v1)", "upstream-v1-battery",
           "sandbox-driver-v1"),
)
BY_NAME = {target.name: target for target in TARGETS}


@dataclass(frozen=True)
class Outcome:
    """What running a target produced: the process's exit code and output, and where its reports are."""

    exit_code: int
    stdout: str
    stderr: str
    report_dir: Path
    command: str


def run(target: Target, folder: Path, report_dir: Path, timeout_s: float = 900) -> Outcome:
    """Run ``target`` as a provider author would (the CLI in a process of its own), reports in ``report_dir``."""
    executable = str(folder / target.executable)
    if target.is_battery:
        reference = str(Path(sys.executable).parent / "sandbox-conformance-host-plugin")
        argv = [executable, "--entrypoint-logs-same-spec", "--", reference]
        return _run(argv, report_dir, timeout_s)
    argv = [sys.executable, "-m", "conformance.cli", "run", "--plugin", executable, "--seed", SEED,
            "--report-dir", str(report_dir), "-n", "2"]
    if target.compat is None:
        return _run(argv, report_dir, timeout_s)
    token = f"interop-{uuid.uuid4().hex}"
    with _forkd_controller(token, target.compat) as url:
        return _run([*argv, "--env", f"FORKD_URL={url}", "--env", f"FORKD_TOKEN={token}"], report_dir, timeout_s)


def _run(argv: list[str], report_dir: Path, timeout_s: float) -> Outcome:
    report_dir.mkdir(parents=True, exist_ok=True)
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=REPO)
    return Outcome(completed.returncode, completed.stdout, completed.stderr, report_dir, shlex.join(argv))


@contextlib.contextmanager
def _forkd_controller(token: str, compat: str) -> Iterator[str]:
    """``serve forkd``'s app in ``compat`` mode on a thread of this process, on a free loopback port."""
    from conformance.reference.rest_server import COMPAT
    from tests import inprocess

    with inprocess.rest_server(token, COMPAT[compat], log=[]) as url:
        yield url


BATTERY_LINE = re.compile(r"^(PASS|SKIP|FAIL) (\w+)(?:[: ] ?(.*))?$")


def battery_checks(stdout: str) -> dict[str, tuple[str, str]]:
    """Upstream's battery output as check name → (PASS/SKIP/FAIL, its reason)."""
    checks: dict[str, tuple[str, str]] = {}
    for line in stdout.splitlines():
        matched = BATTERY_LINE.match(line.strip())
        if matched:
            checks[matched.group(2)] = (matched.group(1), (matched.group(3) or "").strip("() "))
    return checks
