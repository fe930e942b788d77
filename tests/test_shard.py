"""``run --shard i/n`` partitions the selection; ``report merge`` joins the shards into the whole run."""

from __future__ import annotations

import json

import pytest

from conformance import cli
from conformance.config import Selection, parse_shard
from conformance.errors import UsageError
from conformance.reporting import durations, shards
from conformance.reporting.catalogue import all_scenarios
from tests import inprocess


def _loads_ms(parts, weights):
    return [sum(weights[scenario_id] for scenario_id in part) for part in parts]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 8])
def test_shards_partition_the_catalogue_disjointly_stably_and_balanced_by_duration(count):
    ids = [entry.id for entry in all_scenarios()]
    parts = [Selection(shard=(index, count)).shard_of(ids) for index in range(1, count + 1)]
    assert set().union(*parts) == set(ids)
    assert sum(len(part) for part in parts) == len(set(ids))  # no id in two shards
    # the order ids arrive in (collection order, another worker's) does not move a scenario
    again = [Selection(shard=(index, count)).shard_of(reversed(ids)) for index in range(1, count + 1)]
    assert again == parts
    # greedy longest-first onto the lightest shard: no shard ends more than the longest scenario above another
    weights = durations.weights_ms(ids, durations.recorded())
    loads = _loads_ms(parts, weights)
    assert max(loads) - min(loads) <= max(weights.values())


def test_the_recorded_durations_cover_most_of_the_catalogue():
    """The shipped file is what the partition balances by: one naming too few of the catalogue's scenarios
    would leave the balance to the median (an id it names that is gone is harmless: never selected)."""
    recorded = durations.recorded()
    ids = {entry.id for entry in all_scenarios()}
    known = len(set(recorded) & ids)
    assert known >= 0.8 * len(ids), f"durations known for {known} of {len(ids)} scenarios: run `make durations`"
    assert all(seconds >= 0 for seconds in recorded.values())


def test_the_spread_bound_catches_an_unbalanced_partition():
    """The balance check can fail: every scenario in one shard is far outside the bound it asserts."""
    ids = [entry.id for entry in all_scenarios()]
    weights = durations.weights_ms(ids, durations.recorded())
    loads = _loads_ms([ids, [], []], weights)
    assert max(loads) - min(loads) > max(weights.values())


def test_unknown_ids_weigh_the_median_and_ties_go_by_id():
    recorded = {"a": 0.001, "b": 0.004, "c": 0.010, "slow": 5.0}
    assert durations.weights_ms(["a", "new", "slow"], recorded) == {"a": 1, "new": 7, "slow": 5000}  # the median: 7 ms
    # one slow scenario alone in a shard; the rest, longest first, onto the lighter one
    assert durations.balanced_partition(["a", "b", "c", "slow", "new"], 2, recorded) == [["slow"], ["a", "b", "c", "new"]]
    # equal weights (no durations known): by id, alternating, so counts differ by at most one
    parts = durations.balanced_partition([f"s{i:02}" for i in range(7)], 3, {})
    assert parts == [["s00", "s03", "s06"], ["s01", "s04"], ["s02", "s05"]]


def test_the_durations_are_recorded_from_scenarios_that_ran(tmp_path):
    """A skip says nothing about how long a provider that runs the scenario takes: only outcomes that ran
    are recorded, each scenario's longest over the runs."""
    def document(*scenarios):
        return {"scenarios": [{"id": i, "outcome": o, "duration_s": d} for i, o, d in scenarios]}
    runs = [document(("x", "passed", 0.5), ("y", "skipped", 0.0), ("z", "failed", 1.25)),
            document(("x", "passed", 0.75), ("y", "skipped", 0.0), ("w", "disabled", 0.0))]
    assert durations.from_documents(runs) == {"x": 0.75, "z": 1.25}


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
    """The delete feature whole, and as three shards, against the reference plugin in this process."""
    base = tmp_path_factory.mktemp("shards")
    provider = inprocess.plugin()
    whole = inprocess.run_suite(provider, base / "whole", features=("delete.feature",))
    parts = [inprocess.run_suite(provider, base / f"shard-{index}", features=("delete.feature",), shard=(index, 3))
             for index in (1, 2, 3)]
    return base, whole, parts


