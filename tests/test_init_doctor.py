"""``init`` (configuration file, workflow, empty baseline) and ``doctor`` (one verdict line per check).

In-process CLI calls; the plugins doctor starts are real processes (the reference plugin, small shell
scripts), since starting one is what doctor checks."""

from __future__ import annotations

import argparse
import hashlib
import io
import secrets
import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from conformance import cli, config_file, doctor
from conformance.reporting.baseline import Baseline
from conformance.scaffold import BASELINE, WORKFLOW
from tests import inprocess
from tests.helpers import cli_main, one_usage_line, plugin_command

PYTHON_SHA256 = hashlib.sha256(Path(sys.executable).resolve().read_bytes()).hexdigest()





def _script(path: Path, body: str, mode: int = 0o755) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(mode)
    return path


def _lines(out: str) -> dict[str, str]:
    """doctor's lines by their verdict mark: '[ok]', '[FAIL]' or '[--]' (stdout is no terminal here)."""
    return {line.split(" ", 1)[1].strip(): line.split(" ", 1)[0] for line in out.splitlines()}


def _verdict(out: str, fragment: str) -> str:
    found = [mark for text, mark in _lines(out).items() if fragment in text]
    assert len(found) == 1, f"{fragment!r} in one line of:\n{out}"
    return found[0]


# -- init --------------------------------------------------------------------------------------------


def test_init_writes_a_config_a_workflow_and_an_empty_baseline_and_pins_only_when_asked(tmp_path, capsys) -> None:
    code, out, err = cli_main(capsys, "init", "--plugin", plugin_command(), "--name", "ref", "--dir", str(tmp_path))
    assert code == 0, err
    written = [tmp_path / "sandbox-conformance.toml", tmp_path / WORKFLOW, tmp_path / BASELINE]
    assert out.splitlines() == [f"wrote {path}" for path in written]
    table = tomllib.loads(written[0].read_text())
    assert table["provider"] == "ref" and table["providers"]["ref"]["plugin"] == plugin_command()
    assert "sha256" not in table["providers"]["ref"], "a pin refuses every edit of the plugin: opt-in"
    config_file.load(written[0])  # what init writes passes the loader's own checks
    assert Baseline.load(written[2]).entries == []
    pinned = tmp_path / "pinned"
    pinned.mkdir()
    assert cli_main(capsys, "init", "--plugin", plugin_command(), "--name", "ref", "--pin", "--dir", str(pinned))[0] == 0
    table = tomllib.loads((pinned / "sandbox-conformance.toml").read_text())
    assert table["providers"]["ref"]["sha256"] == PYTHON_SHA256  # the executable: the command's first word


def test_init_workflow_installs_the_suite_from_a_reference_that_exists_and_runs_it_with_the_file(tmp_path,
                                                                                                 capsys) -> None:
    """No placeholder (an `OWNER/sandbox-conformance@REF` to replace fails the first push): pip installs the
    suite from where this copy came from, and the workflow is one GitHub accepts."""
    from packaging.requirements import Requirement

    from tests.test_ci import _load, schema_errors

    assert cli_main(capsys, "init", "--plugin", plugin_command(), "--dir", str(tmp_path))[0] == 0
    text = (tmp_path / WORKFLOW).read_text()
    assert "OWNER" not in text and "@REF" not in text, text
    workflow = _load(tmp_path / WORKFLOW)
    assert schema_errors(workflow, "github-workflows") == []
    steps = workflow["jobs"]["conformance"]["steps"]
    install = shlex.split(next(step["run"] for step in steps if "pip install" in step.get("run", "")))
    assert install[:4] == ["python", "-m", "pip", "install"] and Requirement(install[4]).name == "sandbox-conformance"
    run = shlex.split(next(step["run"] for step in steps if step.get("run", "").startswith("sandbox-conformance ")))
    parsed = cli.build_parser().parse_args(run[1:])  # the suite's own parser takes the command as written
    assert parsed.command == "run" and parsed.config == "sandbox-conformance.toml"
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == tomllib.loads((tmp_path / "sandbox-conformance.toml").read_text())["report-dir"]


