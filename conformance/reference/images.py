"""Every image the project needs, built locally and idempotently; nothing is ever pulled.

There is no registry to pull from on the machines this suite targets, so the base image is a Debian
bookworm root filesystem made with ``debootstrap`` and imported with ``docker import``; every other
image is ``FROM`` it, built with the classic builder from a generated Dockerfile in a temporary
context. An image whose tag exists is kept — the derived images carry a digest of their inputs as a
label, so a changed Dockerfile or a changed ``conformance`` source rebuilds them.

    python -m conformance.reference.images [base|sandbox|rest-server|suite|all] [--rebuild]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import conformance
from conformance import bundle

BASE_TAG = "sandbox-conformance/base:bookworm"
SANDBOX_TAG = "sandbox-conformance/sandbox:bookworm"
REST_SERVER_TAG = "sandbox-conformance/forkd-reference:latest"
REST_SERVER_PORT = 8889
SUITE_TAG = "sandbox-conformance/suite:latest"
DIGEST_LABEL = "sandbox-conformance.inputs"
MIRROR = os.environ.get("SANDBOX_CONFORMANCE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
DEBOOTSTRAP_TIMEOUT_S = 1800.0
DOCKER_TIMEOUT_S = 900.0

# The sandbox image: an idle PID 1 so `docker exec` has a running container to enter, and the
# workspace the plugin bind-mounts a host directory onto.
SANDBOX_DOCKERFILE = f"""\
FROM {BASE_TAG}
RUN mkdir -p /workspace
WORKDIR /workspace
LABEL sandbox-conformance.image=sandbox
CMD ["sleep", "infinity"]
"""

# The forkd-compatible reference REST server. FORKD_TOKEN is deliberately not set: whoever runs the
# container passes the secret with `-e FORKD_TOKEN=...`, so it never lands in an image layer.
REST_SERVER_DOCKERFILE = f"""\
FROM {BASE_TAG}
COPY conformance /opt/sandbox-conformance/conformance
ENV PYTHONPATH=/opt/sandbox-conformance PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /opt/sandbox-conformance
LABEL sandbox-conformance.image=forkd-reference
EXPOSE {REST_SERVER_PORT}
CMD ["python3", "-m", "conformance.reference.rest_server", "--host", "0.0.0.0", "--port", "{REST_SERVER_PORT}", \
"--token-env", "FORKD_TOKEN"]
"""


# The suite itself, to run from a CI job that has Docker but no Python: `docker run --rm --network host
# sandbox-conformance/suite sandbox-conformance run --rest http://127.0.0.1:8889`. The base has
# python3 but neither pip nor ensurepip, so the dependencies are installed on the host into a plain
# directory (pip --target, wheels for the base's CPython and platform) and copied in on PYTHONPATH.
SUITE_PYTHON_VERSION = "3.11"  # Debian bookworm's python3
SUITE_DOCKERFILE = f"""\
FROM {BASE_TAG}
COPY site /opt/sandbox-conformance/site
COPY conformance /opt/sandbox-conformance/app/conformance
COPY sandbox-conformance /usr/local/bin/sandbox-conformance
ENV PYTHONPATH=/opt/sandbox-conformance/app:/opt/sandbox-conformance/site PYTHONDONTWRITEBYTECODE=1 \
PYTHONUNBUFFERED=1 HOME=/tmp
WORKDIR /work
LABEL sandbox-conformance.image=suite
ENTRYPOINT []
CMD ["sandbox-conformance", "--help"]
"""
SUITE_LAUNCHER = """\
#!/bin/sh
# The console script pip would write, for the image's own python3.
exec python3 -m conformance.cli "$@"
"""
PIP_TIMEOUT_S = 600.0


class ImageError(RuntimeError):
    """An image could not be built; the message says why in one line."""


def _log(text: str) -> None:
    print(f"images: {text}", file=sys.stderr, flush=True)


def _docker(*args: str, timeout: float = 60.0, check: bool = True, input_file: int | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    docker = shutil.which("docker")
    if docker is None:
        raise ImageError("the docker CLI is not on PATH")
    try:
        completed = subprocess.run([docker, *args], check=False, stdin=input_file, capture_output=True, text=True,
                                   timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise ImageError(f"docker {args[0]} did not finish within {timeout:.0f} s") from None
    if check and completed.returncode != 0:
        detail = (completed.stderr or completed.stdout).strip().splitlines()
        raise ImageError(f"docker {' '.join(args[:2])} failed: {detail[-1] if detail else completed.returncode}")
    return completed


def image_label(tag: str, label: str) -> str | None:
    """The value of one label of a local image; None when the image (or the label) is absent."""
    template = f'{{{{index .Config.Labels "{label}"}}}}'
    completed = _docker("image", "inspect", "--format", template, tag, check=False)
    if completed.returncode != 0:
        return None
    value = completed.stdout.strip()
    return None if value in ("", "<no value>") else value


def image_exists(tag: str) -> bool:
    return _docker("image", "inspect", "--format", "{{.Id}}", tag, check=False).returncode == 0


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """One builder at a time on this machine: parallel test workers share the images."""
    path = Path(tempfile.gettempdir()) / "sandbox-conformance-images.lock"
    handle = _open_lock_file(path)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        os.close(handle)


def _open_lock_file(path: Path) -> int:
    """The lock file, opened read-only once it exists: the base image may be built as root (``sudo``, for debootstrap) and the
    others as a user, and either may have created the file. Opening another user's file in /tmp for writing
    is refused (its mode; ``fs.protected_regular`` refuses O_CREAT), reading it is not, and flock needs
    no more."""
    while True:
        try:
            return os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            pass
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue  # another builder created it meanwhile: open theirs


def _debootstrap() -> str:
    found = shutil.which("debootstrap") or next(
        (p for p in ("/usr/sbin/debootstrap", "/sbin/debootstrap") if os.access(p, os.X_OK)), None)
    if found is None:
        raise ImageError("debootstrap is not installed (apt-get install debootstrap); it builds the base image")
    return found


def ensure_base_image(rebuild: bool = False) -> str:
    """A Debian bookworm rootfs (minbase + python3) imported as BASE_TAG; built only when missing."""
    with _build_lock():
        if image_exists(BASE_TAG) and not rebuild:
            return BASE_TAG
        debootstrap = _debootstrap()
        if os.geteuid() != 0:
            raise ImageError(f"debootstrap must run as root to build the base image: run `sudo {sys.executable} -B "
                             "-m conformance.reference.images base` once; the other images build without root")
        started = time.monotonic()
        _log(f"building {BASE_TAG} with debootstrap from {MIRROR} (about a minute)")
        with tempfile.TemporaryDirectory(prefix="sandbox-conformance-rootfs-") as scratch:
            rootfs = Path(scratch) / "rootfs"
            try:
                completed = subprocess.run(
                    [debootstrap, "--variant=minbase", "--include=python3", "bookworm", str(rootfs), MIRROR],
                    check=False, capture_output=True, text=True, timeout=DEBOOTSTRAP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise ImageError(f"debootstrap did not finish within {DEBOOTSTRAP_TIMEOUT_S:.0f} s") from None
            if completed.returncode != 0:
                lines = (completed.stderr or completed.stdout).strip().splitlines()
                raise ImageError(f"debootstrap failed (exit {completed.returncode}): "
                                 f"{lines[-1] if lines else 'no output'}")
            # Downloaded packages and indexes are dead weight in the image.
            for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for entry in (rootfs / leftover).glob("*"):
                    if entry.is_file():
                        entry.unlink()
            archive = Path(scratch) / "rootfs.tar"
            subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(archive), "."], check=True,
                           capture_output=True, timeout=600)
            with archive.open("rb") as tar:
                _docker("import", "--change", 'CMD ["/bin/bash"]', "--change",
                        "LABEL sandbox-conformance.image=base", "-", BASE_TAG,
                        input_file=tar.fileno(), timeout=DOCKER_TIMEOUT_S)
        _log(f"built {BASE_TAG} in {time.monotonic() - started:.0f} s")
        return BASE_TAG


def _digest(dockerfile: str, tree: Path | None = None) -> str:
    """A digest of what goes into an image: its Dockerfile and the files it copies."""
    digest = hashlib.sha256(dockerfile.encode())
    if tree is not None:
        for path in sorted(tree.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def _build(tag: str, dockerfile: str, package: Path | None = None, rebuild: bool = False,
           extra_inputs: str = "", prepare: Callable[[Path], None] | None = None) -> str:
    """Build ``tag`` from a generated Dockerfile unless an image with the same inputs exists.

    ``extra_inputs`` joins the digest (e.g. the dependency list); ``prepare(context)`` adds to the build
    context what the Dockerfile copies besides the package, and runs only when the image is built."""
    ensure_base_image()
    digest = _digest(dockerfile + extra_inputs, package)
    with _build_lock():
        if image_label(tag, DIGEST_LABEL) == digest and not rebuild:
            return tag
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="sandbox-conformance-context-") as context:
            (Path(context) / "Dockerfile").write_text(dockerfile)
            if package is not None:
                shutil.copytree(package, Path(context) / "conformance",
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            if prepare is not None:
                prepare(Path(context))
            # The classic builder: no buildx plugin needed, and it never pulls a FROM image it has.
            env = {**os.environ, "DOCKER_BUILDKIT": "0"}
            _docker("build", "--quiet", "--pull=false", "--label", f"{DIGEST_LABEL}={digest}", "--tag", tag,
                    context, timeout=DOCKER_TIMEOUT_S, env=env)
        _log(f"built {tag} in {time.monotonic() - started:.1f} s")
        return tag


def ensure_sandbox_image(rebuild: bool = False) -> str:
    """What the Docker-backed reference plugin's sandboxes run."""
    return _build(SANDBOX_TAG, SANDBOX_DOCKERFILE, rebuild=rebuild)


