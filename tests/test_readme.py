"""README.md's commands work as written after its set-up (`make setup`, which creates `.venv`).

The README's convention (stated under "Two commands"): commands are typed from the repository root and call
what `make setup` installed as `.venv/bin/…`. Every command line of its fenced shell blocks, and every inline
command written with that prefix, is checked here:

- its program is one the set-up provides (`.venv/bin/…`, `make`) or an ordinary system tool;
- every `sandbox-conformance …` parses with the CLI's own parser (placeholders such as RUN_ID or
  /path/to/my-plugin are valid arguments, so nothing is substituted) — also the one run inside `docker run`;
- the cheap ones that need no provider run for real (in-process through `cli.main`, and one through the
  console script and one `python -m` as real processes) and exit 0 without a traceback;
- every `make X` (also inline in the prose) names a target of the Makefile, every `.venv/bin/X` an installed program, every
  `python -m X` / script a file of the checkout;
- and every repository path the README or ARCHITECTURE.md names in backticks or links exists.

What is not run, and why, is spelled out in NOT_RUN / NOT_RUN_PROGRAMS below.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance import cli
from conformance.errors import UsageError

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
ARCHITECTURE = REPO / "ARCHITECTURE.md"
MAKEFILE = REPO / "Makefile"
# `.venv/bin` as written in the README is the bin directory of the environment `make setup` made; these
# tests run in that environment (or, in a worktree, in the one its package was installed into).
VENV_PREFIX = ".venv/bin/"
VENV_BIN = Path(sys.executable).parent

SHELL_LANGUAGES = {"sh", "bash", "shell", "console"}
SHELL_OPERATORS = {"&&", "||", ";", "&", "|"}
# Ordinary tools of the reader's machine, not of the set-up; nothing of theirs is checked but docker's
# inner `sandbox-conformance` command.
SYSTEM_PROGRAMS = {"export", "mkdir", "docker", "xdg-open", "cd"}

# `sandbox-conformance` subcommands run for real: cheap, and need nothing but the checkout.
RUN_FOR_REAL = {"list", "lint", "explain", "doctor", "--version"}
# ... and why the others are only parsed (every subcommand the README uses must be in one of the two).
NOT_RUN = {
    "run": "needs the reader's provider, or without --plugin is the whole reference battery (minutes: "
           "`make run`; tests/test_reference_run.py runs it)",
    "sweep": "deletes a past run's sandboxes on the reader's provider",
    "serve": "serves in the foreground until stopped (tests/test_rest.py starts it)",
    "init": "writes files for the reader's plugin, a placeholder path here (tests/test_init_doctor.py)",
    "pin": "rewrites a line of the reader's configuration file (tests/test_pin.py)",
    "report": "merges results.json files of runs that exist only where the reader ran them "
              "(tests/test_shard.py, tests/test_report_matrix.py)",
}
NOT_RUN_PROGRAMS = {
    "make": "its targets take minutes (the battery, our own tests, Docker images, benchmarks); only that "
            "each target exists is checked",
    "docker": "needs a Docker engine and the local images",
    "sandbox-conformance-docker-plugin": "needs a Docker engine; its arguments are parsed",
    "python": "the modules the README starts run whole batteries or servers, except those in CHEAP_PYTHON",
}
# `python` command lines (after `.venv/bin/python`) cheap enough to run: cwd is the checkout.
CHEAP_PYTHON = {("-m", "tests.mutants.launch", "list")}

# Single-token backticked names or link targets starting so are files of this repository (`reports/…`,
# `.github/…` are what a run or `init` writes, not files of the checkout).
REPO_PATH_PREFIXES = ("conformance/", "schemas/", "features/", "steps/", "tests/", "examples/", "benchmarks/",
                      ".ci/")
# Named by the documents but made by a build, not kept in the checkout.
BUILT_PATHS = {"conformance/_bundle/": "the wheel build copies features, steps and schemas there (gitignored)"}


@dataclass(frozen=True)
class Command:
    where: str                # README.md:LINE
    words: tuple[str, ...]    # one simple command, environment assignments left out


# -- reading the Markdown --------------------------------------------------------------------------


def fenced_blocks(markdown: str) -> list[tuple[str, int, list[str]]]:
    """(language, line number of the first content line, content lines without the fence's indent)."""
    blocks: list[tuple[str, int, list[str]]] = []
    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        opening = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)", lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, language = opening.groups()
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            body.append(lines[index].removeprefix(indent))
            index += 1
        blocks.append((language.lower(), index - len(body) + 1, body))
        index += 1
    return blocks