@pytest.mark.parametrize(("direct_url", "remote", "expected", "noted"), [
    (None, None, "sandbox-conformance==", False),  # from a package index: the same index serves CI
    ({"url": "https://github.com/someone/sandbox-conformance.git",
      "vcs_info": {"vcs": "git", "commit_id": "a" * 40}},
     None, "sandbox-conformance @ git+https://github.com/someone/sandbox-conformance.git@" + "a" * 40, False),
    ({"url": "file:///src/sandbox-conformance", "dir_info": {"editable": True}},
     ("https://github.com/someone/sandbox-conformance", "b" * 40),
     "sandbox-conformance @ git+https://github.com/someone/sandbox-conformance@" + "b" * 40, False),
    ({"url": "file:///tmp/sandbox_conformance-0.1.0-py3-none-any.whl", "archive_info": {}}, None,
     "sandbox-conformance==", True),
], ids=["index", "git", "checkout-with-remote", "local-wheel"])
def test_the_workflow_names_the_suite_where_this_copy_came_from(monkeypatch, direct_url, remote, expected,
                                                               noted) -> None:
    import importlib.metadata
    import json

    from conformance import scaffold

    class Installed:
        def read_text(self, name: str) -> str | None:
            return json.dumps(direct_url) if name == "direct_url.json" and direct_url is not None else None

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Installed())
    monkeypatch.setattr(scaffold, "_git_remote", lambda directory: remote)
    requirement, note = scaffold.suite_requirement()
    assert requirement.startswith(expected), requirement
    assert bool(note) == noted, note


def test_init_in_another_dir_writes_a_plugin_path_that_resolves_from_the_file(tmp_path, monkeypatch,
                                                                               capsys) -> None:
    plugin = _script(tmp_path / "plug", f"exec {plugin_command()}")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli_main(capsys, "init", "--plugin", "./plug --flag", "--pin", "--dir", "sub")[0] == 0
    written = tmp_path / "sub" / "sandbox-conformance.toml"
    assert tomllib.loads(written.read_text())["providers"]["plug"]["plugin"] == "../plug --flag"
    monkeypatch.chdir(tmp_path / "sub")  # doctor from the file's directory finds, pins and starts it
    code, out, err = cli_main(capsys, "doctor")
    assert code == 0, out + err
    assert _verdict(out, f"plugin executable found: {plugin}") == "[ok]"
    assert _verdict(out, "sha256 pin matches") == "[ok]"
    # the control: an absolute path is written as given
    other = tmp_path / "other"
    other.mkdir()
    assert cli_main(capsys, "init", "--plugin", str(plugin), "--dir", str(other))[0] == 0
    assert tomllib.loads((other / "sandbox-conformance.toml").read_text())["providers"]["plug"]["plugin"] == str(plugin)


