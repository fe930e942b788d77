"""The accounts of what a run leaves behind, in process: leftover processes as a verdict warning that
survives merging (``--repeat``, ``report merge``), a sandbox whose fate is unknown, and command lines that
cannot reach the user's terminal raw."""

from __future__ import annotations

from conformance.leftovers import printable
from conformance.reporting.verdict import decide
from conformance.reporting.writer import merge_processes_left

PASSED = {"id": "exec-env", "outcome": "passed", "level": "must", "requirements": ["SDP1-070"]}


def _document(**extra) -> dict:
    return {"scenarios": [PASSED], "sandboxes": {"created": 1, "deleted": 1, "leaked": []}, **extra}


def test_processes_left_are_a_warning_naming_each_not_a_failure() -> None:
    found = [{"pid": 100 + n, "command": f"sleep {n}", "fate": "ended by SIGTERM"} for n in range(7)]
    verdict = decide(_document(processes_left={"checked": True, "found": found}))
    assert verdict.passed and verdict.reasons == []
    (warning,) = verdict.warnings
    assert warning.startswith("7 process(es) started by this run were still running"), warning
    assert "pid 100: sleep 0 (ended by SIGTERM)" in warning and "pid 104: sleep 4" in warning
    assert "pid 105" not in warning and "and 2 more (results.json lists them all)" in warning


def test_nothing_left_and_no_check_warn_of_nothing() -> None:
    assert decide(_document(processes_left={"checked": True, "found": []})).warnings == []
    assert decide(_document()).warnings == []


def test_a_sandbox_of_unknown_fate_and_a_silent_worker_are_warnings() -> None:
    verdict = decide(_document(sandboxes={"created": 2, "deleted": 1, "leaked": [], "unknown_fate": ["host-1"],
                                           "workers_unaccounted": 1}))
    assert any("1 sandbox(es) of interrupted scenarios have an unknown fate" in w and "host-1" in w
               for w in verdict.warnings), verdict.warnings
    assert any("1 xdist worker(s) ended without handing over" in w for w in verdict.warnings), verdict.warnings


def test_merged_runs_keep_every_leftover_and_say_when_one_could_not_check() -> None:
    one = {"checked": True, "found": [{"pid": 1, "command": "a", "fate": "ended by SIGTERM"}]}
    other = {"checked": False, "why_not": "no /proc", "found": []}
    assert merge_processes_left([{"processes_left": one}, {"processes_left": one}])["found"] == one["found"] * 2
    assert merge_processes_left([{"processes_left": one}, {"processes_left": other}]) == {
        "checked": False, "found": one["found"], "why_not": "no /proc"}
    assert merge_processes_left([{}, {}]) is None  # documents of a suite that did not check


def test_a_command_line_is_shown_with_its_control_characters_escaped_and_cut() -> None:
    assert printable("sleep\x1b[2J 300\r\n", 200) == "sleep\\x1b[2J 300\\r\\n"
    assert printable("x" * 300, 10) == "x" * 9 + "…"
