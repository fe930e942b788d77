"""Every value handed to a provider is a secret: whatever the provider does with it — puts it in its
refusal of a protocol version, its stderr, its error messages, its commands' output, its sandbox ids;
raw, base64, percent-encoded, JSON-escaped or hex — no report file and no terminal line shows it in any
of those forms.

In process: the hostile plugin (``tests/hostile/secret_spraying.py``) served on a thread, the REST
reference server on a thread; the config file's ``env`` is loaded as the CLI loads it.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import secrets
import textwrap
import urllib.parse
from dataclasses import replace
from pathlib import Path

import pytest

from conformance import config_file, sweep
from conformance.providers import ProviderConfig
from conformance.transcript import REDACTED, Redactor
from tests import inprocess

SPRAYING = "tests.hostile.secret_spraying:serve"
BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")


def _canary(kind: str) -> str:
    # Characters that percent-encoding and JSON escaping change, so each form differs from the raw one.
    return f"{kind}-{secrets.token_hex(8)} ü&\"+/"


def _forms(secret: str) -> list[str]:
    data = secret.encode("utf-8")
    standard = base64.b64encode(data).decode()
    forms = [secret, standard, standard.rstrip("="), base64.urlsafe_b64encode(data).decode().rstrip("="),
             urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret), urllib.parse.quote(secret),
             json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], data.hex()]
    for offset in range(1, 3):  # inside a longer base64 text: the characters that encode only the secret
        encoded = base64.b64encode(bytes(offset) + data).decode().rstrip("=")
        forms.append(encoded[-(-8 * offset // 6):(8 * (offset + len(data)) - 6) // 6 + 1])
    return forms


def _decoded(text: str) -> str:
    """The text with each base64 run that decodes cleanly appended, decoded: what a reader recovers."""
    found = [text]
    for run in BASE64_RUN.findall(text):
        body = run.rstrip("=")
        body = body[: len(body) - len(body) % 4] if len(body) % 4 == 1 else body
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                found.append(decode(body + "=" * (-len(body) % 4)).decode("utf-8", errors="replace"))
            except (binascii.Error, ValueError):
                pass
    return "\n".join(found)


def _assert_nowhere(canaries: dict[str, str], places: dict[str, str]) -> None:
    for where, text in places.items():
        readable = _decoded(text)
        for name, secret in canaries.items():
            for form in _forms(secret):
                assert form not in readable, f"{name} appears in {where} as {form!r}"


def _report_files(report_dir: Path) -> dict[str, str]:
    files = {str(p.relative_to(report_dir)): p.read_text(encoding="utf-8", errors="replace")
             for p in sorted(report_dir.rglob("*")) if p.is_file()}
    assert {"results.json", "junit.xml", "summary.md", "report.html"} <= set(files), sorted(files)
    return files


def test_a_plugin_spraying_its_secrets_everywhere_leaks_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--env, --pass-env and the config file's env, each echoed by the plugin in every form and place."""
    canaries = {"--env": _canary("env"), "--pass-env": _canary("passed"), "config env": _canary("file"),
                "--pass-env id": f"idsecret{secrets.token_hex(8)}"}
    monkeypatch.setenv("CANARY_PASSED", canaries["--pass-env"])
    monkeypatch.setenv("CANARY_ID", canaries["--pass-env id"])
    (tmp_path / "sandbox-conformance.toml").write_text(textwrap.dedent(f"""\
        provider = "spraying"
        [providers.spraying]
        plugin = "unused: served in process"
        env = {{ CANARY_FILE = {json.dumps(canaries["config env"])} }}
        """))
    file_env = config_file.load(tmp_path / "sandbox-conformance.toml").providers["spraying"]["env"]
    provider = ProviderConfig(in_process=(SPRAYING,), env={**file_env, "CANARY_ENV": canaries["--env"]},
                              pass_env=("CANARY_PASSED", "CANARY_ID"))
    run = inprocess.run_suite(provider, tmp_path / "reports",
                              scenarios=("delete-unknown", "exec-exit-code[0]", "exec-separate-streams"))
    data = run.results
    assert run.exit_code == 1, run.stderr
    # It did leak (else the test proves nothing): through the negotiation, the error, the output, the ids.
    assert "answer to the v2 initialize" in data["provider"]["negotiation_detail"]
    assert REDACTED in data["provider"]["negotiation_detail"]
    assert data["sandboxes"]["ids"] and all(REDACTED in sid for sid in data["sandboxes"]["ids"])
    failure = next(s for s in data["scenarios"] if s["id"] == "delete-unknown")
    assert failure["outcome"] == "failed" and REDACTED in failure["message"] and REDACTED in failure["stderr"]
    exec_failure = next(s for s in data["scenarios"] if s["id"] == "exec-separate-streams")
    assert exec_failure["outcome"] == "failed" and "stdout_b64" in "\n".join(exec_failure["transcript"])
    _assert_nowhere(canaries, {**_report_files(run.report_dir), "stdout": run.stdout, "stderr": run.stderr})


