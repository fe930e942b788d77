"""``run --shard i/n`` partitions the selection; ``report merge`` joins the shards into the whole run."""

from __future__ import annotations

import json

import pytest

from conformance import cli
from conformance.config import Selection, parse_shard
from conformance.errors import UsageError
from conformance.reporting import shards
from conformance.reporting.catalogue import all_scenarios
from tests import inprocess


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5])
def test_shards_partition_the_catalogue_disjointly_stably_and_evenly(count):
    ids = [entry.id for entry in all_scenarios()]
    parts = [Selection(shard=(index, count)).shard_of(ids) for index in range(1, count + 1)]
    assert set().union(*parts) == set(ids)
    assert sum(len(part) for part in parts) == len(set(ids))  # no id in two shards
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    # the order ids arrive in (collection order, another worker's) does not move a scenario
    again = [Selection(shard=(index, count)).shard_of(reversed(ids)) for index in range(1, count + 1)]
    assert again == parts


@pytest.mark.parametrize("value", ["0/3", "4/3", "a/b", "1/0", "3", "-1/2", "1/2/3", ""])
def test_bad_shard_values_are_one_line_usage_errors(value, capsys):
    assert cli.main(["run", "--shard", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--shard" in err and "Traceback" not in err


def test_parse_shard_accepts_i_of_n():
    assert parse_shard("2/3") == (2, 3)
    assert parse_shard(None) is None


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The delete feature whole, and as two shards, against the reference plugin in this process."""
    base = tmp_path_factory.mktemp("shards")
    provider = inprocess.plugin()
    whole = inprocess.run_suite(provider, base / "whole", features=("delete.feature",))
    parts = [inprocess.run_suite(provider, base / f"shard-{index}", features=("delete.feature",), shard=(index, 2))
             for index in (1, 2)]
    return base, whole, parts


def test_merged_shards_equal_the_unsharded_run(runs, capsys):
    base, whole, parts = runs
    assert [part.results["run"]["shard"] for part in parts] == [{"index": 1, "count": 2}, {"index": 2, "count": 2}]
    ran = [part.document.with_outcome("passed", "failed", "error", "skipped") for part in parts]
    assert ran[0] and ran[1] and not ran[0] & ran[1]
    other_shard = parts[0].document.scenario(next(iter(ran[1])))
    assert other_shard["outcome"] == "disabled" and "another shard" in other_shard["message"]
    code = cli.main(["report", "merge", *(str(part.report_dir / "results.json") for part in parts),
                     "--out", str(base / "merged")])
    merged = json.loads((base / "merged" / "results.json").read_text())
    assert code == (0 if whole.document.passed else 1)
    assert {s["id"]: s["outcome"] for s in merged["scenarios"]} == whole.outcomes()
    assert merged["summary"] == whole.results["summary"]
    assert merged["verdict"]["passed"] == whole.document.passed
    assert merged["run"]["shards"] == 2 and "shard" not in merged["run"]
    assert {"junit.xml", "summary.md", "badge.svg", "report.html"} <= {p.name for p in (base / "merged").iterdir()}
    assert "verdict" in capsys.readouterr().out


def test_merge_refuses_a_missing_or_repeated_shard_and_another_provider(runs):
    _, _, parts = runs
    one, two = ((f"shard-{i}", part.results) for i, part in enumerate(parts, 1))
    with pytest.raises(UsageError, match="2/2 missing"):
        shards.merge([one])
    with pytest.raises(UsageError, match="given twice"):
        shards.merge([one, one])
    other = {**two[1], "provider": {**two[1]["provider"], "kind": "elsewhere"}}
    with pytest.raises(UsageError, match="another provider.*kind"):
        shards.merge([one, ("other", other)])


def test_merge_of_an_unreadable_file_exits_2_in_one_line(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    assert cli.main(["report", "merge", str(tmp_path / "bad.json"), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err
