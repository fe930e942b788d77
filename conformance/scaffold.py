"""``sandbox-conformance init``: a configuration file naming one provider, a GitHub Actions workflow that
runs the suite with it, and an empty baseline — written only where no file is, unless ``--force``."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

from conformance.config_file import FILE_NAME
from conformance.errors import UsageError
from conformance.providers import ProviderConfig, file_sha256, plugin_executable

WORKFLOW = Path(".github/workflows/sandbox-conformance.yml")
BASELINE = "conformance-baseline.yaml"
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
        source = Path(_argv(args.plugin)[0]).name
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


def config_text(args: argparse.Namespace, name: str) -> str:
    lines = ["# sandbox-conformance configuration: `sandbox-conformance run` reads it from this directory or",
             "# below; flags override every value. Relative paths are relative to this file.",
             f"provider = {_toml(name)}",
             'report-dir = "reports"',
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
        lines.append(f"plugin = {_toml(args.plugin)}")
        lines.append("# the plugin executable's digest, checked before it starts; after a rebuild run")
        lines.append("# `sandbox-conformance init --plugin ... --force` or `doctor`, which prints the new one")
        lines.append(f"sha256 = {_toml(file_sha256(executable))}")
        lines.append('dialect = "auto"')
    else:
        lines.append(f"rest = {_toml(args.rest)}" if args.rest else f"image = {_toml(args.image)}")
        lines.append(f"profile = {_toml(args.profile or 'forkd')}")
    lines += ["# env = { LOG = \"debug\" }         # handed to the provider; values are redacted everywhere",
              "# pass-env = [\"MY_TOKEN\"]         # forwarded from the environment; values are redacted",
              "# create-spec = \"@spec.json\"      # or an inline table",
              "call-timeout = 30", ""]
    return "\n".join(lines)


def workflow_text(name: str) -> str:
    return f"""\
# Runs the sandbox-conformance suite against the provider '{name}' of sandbox-conformance.toml.
# The suite's composite action (action.yml at the root of its repository; inputs plugin / rest / image /
# config / args / report-dir) does the same in one step; this workflow spells it out.
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
        run: pip install sandbox-conformance
      - name: Run the conformance suite
        run: sandbox-conformance run --config {FILE_NAME}
      - name: Keep the reports
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: sandbox-conformance-reports
          path: reports/
"""


def write(args: argparse.Namespace) -> list[Path]:
    """Write the three files; ``UsageError`` naming the first that exists (without --force)."""
    if args.profile is not None and args.plugin:
        raise UsageError("--profile applies to REST providers only (give --rest or --image)")
    directory = Path(args.dir)
    if not directory.is_dir():
        raise UsageError(f"--dir {args.dir}: no such directory")
    name = provider_name(args)
    files = {directory / FILE_NAME: config_text(args, name), directory / WORKFLOW: workflow_text(name),
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
    return list(files)