def test_a_rest_token_an_answer_echoes_is_redacted_in_every_form(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The REST token, echoed by the server in an error body (raw, base64, percent-encoded, hex)."""
    from conformance.reference.rest_server import Answer, ForkdApp, error

    token = f"tok{secrets.token_hex(12)}"

    class Echoing(ForkdApp):
        def live(self, sandbox_id: str):
            try:
                return super().live(sandbox_id)
            except Answer:  # an unknown id: a failure (not the 404 it owes) with the token in every form
                raise error(500, f"no sandbox {sandbox_id}; token {' '.join(_forms(self.token))}") from None

    with inprocess.rest_server(token, Echoing, log=[]) as url:
        monkeypatch.setenv("FORKD_TOKEN", token)
        run = inprocess.run_suite(ProviderConfig(rest_url=url, profile="forkd"), tmp_path / "reports",
                                  scenarios=("delete-unknown",))
    transcript = "\n".join(next(s for s in run.results["scenarios"] if s["id"] == "delete-unknown")
                           .get("transcript") or [])
    assert REDACTED in transcript, "the server did not echo the token (the test proves nothing)"
    _assert_nowhere({"REST token": token}, {**_report_files(run.report_dir), "stdout": run.stdout,
                                            "stderr": run.stderr})


def test_the_redactor_finds_a_secret_in_each_encoding_and_base64_alignment() -> None:
    secret = _canary("unit")
    redactor = Redactor()
    redactor.add(secret)
    for form in _forms(secret):  # shown as [REDACTED], or (a base64 text) encoding it
        shown = _decoded(redactor.text(f"before {form} after"))
        assert REDACTED in shown and not any(other in shown for other in _forms(secret)), (form, shown)
    for offset in range(3):  # a command's output in a base64 field: decoded, redacted, encoded again
        blob = base64.b64encode(b"x" * offset + secret.encode() + b" tail").decode()
        shown = redactor.text(f'"stdout_b64":"{blob}"')
        assert base64.b64decode(shown.split('"')[3]) == b"x" * offset + REDACTED.encode() + b" tail"
    assert redactor.text("nothing secret: aGVsbG8gd29ybGQ= stays") == "nothing secret: aGVsbG8gd29ybGQ= stays"


def test_a_redacted_sandbox_id_is_not_swept_and_says_why(tmp_path: Path) -> None:
    """An id that held a secret is recorded redacted: it cannot be deleted by id, and sweep says so."""
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"provider": {"kind": "host", "command": "x"},
                                   "sandboxes": {"leaked": [f"host-1-{REDACTED}"], "died_holding": [], "ids": []}}))
    outcome = sweep.sweep_recorded(replace(ProviderConfig(), in_process=(inprocess.HOST_PLUGIN,)), results,
                                   moved=True)
    assert outcome.exit_code == 1 and not outcome.deleted
    assert "redacted" in outcome.left[f"host-1-{REDACTED}"], outcome.left


def test_sweep_lines_and_one_line_errors_show_no_secret(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """What the CLI prints itself, outside any report: a sweep's per-sandbox lines (ids the provider
    listed) and the one-line error of a provider that failed its handshake, quoting what it said."""
    from conformance import cli
    from conformance.errors import ProviderStartError
    from conformance.transcript import REDACTOR

    secret = _canary("printed")
    REDACTOR.add(secret)  # as register_secrets does for every value handed to the provider
    printed = io.StringIO()
    sweep.print_result(sweep.SweepResult(label="x", deleted=[f"host-{secret}"],
                                         left={"host-2": f"refused: {_forms(secret)[1]}"}), out=printed)

    def refused(args: object) -> int:
        raise ProviderStartError(f"provider 'p' did not complete the handshake: {' '.join(_forms(secret))}")

    monkeypatch.setattr(cli, "command_run", refused)
    assert cli.main(["run"]) == 2
    err = capsys.readouterr().err
    assert "did not complete the handshake" in err and REDACTED in err and REDACTED in printed.getvalue()
    _assert_nowhere({"secret": secret}, {"sweep output": printed.getvalue(), "stderr": err})


def test_a_secret_the_transcript_cut_goes_through_shows_no_part() -> None:
    """An entry longer than the transcript keeps is cut; a secret the cut went through is redacted first."""
    from conformance.transcript import REDACTOR, Transcript

    secret = f"cut-{secrets.token_hex(16)}"
    REDACTOR.add(secret)
    transcript = Transcript(max_entry_chars=60)
    transcript.record("provider", "received", "x" * 50 + secret + "y" * 50)
    transcript.record("provider", "received", "x" * 50 + base64.b64encode(secret.encode()).decode() + "y" * 50)
    shown = "\n".join(transcript.render())
    assert "more characters" in shown and REDACTED[:10] in shown, shown
    assert secret[:8] not in shown and base64.b64encode(secret.encode()).decode()[:8] not in shown, shown


def test_a_short_secret_never_rewrites_what_the_suite_itself_fills_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--env LOG=error`: the value is redacted where a provider's words land, but an outcome, a level or
    the transport (schema enums, read by every report) stay the suite's words."""
    from conformance import engine

    redactor = Redactor()  # not the process-wide one: "error" would shred every other test's output
    for value in ("error", "must", "stdio"):
        redactor.add(value)
    monkeypatch.setattr(engine, "REDACTOR", redactor)
    document = {
        "provider": {"kind": "stdio-ish", "transport": "stdio", "dialect": "sandbox-driver-v1"},
        "sandboxes": {"ids": ["sbx-error"]}, "wire_violations_outside_scenarios": ["an error"],
        "verdict": {"passed": False, "reasons": ["1 MUST scenario(s) failed: a"], "warnings": []},
        "scenarios": [{"id": "a", "outcome": "error", "level": "must", "message": "an error", "transcript": []}],
    }
    shown = engine.redact_document(document)
    assert shown["scenarios"][0] == {**document["scenarios"][0], "message": f"an {REDACTED}"}
    assert shown["provider"] == {**document["provider"], "kind": f"{REDACTED}-ish"}
    assert shown["sandboxes"]["ids"] == [f"sbx-{REDACTED}"]
