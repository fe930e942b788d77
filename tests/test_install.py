"""The installation is lean and says what is missing (issue 25).

- testcontainers and the docker client are the ``image`` extra: without them `run --image` ends with exit 2
  and one line saying how to install it, and `doctor --image` names it as its failed check;
- `make run` installs the runtime only, `make setup`/`make test` the dev extras (which include ``image``),
  and going from one to the other installs what is missing (one stamp file each);
- before `python -m venv`, `make` names an old Python or a missing venv module (Debian's python3-venv) in
  one line (.ci/check-python);
- the base image's debootstrap, refused to a non-root user, says how to build it as root.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conformance import cli
from conformance.options import IMAGE_EXTRA_HINT
from tests.helpers import REPO

IMAGE_MODULES = ("testcontainers", "testcontainers.core", "testcontainers.core.container", "docker", "docker.errors")


@pytest.fixture
def without_image_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the image extra were not installed: its modules cannot be imported (None in sys.modules)."""
    for name in [*IMAGE_MODULES, *(m for m in sys.modules if m.startswith(("testcontainers.", "docker.")))]:
        monkeypatch.setitem(sys.modules, name, None)


def test_run_with_image_without_the_extra_says_how_to_install_it(without_image_extra, tmp_path, capsys) -> None:
    code = cli.main(["run", "--no-config", "--image", "example.org/provider:1", "--report-dir", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == cli.EXIT_USAGE, captured
    assert captured.err.splitlines() == [f"sandbox-conformance: error: {IMAGE_EXTRA_HINT}"]
    assert "pip install 'sandbox-conformance[image]'" in IMAGE_EXTRA_HINT
    assert list(tmp_path.iterdir()) == []  # nothing ran


def test_doctor_with_image_without_the_extra_names_it_as_the_failed_check(without_image_extra, tmp_path,
                                                                           capsys) -> None:
    code = cli.main(["doctor", "--no-config", "--image", "example.org/provider:1", "--report-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert [line for line in out.splitlines() if IMAGE_EXTRA_HINT in line] == [
        f"[FAIL] Docker engine: not checked: {IMAGE_EXTRA_HINT}"], out


def test_the_image_extra_is_what_the_runtime_leaves_out_and_dev_takes_in() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = {requirement.split(">")[0].split("<")[0] for requirement in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert not runtime & {"testcontainers", "docker"}
    assert {requirement.split(">")[0] for requirement in extras["image"]} == {"testcontainers", "docker"}
    assert "sandbox-conformance[image]" in extras["dev"]


# Whose private functions and attributes the suite touches (pyproject.toml says where): each is bounded
# below its next major version.
TOUCHED_INTERNALS = ("pytest", "pytest-bdd", "pytest-xdist", "execnet", "testcontainers")


def test_every_dependency_whose_internals_we_touch_has_an_upper_bound() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    every = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    bounds = {r.split(">")[0].split("<")[0]: r for r in every}
    assert [name for name in TOUCHED_INTERNALS if "<" not in bounds[name]] == []


# -- make ----------------------------------------------------------------------------------------

def _make(*arguments: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # A make of its own, not a sub-make of the `make test` that may be running these tests (which would name
    # itself make[1] and pass its flags down)
    env = {name: value for name, value in os.environ.items() if name not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", "-C", str(REPO), *arguments], capture_output=True,
                          text=True, timeout=timeout, check=False, env=env)


def _venv_made_by_make_run(tmp_path: Path) -> Path:
    """A venv as `make run` leaves it: its python, and the runtime stamp newer than pyproject.toml."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / "bin" / ".installed-runtime").touch()
    return venv


def test_make_run_installs_the_runtime_and_make_test_adds_the_dev_extras(tmp_path: Path) -> None:
    fresh = _make("-n", "run", f"VENV={tmp_path / 'fresh'}")
    assert fresh.returncode == 0, fresh.stderr
    assert ".ci/check-python" in fresh.stdout and "-m venv" in fresh.stdout
    assert "pip install --quiet -e .\n" in fresh.stdout and "[dev]" not in fresh.stdout
    venv = _venv_made_by_make_run(tmp_path)
    again = _make("-n", "run", f"VENV={venv}")
    assert "pip install" not in again.stdout and "sandbox-conformance run" in again.stdout
    test = _make("-n", "test", f"VENV={venv}")
    assert test.returncode == 0, test.stderr
    assert "pip install --quiet -e '.[dev]'" in test.stdout and "-m venv" not in test.stdout


def _python_that(tmp_path: Path, prelude: str) -> Path:
    """A python3 for `make PYTHON=`: this interpreter, altered by ``prelude`` before the script it runs."""
    wrapper = tmp_path / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -c "{prelude}; import runpy, sys; '
                       f"sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')\" \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


@pytest.mark.parametrize(("prelude", "fix"), [
    ("import sys; sys.version_info = (3, 10, 12, 'final', 0)", "needs 3.11 or newer: install it and run make "
                                                               "PYTHON=python3.11"),
    ("import sys; sys.modules['ensurepip'] = None", "no venv/ensurepip module): apt-get install python3-venv"),
], ids=["old-python", "no-python3-venv"])
def test_make_names_what_the_python_lacks_in_one_line_and_makes_no_venv(prelude: str, fix: str,
                                                                          tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    made = _make("setup", f"VENV={venv}", f"PYTHON={_python_that(tmp_path, prelude)}")
    assert made.returncode != 0
    ours = [line for line in made.stderr.splitlines() if not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert len(ours) == 1 and fix in ours[0], made.stderr
    assert not venv.exists()


def test_the_python_check_passes_this_interpreter_silently() -> None:
    checked = subprocess.run([sys.executable, str(REPO / ".ci" / "check-python")], capture_output=True,
                             text=True, timeout=30, check=False)
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


# -- images --------------------------------------------------------------------------------------

def test_debootstrap_refused_to_a_user_says_how_to_build_the_base_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    from conformance.reference import images

    monkeypatch.setattr(images, "_build_lock", contextlib.nullcontext)
    monkeypatch.setattr(images, "image_exists", lambda tag: False)
    monkeypatch.setattr(images, "_debootstrap", lambda: "/usr/sbin/debootstrap")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(images.ImageError) as refused:
        images.ensure_base_image()
    assert str(refused.value).startswith("debootstrap must run as root to build the base image: run `sudo ")
    assert f"{sys.executable} -B -m conformance.reference.images base` once" in str(refused.value)


def test_the_build_lock_opens_a_lock_file_it_may_not_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The base image built as root leaves root's lock file: a user's build must still take the lock."""
    from conformance.reference import images

    monkeypatch.setattr(images.tempfile, "gettempdir", lambda: str(tmp_path))
    with images._build_lock():
        pass
    lock = tmp_path / "sandbox-conformance-images.lock"
    assert lock.exists()
    # as for another user's file (this test may run as root, whom no mode refuses): reading it only
    monkeypatch.setattr(os, "open", _refusing_writes(os.open, lock, lambda flags: flags & (os.O_WRONLY | os.O_RDWR)))
    monkeypatch.setattr(io, "open", _refusing_writes(io.open, lock, lambda mode="r", *_, **__: mode != "r"))
    with images._build_lock():
        pass


def _refusing_writes(real_open, lock: Path, writes):
    def guarded(path, *args, **kwargs):
        if Path(path) == lock and writes(*args[:1], **{k: v for k, v in kwargs.items() if k in ("mode", "flags")}):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)
    return guarded