def package_source() -> Path:
    """The ``conformance`` package this process runs: the repository's or the installed one."""
    return Path(conformance.__file__).resolve().parent


def ensure_rest_server_image(rebuild: bool = False) -> str:
    """The forkd-compatible reference REST server, from this process's ``conformance`` source."""
    return _build(REST_SERVER_TAG, REST_SERVER_DOCKERFILE, package=package_source(), rebuild=rebuild)


def suite_requirements() -> list[str]:
    """The suite's runtime dependencies, as its installed metadata states them (extras left out)."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        declared = requires("sandbox-conformance") or []
    except PackageNotFoundError:
        raise ImageError("sandbox-conformance is not installed (pip install -e .): its dependencies are "
                         "unknown") from None
    return sorted(r.split(";")[0].strip() for r in declared if "extra ==" not in r)


def _install_suite_dependencies(site: Path) -> None:
    """pip on the host installs wheels for the base image's CPython into ``site`` (no pip in the image)."""
    machine = platform.machine()
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
               "--target", str(site), "--python-version", SUITE_PYTHON_VERSION, "--implementation", "cp",
               "--only-binary=:all:", "--platform", f"manylinux2014_{machine}",
               "--platform", f"manylinux_2_28_{machine}", *suite_requirements()]
    try:
        completed = subprocess.run(command, check=False, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ImageError(f"pip did not install the suite's dependencies within {PIP_TIMEOUT_S:.0f} s") from None
    if completed.returncode != 0:
        lines = (completed.stderr or completed.stdout).strip().splitlines()
        raise ImageError(f"pip could not install the suite's dependencies: {lines[-1] if lines else 'no output'}")
    # Console scripts written for the host's interpreter would not run in the image.
    shutil.rmtree(site / "bin", ignore_errors=True)


def _prepare_suite_context(context: Path) -> None:
    # The package carries features, steps and schemas inside it, as the wheel does (bundle.root()).
    packaged = context / "conformance" / "_bundle"
    for folder in (bundle.features_dir(), bundle.steps_dir(), bundle.schemas_dir()):
        shutil.copytree(folder, packaged / folder.name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    launcher = context / "sandbox-conformance"
    launcher.write_text(SUITE_LAUNCHER)
    launcher.chmod(0o755)
    _install_suite_dependencies(context / "site")


def _suite_inputs() -> str:
    """What the suite image holds besides the package: its dependencies and the bundled data."""
    digest = hashlib.sha256("\n".join([*suite_requirements(), platform.machine()]).encode() + SUITE_LAUNCHER.encode())
    for folder in (bundle.features_dir(), bundle.steps_dir(), bundle.schemas_dir()):
        digest.update(_digest(folder.name, folder).encode())
    return digest.hexdigest()


def ensure_suite_image(rebuild: bool = False) -> str:
    """The suite itself with its dependencies, from this process's ``conformance`` source."""
    return _build(SUITE_TAG, SUITE_DOCKERFILE, package=package_source(), rebuild=rebuild,
                  extra_inputs=_suite_inputs(), prepare=_prepare_suite_context)


BUILDERS = {"base": ensure_base_image, "sandbox": ensure_sandbox_image, "rest-server": ensure_rest_server_image,
            "suite": ensure_suite_image}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.reference.images",
                                     description="Build the images the suite's Docker paths need, locally.")
    parser.add_argument("which", nargs="?", default="all", choices=(*BUILDERS, "all"))
    parser.add_argument("--rebuild", action="store_true", help="build even when the image exists")
    args = parser.parse_args(argv)
    chosen = list(BUILDERS) if args.which == "all" else [args.which]
    try:
        for name in chosen:
            started = time.monotonic()
            tag = BUILDERS[name](rebuild=args.rebuild)
            print(f"{name}: {tag} ({time.monotonic() - started:.1f} s)")
    except ImageError as error:
        print(f"images: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
