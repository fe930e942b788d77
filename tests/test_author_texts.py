"""What a provider author reads in the first hour says what it means: baseline reasons cut at a word, the seed of a
merged run, the protocol negotiation as information, no test-double names from `explain`, a workflow `init` writes
that runs on its first push, one story of where the configuration file is found."""

from __future__ import annotations

import yaml

from conformance.reporting import html
from conformance.reporting.baseline import REASON_CHARS, write_baseline
from conformance.reporting.model import ScenarioInfo
from tests import inprocess


def test_a_v1_plugins_negotiation_reads_as_information_with_the_refusal_as_its_detail(tmp_path) -> None:
    run = inprocess.run_suite(inprocess.plugin(), tmp_path, scenarios=("delete-twice",))
    provider = run.results["provider"]
    header = next(line for line in run.output.splitlines() if line.startswith("run "))
    assert header.endswith("· protocol v1 (negotiated: the plugin offers v1, not v2)"), header
    assert provider["negotiation_detail"].startswith("its answer to the v2 initialize: ")
    assert provider["negotiation_detail"] not in run.output  # the plugin's refusal is no headline
    page = (tmp_path / html.REPORT_NAME).read_text(encoding="utf-8")
    assert "how it was settled" in page  # the detail is kept for whoever wants it


def test_update_baseline_cuts_a_long_reason_at_a_word_with_an_ellipsis(tmp_path) -> None:
    words = "the provider answered sandbox/delete with kind internal where not_found was due " * 8
    short = "a short cause"
    results = []
    for scenario_id, message in (("delete-unknown", words), ("delete-twice", short)):
        result = ScenarioInfo(scenario_id, "t", "delete.feature", "must", ("SDP1-059",), (), ()).result()
        result.outcome, result.message = "failed", message
        results.append(result)
    path = tmp_path / "baseline.yaml"
    assert write_baseline(path, results) == 2
    reasons = {e["id"]: e["reason"] for e in yaml.safe_load(path.read_text())["expected_failures"]}
    cause = reasons["delete-unknown"].split(": ", 1)[1]
    assert cause.endswith("…") and len(cause) <= REASON_CHARS
    kept = cause.removesuffix("…")
    assert words.startswith(kept) and words[len(kept)] == " " and not kept.endswith(" "), cause  # a whole word
    assert reasons["delete-twice"].endswith(": a short cause")  # a short one whole, no ellipsis


def test_sandboxes_of_an_ended_provider_are_told_without_blaming_a_death_the_suite_may_have_caused() -> None:
    from conformance.reporting import terminal
    from conformance.reporting.model import HELD_BY_ENDED
    from conformance.reporting.verdict import decide

    document = {"suite": {"version": "0"}, "provider": {}, "run": {"id": "r", "seed": 1}, "scenarios": [],
                "summary": {"total": 0, "levels": {}},
                "sandboxes": {"created": 1, "deleted": 0, "leaked": [], "died_holding": ["sb-1"]}}
    warning = next(w for w in decide(document).warnings if "sb-1" in w)
    shown = terminal.render_summary(document, width=300)
    for text in (warning, shown):
        assert HELD_BY_ENDED in text and "died;" not in text and "that died" not in text
    assert "the suite ended it" in HELD_BY_ENDED


def test_a_merged_runs_seed_is_every_shards_when_they_drew_different_ones(tmp_path) -> None:
    from conformance.reporting import markdown, shards, terminal

    def shards_with(*seeds: int) -> dict:
        documents = [(f"shard {index}", inprocess.run_suite(
            inprocess.plugin(), tmp_path / f"{'-'.join(map(str, seeds))}-{index}", seed=seed,
            scenarios=("delete-twice", "exec-env"), shard=(index, len(seeds))).results)
            for index, seed in enumerate(seeds, start=1)]
        return shards.merge(documents)

    merged = shards_with(11, 12)
    assert merged["run"]["shard_seeds"] == [{"index": 1, "seed": 11}, {"index": 2, "seed": 12}]
    shards.write_run(tmp_path / "merged", merged)  # results.json's schema admits it
    for shown in (terminal.render_summary(merged, width=200), markdown.render_markdown(merged)):
        assert "seeds per shard 1/2: 11, 2/2: 12" in shown and "seed 11 " not in shown
    assert "replay with --seed" not in terminal.render_summary(merged, width=200)
    shared = shards_with(7, 7)  # the control: one seed for every shard is the run's
    assert "shard_seeds" not in shared["run"] and shared["run"]["seed"] == 7
    assert "seed 7 (replay with --seed 7)" in terminal.render_summary(shared, width=200)


def test_gitignore_keeps_only_files_that_exist() -> None:
    from tests.helpers import REPO

    kept = [line[2:] for line in (REPO / ".gitignore").read_text().splitlines() if line.startswith("!/")]
    assert kept and all((REPO / path).exists() for path in kept), kept


def test_the_config_file_init_writes_says_where_it_is_found_as_discovery_and_the_readme_do(tmp_path, capsys) -> None:
    from conformance import config_file
    from tests.helpers import REPO, cli_main, plugin_command

    assert cli_main(capsys, "init", "--plugin", plugin_command(), "--dir", str(tmp_path))[0] == 0
    written = tmp_path / config_file.FILE_NAME
    header = " ".join(line.lstrip("# ") for line in written.read_text().splitlines() if line.startswith("#"))
    assert "started in this directory or one below it" in header
    assert "the working directory, then each one above it" in header
    below = tmp_path / "a" / "b"
    below.mkdir(parents=True)
    assert config_file.discover(below) == written == config_file.discover(tmp_path)  # what the header says
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "in the working directory or the nearest directory above it" in readme