def without_fenced_blocks(markdown: str) -> str:
    """The prose: each fenced block blanked out, its line breaks kept so line numbers stay true."""
    return re.sub(r"^(\s*)(`{3,}|~{3,}).*?^\s*\2[ \t]*$", lambda block: "\n" * block.group(0).count("\n"),
                  markdown, flags=re.DOTALL | re.MULTILINE)


def command_lines(language: str, first_line: int, body: list[str]) -> list[tuple[int, str]]:
    """The logical command lines of a shell block: `\\` continuations joined; in a console block only
    `$ ` lines (the rest is output), in the others every line; comment-only lines left out."""
    commands: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for offset, line in enumerate(body):
        if pending is None:
            if language == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            pending = (first_line + offset, "")
        text = pending[1] + line
        if text.endswith("\\"):
            pending = (pending[0], text[:-1] + " ")
            continue
        commands.append((pending[0], text))
        pending = None
    if pending is not None:
        commands.append(pending)
    return commands


def simple_commands(where: str, line: str) -> list[Command]:
    """A command line's simple commands (split at &&, ;, & and |), without `NAME=value` prefixes."""
    commands, words = [], []
    for word in [*shlex.split(line, comments=True), ";"]:
        if word not in SHELL_OPERATORS:
            words.append(word)
            continue
        while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
            words.pop(0)
        if words:
            commands.append(Command(where, tuple(words)))
        words = []
    return commands


def typed_commands(markdown: str, name: str) -> list[Command]:
    """Every command of the file's shell blocks, and every inline one written with `.venv/bin/` or `make`."""
    commands: list[Command] = []
    for language, first_line, body in fenced_blocks(markdown):
        if language in SHELL_LANGUAGES:
            for line_number, line in command_lines(language, first_line, body):
                commands.extend(simple_commands(f"{name}:{line_number}", line))
    prose = without_fenced_blocks(markdown)
    for span in re.finditer(r"`([^`]+)`", prose):
        if re.match(rf"({re.escape(VENV_PREFIX)}[\w.-]+|make [\w-]+)(\s|$)", span.group(1)):
            line_number = prose.count("\n", 0, span.start()) + 1
            commands.extend(simple_commands(f"{name}:{line_number}", " ".join(span.group(1).split())))
    return commands


# -- judging one command ---------------------------------------------------------------------------


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", MAKEFILE.read_text(), flags=re.MULTILINE))


def cli_parse_problem(argv: list[str]) -> str | None:
    """Why `sandbox-conformance ARGV` does not parse, or None."""
    own, _pytest_args = cli.split_pytest_arguments(argv)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # --version prints
            cli.build_parser().parse_args(own)
    except UsageError as exc:
        return f"does not parse: {exc}"
    except SystemExit as exc:
        if exc.code not in (0, None):
            return f"does not parse: exit {exc.code}"
    return None


def docker_plugin_parse_problem(argv: list[str]) -> str | None:
    from conformance.reference.docker_plugin import build_parser

    parser = build_parser()
    parser.exit_on_error = False
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            parser.parse_args(argv)
    except (argparse.ArgumentError, SystemExit) as exc:
        return f"does not parse: {exc}"
    return None


def python_target_problem(argv: list[str]) -> str | None:
    """`python -m MODULE` / `python SCRIPT`: the module or script is a file of the checkout."""
    if argv[:1] == ["-m"] and len(argv) > 1:
        module = REPO.joinpath(*argv[1].split("."))
        if module.with_suffix(".py").is_file() or (module / "__main__.py").is_file():
            return None
        return f"module {argv[1]} is no file of the checkout"
    if argv and argv[0].endswith(".py"):
        return None if (REPO / argv[0]).is_file() else f"script {argv[0]} does not exist"
    return None


