"""A plugin that plants escape sequences, control bytes, bytes that are not UTF-8 and characters no report
format may hold (tests/hostile/terminal_escapes.py) in its error messages, its stderr and its commands'
output: nothing of it reaches the terminal raw (it shows escaped, ``\\x1b[2K``), and every report stays
valid for its format, as its own parser reads it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conformance import cli
from conformance.inert import _ACTIVE, inert, inert_line, inert_tree
from conformance.providers import ProviderConfig
from conformance.reporting import writer
from conformance.reporting.progress import failure_line
from conformance.reporting.terminal import render_summary
from tests.hostile import terminal_escapes as hostile
from tests.inprocess import run_suite

REPO = Path(__file__).resolve().parent.parent
HOSTILE_PLUGIN = REPO / "tests" / "hostile" / "terminal_escapes.py"
# One scenario per vector: an error answer (exit 1), raw bytes on the wire (exit 42), command output.
SCENARIOS = ("exec-exit-code[1]", "exec-exit-code[42]", "exec-separate-streams")
# Raw, each is an attack on the terminal; ESC [1A ESC [2K alone is also how rich's live line erases itself,
# so the fake verdict it precedes is what marks the plugin's.
RAW_PLANTED = (hostile.TITLE, hostile.CLIPBOARD, hostile.HIDE_LINE + hostile.FAKE_VERDICT, hostile.COLOUR)
ESCAPED_TITLE = "\\x1b]0;PWNED\\x07"
# What no report (nor the terminal output) may hold: C0 controls but TAB and LF (a lone CR would overwrite a
# line); DEL; C1; surrogates; U+FFFE/U+FFFF.
FORBIDDEN_IN_REPORTS = ({*map(chr, range(0x20)), "\x7f", *map(chr, range(0x80, 0xA0)), *map(chr, range(0xD800, 0xE000)),
                         "\ufffe", "\uffff"} - set("\t\n"))


# -- the one convention ----------------------------------------------------------------------------


def test_inert_escapes_what_acts_on_a_terminal_and_keeps_the_rest() -> None:
    assert inert(hostile.TITLE) == "\\x1b]0;PWNED\\x07"
    assert inert("\x1b[1A\x1b[2Kverdict: PASS") == "\\x1b[1A\\x1b[2Kverdict: PASS"
    assert inert("nul\x00 csi\x9b2J del\x7f") == "nul\\x00 csi\\x9b2J del\\x7f"
    assert inert("\ud800\udc80 \ufffe\uffff \u202eevil") == "\\ud800\\udc80 \\ufffe\\uffff \\u202eevil"
    assert inert("one\r\ntwo\rthree\n\tfour") == "one\ntwo\\x0dthree\n\tfour"  # a lone CR would overwrite
    ordinary = "café ✓ 日本語 🎉 \\x1b (already a backslash)"
    assert inert(ordinary) == ordinary
    assert inert(inert(hostile.ATTACK)) == inert(hostile.ATTACK)  # idempotent: a report read back is unchanged
    assert inert_line(f"refused\n{hostile.WORKFLOW_COMMAND}") == f"refused\\x0a{hostile.WORKFLOW_COMMAND}"
    assert inert_tree({"k\x1b": ["v\x07", 1, None]}) == {"k\\x1b": ["v\\x07", 1, None]}


def test_the_quick_check_of_a_tree_misses_no_character_inert_escapes() -> None:
    """``inert_tree`` returns a value untouched when its JSON shows nothing to escape: every character
    ``inert`` escapes must show, alone and after backslashes (an escaped one must not hide it)."""
    active = set(_ACTIVE.findall("".join(map(chr, range(0x110000)))))
    assert len(active) > 2000  # C0, C1, the surrogates, ...
    for character in sorted(active):
        for text in (character, f"\\{character}", f"\\\\{character}x"):
            assert inert_tree({"k": [text]}) == {"k": [inert(text)]}, repr(text)
    assert inert_tree({"k": ["C:\\repo\\bin", "tab\tline\n"]}) == {"k": ["C:\\repo\\bin", "tab\tline\n"]}


def test_a_failure_line_shows_a_provider_message_escaped() -> None:
    scenario = {"id": "exec-env", "outcome": "failed", "level": "must", "requirements": ["SDP1-S02"],
                "message": f"{hostile.ATTACK}\nsecond line"}
    line = failure_line(scenario)
    assert not any(planted in line for planted in RAW_PLANTED)
    assert ESCAPED_TITLE in line and "\r" not in line


# -- a run against the hostile plugin, in process ------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory):
    provider = ProviderConfig(in_process=("tests.hostile.terminal_escapes:serve",))
    return run_suite(provider, tmp_path_factory.mktemp("escapes"), scenarios=SCENARIOS)


def _assert_inert(text: str, where: str) -> None:
    for planted in RAW_PLANTED:
        assert planted not in text, f"{where} carries the provider's {planted!r} raw"
    assert ESCAPED_TITLE in text, f"{where} does not show the provider's planted sequence escaped"


def test_the_terminal_summary_and_failure_lines_show_provider_text_escaped(hostile_run) -> None:
    assert set(hostile_run.with_outcome("failed", "error")) == set(SCENARIOS)
    _assert_inert(hostile_run.output, "the terminal output")
    assert hostile_run.output.count(f"FAILED {SCENARIOS[0]} ") == 2  # the failure line, then the summary
    assert "\\x1b[31mERROR\\x1b[0m exec/run received" in hostile_run.output  # the stderr tail, escaped
    assert not FORBIDDEN_IN_REPORTS & set(hostile_run.output + hostile_run.stderr)


def _report_text(path: Path) -> str:
    text = path.read_bytes().decode("utf-8")  # strict: a report is UTF-8 whatever the provider sent
    found = FORBIDDEN_IN_REPORTS & set(text)
    assert not found, f"{path.name} holds {sorted(map(hex, map(ord, found)))}"
    return text


class _TextOf(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def test_every_report_is_valid_for_its_format_and_shows_provider_text_escaped(hostile_run) -> None:
    reports = hostile_run.report_dir
    written = {path.name for path in reports.iterdir() if path.is_file()}
    assert written >= {"results.json", "junit.xml", "summary.md", "report.html", "badge.svg", "badge.json"}

    document = json.loads(_report_text(reports / "results.json"))
    assert inert_tree(document) == document  # no lone surrogate behind a \\ud800 JSON escape either
    messages = "\n".join(s.get("message") or "" for s in document["scenarios"])
    stderr = "\n".join(s.get("stderr") or "" for s in document["scenarios"])
    _assert_inert(messages, "results.json's messages")
    _assert_inert(stderr, "results.json's stderr tails")
    assert "\\ud800" in messages and "\\ufffe" in messages  # from the JSON error answer, escaped

    junit = ET.fromstring(_report_text(reports / "junit.xml").encode("utf-8"))
    failures = "\n".join(f"{element.get('message')}\n{element.text}" for element in junit.iter("failure"))
    _assert_inert(failures, "junit.xml's failures")
    assert "\\x1b[31mERROR" in failures  # the ANSI-coloured log line of the stderr tail

    parser = _TextOf()
    parser.feed(_report_text(reports / "report.html"))
    parser.close()
    _assert_inert("".join(parser.parts), "report.html's text")

    markdown = _report_text(reports / "summary.md")
    assert not any(planted in markdown for planted in RAW_PLANTED)
    assert r"\\x1b\]0;PWNED\\x07" in markdown  # escaped, then Markdown-escaped: it renders as \x1b]0;PWNED\x07
    json.loads(_report_text(reports / "badge.json"))
    ET.fromstring(_report_text(reports / "badge.svg").encode("utf-8"))


def test_an_ansi_coloured_stderr_line_keeps_junit_xml_well_formed(hostile_run, tmp_path: Path) -> None:
    """The commonest case, no attack at all: a plugin that colours its log lines."""
    document = json.loads((hostile_run.report_dir / "results.json").read_text(encoding="utf-8"))
    failed = next(s for s in document["scenarios"] if s["outcome"] == "failed")
    failed["stderr"] = "\x1b[32mINFO\x1b[0m listening\n\x1b[31mERROR\x1b[0m exec failed"
    writer.write_document(tmp_path, document)
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert "\\x1b[31mERROR\\x1b[0m exec failed" in "".join(junit.itertext())


def test_a_provider_version_that_looks_like_markup_is_shown_as_it_is(hostile_run) -> None:
    """The summary's rule names the provider's kind and version: rich markup in them is text, not a crash."""
    document = json.loads((hostile_run.report_dir / "results.json").read_text(encoding="utf-8"))
    document["provider"]["version"] = "[/bold] [link=https://example.invalid]1.0"
    assert "[/bold] [link=https://example.invalid]1.0" in render_summary(document, width=200)


# -- one-line errors and doctor: a plugin that refuses the handshake with planted text ---------------------


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_a_one_line_error_and_doctor_show_the_refusal_escaped(tmp_path: Path) -> None:
    plugin = f"{sys.executable} {HOSTILE_PLUGIN} --refuse-handshake"
    code, out, err = _cli("run", "--no-config", "--plugin", plugin, "--report-dir", str(tmp_path / "run"),
                          "--scenario", SCENARIOS[0])
    assert code == 2 and not out
    assert len(err.splitlines()) == 1 and "did not complete the handshake" in err  # no line of the plugin's
    assert f"\\x0a{hostile.WORKFLOW_COMMAND}" in err
    _assert_inert(err, "the exit-2 error line")
    code, out, err = _cli("doctor", "--no-config", "--plugin", plugin, "--report-dir", str(tmp_path / "doctor"))
    assert code == 1 and "handshake failed" in out
    assert not any(line.startswith("::") for line in out.splitlines())
    _assert_inert(out, "doctor's output")


# -- the real CLI on a pseudo-terminal ---------------------------------------------------------------------


def test_nothing_a_plugin_plants_reaches_a_real_terminal_raw(tmp_path: Path) -> None:
    """The live progress line, the failure lines above it, the summary and the FAIL lines on stderr, as a
    person's terminal receives them; the plugin is a real process, whose stderr carries bytes that are not
    UTF-8 too."""
    pty = pytest.importorskip("pty")
    argv = [str(REPO / ".venv" / "bin" / "sandbox-conformance"), "run", "--no-config",
            "--plugin", f"{sys.executable} {HOSTILE_PLUGIN}", "--report-dir", str(tmp_path),
            *(arg for scenario in SCENARIOS for arg in ("--scenario", scenario))]
    if not Path(argv[0]).exists():
        argv[:1] = [sys.executable, "-m", "conformance.cli"]
    environment = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "FORCE_COLOR")}
    environment.update(COLUMNS="200", LINES="50", TERM="xterm-256color")
    terminal, child_end = pty.openpty()
    process = subprocess.Popen(argv, stdin=child_end, stdout=child_end, stderr=child_end, cwd=REPO,
                               env=environment, start_new_session=True)
    os.close(child_end)  # the child holds the only other end: reading ends (EIO) when it exits
    received = bytearray()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            ready, _, _ = select.select([terminal], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(terminal)
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
    assert process.returncode == 1, received.decode("utf-8", "replace")[-2000:]
    text = received.decode("utf-8")  # what the terminal got is UTF-8: no byte the plugin sent passed through
    _assert_inert(text, "the terminal")
    assert "\x00" not in text and "\x07" not in text and "\x9b" not in text and "\x7f" not in text
    assert f"FAILED {SCENARIOS[0]}" in text and "verdict: FAIL" in text
