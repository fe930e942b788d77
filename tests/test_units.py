"""Small units: output sanitization, tag expressions, redaction, example-row keys."""

from __future__ import annotations

import pytest

from conformance.reference.sanitize import Sanitizer, sanitize
from conformance.scenario_tags import ScenarioTags, TagExpression, example_key
from conformance.transcript import Redactor

COLOURED = b"\x1b[31mred\x1b[0m\x07\x01\n"


@pytest.mark.parametrize(("mode", "expected"), [
    ("raw", COLOURED),
    ("strip_ansi", b"red\x07\x01\n"),
    ("strip_all", b"red\n"),
])
def test_sanitization_modes(mode: str, expected: bytes) -> None:
    assert sanitize(COLOURED, mode) == expected


def test_sanitization_is_the_same_whatever_the_chunking() -> None:
    data = b"a\x1b]0;title\x07b\x1bP1;2q\x1b\\c\xc2\x9b1mdone\t\r\n\x1b[38;5;2mx"
    whole = sanitize(data, "strip_all")
    for size in (1, 2, 3, 7):
        sanitizer = Sanitizer("strip_all")
        pieces = b"".join(sanitizer.feed(data[i:i + size]) for i in range(0, len(data), size)) + sanitizer.finish()
        assert pieces == whole
    assert whole == b"abcdone\t\r\nx"


def test_utf8_text_survives_sanitization() -> None:
    text = "héllo ✓ — ok".encode()
    assert sanitize(text, "strip_all") == text


@pytest.mark.parametrize(("expression", "expected"), [
    ("must", True),
    ("should", False),
    ("must and req:SDP1-059", True),
    ("must and not cap:exec.stdin", True),
    ("should or (req:SDP1-0* and not dialect:fabro-sketch)", True),
    ("not (must or should)", False),
])
def test_tag_expressions(expression: str, expected: bool) -> None:
    tags = ScenarioTags.parse({"id:delete-unknown", "req:SDP1-059", "must"}).tag_set()
    assert TagExpression(expression).matches(tags) is expected


@pytest.mark.parametrize("bad", ["", "must and", "(must", "must)", "and must"])
def test_malformed_tag_expressions_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        TagExpression(bad)


def test_redaction_removes_known_secrets_and_secret_looking_keys() -> None:
    redactor = Redactor()
    redactor.add_environment({"FORKD_TOKEN": "tok-123456", "PLAIN": "visible"})
    assert redactor.text("Bearer tok-123456 and visible") == "Bearer [REDACTED] and visible"
    assert redactor.value({"api_key": "abc", "nested": ["tok-123456"]}) == {"api_key": "[REDACTED]", "nested": ["[REDACTED]"]}


def test_example_keys_are_slugs_of_the_first_cell() -> None:
    assert example_key({"operation": "refresh activity", "capability": "x"}) == "refresh-activity"
    assert example_key({"code": "42"}) == "42"


# -- the results document's self-check ------------------------------------------------------------------------


def test_results_self_check_refuses_a_document_that_breaks_its_schema(tmp_path) -> None:
    """write_document validates before it writes: a scenario that ran, the document's own fields and the one
    left-out scenario entry that stands for all of them are checked; a valid document is written."""
    import copy
    import json

    from conformance.errors import HarnessError
    from conformance.reporting.writer import write_document
    from tests import inprocess

    run = inprocess.run_suite(inprocess.plugin(run_id="self-check"), tmp_path / "run", scenarios=("delete-unknown",))
    document = json.loads((tmp_path / "run" / "results.json").read_text())
    assert sum(s["outcome"] == "disabled" for s in document["scenarios"]) > 1
    assert run.exit_code == 0

    written = write_document(tmp_path / "again", copy.deepcopy(document))
    assert json.loads((tmp_path / "again" / "results.json").read_text()) == written

    ran = copy.deepcopy(document)
    next(s for s in ran["scenarios"] if s["outcome"] == "passed")["outcome"] = "green"
    top = copy.deepcopy(document)
    top["verdict"] = "PASS"
    left_out = copy.deepcopy(document)
    next(s for s in left_out["scenarios"] if s["outcome"] == "disabled")["level"] = "sometimes"
    for broken in (ran, top, left_out):
        with pytest.raises(HarnessError, match="would violate its own schema"):
            write_document(tmp_path / "broken", broken)
    assert not (tmp_path / "broken").exists()


def test_a_sandbox_on_the_suites_own_network_is_seen_even_where_that_network_is_loopback_alone() -> None:
    """GAP 4's observation of a blocked network: a provider that ignores the policy and runs commands on the
    machine the suite runs on is caught by the suite's own listening socket, even on a machine whose only
    interface is loopback (its interfaces and routes are removed from what the probe saw, here)."""
    import subprocess

    from steps.gaps import _network_probe, _not_blocked, _read_view, _suite_listener

    with _suite_listener() as (port, inode):
        seen = subprocess.run(["bash", "-c", _network_probe(port)], capture_output=True, check=True).stdout
        loopback_alone = b"\n".join(line for line in seen.splitlines()
                                    if not line.startswith((b"interface", b"route")) or line.startswith(b"interface lo "))
        view = _read_view(loopback_alone, port, inode)
    assert view.sees_the_suite and view.others() == [] and view.routes == []
    assert any("a socket the suite listens on" in problem for problem in _not_blocked(view))
    # a sandbox of its own, as Docker's --network none leaves it: loopback only, no route, not the suite's socket
    own = _read_view(b"interface lo 0x9\nroute Iface Destination 0\n", port, inode)
    assert _not_blocked(own) == []