def test_init_pins_the_script_an_interpreter_runs_and_names_the_provider_after_it(tmp_path, monkeypatch,
                                                                                    capsys) -> None:
    script = tmp_path / "my_plugin.py"
    script.write_text("from conformance.reference.host_plugin import main\nraise SystemExit(main())\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli_main(capsys, "init", "--plugin", f"{sys.executable} ./my_plugin.py", "--pin", "--dir", "sub")[0] == 0
    provider = tomllib.loads((tmp_path / "sub" / "sandbox-conformance.toml").read_text())["providers"]["my_plugin"]
    assert provider["sha256"] == hashlib.sha256(script.read_bytes()).hexdigest() != PYTHON_SHA256
    assert provider["plugin"] == f"{sys.executable} ../my_plugin.py"  # resolves from the file, like a plugin path
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the script is found from the file, not the working directory
    code, out, err = cli_main(capsys, "doctor", "--config", str(tmp_path / "sub" / "sandbox-conformance.toml"))
    assert code == 0 and _verdict(out, "sha256 pin matches") == "[ok]", out + err
    script.write_text(script.read_text() + "# changed\n")  # what the pin is for: an edited script is refused
    code, out, err = cli_main(capsys, "doctor", "--config", str(tmp_path / "sub" / "sandbox-conformance.toml"))
    assert code == 1 and _verdict(out, f"plugin script {script} does not match its sha256 pin") == "[FAIL]", out
    monkeypatch.chdir(tmp_path)  # without a pin, doctor shows the digest a pin of this command would have
    code, out, _ = cli_main(capsys, "doctor", "--no-config", "--plugin", f"{sys.executable} my_plugin.py",
                         "--report-dir", str(tmp_path / "reports"))
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    assert code == 0 and _verdict(out, f"sha256 pin: none (the script my_plugin.py's is {digest})") == "[--]", out


def test_init_for_rest_and_image_providers_names_a_profile(tmp_path, capsys) -> None:
    assert cli_main(capsys, "init", "--rest", "http://127.0.0.1:8889", "--dir", str(tmp_path))[0] == 0
    table = tomllib.loads((tmp_path / "sandbox-conformance.toml").read_text())
    assert table["providers"]["127-0-0-1"] == {"rest": "http://127.0.0.1:8889", "profile": "forkd", "call-timeout": 30}
    other = tmp_path / "other"
    other.mkdir()
    assert cli_main(capsys, "init", "--image", "registry.test/team/forkd:1.2", "--dir", str(other))[0] == 0
    assert "forkd" in config_file.load(other / "sandbox-conformance.toml").providers
    dotted = tmp_path / "dotted"
    dotted.mkdir()
    assert cli_main(capsys, "init", "--rest", "http://x", "--name", "my.provider", "--dir", str(dotted))[0] == 0
    assert list(config_file.load(dotted / "sandbox-conformance.toml").providers) == ["my.provider"]


AUTHORS_BASELINE = "# mine\nexpected_failures: [{id: exec-env, reason: mine}]\nnote: kept\n"


def test_init_keeps_a_baseline_and_a_workflow_that_exist_and_refuses_a_config_without_force(tmp_path, capsys) -> None:
    (tmp_path / BASELINE).write_text(AUTHORS_BASELINE)
    code, out, err = cli_main(capsys, "init", "--plugin", plugin_command(), "--dir", str(tmp_path))
    assert code == 0, err
    assert f"kept {tmp_path / BASELINE} (init never rewrites a baseline)" in out.splitlines()
    assert (tmp_path / BASELINE).read_text() == AUTHORS_BASELINE
    line = one_usage_line(*cli_main(capsys, "init", "--plugin", plugin_command(), "--dir", str(tmp_path))[::2])
    assert f"{tmp_path / 'sandbox-conformance.toml'} exists (give --force to update its provider" in line


def test_init_force_rewrites_only_the_keys_its_arguments_say(tmp_path, monkeypatch, capsys) -> None:
    """The issue: `init --force` emptied the baseline and reset the author's `strict = true`."""
    monkeypatch.chdir(tmp_path)
    assert cli_main(capsys, "init", "--plugin", plugin_command(), "--name", "ref", "--pin")[0] == 0
    config = tmp_path / "sandbox-conformance.toml"
    authored = (config.read_text().replace("strict = false", "strict = true   # mine")
                .replace("call-timeout = 30", "call-timeout = 45\nenv = { LOG = \"debug\" }")
                + "\n[providers.other]  # another of mine\nrest = \"http://x\"\n")
    config.write_text(authored)
    (tmp_path / BASELINE).write_text(AUTHORS_BASELINE)
    workflow = (tmp_path / WORKFLOW).read_text().replace("OWNER/sandbox-conformance@REF", "me/sc@v1")
    (tmp_path / WORKFLOW).write_text(workflow)
    script = _script(tmp_path / "plug.sh", f"exec {plugin_command()}")
    code, out, err = cli_main(capsys, "init", "--plugin", "./plug.sh", "--name", "ref", "--force")
    assert code == 0, err
    assert out.splitlines() == ["updated sandbox-conformance.toml (provider ref; every other line kept)",
                                f"kept {WORKFLOW} (init never rewrites a workflow: delete it for a fresh one)",
                                f"kept {BASELINE} (init never rewrites a baseline)"]
    assert (tmp_path / BASELINE).read_text() == AUTHORS_BASELINE and (tmp_path / WORKFLOW).read_text() == workflow
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    expected = authored.replace(f'plugin = "{plugin_command()}"', 'plugin = "./plug.sh"').replace(PYTHON_SHA256, digest)
    assert config.read_text() == expected  # the plugin and its pin (which the author kept) renewed; nothing else
    assert config_file.load(config).table["strict"] is True


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--plugin", "/nonexistent/plugin"], "plugin executable not found: /nonexistent/plugin"),
    (["--plugin", "'unbalanced"], "--plugin is not a valid command line"),
    (["--rest", "http://x", "--name", "no spaces"], "--name 'no spaces' must be letters"),
    (["--rest", "http://x", "--dir", "/nonexistent/dir"], "--dir /nonexistent/dir: no such directory"),
    (["--rest", "http://x", "--pin"], "--pin pins a plugin file: it needs --plugin"),
    ([], "one of the arguments --plugin --rest --image --template is required"),
])
def test_init_bad_input_isone_usage_line(argv, fragment, capsys) -> None:
    assert fragment in one_usage_line(*cli_main(capsys, "init", *argv)[::2])


