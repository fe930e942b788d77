"""``sandbox-conformance init``: a configuration file naming one provider, a GitHub Actions workflow that
runs the suite with it, and an empty baseline — written only where no file is, unless ``--force``."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path

from conformance.config_file import FILE_NAME
from conformance.errors import UsageError
from conformance.providers import ProviderConfig, file_sha256, interpreted_script, plugin_executable

WORKFLOW = Path(".github/workflows/sandbox-conformance.yml")
BASELINE = "conformance-baseline.yaml"
REPORT_DIR = "reports"  # the file's report-dir, which the workflow uploads
PACKAGE = "sandbox-conformance"
EMPTY_BASELINE = ("# Known failures (see `sandbox-conformance run --update-baseline`): a listed scenario that fails\n"
                  "# is xfail; one that passes, or an entry that names nothing, fails the run.\n"
                  "expected_failures: []\n")


def _toml(value: str) -> str:
    """A TOML basic string: JSON's escapes (\\", \\\\, \\n, \\uXXXX) are TOML's too."""
    return json.dumps(value)


def _toml_key(name: str) -> str:
    """A bare key where TOML allows one; a dot would split it into nested tables, so that one is quoted."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _toml(name)


def provider_name(args: argparse.Namespace) -> str:
    if args.name:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", args.name):
            raise UsageError(f"--name {args.name!r} must be letters, digits, _ . - (a TOML key)")
        return args.name
    if args.plugin:
        argv = _argv(args.plugin)
        script = interpreted_script(argv)
        source = Path(script).stem if script else Path(argv[0]).name
    elif args.rest:
        source = re.sub(r"^\w+://", "", args.rest).split("/")[0].split(":")[0]
    else:
        source = args.image.rsplit("/", 1)[-1].split(":")[0]
    return re.sub(r"[^A-Za-z0-9_-]+", "-", source).strip("-_") or "provider"


def _argv(command: str) -> list[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"--plugin is not a valid command line: {exc}") from None
    if not argv:
        raise UsageError("--plugin is empty")
    return argv


def _plugin_for_file(argv: list[str], directory: Path) -> str:
    """The plugin command as the file must say it: the file resolves relative paths (the executable's and
    an interpreter's script) against its own directory, the command line against the working directory."""
    script = interpreted_script(argv)
    paths = [0] if "/" in argv[0] else []
    if script is not None:
        paths.append(argv.index(script, 1))
    rewritten = list(argv)
    for index in paths:
        if not os.path.isabs(os.path.expanduser(argv[index])):
            relative = os.path.relpath(Path.cwd() / argv[index], directory.resolve())
            rewritten[index] = relative if "/" in relative else f"./{relative}"  # a bare name would mean PATH
    return shlex.join(rewritten)


def config_text(args: argparse.Namespace, name: str) -> str:
    lines = ["# sandbox-conformance configuration: `run`, `sweep` and `doctor` find it when started in this",
             "# directory or one below it (they look in the working directory, then each one above it; here this",
             "# file wins over a pyproject.toml). Flags override every value. Relative paths are relative to this file.",
             f"provider = {_toml(name)}",
             f"report-dir = {_toml(REPORT_DIR)}",
             'report-formats = ["junit", "markdown", "html", "badge"]',
             f"expected-failures = {_toml(BASELINE)}",
             "strict = false",
             "",
             "[selection]",
             '# tags = "must"                 # a tag expression, as --tags',
             "",
             f"[providers.{_toml_key(name)}]"]
    if args.plugin:
        argv = _argv(args.plugin)
        executable = plugin_executable(ProviderConfig(plugin=args.plugin))
        if executable is None:
            raise UsageError(f"plugin executable not found: {argv[0]} (init pins its sha256, so it must exist)")
        script = interpreted_script(argv)
        lines.append(f"plugin = {_toml(_plugin_for_file(argv, Path(args.dir)))}")
        lines.append(f"# the digest of the plugin {'script (not its interpreter)' if script else 'executable'}, "
                     "checked before it starts; after")
        lines.append("# a change run `sandbox-conformance init --plugin ... --force` or `doctor`, which prints the new one")
        lines.append(f"sha256 = {_toml(file_sha256(script or executable))}")
        lines.append('dialect = "auto"')
    else:
        lines.append(f"rest = {_toml(args.rest)}" if args.rest else f"image = {_toml(args.image)}")
        lines.append(f"profile = {_toml(args.profile or 'forkd')}")
    lines += ["# env = { LOG = \"debug\" }         # handed to the provider; values are redacted everywhere",
              "# pass-env = [\"MY_TOKEN\"]         # forwarded from the environment; values are redacted",
              "# create-spec = \"@spec.json\"      # or an inline table",
              "call-timeout = 30", ""]
    return "\n".join(lines)


