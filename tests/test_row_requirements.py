"""An outline row cites its own requirements: the scenario's tags and those of its own Examples block, never
another block's (``scenario_tags.row_tags``) — in the catalogue (``list``, ``explain``, coverage), in a run's
results, and for ``--tags``."""

from __future__ import annotations

from conformance.reporting.catalogue import all_scenarios
from tests import inprocess

SCENARIO_LEVEL = ("SDP1-023", "SDP1-024", "SKETCH-002")  # features/capabilities.feature: optional-operation
OWN = {"optional-operation[archive]": "SDP1-060", "optional-operation[create-a-volume]": "SDP1-028",
       "optional-operation[get-a-preview-url]": "SDP1-030", "optional-operation[open-a-terminal]": None}


def test_each_row_of_an_outline_cites_its_own_blocks_requirements_only() -> None:
    rows = {entry.id: entry for entry in all_scenarios() if entry.base_id == "optional-operation"}
    for row_id, own in OWN.items():
        assert set(rows[row_id].tags.requirements) == {*SCENARIO_LEVEL, *([own] if own else [])}, row_id
        assert rows[row_id].base_id == "optional-operation" and rows[row_id].tags.level == "must"
    # every block's requirement is cited by some row, and no row cites two blocks' requirements
    blocks = {"SDP1-060", "SDP1-028", "SDP1-030"}
    assert all(any(r in e.tags.requirements for e in rows.values()) for r in blocks)
    assert all(len(blocks & set(e.tags.requirements)) <= 1 for e in rows.values())


def test_a_run_reports_and_selects_each_row_by_its_own_requirements(tmp_path) -> None:
    run = inprocess.run_suite(inprocess.plugin(), tmp_path, tags="req:SDP1-028 and id:optional-operation")
    ran = {s["id"]: s for s in run.results["scenarios"] if s["outcome"] != "disabled"}
    assert "optional-operation[create-a-volume]" in ran and "optional-operation[archive]" not in ran
    assert all(s["requirements"] == ["SDP1-023", "SDP1-024", "SDP1-028"] for s in ran.values()), ran