def test_merged_shards_equal_the_unsharded_run(runs, capsys):
    base, whole, parts = runs
    assert [part.results["run"]["shard"] for part in parts] == [{"index": i, "count": 3} for i in (1, 2, 3)]
    ran = [part.document.with_outcome("passed", "failed", "error", "skipped") for part in parts]
    assert all(ran) and sum(map(len, ran)) == len(set().union(*ran))  # every shard ran some, none the same
    other_shard = parts[0].document.scenario(next(iter(ran[1])))
    assert other_shard["outcome"] == "disabled" and "another shard" in other_shard["message"]
    code = cli.main(["report", "merge", *(str(part.report_dir / "results.json") for part in parts),
                     "--out", str(base / "merged")])
    merged = json.loads((base / "merged" / "results.json").read_text())
    assert code == (0 if whole.document.passed else 1)
    assert {s["id"]: s["outcome"] for s in merged["scenarios"]} == whole.outcomes()
    assert merged["summary"] == whole.results["summary"]
    assert merged["verdict"]["passed"] == whole.document.passed
    assert merged["run"]["shards"] == 3 and "shard" not in merged["run"]
    written = {p.name for p in (base / "merged").iterdir()}
    assert {"junit.xml", "summary.md", "badge.svg", "report.html"} <= written and "matrix.json" not in written  # one provider
    assert "verdict" in capsys.readouterr().out


def test_merge_refuses_a_missing_or_repeated_shard_and_another_provider(runs):
    _, _, parts = runs
    one, two, three = ((f"shard-{i}", part.results) for i, part in enumerate(parts, 1))
    with pytest.raises(UsageError, match="2/3, 3/3 missing"):
        shards.merge([one])
    with pytest.raises(UsageError, match="given twice"):
        shards.merge([one, one, two, three])
    other = {**two[1], "provider": {**two[1]["provider"], "kind": "elsewhere"}}
    with pytest.raises(UsageError, match="another provider.*kind"):
        shards.merge([one, ("other", other), three])


def test_merge_of_an_unreadable_file_exits_2_in_one_line(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    assert cli.main(["report", "merge", str(tmp_path / "bad.json"), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err


def test_recording_durations_writes_the_file_and_refuses_a_non_results_file(runs, tmp_path, capsys):
    _, whole, _ = runs
    out = tmp_path / "durations.json"
    assert durations.main([str(whole.report_dir / "results.json"), "--out", str(out)]) == 0
    seconds = json.loads(out.read_text())["seconds"]
    assert set(seconds) == whole.with_outcome("passed", "failed", "error")
    (tmp_path / "bad.json").write_text('{"scenarios": []}')
    assert durations.main([str(tmp_path / "bad.json"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json is not a results.json" in err


def _pairs(parts) -> list[tuple[str, dict]]:
    """The shards as ``(source, document)`` pairs, each document a copy a test may change."""
    return [(f"shard-{index}", json.loads(json.dumps(part.results))) for index, part in enumerate(parts, 1)]


def _ran(document: dict) -> str:
    return next(s["id"] for s in document["scenarios"] if s["outcome"] != "disabled")


def test_merge_refuses_shards_of_different_selections_naming_the_scenario_no_shard_ran(runs, tmp_path, capsys):
    """Shard 2 of another selection left out a scenario shards 1 and 3 say is shard 2's: merging them would
    be a run that silently lacks it."""
    _, _, parts = runs
    pairs = _pairs(parts)
    missing = _ran(pairs[1][1])
    other = next(s for s in pairs[1][1]["scenarios"] if s["id"] == missing)
    other.update(outcome="disabled", message=None)  # not selected in that run
    with pytest.raises(UsageError, match=f"scenario {missing} is in another shard according to shard-1, but no "
                                         "shard given ran it"):
        shards.merge(pairs)
    paths = []
    for source, document in pairs:
        (tmp_path / f"{source}.json").write_text(json.dumps(document))
        paths.append(str(tmp_path / f"{source}.json"))
    assert cli.main(["report", "merge", *paths, "--out", str(tmp_path / "merged")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and missing in err and "Traceback" not in err


def test_an_interrupted_shards_unreached_scenarios_still_merge(runs):
    """The control: a scenario an interrupted shard never reached is accounted for (the merged run says
    interrupted), not a scenario of another selection."""
    _, _, parts = runs
    pairs = _pairs(parts)
    unreached = next(s for s in pairs[1][1]["scenarios"] if s["id"] == _ran(pairs[1][1]))
    unreached.update(outcome="disabled", message="not reached: the run was interrupted")
    pairs[1][1]["run"]["interrupted"] = True
    merged = shards.merge(pairs)
    assert merged["run"]["interrupted"] and not merged["verdict"]["passed"]


def test_merge_refuses_shards_of_another_suite_version(runs):
    _, _, parts = runs
    pairs = _pairs(parts)
    assert shards.merge(pairs)["run"]["shards"] == 3  # the control: the same shards, one version
    pairs[2][1]["suite"]["version"] = "0.0.0-other"
    with pytest.raises(UsageError, match="shard-3 was written by suite version 0.0.0-other, shard-1 by .*one suite version"):
        shards.merge(pairs)