def command_problems(command: Command) -> list[str]:
    """What is wrong with one README command; empty when it works as written."""
    program, argv = command.words[0], list(command.words[1:])
    problems = [f"{VENV_PREFIX}{name} is not installed by `make setup`"
                for word in command.words for name in re.findall(r"(?:^|\s)\.venv/bin/([\w.-]+)", word)
                if not (VENV_BIN / name).is_file()]
    if program == "make":
        problems += [f"no Makefile target {target!r}" for target in argv
                     if not target.startswith("-") and "=" not in target and target not in makefile_targets()]
    elif program == f"{VENV_PREFIX}sandbox-conformance":
        problems.append(cli_parse_problem(argv))
        subcommand = next((word for word in argv if not word.startswith("-") or word == "--version"), "")
        if subcommand not in RUN_FOR_REAL and subcommand not in NOT_RUN:
            problems.append(f"subcommand {subcommand!r} is neither run here nor says why not (NOT_RUN)")
    elif program == f"{VENV_PREFIX}sandbox-conformance-docker-plugin":
        problems.append(docker_plugin_parse_problem(argv))
    elif program == f"{VENV_PREFIX}python":
        problems.append(python_target_problem(argv))
    elif program == "docker":
        # the suite's image runs the CLI inside it: that command must parse too
        if "sandbox-conformance" in argv:
            problems.append(cli_parse_problem(argv[argv.index("sandbox-conformance") + 1:]))
    elif program not in SYSTEM_PROGRAMS:
        problems.append(f"{program!r} is not what the set-up provides: call it as {VENV_PREFIX}…, "
                        f"the README's convention (see 'Two commands')")
    return [f"{command.where}: {shlex.join(command.words)}: {problem}" for problem in problems if problem]


def run_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str | None:
    """Run `sandbox-conformance ARGV` through cli.main; why it did not work, or None."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # --version exits through argparse
        code = exc.code or 0
    captured = capsys.readouterr()
    if "Traceback" in captured.out + captured.err:
        return f"printed a traceback:\n{captured.err}"
    if code != 0:
        return f"exit {code}: {captured.err.strip()}"
    if not captured.out.strip():
        return "printed nothing"
    return None


def cli_commands(commands: list[Command]) -> list[Command]:
    return [command for command in commands if command.words[0] == f"{VENV_PREFIX}sandbox-conformance"]


README_COMMANDS = typed_commands(README.read_text(), "README.md")


# -- the README as it is ----------------------------------------------------------------------------


def test_the_readme_has_commands_of_every_kind_this_test_checks() -> None:
    programs = {command.words[0] for command in README_COMMANDS}
    assert {"make", f"{VENV_PREFIX}sandbox-conformance", f"{VENV_PREFIX}python"} <= programs, programs
    assert len(cli_commands(README_COMMANDS)) >= 30


def test_every_readme_command_works_as_written() -> None:
    problems = [problem for command in README_COMMANDS for problem in command_problems(command)]
    assert not problems, "\n".join(problems)


def test_the_cheap_readme_commands_run_and_exit_0(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # as a reader's project would: no configuration file, reports land here
    ran, failures = [], []
    for command in cli_commands(README_COMMANDS):
        argv = list(command.words[1:])
        if argv[0] in RUN_FOR_REAL:
            ran.append(argv[0])
            problem = run_in_process(argv, capsys)
            if problem:
                failures.append(f"{command.where}: {shlex.join(command.words)}: {problem}")
    assert not failures, "\n".join(failures)
    assert {"list", "lint", "explain", "doctor"} <= set(ran), ran


def test_the_console_script_runs_as_the_readme_writes_it(tmp_path) -> None:
    listing = next(command for command in cli_commands(README_COMMANDS) if command.words[1:] == ("list",))
    argv = [str(VENV_BIN / "sandbox-conformance"), *listing.words[1:]]
    environment = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's code, whatever was installed
    done = subprocess.run(argv, check=False, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "exec-env" in done.stdout


def test_the_cheap_python_commands_run_from_the_checkout() -> None:
    cheap = [command for command in README_COMMANDS
             if command.words[0] == f"{VENV_PREFIX}python" and tuple(command.words[1:]) in CHEAP_PYTHON]
    assert cheap, "the README no longer shows the mutant listing; adjust CHEAP_PYTHON"
    for command in cheap:
        done = subprocess.run([str(VENV_BIN / "python"), *command.words[1:]], check=False, cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command.where, done.stderr)
        assert done.stdout.strip(), command.where


def repo_paths_named(markdown: str) -> set[str]:
    """Backticked single-token names and relative link targets that look like files of the repository."""
    prose = without_fenced_blocks(markdown)
    names = set(re.findall(r"`([^`\s]+)`", prose)) | set(re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", prose))
    return {name.rstrip(".,:;") for name in names
            if not name.startswith(("http:", "https:", "mailto:")) and "<" not in name  # <dialect>: a pattern
            and name not in BUILT_PATHS
            and (name.startswith(REPO_PATH_PREFIXES) or name in {"action.yml", "ARCHITECTURE.md", "Makefile"})}


def missing_paths(markdown: str) -> list[str]:
    missing = []
    for name in sorted(repo_paths_named(markdown)):
        if any(mark in name for mark in "*?["):
            if not list(REPO.glob(name)):
                missing.append(f"{name} (matches nothing)")
        elif not (REPO / name).exists():
            missing.append(name)
    return missing


@pytest.mark.parametrize("document", [README, ARCHITECTURE], ids=lambda path: path.name)
def test_every_repository_path_named_exists(document: Path) -> None:
    assert len(repo_paths_named(document.read_text())) >= 5
    assert not missing_paths(document.read_text())


def test_architecture_commands_work_as_written_too() -> None:
    problems = [problem for command in typed_commands(ARCHITECTURE.read_text(), "ARCHITECTURE.md")
                for problem in command_problems(command)]
    assert not problems, "\n".join(problems)


# -- controls: each check catches what it is for ------------------------------------------------------


def test_extraction_joins_continuations_and_drops_comments_prompts_and_output() -> None:
    markdown = """\