# -- doctor ------------------------------------------------------------------------------------------


def test_doctor_passes_the_reference_plugin_from_an_init_config(tmp_path, monkeypatch, capsys) -> None:
    assert cli_main(capsys, "init", "--plugin", plugin_command(), "--name", "ref", "--pin", "--dir",
                    str(tmp_path))[0] == 0
    monkeypatch.chdir(tmp_path)
    code, out, err = cli_main(capsys, "doctor")
    assert code == 0, out + err
    assert set(_lines(out).values()) <= {"[ok]", "[--]"}, out
    assert _verdict(out, f"configuration file {tmp_path / 'sandbox-conformance.toml'}, provider ref") == "[ok]"
    assert _verdict(out, f"plugin executable found: {sys.executable}") == "[ok]"
    assert _verdict(out, "execute bit set") == "[ok]"
    assert _verdict(out, f"sha256 pin matches {PYTHON_SHA256}") == "[ok]"
    assert _verdict(out, "handshake completed: sandbox-driver-v1") == "[ok]"
    assert _verdict(out, "Docker engine: not needed") == "[--]"
    assert _verdict(out, f"report directory {tmp_path / 'reports'} writable") == "[ok]"


def test_doctor_without_a_pin_says_so_and_shows_the_digest(tmp_path, capsys) -> None:
    code, out, _ = cli_main(capsys, "doctor", "--no-config", "--plugin", plugin_command(),
                         "--report-dir", str(tmp_path))
    assert code == 0 and _verdict(out, f"sha256 pin: none (the executable's is {PYTHON_SHA256})") == "[--]"


