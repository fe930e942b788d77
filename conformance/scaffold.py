"""``sandbox-conformance init``: a configuration file naming one provider (its plugin pinned by sha256 with
``--pin`` only), a GitHub Actions workflow that runs the suite with it, and an empty baseline. A baseline or
workflow that exists is never rewritten; a configuration file that exists only with ``--force``, and then
by line: the keys init's arguments say change, every other line stays (``updated_config``)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from pathlib import Path

from conformance.config_file import FILE_NAME
from conformance.errors import UsageError
from conformance.providers import ProviderConfig, file_sha256, interpreted_script, plugin_executable
from conformance.toml_lines import TomlLines

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
             provider_table(args, name)]
    return "\n".join(lines)


def provider_table(args: argparse.Namespace, name: str) -> str:
    """The ``[providers.NAME]`` table init writes: the provider its arguments name, a plugin's sha256 pin
    only with --pin (a pin refuses every edit of the plugin until it is renewed: opt-in)."""
    lines = [f"[providers.{_toml_key(name)}]"]
    if args.plugin:
        argv = _argv(args.plugin)
        lines.append(f"plugin = {_toml(_plugin_for_file(argv, Path(args.dir)))}")
        if getattr(args, "pin", False):
            lines.append(f"# the digest of the plugin {'script (not its interpreter)' if interpreted_script(argv) else 'executable'}"
                         ", checked before it starts; after")
            lines.append("# a change, `sandbox-conformance pin` renews it (this line only)")
            lines.append(f"sha256 = {_toml(_digest(args))}")
        else:
            lines.append("# sha256 = \"…\"                  # `sandbox-conformance pin` writes it: a changed plugin is refused")
        lines.append('dialect = "auto"')
    else:
        lines.append(f"rest = {_toml(args.rest)}" if args.rest else f"image = {_toml(args.image)}")
        lines.append(f"profile = {_toml(args.profile or 'forkd')}")
    lines += ["# env = { LOG = \"debug\" }         # handed to the provider; values are redacted everywhere",
              "# pass-env = [\"MY_TOKEN\"]         # forwarded from the environment; values are redacted",
              "# create-spec = \"@spec.json\"      # or an inline table",
              "call-timeout = 30", ""]
    return "\n".join(lines)


def _pinned_file(args: argparse.Namespace) -> str:
    """The file a pin of ``--plugin`` covers (the script an interpreter runs, else the executable); init
    refuses a plugin that is not there, pinned or not: a typo shows now, not at the first run."""
    argv = _argv(args.plugin)
    executable = plugin_executable(ProviderConfig(plugin=args.plugin))
    if executable is None:
        raise UsageError(f"plugin executable not found: {argv[0]} (no such file, nor a name on PATH)")
    return interpreted_script(argv) or executable


def _digest(args: argparse.Namespace) -> str:
    return file_sha256(_pinned_file(args))


def updated_config(path: Path, args: argparse.Namespace, name: str) -> str:
    """``init --force`` over an existing file: the keys init's arguments say (``provider`` and the named
    provider's kind, profile and pin) rewritten by line; every other line, the author's settings and comments
    among them, kept as it is. A pin is written with --pin, renewed where the table already had one."""
    from conformance.config_file import PROVIDER_KINDS, ConfigFile, _check_schema
    from conformance.user_input import read_text

    text = read_text(path, str(path), 1024**2)
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML ({exc}): fix it, or move it aside and run init again") from None
    lines = TomlLines(text)
    lines.set((), "provider", _toml(name))
    table = ("providers", name)
    if not lines.has_table(table):
        lines.append(provider_table(args, name))
    else:
        kind = "plugin" if args.plugin else "rest" if args.rest else "image"
        where = _plugin_for_file(_argv(args.plugin), Path(args.dir)) if args.plugin else args.rest or args.image
        lines.set(table, kind, _toml(where), after=PROVIDER_KINDS)  # a provider of another kind: in its place
        for other in PROVIDER_KINDS:
            if other != kind:
                lines.remove(table, other)
        if args.plugin:
            lines.remove(table, "profile")
            if getattr(args, "pin", False) or lines.has_key(table, "sha256"):
                lines.set(table, "sha256", _toml(_digest(args)), after=("plugin",))
        else:
            lines.set(table, "profile", _toml(args.profile or "forkd"), after=(kind,))
            lines.remove(table, "sha256")
    try:
        merged = tomllib.loads(lines.text)
    except tomllib.TOMLDecodeError as exc:  # a layout the line edits cannot follow (a dotted key, ...)
        raise UsageError(f"{path} cannot be updated by line ({exc}): move it aside and run init again") from None
    _check_schema(ConfigFile(path.resolve(), merged), "")
    return lines.text


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


# Why init leaves a file that exists: the author's build steps, the author's known failures.
KEPT_WORKFLOW = "init never rewrites a workflow: delete it for a fresh one"
KEPT_BASELINE = "init never rewrites a baseline"


def write(args: argparse.Namespace) -> list[str]:
    """Write the files, one line of output each. A baseline or a workflow that exists is kept (it holds the
    author's entries and build steps); a configuration file that exists is refused without --force and, with
    it, updated by line (``updated_config``). ``UsageError`` names the refused file; nothing is written then."""
    if args.profile is not None and args.plugin:
        raise UsageError("--profile applies to REST providers only (give --rest or --image)")
    if getattr(args, "pin", False) and not args.plugin:
        raise UsageError("--pin pins a plugin file: it needs --plugin")
    directory = Path(args.dir)
    if not directory.is_dir():
        raise UsageError(f"--dir {args.dir}: no such directory")
    name = provider_name(args)
    if args.plugin:
        _pinned_file(args)
    config = directory / FILE_NAME
    if config.exists() and not args.force:
        raise UsageError(f"{config} exists (give --force to update its provider, keeping every other line)")
    if config.exists():
        said = f"updated {config} (provider {name}; every other line kept)"
        files = {config: (updated_config(config, args, name), said)}
    else:
        files = {config: (config_text(args, name), f"wrote {config}")}
    workflow = directory / WORKFLOW
    requirement, unreachable = (None, None) if workflow.exists() else suite_requirement()
    for path, text, kept in ((workflow, workflow_text(name, requirement), KEPT_WORKFLOW),
                             (directory / BASELINE, EMPTY_BASELINE, KEPT_BASELINE)):
        files[path] = (None, f"kept {path} ({kept})") if path.exists() else (text, f"wrote {path}")
    for path, (text, _) in files.items():
        if text is None:
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{path} cannot be written: {exc.strerror}") from None
    if unreachable:
        print(f"sandbox-conformance: note: {unreachable}", file=sys.stderr)
    return [said for _, said in files.values()]


# -- init --template: a provider to start from ----------------------------------------------------------

# Each template (``examples/<name>/``): the file the configuration points at, and for REST the profile.
# v2, v1 and sketch are plugins run by an interpreter; rest is a server the suite reaches by URL.
TEMPLATES = {"v2": "plugin.py", "v1": "plugin.py", "sketch": "plugin.py", "rest": "profile.yaml"}
REST_PROFILE = "profile.yaml"
# Where a REST template's server is reached when its profile names no base_url; its README says how to start it.
REST_URL_PLACEHOLDER = "http://127.0.0.1:8080"
INTERPRETER = "python3"
SKIPPED = ("__pycache__", ".pyc")


def template_root() -> Path:
    """The folder holding the templates: inside the wheel, or the repository's ``examples/``."""
    from conformance import bundle

    return bundle.examples_dir()


def template_files(name: str) -> tuple[Path, list[Path]]:
    """A template's folder and its files (relative to it); ``UsageError`` when it is unknown or not installed."""
    if name not in TEMPLATES:
        raise UsageError(f"--template {name!r} is unknown; valid: {', '.join(TEMPLATES)}")
    folder = template_root() / name
    if not (folder / TEMPLATES[name]).is_file():
        raise UsageError(f"template {name} is not installed: {folder / TEMPLATES[name]} is missing")
    files = sorted(path.relative_to(folder) for path in folder.rglob("*")
                   if path.is_file() and not any(part.endswith(SKIPPED) for part in path.parts))
    return folder, files


def _rest_url(profile: Path) -> str:
    """The URL the copied profile says its server listens on (``base_url``), else the placeholder."""
    import yaml

    try:
        document = yaml.safe_load(profile.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return REST_URL_PLACEHOLDER
    url = document.get("base_url") if isinstance(document, dict) else None
    return url if isinstance(url, str) and url else REST_URL_PLACEHOLDER


def template_args(args: argparse.Namespace, folder: Path) -> argparse.Namespace:
    """The arguments ``init --plugin ...`` (or ``--rest URL --profile FILE``) would have been given for the
    template in ``folder`` once copied; the paths as seen from the working directory, as a user types them."""
    name = args.template
    chosen = {"plugin": None, "rest": None, "image": None, "profile": None, "name": args.name or name}
    if name == "rest":
        chosen["rest"] = _rest_url(folder / REST_PROFILE)
        chosen["profile"] = f"./{REST_PROFILE}"  # written as given: relative to the file's directory
    else:
        chosen["plugin"] = shlex.join([INTERPRETER, os.path.join(args.dir, TEMPLATES[name])])
    return argparse.Namespace(**{**vars(args), **chosen})


def write_template(args: argparse.Namespace) -> list[str]:
    """Copy ``examples/<template>/`` into ``--dir``, then write what ``init`` writes for it. Nothing is written
    when a file exists (without --force): ``UsageError`` names the first."""
    if args.profile is not None:
        raise UsageError("--profile does not apply to --template (the rest template brings its own profile)")
    directory = Path(args.dir)
    if not directory.is_dir():
        raise UsageError(f"--dir {args.dir}: no such directory")
    folder, files = template_files(args.template)
    copies = {folder / relative: directory / relative for relative in files}
    chosen = template_args(args, folder)
    provider_name(chosen)  # a bad --name stops it here, before anything is copied
    if chosen.plugin and plugin_executable(ProviderConfig(plugin=INTERPRETER)) is None:
        raise UsageError(f"{INTERPRETER} is not on PATH: the {args.template} template is a Python plugin that runs with it")
    if not args.force:
        for path in [*copies.values(), directory / FILE_NAME]:  # a baseline or workflow that exists is kept
            if path.exists():
                raise UsageError(f"{path} exists (give --force to overwrite it)")
    for source, target in copies.items():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            target.chmod(0o755 if target.suffix == ".py" else 0o644)
        except OSError as exc:
            raise UsageError(f"{target} cannot be written: {exc.strerror}") from None
    return [*(f"wrote {target}" for target in copies.values()), *write(chosen)]
