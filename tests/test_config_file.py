"""The configuration file: discovery, strict checking (one line naming the file and the key), flags over
the file, relative paths, the sha256 pin, report formats, secrets from the file, and a reproduce command
that names the file and works when pasted.

In-process CLI calls (``cli.main``) wherever the process is not the point; one real run of a plugin and
one pasted reproduce command."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance import cli, config_file
from conformance.config import RunConfig
from tests.helpers import LAUNCHER, REPO, cli_main, mutant_command, one_usage_line, plugin_command


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path





def _config(argv: list[str]) -> RunConfig:
    args = cli.build_parser().parse_args(["run", *argv])
    args.pytest_args = []
    return RunConfig.from_arguments(args)


# -- discovery ---------------------------------------------------------------------------------------


def test_discovery_walks_up_and_prefers_the_dedicated_file(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    _write(tmp_path / "pyproject.toml", '[tool.sandbox-conformance]\nstrict = true\n')
    _write(tmp_path / "a" / "pyproject.toml", '[project]\nname = "no-table-here"\n')  # no table: not a config
    assert config_file.discover(deep) == tmp_path / "pyproject.toml"
    _write(tmp_path / "a" / "sandbox-conformance.toml", "strict = false\n")
    assert config_file.discover(deep) == tmp_path / "a" / "sandbox-conformance.toml"
    _write(tmp_path / "a" / "pyproject.toml", '[tool.sandbox-conformance]\nstrict = true\n')
    assert config_file.discover(tmp_path / "a") == tmp_path / "a" / "sandbox-conformance.toml"


def test_pyproject_table_applies_and_no_config_ignores_it(tmp_path: Path, monkeypatch) -> None:
    _write(tmp_path / "pyproject.toml", '[tool.sandbox-conformance]\nstrict = true\nreport-dir = "r"\n')
    monkeypatch.chdir(tmp_path)
    config = _config([])
    assert config.strict and config.report_dir == str(tmp_path / "r")
    assert config.config_file == str(tmp_path / "pyproject.toml")
    ignored = _config(["--no-config"])
    assert not ignored.strict and ignored.config_file is None and ignored.report_dir == str(tmp_path / "reports")


# -- strict checking: exit 2, one line naming the file and the key -----------------------------------

BAD_FILES = [
    ('[providers.mine]\nplugin = "p"\ncall-timeout = "x"\n', "key 'providers.mine.call-timeout' must be a number, got \"x\""),
    ('[providers.mine]\nplugin = "p"\ncall-timeout = 0\n', "key 'providers.mine.call-timeout' must be greater than 0"),
    ('[providers.mine]\nplugin = "p"\ntimeout = 3\n', "key 'providers.mine.timeout' is not a setting"),
    ('reprot-dir = "r"\n', "key 'reprot-dir' is not a setting (did you mean 'report-dir'?)"),
    ('report-formats = ["junit", "pdf"]\n', "key 'report-formats' names an unknown format 'pdf'"),
    ('strict = "yes"\n', "key 'strict' must be true or false, got \"yes\""),
    ('provider = "other"\n[providers.mine]\nplugin = "p"\n', "key 'provider' names no provider of this file: 'other'"),
    ('[providers.mine]\nplugin = "p"\nrest = "http://x"\n', "key 'providers.mine' needs exactly one of plugin, rest or image"),
    ('[providers.mine]\nrest = "http://x"\nsha256 = "' + "a" * 64 + '"\n', "key 'providers.mine.sha256' pins a plugin"),
    ('[providers.mine]\nplugin = "p"\nsha256 = "abc"\n', "key 'providers.mine.sha256' must be a sha256 digest"),
    ('[providers.mine]\nplugin = "p"\ndialect = "klingon"\n', "key 'providers.mine.dialect' must be one of auto"),
    ('[providers.mine]\nplugin = "p"\ncreate-spec = "@missing.json"\n', "key 'providers.mine.create-spec' names a file"),
    ('expected-failures = "nowhere.yaml"\n', "key 'expected-failures' names a file that does not exist"),
    ('[selection]\nscenarios = ["no-such-scenario"]\n', "[selection]: --scenario 'no-such-scenario' is not a scenario id"),
    ('[selection]\ntags = "must and ("\n', "[selection]: --tags"),
    ("strict = \n", "is not valid TOML"),
    ("strict = 1979-05-27\n", "key 'strict' must be true or false, got \"1979-05-27\""),
    # a TOML date has no JSON form: it is named, not a TypeError traceback
    ('[providers.mine]\nplugin = "p"\ncreate-spec = { a = { b = 1979-05-27 } }\n',
     "key 'providers.mine.create-spec.a.b' is a TOML date or time"),
    # a value that only a flag's check used to catch is named by its key in the file, not by the flag
    ('[providers.mine]\nplugin = "p"\nmax-message-bytes = -5\n',
     "key 'providers.mine.max-message-bytes' must be a positive whole number of bytes"),
    ('[providers.mine]\nplugin = "p"\nmax-message-bytes = "1 PiB"\n',
     "key 'providers.mine.max-message-bytes' must be a positive whole number of bytes"),
    ('[providers.mine]\nrest = "http://x"\nopen-ack = false\n',
     "key 'providers.mine.open-ack' applies to sandbox-driver-v2 plugins only"),
    ('[providers.mine]\nplugin = "p"\ncall-timeout = nan\n', "key 'providers.mine.call-timeout' must be a finite"),
    ('[providers.mine]\nplugin = "p"\ncall-timeout = inf\n', "key 'providers.mine.call-timeout' must be a finite"),
    # a name the schema's propertyNames refuses is named as a name, once
    ('[providers."a b"]\nplugin = "p"\n', "key 'providers': provider name 'a b' must be letters, digits, _ . -"),
    ('[providers.mine]\nplugin = "p"\nenv = { "A=B" = "v" }\n',
     "key 'providers.mine.env': env name 'A=B' must be letters, digits and _"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD_FILES, ids=[fragment[:40] for _, fragment in BAD_FILES])
def test_a_wrong_key_or_type_is_one_line_naming_the_file_and_the_key(text, fragment, tmp_path, monkeypatch,
                                                                       capsys) -> None:
    path = _write(tmp_path / "sandbox-conformance.toml", text)
    monkeypatch.chdir(tmp_path)
    line = one_usage_line(*cli_main(capsys, "run")[::2])
    assert str(path) in line and fragment in line, line


def test_a_pyproject_key_is_named_with_its_table(tmp_path, monkeypatch, capsys) -> None:
    _write(tmp_path / "pyproject.toml", "[tool.sandbox-conformance.providers.mine]\nplugin = 7\n")
    monkeypatch.chdir(tmp_path)
    line = one_usage_line(*cli_main(capsys, "run")[::2])
    assert "key 'tool.sandbox-conformance.providers.mine.plugin' must be a string, got 7" in line


def test_a_mistyped_env_is_reported_without_its_value(tmp_path, monkeypatch, capsys) -> None:
    secret = f"secret-{secrets.token_hex(8)}"
    _write(tmp_path / "sandbox-conformance.toml", f'[providers.mine]\nplugin = "p"\nenv = "{secret}"\n')
    monkeypatch.chdir(tmp_path)
    line = one_usage_line(*cli_main(capsys, "run")[::2])
    assert "key 'providers.mine.env' must be a table, got a string" in line and secret not in line


@pytest.mark.parametrize("env_table", ['{ "" = "%s" }', '{ "A=B" = "%s" }', '{ "1X" = "%s" }'])
def test_a_bad_env_name_is_refused_without_its_value(env_table, tmp_path, monkeypatch, capsys) -> None:
    secret = f"secret-{secrets.token_hex(8)}"
    _write(tmp_path / "sandbox-conformance.toml", f'[providers.mine]\nplugin = "p"\nenv = {env_table % secret}\n')
    monkeypatch.chdir(tmp_path)
    line = one_usage_line(*cli_main(capsys, "run")[::2])
    assert "key 'providers.mine.env': env name" in line and secret not in line, line


@pytest.mark.parametrize("pair", ["=%s", "%s"])
def test_a_bad_env_flag_is_refused_without_its_value(pair, tmp_path, capsys) -> None:
    secret = f"secret-{secrets.token_hex(8)}"
    line = one_usage_line(*cli_main(capsys, "run", "--no-config", "--plugin", "p", "--env", pair % secret)[::2])
    assert "--env expects NAME=VALUE" in line and secret not in line, line


def test_good_names_and_values_pass_the_checks_that_refuse_bad_ones(tmp_path, monkeypatch) -> None:
    """The controls of the checks above: a usable env name, byte counts, a finite timeout, a string date."""
    _write(tmp_path / "sandbox-conformance.toml", """\
        [providers."my.provider-1"]
        plugin = "p"
        env = { _LOG_2 = "debug" }
        max-message-bytes = "1MiB"
        call-timeout = 0.5
        open-ack = false
        create-spec = { a = { b = "1979-05-27" } }
        """)
    monkeypatch.chdir(tmp_path)
    config = _config([])
    assert config.provider.env == {"_LOG_2": "debug"} and config.provider.max_message_bytes == 1024 ** 2
    assert config.provider.call_timeout_s == 0.5 and not config.provider.open_ack
    assert config.provider.create_spec == {"a": {"b": "1979-05-27"}} and config.provider_name == "my.provider-1"
    _write(tmp_path / "sandbox-conformance.toml", '[providers.mine]\nplugin = "p"\nmax-message-bytes = 4096\n')
    assert _config([]).provider.max_message_bytes == 4096


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--provider", "mien"], "--provider 'mien' is not a provider of"),
    (["--provider", "mine", "--plugin", "x"], "--provider and --plugin are mutually exclusive"),
    (["--config", "nowhere.toml"], "--config nowhere.toml: no such file"),
    (["--config", "sandbox-conformance.toml", "--no-config"], "not allowed with argument --config"),
])
def test_bad_config_flags_areone_usage_line(argv, fragment, tmp_path, monkeypatch, capsys) -> None:
    _write(tmp_path / "sandbox-conformance.toml", '[providers.mine]\nplugin = "p"\n')
    monkeypatch.chdir(tmp_path)
    assert fragment in one_usage_line(*cli_main(capsys, "run", *argv)[::2])


def test_sweep_cannot_start_an_image_provider_from_the_file(tmp_path, monkeypatch, capsys) -> None:
    _write(tmp_path / "sandbox-conformance.toml", '[providers.boxed]\nimage = "team/provider:1"\n')
    monkeypatch.chdir(tmp_path)
    line = one_usage_line(*cli_main(capsys, "sweep", "--run-id", "run-x")[::2])
    assert "key 'providers.boxed.image' is started by `run`; this command needs a running provider" in line


def test_several_providers_without_a_default_ask_for_one(tmp_path, monkeypatch, capsys) -> None:
    _write(tmp_path / "sandbox-conformance.toml", '[providers.a]\nplugin = "p"\n[providers.b]\nplugin = "q"\n')
    monkeypatch.chdir(tmp_path)
    assert "names 2 providers and no default 'provider': give --provider (a, b)" in one_usage_line(
        *cli_main(capsys, "run")[::2])
    assert _config(["--provider", "b"]).provider.plugin == "q"  # the control: naming one settles it


# -- the file's values, relative paths, and flags over them -----------------------------------------

FULL = """\
    provider = "mine"
    report-dir = "out"
    report-formats = ["junit"]
    expected-failures = "baseline.yaml"
    strict = true
    [selection]
    tags = "must"
    features = ["delete.feature"]
    [providers.mine]
    plugin = "./bin/plugin --flag"
    env = { LOG = "debug", SHARED = "from-file" }
    pass-env = ["FROM_FILE"]
    create-spec = "@spec.json"
    call-timeout = 12
    dialect = "sandbox-driver-v1"
    [providers.other]
    plugin = "other-plugin"
    """


@pytest.fixture
def full_file(tmp_path: Path, monkeypatch) -> Path:
    path = _write(tmp_path / "conf" / "sandbox-conformance.toml", FULL)
    _write(tmp_path / "conf" / "baseline.yaml", "expected_failures: []\n")
    _write(tmp_path / "conf" / "spec.json", '{"source": "host_directory"}')
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # relative paths are the file's, not the working directory's
    return path


def test_the_file_supplies_everything_relative_to_its_directory(full_file: Path) -> None:
    config = _config(["--config", str(full_file)])
    here = full_file.parent
    assert config.provider.plugin == f"{here}/bin/plugin --flag"
    assert config.provider.env == {"LOG": "debug", "SHARED": "from-file"}
    assert config.provider.pass_env == ("FROM_FILE",)
    assert config.provider.create_spec == {"source": "host_directory"}
    assert config.provider.call_timeout_s == 12 and config.provider.dialect == "sandbox-driver-v1"
    assert config.report_dir == str(here / "out") and config.report_formats == ("junit",)
    assert config.expected_failures == str(here / "baseline.yaml") and config.strict
    assert config.selection.tags == "must" and config.selection.features == ("delete.feature",)
    assert (config.provider_name, config.config_file) == ("mine", str(full_file))
    assert RunConfig.from_json(config.to_json()) == config  # xdist workers get the same configuration


def test_flags_override_each_class_of_setting(full_file: Path) -> None:
    given = ["--config", str(full_file)]
    # provider: a provider flag replaces the named provider as a whole (none of its env or timeout leaks in)
    by_flag = _config([*given, "--plugin", "flag-plugin"])
    assert by_flag.provider.plugin == "flag-plugin" and by_flag.provider.env == {} and by_flag.provider_name is None
    assert by_flag.provider.call_timeout_s == 30 and by_flag.provider.dialect == "auto"
    assert _config([*given, "--provider", "other"]).provider.plugin == "other-plugin"
    # selection: any selection flag replaces the file's selection
    chosen = _config([*given, "--scenario", "exec-env"]).selection
    assert chosen.scenarios == ("exec-env",) and chosen.tags is None and chosen.features == ()
    # report dir, timeouts, verdict, env: the flag's value wins; --env adds to (and overrides) the file's env
    config = _config([*given, "--report-dir", "mine", "--call-timeout", "3", "--no-strict",
                      "--env", "SHARED=from-flag", "--dialect", "auto"])
    assert config.report_dir == str(Path.cwd() / "mine") and config.provider.call_timeout_s == 3
    assert not config.strict and config.provider.dialect == "auto"
    assert config.provider.env == {"LOG": "debug", "SHARED": "from-flag"}
    assert config.file_env_names == ("LOG",)  # SHARED came from the flag: the reproduce command names it


def test_the_reproduce_command_names_the_file_and_keeps_overrides(full_file: Path) -> None:
    config = _config(["--config", str(full_file), "--env", "SHARED=x", "--no-strict", "--seed", "7"])
    command = config.reproduce("delete-unknown")
    assert f"--config {full_file}" in command and "--provider mine" in command and "--plugin" not in command
    assert "LOG" not in command and '--env "SHARED=${SHARED:?export SHARED first}"' in command
    assert "--no-strict" in command and command.endswith("--seed 7 --no-strict --scenario delete-unknown")
    assert config.variables_to_export() == ["SHARED"]
    assert "--config" not in _config(["--no-config", "--seed", "7"]).reproduce("x")  # the control


def test_a_shard_partitions_the_files_selection(tmp_path, monkeypatch) -> None:
    _write(tmp_path / "sandbox-conformance.toml", '[selection]\nscenarios = ["exec-env", "delete-unknown"]\n')
    monkeypatch.chdir(tmp_path)
    sharded = _config(["--shard", "1/2"]).selection
    assert sharded.scenarios == ("exec-env", "delete-unknown") and sharded.shard == (1, 2)
    assert len(sharded.shard_of(["exec-env", "delete-unknown"])) == 1  # half of the file's two, not of all
    # the control: a selection flag still replaces the file's selection, and keeps the shard
    chosen = _config(["--shard", "1/2", "--scenario", "exec-env"]).selection
    assert chosen.scenarios == ("exec-env",) and chosen.shard == (1, 2)


def _parsed_back(command: str) -> RunConfig:
    """A reproduce command as `run` would parse it when pasted (``$VARS`` are not expanded: none are used)."""
    argv = shlex.split(command)
    return _config(argv[argv.index("run") + 1:])


def test_a_reproduce_command_writes_its_reports_beside_the_runs(tmp_path, monkeypatch) -> None:
    """In repro/<id>/ of the run's report directory (relative when it is under the working directory), so a
    pasted command never replaces the run's reports; pasted from a reproduction, into the same place again."""
    _write(tmp_path / "sandbox-conformance.toml", 'report-dir = "out"\n')
    monkeypatch.chdir(tmp_path)
    command = _config(["--plugin", "p", "--seed", "7"]).reproduce("exec-exit-code[42]")
    assert "--report-dir out/repro/exec-exit-code_42_ --seed 7" in command, command
    again = _parsed_back(command)
    assert again.report_dir == str(tmp_path / "out" / "repro" / "exec-exit-code_42_")
    assert _parsed_back(again.reproduce("exec-exit-code[42]")).report_dir == again.report_dir
    assert _parsed_back(again.reproduce("exec-env")).report_dir == str(Path(again.report_dir) / "repro" / "exec-env")
    elsewhere = _config(["--no-config", "--plugin", "p", "--report-dir", "/tmp/elsewhere"]).reproduce("exec-env")
    assert "--report-dir /tmp/elsewhere/repro/exec-env " in elsewhere