def _doctor_with(tmp_path: Path, monkeypatch, capsys, provider: str) -> tuple[int, str]:
    (tmp_path / "sandbox-conformance.toml").write_text(f"[providers.p]\n{provider}\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli_main(capsys, "doctor")
    assert err == "", err
    return code, out


def test_doctor_fails_a_file_without_the_execute_bit(tmp_path, monkeypatch, capsys) -> None:
    plugin = _script(tmp_path / "plugin.sh", f"exec {plugin_command()}", mode=0o644)
    code, out = _doctor_with(tmp_path, monkeypatch, capsys, f'plugin = "{plugin}"')
    assert code == 1
    assert _verdict(out, f"plugin executable found: {plugin}") == "[ok]"
    assert _verdict(out, f"execute bit not set on {plugin}") == "[FAIL]"
    assert _verdict(out, "handshake: not tried (a check above failed)") == "[--]"


def test_doctor_fails_a_wrong_pin_naming_both_digests(tmp_path, monkeypatch, capsys) -> None:
    plugin = _script(tmp_path / "plugin.sh", f"exec {plugin_command()}")
    actual = hashlib.sha256(plugin.read_bytes()).hexdigest()
    code, out = _doctor_with(tmp_path, monkeypatch, capsys, f'plugin = "{plugin}"\nsha256 = "{"1" * 64}"')
    assert code == 1
    assert _verdict(out, f"does not match its sha256 pin (the file changed since it was pinned): expected {'1' * 64}, "
                         f"got {actual}; run `sandbox-conformance pin --config {tmp_path / 'sandbox-conformance.toml'}` "
                         "to trust the new file") == "[FAIL]"
    assert _verdict(out, "handshake: not tried") == "[--]"


def test_doctor_fails_a_plugin_that_exits_at_once_without_showing_its_secrets(tmp_path, monkeypatch,
                                                                               capsys) -> None:
    canary = f"canary-{secrets.token_hex(12)}"
    plugin = _script(tmp_path / "plugin.sh", 'echo "starting with $CANARY_TOKEN" >&2\nexit 3')
    code, out = _doctor_with(tmp_path, monkeypatch, capsys, f'plugin = "{plugin}"\nenv = {{ CANARY_TOKEN = "{canary}" }}')
    assert code == 1
    assert _verdict(out, "handshake failed:") == "[FAIL]"
    assert "did not complete the handshake" in out and "starting with [REDACTED]" in out, out
    assert canary not in out


def test_doctor_fails_a_missing_plugin_and_an_unwritable_report_dir(tmp_path, capsys) -> None:
    code, out, _ = cli_main(capsys, "doctor", "--no-config", "--plugin", "/nonexistent/plugin",
                         "--report-dir", "/proc/forbidden")
    assert code == 1
    assert _verdict(out, "plugin executable not found: /nonexistent/plugin") == "[FAIL]"
    assert _verdict(out, "report directory /proc/forbidden is not writable") == "[FAIL]"


def test_doctor_checks_a_rest_provider_health(tmp_path, monkeypatch, capsys) -> None:
    token = f"token-{secrets.token_hex(8)}"
    monkeypatch.setenv("FORKD_TOKEN", token)
    with inprocess.rest_server(token, log=[]) as url:
        code, out, _ = cli_main(capsys, "doctor", "--no-config", "--rest", url, "--report-dir", str(tmp_path))
    assert code == 0, out
    assert _verdict(out, f"REST provider {url} answers its health check") == "[ok]"
    assert _verdict(out, "not used by a REST provider") == "[--]"
    code, out, _ = cli_main(capsys, "doctor", "--no-config", "--rest", "http://127.0.0.1:9", "--call-timeout", "2",
                         "--report-dir", str(tmp_path))
    assert code == 1 and _verdict(out, "REST provider http://127.0.0.1:9 unreachable") == "[FAIL]"
    assert token not in out


def test_doctor_needs_a_docker_engine_for_an_image_only(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    code, out, _ = cli_main(capsys, "doctor", "--no-config", "--image", "any/image:1", "--report-dir", str(tmp_path))
    assert code == 1 and _verdict(out, "Docker engine unreachable") == "[FAIL]"
    assert _verdict(out, "health check: not tried") == "[--]"


@pytest.mark.docker
def test_doctor_reaches_the_docker_engine(docker_engine, tmp_path, capsys) -> None:
    code, out, _ = cli_main(capsys, "doctor", "--no-config", "--image", "any/image:1", "--report-dir", str(tmp_path))
    assert code == 0 and _verdict(out, f"Docker engine reachable (version {docker_engine})") == "[ok]"


def test_doctor_bad_input_is_exit_2(capsys) -> None:
    line = one_usage_line(*cli_main(capsys, "doctor", "--no-config", "--call-timeout", "0")[::2])
    assert "--call-timeout must be a positive number of seconds" in line


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("no_color", "marks"), [(None, ("✓", "✗", "–")), ("1", ("[ok]", "[FAIL]", "[--]"))])
def test_doctor_marks_are_symbols_on_a_terminal_and_ascii_with_no_color(no_color, marks, tmp_path,
                                                                         monkeypatch) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    args = cli.build_parser().parse_args(["doctor", "--no-config", "--plugin", "/nonexistent/plugin",
                                          "--report-dir", str(tmp_path)])
    terminal = _Terminal()
    assert doctor.run(args, out=terminal) == 1
    starts = {line.split(" ", 1)[0] for line in terminal.getvalue().splitlines()}
    assert starts == set(marks), terminal.getvalue()


def test_every_doctor_check_reaches_argparse_defaults() -> None:
    """doctor reads the same provider options as run (its Namespace has every attribute it needs)."""
    args = cli.build_parser().parse_args(["doctor", "--no-config"])
    assert isinstance(args, argparse.Namespace) and args.open_ack is None and args.report_dir is None
    config_file.apply(args)
    assert (args.open_ack, args.report_dir, args.dialect) == ("on", "reports", "auto")


def test_init_force_changing_the_providers_kind_edits_its_table_in_place(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_main(capsys, "init", "--plugin", plugin_command(), "--name", "p", "--pin")[0] == 0
    config = tmp_path / "sandbox-conformance.toml"
    pinned = config.read_text()
    assert cli_main(capsys, "init", "--rest", "http://127.0.0.1:8889", "--name", "p", "--force")[0] == 0
    lines = pinned.splitlines(keepends=True)
    plugin_at = next(index for index, line in enumerate(lines) if line.startswith("plugin = "))
    rest = ['rest = "http://127.0.0.1:8889"\n', 'profile = "forkd"\n']
    kept = [line for line in lines[plugin_at + 1:] if not line.startswith("sha256 = ")]
    assert config.read_text() == "".join([*lines[:plugin_at], *rest, *kept])  # the pin goes with the plugin
    assert "sha256" not in config_file.load(config).providers["p"]
    # a layout one line cannot carry is refused, the file left as it was
    config.write_text('providers.p.plugin = "x"\n')
    line = one_usage_line(*cli_main(capsys, "init", "--plugin", plugin_command(), "--name", "p", "--force")[::2])
    assert "cannot be updated by line" in line and config.read_text() == 'providers.p.plugin = "x"\n'
