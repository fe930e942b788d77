"""The run step of the repository's GitHub Action (``action.yml``), usable from any CI job.

    python -m conformance.ci_action

Reads the action's inputs from ``INPUT_<NAME>`` environment variables (the name upper-cased, ``-``
as ``_``: ``INPUT_REPORT_DIR``), builds the ``sandbox-conformance run`` argument vector from them,
runs the suite in this process and writes the step's outputs (``verdict``, ``exit-code``,
``report-dir``) to ``$GITHUB_OUTPUT`` when that is set. Its exit code is the suite's.

No input ever reaches a shell: each value becomes one ``--option=value`` element (so a value starting
with ``-`` is still a value), and ``args`` is split like a shell would split it, but never run through
one — ``$(...)``, ``;`` and backquotes stay literal text. The argument vector is not printed: ``args``
may carry ``--env NAME=VALUE``, whose value is a secret.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

from conformance import cli
from conformance.inert import inert_line

# action input → the `run` option it becomes, passed only when the input is set. `config` and
# `provider` select a provider from a configuration file; a suite without those options refuses them
# with exit 2, like any unknown option.
OPTION_INPUTS: dict[str, str] = {
    "plugin": "--plugin",
    "rest": "--rest",
    "image": "--image",
    "profile": "--profile",
    "dialect": "--dialect",
    "config": "--config",
    "provider": "--provider",
    "shard": "--shard",
}
ARGS_INPUT = "args"
REPORT_DIR_INPUT = "report-dir"
DEFAULT_REPORT_DIR = "conformance-report"
# Every input this script reads; action.yml maps each onto its environment variable (a test checks).
INPUTS: tuple[str, ...] = (*OPTION_INPUTS, ARGS_INPUT, REPORT_DIR_INPUT)


class InputError(ValueError):
    """An input the action cannot use; the message names it in one line."""


def env_name(input_name: str) -> str:
    """The environment variable that carries an action input: ``report-dir`` → ``INPUT_REPORT_DIR``."""
    return "INPUT_" + input_name.upper().replace("-", "_").replace(" ", "_")


def _input(environ: Mapping[str, str], name: str) -> str:
    return environ.get(env_name(name), "").strip()


def report_dir(environ: Mapping[str, str]) -> Path:
    """Where the reports go: the ``report-dir`` input, relative to the working directory, made absolute."""
    given = _input(environ, REPORT_DIR_INPUT) or DEFAULT_REPORT_DIR
    if "\n" in given or "\r" in given:
        raise InputError("report-dir: a directory name cannot contain a line break")
    return Path(given).resolve()


def run_arguments(environ: Mapping[str, str]) -> list[str]:
    """The ``sandbox-conformance`` argument vector (starting with ``run``) the inputs describe."""
    argv = ["run"]
    for name, option in OPTION_INPUTS.items():
        value = _input(environ, name)
        if value:
            argv.append(f"{option}={value}")
    argv.append(f"--report-dir={report_dir(environ)}")
    try:
        extra = shlex.split(_input(environ, ARGS_INPUT))
    except ValueError as error:  # an unbalanced quote
        raise InputError(f"args: {error} in the extra arguments") from None
    # The upload step and the report-dir output follow the input; a second --report-dir would win silently.
    if any(arg == "--report-dir" or arg.startswith("--report-dir=") for arg in extra):
        raise InputError("args: --report-dir belongs in the report-dir input (the upload step reads it)")
    argv.extend(extra)
    return argv


def results_stamp(reports: Path) -> tuple[int, int, int] | None:
    """What tells one results.json from the next: inode, modification time (ns) and size; None when absent."""
    try:
        status = (reports / "results.json").stat()
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns, status.st_size


def verdict_of(reports: Path, before: tuple[int, int, int] | None = None, code: int = 0) -> str:
    """``pass`` or ``fail`` from the results.json this run wrote; ``none`` when it wrote none: a usage error
    (exit 2), or a results.json unchanged since ``before`` (an earlier run's, left in the report dir)."""
    if code not in (0, 1) or results_stamp(reports) in (None, before):
        return "none"
    try:
        document = json.loads((reports / "results.json").read_text(encoding="utf-8"))
        return "pass" if document["verdict"]["passed"] else "fail"
    except (OSError, ValueError, KeyError, TypeError):
        return "none"


def write_outputs(path: str, outputs: Mapping[str, str]) -> None:
    """Append step outputs to ``$GITHUB_OUTPUT`` in the delimited form, which no value can break out of."""
    with open(path, "a", encoding="utf-8") as handle:
        for name, value in outputs.items():
            delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
            handle.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def main(environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    try:
        argv = run_arguments(environ)
        reports = report_dir(environ)
    except InputError as error:
        print(f"sandbox-conformance action: {inert_line(str(error))}", file=sys.stderr)
        code, reports, before = 2, None, None
    else:
        before = results_stamp(reports)  # a results.json of an earlier run must not answer for this one
        try:
            code = cli.main(argv)
        except SystemExit as exit:  # argparse refusing an option (its one line is already on stderr)
            code = exit.code if isinstance(exit.code, int) else 2
    outputs_file = environ.get("GITHUB_OUTPUT")
    if outputs_file:
        write_outputs(outputs_file, {"verdict": verdict_of(reports, before, code) if reports else "none",
                                     "exit-code": str(code), "report-dir": str(reports or "")})
    return code


if __name__ == "__main__":
    sys.exit(main())
