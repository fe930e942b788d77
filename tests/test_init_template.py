"""``init --template NAME``: a provider to start from, copied from ``examples/NAME/`` with the configuration
``init --plugin`` (or ``--rest --profile``) would write for it. In-process CLI calls, on tiny fake templates
under a monkeypatched template root; one test asks for the real templates the repository ships."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from conformance import config_file, scaffold
from conformance.scaffold import BASELINE, TEMPLATES, WORKFLOW
from tests.helpers import cli_main, one_usage_line

PLUGIN_SOURCE = "#!/usr/bin/env python3\nprint('a fake plugin')\n"


@pytest.fixture
def templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "templates"
    for name in ("v2", "v1", "sketch"):
        (root / name / "lib").mkdir(parents=True)
        (root / name / "plugin.py").write_text(PLUGIN_SOURCE + f"# {name}\n")
        (root / name / "README.md").write_text(f"# the {name} template\n")
        (root / name / "lib" / "helper.py").write_text("HELP = 1\n")
        (root / name / "__pycache__").mkdir()
        (root / name / "__pycache__" / "plugin.cpython-311.pyc").write_bytes(b"\0")
    (root / "rest").mkdir()
    (root / "rest" / "server.py").write_text("print('a fake server')\n")
    (root / "rest" / "profile.yaml").write_text("name: fake\nbase_url: http://127.0.0.1:9876\n")
    (root / "rest" / "README.md").write_text("# the rest template\n")
    monkeypatch.setattr(scaffold, "template_root", lambda: root)
    return root


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def test_a_plugin_template_is_copied_and_the_file_points_at_it(templates, work, capsys) -> None:
    code, out, err = cli_main(capsys, "init", "--template", "v2")
    assert code == 0, err
    assert (work / "plugin.py").read_text() == (templates / "v2" / "plugin.py").read_text()
    assert (work / "lib" / "helper.py").is_file() and (work / "README.md").is_file()
    assert not (work / "__pycache__").exists(), "compiled leftovers are not part of a template"
    assert (work / "plugin.py").stat().st_mode & 0o111, "the plugin is executable"
    table = tomllib.loads((work / "sandbox-conformance.toml").read_text())
    provider = table["providers"][table["provider"]]
    assert provider["plugin"] == "python3 ./plugin.py" and provider["dialect"] == "auto"
    assert "sha256" not in provider  # pinning is opt-in (init --pin), as for init --plugin
    assert (work / WORKFLOW).is_file() and (work / BASELINE).is_file()
    config_file.load(work / "sandbox-conformance.toml")
    assert f"wrote {Path('plugin.py')}" in out.splitlines() and "wrote sandbox-conformance.toml" in out.splitlines()


def test_the_file_is_what_init_plugin_writes_for_the_copied_plugin(templates, work, capsys) -> None:
    assert cli_main(capsys, "init", "--template", "v1", "--name", "mine")[0] == 0
    from_template = (work / "sandbox-conformance.toml").read_text()
    assert cli_main(capsys, "init", "--plugin", "python3 ./plugin.py", "--name", "mine", "--force")[0] == 0
    assert (work / "sandbox-conformance.toml").read_text() == from_template


def test_the_rest_template_points_at_its_profile_and_the_url_it_names(templates, work, capsys) -> None:
    code, _, err = cli_main(capsys, "init", "--template", "rest")
    assert code == 0, err
    assert (work / "server.py").is_file() and (work / "profile.yaml").is_file()
    table = tomllib.loads((work / "sandbox-conformance.toml").read_text())
    provider = table["providers"][table["provider"]]
    assert provider == {**provider, "rest": "http://127.0.0.1:9876", "profile": "./profile.yaml"}
    assert "plugin" not in provider


def test_a_rest_profile_naming_no_url_gets_the_placeholder(templates, work, capsys) -> None:
    (templates / "rest" / "profile.yaml").write_text("name: fake\n")
    assert cli_main(capsys, "init", "--template", "rest")[0] == 0
    table = tomllib.loads((work / "sandbox-conformance.toml").read_text())
    assert table["providers"][table["provider"]]["rest"] == scaffold.REST_URL_PLACEHOLDER


def test_into_another_dir_the_paths_resolve_from_the_file(templates, work, capsys) -> None:
    (work / "sub").mkdir()
    assert cli_main(capsys, "init", "--template", "sketch", "--dir", "sub")[0] == 0
    assert (work / "sub" / "plugin.py").is_file() and not (work / "plugin.py").exists()
    table = tomllib.loads((work / "sub" / "sandbox-conformance.toml").read_text())
    assert table["providers"][table["provider"]]["plugin"] == "python3 ./plugin.py"  # relative to the file


def test_an_existing_file_stops_it_before_anything_is_written(templates, work, capsys) -> None:
    (work / "README.md").write_text("my own readme\n")
    line = one_usage_line(*cli_main(capsys, "init", "--template", "v2")[::2])
    assert "README.md exists" in line and "--force" in line
    assert (work / "README.md").read_text() == "my own readme\n"
    assert sorted(p.name for p in work.iterdir()) == ["README.md"], "nothing else was written"


def test_a_bad_name_stops_it_before_anything_is_written(templates, work, capsys) -> None:
    assert "--name" in one_usage_line(*cli_main(capsys, "init", "--template", "v2", "--name", "no spaces")[::2])
    assert list(work.iterdir()) == []


def test_no_python3_on_path_stops_it_before_anything_is_written(templates, work, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(work.parent / "nothing-here"))
    assert "python3 is not on PATH" in one_usage_line(*cli_main(capsys, "init", "--template", "v2")[::2])
    assert list(work.iterdir()) == []


def test_an_existing_config_stops_it_before_the_template_is_copied(templates, work, capsys) -> None:
    (work / "sandbox-conformance.toml").write_text("# mine\n")
    line = one_usage_line(*cli_main(capsys, "init", "--template", "v2")[::2])
    assert "sandbox-conformance.toml exists" in line and not (work / "plugin.py").exists()


def test_force_overwrites(templates, work, capsys) -> None:
    (work / "plugin.py").write_text("old\n")
    assert cli_main(capsys, "init", "--template", "v2", "--force")[0] == 0
    assert (work / "plugin.py").read_text().startswith("#!/usr/bin/env python3")


def test_an_unknown_template_is_one_line_naming_the_valid_ones(templates, work, capsys) -> None:
    line = one_usage_line(*cli_main(capsys, "init", "--template", "v3")[::2])
    assert all(name in line for name in TEMPLATES), line
    assert list(work.iterdir()) == []


def test_a_template_missing_from_the_installation_is_one_line(templates, work, capsys) -> None:
    (templates / "v1" / "plugin.py").unlink()
    line = one_usage_line(*cli_main(capsys, "init", "--template", "v1")[::2])
    assert "not installed" in line and "plugin.py" in line


def test_template_and_a_profile_or_another_target_do_not_mix(templates, work, capsys) -> None:
    assert "--profile" in one_usage_line(*cli_main(capsys, "init", "--template", "rest", "--profile", "x")[::2])
    one_usage_line(*cli_main(capsys, "init", "--template", "v2", "--plugin", "python3 x.py")[::2])


def test_every_template_ships_in_examples() -> None:
    """The real templates (examples/v2, v1, sketch: plugin.py; rest: server.py and profile.yaml; each a README)."""
    root = scaffold.template_root()
    for name, entry in TEMPLATES.items():
        folder = root / name
        assert (folder / entry).is_file(), f"{folder / entry} is missing"
        assert (folder / "README.md").is_file(), f"{folder}/README.md is missing"
    assert (root / "rest" / "server.py").is_file()
    from conformance.options import INIT_TEMPLATES

    assert tuple(TEMPLATES) == INIT_TEMPLATES  # the parser offers the names without importing scaffold
