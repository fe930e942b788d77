"""``sandbox-conformance init``: a configuration file naming one provider, a GitHub Actions workflow that
runs the suite with it, and an empty baseline — written only where no file is, unless ``--force``."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
from pathlib import Path

from conformance.config_file import FILE_NAME
from conformance.errors import UsageError
from conformance.providers import ProviderConfig, file_sha256, interpreted_script, plugin_executable

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


def workflow_text(name: str) -> str:
    return f"""\
# Runs the sandbox-conformance suite against the provider '{name}' of {FILE_NAME}, with the
# suite's composite action (action.yml at the root of its repository): it sets up Python, installs the
# suite from its own checkout, runs it, uploads the reports and leaves the summary on the job's page.
name: sandbox-conformance
on:
  push:
  pull_request:
jobs:
  conformance:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      # Build or install your provider here, so the command (and its sha256 pin) in the file match.
      # OWNER/sandbox-conformance@REF: the suite's repository and a tag or commit of it (the ref is the
      # version of the suite that runs); replace both before the first push.
      - uses: OWNER/sandbox-conformance@REF
        id: conformance
        with:
          config: {FILE_NAME}
          report-dir: reports          # the file's report-dir; the action uploads this directory
          artifact-name: sandbox-conformance-reports
# steps.conformance.outputs.verdict is pass, fail or none (the suite could not run)
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