def suite_requirement() -> tuple[str, str | None]:
    """What ``pip install`` takes in CI to install this very suite, and why it might not reach it (None where it
    names where this copy came from). A copy installed from git is named by that URL and commit; one from a git
    checkout with a remote, by the remote and the checkout's commit; any other, by its version on the package
    index (the only reference known)."""
    import importlib.metadata

    try:
        distribution = importlib.metadata.distribution(PACKAGE)
        origin = json.loads(distribution.read_text("direct_url.json") or "null")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        origin = None
    from conformance import __version__

    indexed = f"{PACKAGE}=={__version__}"
    if not isinstance(origin, dict):
        return indexed, None  # installed from a package index: the same index serves CI
    url, vcs = str(origin.get("url", "")), origin.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and url.startswith("https://") and vcs.get("commit_id"):
        return f"{PACKAGE} @ git+{url}@{vcs['commit_id']}", None
    if url.startswith("file://"):
        remote = _git_remote(Path(url.removeprefix("file://")))
        if remote is not None:
            return f"{PACKAGE} @ git+{remote[0]}@{remote[1]}", None
    return indexed, (f"this copy of the suite came from {url}, which CI cannot reach: the workflow installs "
                     f"{indexed} from the package index; edit its pip install line if that index lacks it")


def _git_remote(directory: Path) -> tuple[str, str] | None:
    """(https URL of ``origin``, commit checked out) of a git checkout, or None."""
    import subprocess

    def git(*words: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(directory), *words], capture_output=True, text=True, timeout=10,
                                  check=False)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    url, commit = git("config", "--get", "remote.origin.url"), git("rev-parse", "HEAD")
    scp = re.fullmatch(r"git@([^:/]+):(.+)", url)  # git@github.com:owner/repo.git
    url = f"https://{scp[1]}/{scp[2]}" if scp else url
    return (url, commit) if url.startswith("https://") and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def workflow_text(name: str, requirement: str | None = None) -> str:
    """A workflow that runs on its first push: it installs the suite with pip from a reference that exists
    (``suite_requirement``), never a placeholder to replace."""
    requirement = requirement or suite_requirement()[0]
    return f"""\
# Runs the sandbox-conformance suite against the provider '{name}' of {FILE_NAME}:
# installs the suite, runs it with the file (the summary lands on the job's page), uploads the reports.
name: sandbox-conformance
on:
  push:
  pull_request:
jobs:
  conformance:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      # Build or install your provider here, so the command (and its sha256 pin) in the file match.
      - name: Install sandbox-conformance
        run: python -m pip install {shlex.quote(requirement)}
      - name: Run the conformance suite
        run: sandbox-conformance run --config {FILE_NAME}
      - name: Upload the reports
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: sandbox-conformance-reports
          path: {REPORT_DIR}          # the file's report-dir
          if-no-files-found: warn
"""


def write(args: argparse.Namespace) -> list[Path]:
    """Write the three files; ``UsageError`` naming the first that exists (without --force)."""
    if args.profile is not None and args.plugin:
        raise UsageError("--profile applies to REST providers only (give --rest or --image)")
    directory = Path(args.dir)
    if not directory.is_dir():
        raise UsageError(f"--dir {args.dir}: no such directory")
    name = provider_name(args)
    requirement, unreachable = suite_requirement()
    files = {directory / FILE_NAME: config_text(args, name), directory / WORKFLOW: workflow_text(name, requirement),
             directory / BASELINE: EMPTY_BASELINE}
    if not args.force:
        for path in files:
            if path.exists():
                raise UsageError(f"{path} exists (give --force to overwrite it)")
    for path, text in files.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{path} cannot be written: {exc.strerror}") from None
    if unreachable:
        print(f"sandbox-conformance: note: {unreachable}", file=sys.stderr)
    return list(files)