```sh
# a comment line
A=1 .venv/bin/sandbox-conformance run \\
    --seed 3   # a trailing comment
make images &   # background
```
  ```console
  $ .venv/bin/sandbox-conformance list
  exec-env  an output line
  ```
Inline: `.venv/bin/python -m tests.mutants.launch list` and `make run`, not `sandbox-conformance list`."""
    assert [command.words for command in typed_commands(markdown, "x")] == [
        (".venv/bin/sandbox-conformance", "run", "--seed", "3"),
        ("make", "images"),
        (".venv/bin/sandbox-conformance", "list"),
        (".venv/bin/python", "-m", "tests.mutants.launch", "list"),
        ("make", "run"),
    ]
    assert [command.where for command in typed_commands(markdown, "x")] == ["x:3", "x:5", "x:8", "x:11", "x:11"]


@pytest.mark.parametrize(("line", "expected"), [
    (".venv/bin/sandbox-conformance list --no-such-flag", "unrecognized arguments: --no-such-flag"),
    (".venv/bin/sandbox-conformance report merge r1/results.json", "--out"),
    ("docker run --rm sandbox-conformance/suite sandbox-conformance run --no-such-flag", "--no-such-flag"),
    (".venv/bin/sandbox-conformance-docker-plugin --sweep --no-such-flag", "--no-such-flag"),
    ("sandbox-conformance list", "the README's convention"),
    ("python -m tests.mutants.launch list", "the README's convention"),
    ("make no-such-target", "no Makefile target 'no-such-target'"),
    (".venv/bin/python -m tests.no_such_module", "module tests.no_such_module is no file"),
    (".venv/bin/no-such-program --help", ".venv/bin/no-such-program is not installed"),
])
def test_a_broken_command_is_caught(line: str, expected: str) -> None:
    problems = [problem for command in simple_commands("x:1", line) for problem in command_problems(command)]
    assert any(expected in problem for problem in problems), problems


def test_the_placeholders_the_readme_uses_parse_as_they_are() -> None:
    # the passing control of the parse check: placeholders are ordinary argument values
    for line in [".venv/bin/sandbox-conformance run --plugin ./my-plugin --update-baseline known-failures.yaml",
                 ".venv/bin/sandbox-conformance sweep --run-id RUN_ID --plugin \"/path/to/my-plugin --flag\"",
                 ".venv/bin/sandbox-conformance run -- -p no:randomly", ".venv/bin/sandbox-conformance --version"]:
        assert not [problem for command in simple_commands("x:1", line) for problem in command_problems(command)]


def test_a_cheap_command_that_fails_is_caught(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert "exit 2" in run_in_process(["explain", "NO-SUCH-ID"], capsys)
    assert run_in_process(["--version"], capsys) is None


def test_a_missing_repository_path_is_caught() -> None:
    markdown = ("See `examples/nowhere.yml`, [the schema](schemas/no-such.json), `tests/redteam/measured-*.nope` "
                "and `conformance/cli.py`; `reports/results.json` is output, not a file of the checkout.")
    assert missing_paths(markdown) == ["examples/nowhere.yml", "schemas/no-such.json",
                                       "tests/redteam/measured-*.nope (matches nothing)"]
