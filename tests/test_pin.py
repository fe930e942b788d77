"""``sandbox-conformance pin``: the sha256 pin written or renewed by rewriting that one line of the
configuration file — every other byte as the author wrote it — and the mismatch that says how to renew it.

In-process CLI calls; the plugins are small shell scripts (a pin covers a file, not a process)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.helpers import cli_main, one_usage_line, plugin_command

AUTHORED = """\
# my provider's settings
provider = "mine"
strict = true   # SHOULD failures fail my CI

[providers.mine]   # the one I build
plugin = "./plug.sh --flag"
sha256 = "{pin}"   # renewed by `pin`
env = {{ LOG = "debug" }}

[providers.upstream]
rest = "http://127.0.0.1:8889"
"""


def _plugin(directory: Path, body: str = "") -> Path:
    plugin = directory / "plug.sh"
    plugin.write_text(f"#!/bin/sh\n{body}\nexec {plugin_command()}\n")
    plugin.chmod(0o755)
    return plugin


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pin_renews_only_the_pin_line_and_the_mismatch_says_how(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    plugin = _plugin(tmp_path)
    config = tmp_path / "sandbox-conformance.toml"
    before = AUTHORED.format(pin=_sha(plugin)).replace("\n", "\r\n").encode()  # CRLF line ends survive too
    config.write_bytes(before)
    plugin.write_text(plugin.read_text() + "# rebuilt\n")
    old = before.split(b'sha256 = "')[1][:64].decode()
    line = one_usage_line(*cli_main(capsys, "run", "--scenario", "exec-env")[::2])
    assert line.endswith(f"does not match its sha256 pin (the file changed since it was pinned): expected {old}, "
                         f"got {_sha(plugin)}; run `sandbox-conformance pin --config {config} --provider mine` to "
                         "trust the new file, or remove `sha256` from [providers.mine] there"), line
    code, out, err = cli_main(capsys, "pin")
    assert code == 0, err
    assert out == f"pinned {plugin} in [providers.mine] of {config}: sha256 {_sha(plugin)} (was {old})\n"
    assert config.read_bytes() == before.replace(old.encode(), _sha(plugin).encode())
    code, out, err = cli_main(capsys, "doctor")
    assert code == 0 and f"sha256 pin matches {_sha(plugin)}" in out, out + err
    assert cli_main(capsys, "pin")[1].endswith("(nothing written)\n")  # already matching: the file untouched
    assert config.read_bytes() == before.replace(old.encode(), _sha(plugin).encode())


def test_pin_writes_a_pin_where_there_was_none(tmp_path, monkeypatch, capsys) -> None:
    """Into `init`'s offer (`# sha256 = …`) where the file has it, else after `plugin`; in pyproject.toml too."""
    monkeypatch.chdir(tmp_path)
    plugin = _plugin(tmp_path)
    assert cli_main(capsys, "init", "--plugin", "./plug.sh", "--name", "mine")[0] == 0
    config = tmp_path / "sandbox-conformance.toml"
    offered = config.read_text()
    assert cli_main(capsys, "pin")[0] == 0
    lines = offered.splitlines(keepends=True)
    at = next(index for index, line in enumerate(lines) if line.startswith("# sha256 = "))
    assert config.read_text() == "".join([*lines[:at], f'sha256 = "{_sha(plugin)}"\n', *lines[at + 1:]])
    pyproject = tmp_path / "sub" / "pyproject.toml"
    pyproject.parent.mkdir()
    text = ('[project]\nname = "x"\n\n[tool.sandbox-conformance.providers.mine]\nplugin = "../plug.sh"\n'
            "call-timeout = 5\n\n[tool.other]\nkey = 1\n")
    pyproject.write_text(text)
    code, _, err = cli_main(capsys, "pin", "--config", str(pyproject))
    assert code == 0, err
    assert pyproject.read_text() == text.replace('"../plug.sh"\n', f'"../plug.sh"\nsha256 = "{_sha(plugin)}"\n')


@pytest.mark.parametrize(("layout", "argv", "fragment"), [
    ('[providers.mine]\nrest = "http://x"\n', [], "provider mine of {config} is a REST provider"),
    ('providers = {{ mine = {{ plugin = "./plug.sh" }} }}\n', [],
     "{config} cannot be edited by line (no [providers.mine] table header): set sha256 = "),
    ('[providers.mine]\nplugin = "./plug.sh"\n', ["--provider", "mien"], "--provider 'mien' is not a provider of"),
    ('[providers.mine]\nplugin = "./missing"\n', [], "plugin executable not found: {dir}/missing"),
])
def test_pin_that_cannot_is_one_line_and_leaves_the_file(layout, argv, fragment, tmp_path, monkeypatch,
                                                          capsys) -> None:
    monkeypatch.chdir(tmp_path)
    _plugin(tmp_path)
    config = tmp_path / "sandbox-conformance.toml"
    config.write_text(layout.format())
    line = one_usage_line(*cli_main(capsys, "pin", *argv)[::2])
    assert fragment.format(config=config, dir=tmp_path) in line
    assert config.read_text() == layout.format()


def test_pin_without_a_file_says_how_to_write_one(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    line = one_usage_line(*cli_main(capsys, "pin")[::2])
    assert "no configuration file found here or above" in line and "init --plugin COMMAND --pin" in line