def test_a_no_config_run_reproduces_without_the_file(tmp_path, monkeypatch) -> None:
    _write(tmp_path / "sandbox-conformance.toml", 'strict = true\nexpected-failures = "baseline.yaml"\n')
    _write(tmp_path / "baseline.yaml", "expected_failures: []\n")
    monkeypatch.chdir(tmp_path)
    ignoring = _config(["--no-config", "--plugin", "p", "--seed", "7"])
    command = ignoring.reproduce("exec-env")
    assert " run --no-config " in command, command
    again = _parsed_back(command)
    assert again.config_file is None and not again.strict and again.expected_failures is None
    # the control: a run that read the file reproduces with it, and so reads strict and the baseline again
    reading = _parsed_back(_config(["--plugin", "p", "--seed", "7"]).reproduce("exec-env"))
    assert reading.strict and reading.expected_failures == str(tmp_path / "baseline.yaml")


# -- the sha256 pin ---------------------------------------------------------------------------------


def _marker_plugin(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "started"
    plugin = _write(tmp_path / "plugin.sh", f"#!/bin/sh\ntouch {marker}\nexec {plugin_command()}\n")
    plugin.chmod(0o755)
    return plugin, marker


@pytest.mark.parametrize("command", [["run"], ["sweep", "--run-id", "run-x"]])
def test_a_wrong_pin_stops_the_plugin_before_it_starts(command, tmp_path, monkeypatch, capsys) -> None:
    plugin, marker = _marker_plugin(tmp_path)
    actual = hashlib.sha256(plugin.read_bytes()).hexdigest()
    _write(tmp_path / "sandbox-conformance.toml", f'[providers.p]\nplugin = "{plugin}"\nsha256 = "{"0" * 64}"\n')
    monkeypatch.chdir(tmp_path)
    line = one_usage_line(*cli_main(capsys, *command)[::2])
    path = tmp_path / "sandbox-conformance.toml"
    assert line.endswith(f"{plugin} does not match its sha256 pin (the file changed since it was pinned): expected "
                         f"{'0' * 64}, got {actual}; run `sandbox-conformance pin --config {path}` to trust the new "
                         "file, or remove `sha256` from [providers.p] there"), line
    assert not marker.exists(), "the plugin was started despite its pin"


def test_the_right_pin_lets_a_sweep_start_the_plugin(tmp_path, monkeypatch, capsys) -> None:
    plugin, marker = _marker_plugin(tmp_path)
    digest = hashlib.sha256(plugin.read_bytes()).hexdigest()
    _write(tmp_path / "sandbox-conformance.toml", f'[providers.p]\nplugin = "{plugin}"\nsha256 = "{digest}"\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = cli_main(capsys, "sweep", "--run-id", "run-nothing-here")
    assert code == 0 and "nothing to delete" in out, err
    assert marker.exists()


# -- a real run from the file: secrets, report formats, a reproduce command that pastes ---------------


def test_a_run_from_the_file_hides_its_env_and_reproduces_from_it(tmp_path, monkeypatch, capsys) -> None:
    canary = f"canary-{secrets.token_hex(12)}"
    path = _write(tmp_path / "project" / "sandbox-conformance.toml", f"""\
        provider = "echoing"
        report-dir = "out"
        report-formats = ["junit"]
        [selection]
        scenarios = ["delete-unknown"]
        [providers.echoing]
        plugin = {json.dumps(mutant_command("secret-echoing"))}
        sha256 = "{hashlib.sha256(LAUNCHER.read_bytes()).hexdigest()}"
        env = {{ CANARY_FROM_FILE = "{canary}" }}
        call-timeout = 20
        """)
    monkeypatch.chdir(path.parent)
    monkeypatch.setattr(sys, "argv", ["cli.py"])  # as `python -m conformance.cli` (an xdist worker's argv is "-c")
    code, out, err = cli_main(capsys, "run")
    reports = path.parent / "out"
    assert code == 1, err  # the mutant echoes its env into a failing delete
    results = json.loads((reports / "results.json").read_text())
    failure = next(s for s in results["scenarios"] if s["id"] == "delete-unknown")
    assert failure["outcome"] == "failed" and "[REDACTED]" in failure["stderr"], "the leak happened"
    for where, text in (("results.json", (reports / "results.json").read_text()),
                        ("junit.xml", (reports / "junit.xml").read_text()), ("stdout", out), ("stderr", err)):
        assert canary not in text, f"a value from the file appears in {where}"
    assert not (reports / "summary.md").exists() and not (reports / "badge.svg").exists(), "only junit was asked"
    reproduce = failure["reproduce"]
    assert f"--config {path}" in reproduce and "--provider echoing" in reproduce and "CANARY" not in reproduce
    # Pasted elsewhere, with the canary nowhere in the environment: the file supplies provider and env again.
    env = {k: v for k, v in os.environ.items() if k != "CANARY_FROM_FILE"}
    env["PYTHONPATH"] = str(REPO)
    pasted = subprocess.run(["bash", "-c", f"{reproduce} --report-dir {tmp_path / 'again'}"], cwd=tmp_path,
                            capture_output=True, text=True, env=env, timeout=120, check=False)
    assert pasted.returncode == 1, pasted.stderr
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert {s["id"]: s["outcome"] for s in again["scenarios"]}["delete-unknown"] == "failed"
    assert again["summary"]["selected"] == 1 and canary not in pasted.stdout + pasted.stderr
