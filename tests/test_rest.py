"""REST providers: profiles, templates, the HTTP transport's retries, the REST adapter, the reference REST
server, and the whole suite over ``--rest`` and ``--image``.

The reference REST server (or a mutant ``ForkdApp``) runs on a thread of this process
(``tests/inprocess.py``), and the whole suite runs against it in this process too; its log is kept in a
list (the ``log`` seam of ``ForkdApp``, where a server process prints to stderr). The CLI (its exit 2 and one line, ``serve``), the server's own process
refusing to start, and container images run as processes.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from conformance.adapter import ExecRequest, SandboxRequest
from conformance.dialects.rest import load_profile, open_rest_adapter, parse_profile, templates
from conformance.dialects.rest.adapter import RestAdapter
from conformance.dialects.rest.profile import TimedOutSignal
from conformance.errors import (
    ApplicationErrorAnswer,
    NotExpressible,
    ProviderCrashed,
    SchemaViolation,
    UsageError,
)
from conformance.providers import ProviderConfig
from conformance.reference.rest_server import COMPAT, EAGAIN_MESSAGE, Answer, Forkd052App
from conformance.transports.http import Credentials, HttpTransport, RetryPolicy
from tests import inprocess
from tests.helpers import REPO, SuiteRun, cli_main, one_usage_line, run_cli
from tests.mutants import REGISTRY

TOKEN_ENV = "FORKD_TOKEN"  # what the built-in forkd profile reads
ONE_LINE = "sandbox-conformance: error: "
SERVER_START_TIMEOUT_S = 20.0
ACCEPTED_SKIPS = ("capability ", "applies to dialect", "the rest dialect cannot express",
                  "the rest dialect states no rule")


# -- the reference REST server, as the suite's own tests start it -----------------------------------


def _token() -> str:
    return f"test-token-{uuid.uuid4().hex}"


def _with_token(token: str) -> dict[str, str]:
    """This process's environment plus the token where the forkd profile reads it (for a CLI process)."""
    return {**os.environ, TOKEN_ENV: token}


def _first_line(process: subprocess.Popen[str], log_path: Path) -> str:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    if not selector.select(timeout=SERVER_START_TIMEOUT_S):
        raise AssertionError(f"the REST server did not start within {SERVER_START_TIMEOUT_S} s: "
                             f"{log_path.read_text(errors='replace')}")
    line = process.stdout.readline()
    assert line, f"the REST server exited: {log_path.read_text(errors='replace')}"
    return line


def rest_suite(url: str, token: str, monkeypatch: pytest.MonkeyPatch, report_dir: Path,
               **selection: Any) -> inprocess.InProcessRun:
    """What ``sandbox-conformance run --rest URL --profile forkd`` does, in this process, with the server's
    token in this process's environment."""
    monkeypatch.setenv(TOKEN_ENV, token)
    return inprocess.run_suite(ProviderConfig(rest_url=url, profile="forkd"), report_dir, **selection)


def _assert_one_line_error(run: SuiteRun, *fragments: str) -> None:
    assert run.exit_code == 2, (run.exit_code, run.stdout[-500:], run.stderr[-500:])
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(ONE_LINE), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in run.stderr + run.stdout


# -- profiles --------------------------------------------------------------------------------------

FORKD_TEXT = (REPO / "conformance" / "profiles" / "forkd.yaml").read_text()


def _edited(path: str, value: Any) -> str:
    """The forkd profile with the value at a /-separated path replaced (``None`` deletes it)."""
    import yaml

    document = yaml.safe_load(FORKD_TEXT)
    *parents, last = path.strip("/").split("/")
    node = document
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return yaml.safe_dump(document)


def test_the_built_in_forkd_profile_loads() -> None:
    profile = load_profile("forkd")
    assert profile.name == "forkd" and profile.auth_scheme == "bearer" and profile.token_env == TOKEN_ENV
    assert profile.create_id == ["/0/id", "/id"]
    assert profile.create_fields == {"from_snapshot", "memory_mb"}
    assert profile.port() == 8889
    assert profile.list is not None and profile.get is not None and not profile.supports_labels


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        ("exec/timeout/unit", "h", "at /exec/timeout/unit"),
        ("auth/scheme", "kerberos", "at /auth/scheme"),
        ("auth/token_env", None, "at /auth"),
        ("create/id", 7, "at /create/id"),
        ("delete/success", [], "at /delete/success"),
        ("get/path", "v1/sandboxes/{id}", "at /get/path"),
        ("exec/body/args", "{argv}", "at /exec/body/args: unknown placeholder {argv}"),
        ("delete/path", "/v1/sandboxes/{sandbox}", "at /delete/path: unknown placeholder {sandbox}"),
        ("exec/working_dir", "field", "at /exec/working_dir"),
        ("exec/timed_out", [{}], "at /exec/timed_out/0"),
        ("exec/timed_out", [{"status": [500], "body_matches": "(os error 11"}],
         "at /exec/timed_out/0/body_matches: is not a regular expression"),
        ("exec/timed_out", [{"after_deadline": True}], "at /exec/timed_out/0: after_deadline alone"),
        ("exec/timed_out", [{"status": [500], "after_deadline": "yes"}], "at /exec/timed_out/0/after_deadline"),
        ("exec/negative_exit_code", "maybe", "at /exec/negative_exit_code"),
        ("create/not_ready", {"wait_s": 5}, "at /create/not_ready"),
        ("health", None, "'health' is a required property"),
        ("surprise", True, "at /: Additional properties are not allowed ('surprise' was unexpected)"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_bad_profile_is_refused_naming_the_field(path: str, value: Any, fragment: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_profile(_edited(path, value), "profile p.yaml")
    message = str(refused.value)
    assert message.startswith("profile p.yaml is invalid at ") or "required property" in message, message
    assert fragment in message and "\n" not in message


def test_profile_files_names_and_yaml_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"unknown profile 'nosuch': the built-in profiles are forkd"):
        load_profile("nosuch")
    with pytest.raises(UsageError, match=r"profile /nonexistent/p\.yaml does not exist"):
        load_profile("/nonexistent/p.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nauth: [unclosed\n")
    with pytest.raises(UsageError, match=r"is not valid YAML: .* at line \d+ column \d+"):
        load_profile(str(broken))
    good = tmp_path / "mine.yaml"
    good.write_text(_edited("name", "mine"))
    assert load_profile(str(good)).name == "mine"


# -- templates and extraction ----------------------------------------------------------------------


def test_templates_fill_typed_values_and_drop_optional_keys() -> None:
    template = {"args": "{command}", "timeout_secs": "{timeout}", "tag": "{snapshot?}", "note": "run {id}",
                "list": ["{env?}", "x"]}
    filled = templates.fill(template, {"command": ["bash", "-c", "true"], "timeout": 3, "id": "s1"})
    assert filled == {"args": ["bash", "-c", "true"], "timeout_secs": 3, "note": "run s1", "list": ["x"]}
    with pytest.raises(templates.TemplateError, match=r"\{timeout\}"):
        templates.fill({"t": "{timeout}"}, {})
    assert templates.fill_path("/v1/sandboxes/{id}/exec", {"id": "a b/c"}) == "/v1/sandboxes/a%20b%2Fc/exec"
    assert templates.names(template) == {"command", "timeout", "snapshot", "id", "env"}


def test_pointers_read_an_array_answer_and_a_bare_object() -> None:
    array, bare = [{"id": "sb-1", "state": "running"}], {"id": "sb-2"}
    assert templates.first(array, ["/0/id", "/id"]) == ("/0/id", "sb-1")
    assert templates.first(bare, ["/0/id", "/id"]) == ("/id", "sb-2")
    assert templates.first({}, ["/0/id", "/id"]) == (None, None)
    assert templates.resolve({"a/b": {"~": 1}}, "/a~1b/~0") == (True, 1)
    assert templates.resolve([1], "/01") == (False, None)
    assert templates.resolve([1, 2], "") == (True, [1, 2])


# -- the adapter over a mock transport ---------------------------------------------------------------


@dataclass
class Mock:
    """A scripted provider: each request is answered by ``handler`` and recorded."""

    handler: Any
    seen: list[httpx.Request]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        return self.handler(request)


def _adapter(handler: Any, profile_text: str = FORKD_TEXT, attempts: int = 3) -> tuple[RestAdapter, Mock]:
    mock = Mock(handler, [])
    profile = parse_profile(profile_text, "test profile")
    http = HttpTransport("http://provider.test", Credentials("bearer", None, "secret-token-123"),
                         retries=RetryPolicy(attempts, 0.0), transport=httpx.MockTransport(mock), sleep=lambda _s: None)
    return RestAdapter(profile, http, run_labels={"sandbox-conformance.run": "run-x"}), mock


def _json(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None


def test_create_reads_the_id_of_an_array_answer_and_of_a_bare_object() -> None:
    for body in ([{"id": "sb-1", "snapshot_tag": "default"}], {"id": "sb-2"}):
        adapter, mock = _adapter(lambda r, body=body: httpx.Response(201, json=body))
        handle = adapter.create(SandboxRequest())
        assert handle.id in ("sb-1", "sb-2")
        # optional fields without values are dropped, the run label too; forkd's required tag is the default
        assert _json(mock.seen[0]) == {"snapshot_tag": "default"}
        assert mock.seen[0].headers["Authorization"] == "Bearer secret-token-123"
    adapter, _mock = _adapter(lambda r: httpx.Response(201, json=[{"sandbox_id": "x"}]))
    with pytest.raises(SchemaViolation, match=r"no sandbox id at /0/id or /id"):
        adapter.create(SandboxRequest())


def test_the_profiles_create_defaults_yield_to_the_create_spec_and_to_the_scenario() -> None:
    mock = Mock(lambda r: httpx.Response(201, json=[{"id": "sb"}]), [])
    http = HttpTransport("http://provider.test", Credentials("bearer", None, "secret-token-123"),
                         transport=httpx.MockTransport(mock))
    adapter = RestAdapter(parse_profile(FORKD_TEXT, "test profile"), http, base_spec={"snapshot_tag": "zen-gate-base"})
    adapter.create(SandboxRequest())
    adapter.create(SandboxRequest(from_snapshot="warm"))
    assert [_json(sent)["snapshot_tag"] for sent in mock.seen] == ["zen-gate-base", "warm"]


def test_create_maps_what_the_profile_maps_and_refuses_to_express_the_rest() -> None:
    adapter, mock = _adapter(lambda r: httpx.Response(201, json=[{"id": "sb"}]))
    adapter.create(SandboxRequest(from_snapshot="warm", memory_mb=512))
    assert _json(mock.seen[-1]) == {"snapshot_tag": "warm", "memory_limit_mib": 512}
    for request in (SandboxRequest(labels={"a": "b"}), SandboxRequest(cpu_cores=1), SandboxRequest(name="n"),
                    SandboxRequest(extra={"region": "eu"})):
        with pytest.raises(NotExpressible, match="the rest dialect cannot express: creating a sandbox with"):
            adapter.create(request)


def test_error_answers_become_kinds_with_the_status_and_the_body_message() -> None:
    answers = {401: "auth", 403: "auth", 404: "not_found", 400: "invalid_spec", 422: "invalid_spec", 408: "timeout",
               409: "invalid_state", 429: "rate_limited", 500: "provider", 503: "provider"}
    for status, kind in answers.items():
        adapter, _mock = _adapter(lambda r, status=status: httpx.Response(status, json={"error": f"said {status}"}),
                                  attempts=1)
        with pytest.raises(ApplicationErrorAnswer) as refused:
            adapter.describe("sb")
        assert (refused.value.kind, refused.value.http_status, refused.value.message) == (kind, status, f"said {status}")
    adapter, _mock = _adapter(lambda r: httpx.Response(400, json={"error": "memory_limit_mib is not supported"}))
    with pytest.raises(ApplicationErrorAnswer) as refused:
        adapter.create(SandboxRequest(memory_mb=64))
    assert refused.value.kind == "invalid_spec" and refused.value.detail["field"] == "resources.memory_mb"
    adapter, _mock = _adapter(lambda r: httpx.Response(404, text="nope"))
    with pytest.raises(ApplicationErrorAnswer) as refused:
        adapter.describe("sb")
    assert refused.value.message == "" and refused.value.detail["body"] == "nope"


def test_exec_folds_the_command_and_reads_results_timeouts_and_missing_sandboxes() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = _json(request)
        script = body["args"][-1]
        if "missing" in request.url.path:
            return httpx.Response(404, json={"error": "sandbox missing not found"})
        if "sleep" in script:
            return httpx.Response(408, json={"error": "exec deadline exceeded after 1.0s"})
        return httpx.Response(200, json={"stdout": "deadline exceeded", "stderr": "e", "exit_code": 3})

    adapter, mock = _adapter(handler)
    ran = adapter.exec("sb", ExecRequest("echo hi", timeout_s=1.2, env={"A": "1"}, working_dir="/w"))
    assert (ran.outcome, ran.termination, ran.exit_code, ran.stdout) == ("ran", "exited", 3, b"deadline exceeded")
    sent = _json(mock.seen[-1])
    assert sent["timeout_secs"] == 2  # rounded up
    assert sent["args"] == ["env", "A=1", "bash", "-c", "cd -- /w || exit 125\necho hi"]
    timed_out = adapter.exec("sb", ExecRequest("sleep 9", timeout_s=0.1))
    assert (timed_out.outcome, timed_out.termination, timed_out.exit_code) == ("ran", "timed_out", None)
    assert _json(mock.seen[-1])["timeout_secs"] == 1  # the profile's minimum
    missing = adapter.exec("missing", ExecRequest("true"))
    assert missing.outcome == "infra" and missing.error is not None and missing.error.kind == "not_found"
    with pytest.raises(NotExpressible, match="stdin"):
        adapter.exec("sb", ExecRequest("cat", stdin=b"x"))


def test_a_timeout_signal_holds_only_when_every_condition_does() -> None:
    late = TimedOutSignal((500,), body_matches=r"Resource temporarily unavailable \(os error 11\)", after_deadline=True)
    body = json.dumps({"error": EAGAIN_MESSAGE})
    assert late.matches(500, body, False, elapsed_s=6.0, deadline_s=1.0)
    assert late.matches(500, body, False, elapsed_s=1.0, deadline_s=1.0)  # "at least" the deadline
    assert not late.matches(500, body, False, elapsed_s=0.5, deadline_s=1.0)  # sooner: a broken channel
    assert not late.matches(500, body, False)  # no timing known: not a timeout
    assert not late.matches(502, body, False, elapsed_s=6.0, deadline_s=1.0)
    assert not late.matches(500, '{"error": "exec: connection refused"}', False, elapsed_s=6.0, deadline_s=1.0)
    phrase = TimedOutSignal(body_contains="deadline exceeded")
    assert phrase.matches(504, "deadline exceeded", False) and not phrase.matches(200, "deadline exceeded", True)


def test_forkd_052_answers_are_read_as_forkd_answers_them() -> None:
    """The built-in profile reads both forkd eras: the 500 EAGAIN only once the deadline passed, a negative exit
    code as a signal, a signal field, and 408 / "deadline exceeded"."""
    def handler(request: httpx.Request) -> httpx.Response:
        script = _json(request)["args"][-1]
        if script.startswith("late"):
            time.sleep(1.05)  # past the 1 s timeout_secs the request asked for
            return httpx.Response(500, json={"error": EAGAIN_MESSAGE})
        if script.startswith("early"):
            return httpx.Response(500, json={"error": EAGAIN_MESSAGE})
        if script.startswith("killed"):
            return httpx.Response(200, json={"stdout": "", "stderr": "", "exit_code": -15})
        if script.startswith("signal"):
            return httpx.Response(200, json={"stdout": "", "stderr": "", "exit_code": None, "signal": 9})
        if script.startswith("bad-signal"):
            return httpx.Response(200, json={"stdout": "", "stderr": "", "exit_code": None, "signal": "TERM"})
        return httpx.Response(408, json={"error": "exec deadline exceeded after 1.0s (requested timeout_secs=1)"})

    adapter, _mock = _adapter(handler)
    assert adapter.exec_reports == frozenset({"signal"})
    late = adapter.exec("sb", ExecRequest("late", timeout_s=1))
    assert (late.outcome, late.termination, late.exit_code) == ("ran", "timed_out", None)
    early = adapter.exec("sb", ExecRequest("early", timeout_s=1))
    assert early.outcome == "infra" and early.error is not None and early.error.kind == "provider"
    assert EAGAIN_MESSAGE in early.error.message
    killed = adapter.exec("sb", ExecRequest("killed"))
    assert (killed.termination, killed.exit_code, killed.signal) == ("killed", None, 15)
    signalled = adapter.exec("sb", ExecRequest("signal"))
    assert (signalled.termination, signalled.exit_code, signalled.signal) == ("killed", None, 9)
    with pytest.raises(SchemaViolation, match="the signal must be a positive integer"):
        adapter.exec("sb", ExecRequest("bad-signal"))
    patched = adapter.exec("sb", ExecRequest("sleep 5", timeout_s=1))
    assert patched.termination == "timed_out"
    plain, _mock = _adapter(handler, _edited("exec/negative_exit_code", "exit_code").replace("signal: /signal", ""))
    assert plain.exec_reports == frozenset()
    assert plain.exec("sb", ExecRequest("killed")).exit_code == -15  # read as it is: the profile says nothing


def test_a_create_answered_not_ready_is_sent_again_until_ready_or_the_wait_ends() -> None:
    answers = iter([409, 409, 201])

    def handler(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        if status == 409:
            return httpx.Response(409, json={"error": "snapshot warm is still being written"})
        return httpx.Response(201, json=[{"id": "sb-1", "snapshot_tag": "warm"}])

    adapter, mock = _adapter(handler)
    assert adapter.create(SandboxRequest(from_snapshot="warm")).id == "sb-1"
    assert len(mock.seen) == 3
    impatient, mock = _adapter(lambda r: httpx.Response(409, json={"error": "snapshot warm is still being written"}),
                               _edited("create/not_ready/wait_s", 0))
    with pytest.raises(ApplicationErrorAnswer) as refused:
        impatient.create(SandboxRequest(from_snapshot="warm"))
    assert (refused.value.kind, refused.value.http_status, len(mock.seen)) == ("invalid_state", 409, 1)


def test_retries_only_for_idempotent_operations() -> None:
    counts: dict[str, int] = {}

    def flaky(request: httpx.Request) -> httpx.Response:
        counts[request.method] = counts.get(request.method, 0) + 1
        if counts[request.method] < 3:
            return httpx.Response(503, json={"error": "busy"})
        return httpx.Response(204 if request.method == "DELETE" else 200, json=[] if request.method == "GET" else None)

    adapter, _mock = _adapter(flaky)
    adapter.delete("sb")  # 503, 503, then 204
    assert counts["DELETE"] == 3
    assert adapter.list() == [] and counts["GET"] == 3
    with pytest.raises(ApplicationErrorAnswer) as refused:
        adapter.create(SandboxRequest())
    assert refused.value.http_status == 503 and counts["POST"] == 1
    outcome = adapter.exec("sb", ExecRequest("true"))
    assert outcome.outcome == "infra" and counts["POST"] == 2  # one more: exec is never retried

    def unreachable(request: httpx.Request) -> httpx.Response:
        counts["connect " + request.method] = counts.get("connect " + request.method, 0) + 1
        raise httpx.ConnectError("connection refused", request=request)

    adapter, _mock = _adapter(unreachable)
    with pytest.raises(ProviderCrashed, match="cannot connect"):
        adapter.describe("sb")
    assert counts["connect GET"] == 3
    with pytest.raises(ProviderCrashed):
        adapter.create(SandboxRequest())
    assert counts["connect POST"] == 1


def test_the_transcript_records_requests_and_answers_without_the_token() -> None:
    adapter, _mock = _adapter(lambda r: httpx.Response(201, json=[{"id": "sb"}]))
    seen: list[tuple[str, str, str]] = []
    adapter.transport.add_observer(lambda channel, direction, text: seen.append((channel, direction, text)))
    adapter.create(SandboxRequest())
    assert [d for _c, d, _t in seen] == ["sent", "received"]
    assert seen[0][2] == "POST http://provider.test/v1/sandboxes {\"snapshot_tag\":\"default\"}" and seen[1][2].startswith("201 (")
    assert all("secret-token-123" not in text for _c, _d, text in seen)


def test_a_token_variable_that_is_not_set_is_a_one_line_usage_error() -> None:
    with pytest.raises(UsageError, match="environment variable FORKD_TOKEN, which is not set"):
        open_rest_adapter(load_profile("forkd"), "http://127.0.0.1:9", environ={})


# -- the reference REST server ---------------------------------------------------------------------


def test_the_reference_server_wants_the_token_everywhere_but_health_and_never_logs_it() -> None:
    token, lines = _token(), []
    with inprocess.rest_server(token, log=lines) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert client.get("/healthz").json() == {"ok": True}
        refused = client.post("/v1/sandboxes", json={})
        assert (refused.status_code, refused.json()) == (401, {"error": "unauthorized"})
        wrong = client.get("/v1/sandboxes", headers={"Authorization": "Bearer not-the-token"})
        assert wrong.status_code == 401
        auth = {"Authorization": f"Bearer {token}"}
        assert client.get("/v1/sandboxes", headers=auth).json() == []
        created = client.post("/v1/sandboxes", json={}, headers=auth)
        assert created.status_code == 201 and created.json()[0]["memory_limit_mib"] is None
        sandbox = created.json()[0]["id"]
        ran = client.post(f"/v1/sandboxes/{sandbox}/exec", headers=auth, json={"args": ["sh", "-c", "echo hi; exit 4"]})
        assert ran.json() == {"stdout": "hi\n", "stderr": "", "exit_code": 4}
        assert client.post(f"/v1/sandboxes/{sandbox}/exec", headers=auth, json={"args": []}).status_code == 400
        late = client.post(f"/v1/sandboxes/{sandbox}/exec", headers=auth, json={"args": ["sleep", "5"], "timeout_secs": 1})
        assert late.status_code == 408 and "requested timeout_secs=1" in late.json()["error"]
        sized = client.post("/v1/sandboxes", headers=auth, json={"memory_limit_mib": 256})
        assert sized.status_code == 400 and "memory_limit_mib" in sized.json()["error"]
        tagged = client.post("/v1/sandboxes", headers=auth, json={"snapshot_tag": "nope"})
        assert (tagged.status_code, tagged.json()) == (404, {"error": "snapshot nope not found"})
        assert client.delete(f"/v1/sandboxes/{sandbox}", headers=auth).status_code == 204
        assert client.delete(f"/v1/sandboxes/{sandbox}", headers=auth).status_code == 404
        gone = client.post(f"/v1/sandboxes/{sandbox}/exec", headers=auth, json={"args": ["true"]})
        assert gone.status_code == 404
    log = "\n".join(lines)  # the server's log: one line per request
    assert "POST /v1/sandboxes 401" in log and "GET /healthz 200" in log
    assert token not in log


def test_the_forkd_052_server_answers_as_forkd_052(monkeypatch: pytest.MonkeyPatch) -> None:
    """--compat forkd-0.5.2: a create without the required snapshot_tag refused 422 in text (axum's rejection),
    SandboxInfo without a state and with the memory asked, a negative exit code for a
    signal, 404 "snapshot <tag> not found", 409 while a snapshot is written and then a sandbox from it."""
    token = _token()
    served: list[Forkd052App] = []

    refusals = []  # (status) of each create while a snapshot is written
    refused_twice = threading.Event()

    class Served(Forkd052App):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            served.append(self)

        def create(self, body: Any) -> Answer:
            try:
                return super().create(body)
            except Answer as refused:
                if refused.status == 409:
                    refusals.append(refused.status)
                    if len(refusals) == 2:
                        refused_twice.set()
                raise

    with inprocess.rest_server(token, Served, log=[]) as url:
        headers = {"Authorization": f"Bearer {token}"}
        untagged = httpx.post(url + "/v1/sandboxes", json={"memory_limit_mib": 64}, headers=headers, timeout=30)
        assert (untagged.status_code, untagged.headers["content-type"].split(";")[0]) == (422, "text/plain")
        assert "missing field `snapshot_tag`" in untagged.text
        created = httpx.post(url + "/v1/sandboxes", json={"snapshot_tag": "default", "memory_limit_mib": 64},
                             headers=headers, timeout=30)
        assert created.status_code == 201
        (info,) = created.json()
        assert "state" not in info and info["memory_limit_mib"] == 64
        ran = httpx.post(f"{url}/v1/sandboxes/{info['id']}/exec", json={"args": ["bash", "-c", "kill -TERM $$"]},
                         headers=headers, timeout=30).json()
        assert ran == {"stdout": "", "stderr": "", "exit_code": -15}
        missing = httpx.post(url + "/v1/sandboxes", json={"snapshot_tag": "nosuch"}, headers=headers, timeout=30)
        assert (missing.status_code, missing.json()) == (404, {"error": "snapshot nosuch not found"})
        refused = httpx.post(url + "/v1/sandboxes", json={"snapshot_tag": "default", "memory_limit_mib": "lots"},
                              headers=headers, timeout=30)
        assert refused.status_code == 400
        monkeypatch.setenv(TOKEN_ENV, token)
        adapter = open_rest_adapter(load_profile("forkd"), url)
        try:
            served[0].write_snapshot("warming", 600)
            writing = httpx.post(url + "/v1/sandboxes", json={"snapshot_tag": "warming"}, headers=headers, timeout=30)
            assert writing.status_code == 409
            # the snapshot is written once the adapter's own create has been answered 409 (no clock to race)
            done = threading.Thread(target=lambda: refused_twice.wait(60) and served[0].write_snapshot("warming", 0))
            done.start()
            warm = adapter.create(SandboxRequest(from_snapshot="warming"))
            done.join()
            assert len(refusals) >= 2 and warm.status.state == "running"
            assert adapter.describe(warm.id).raw["snapshot_tag"] == "warming"
            for sandbox_id in (info["id"], warm.id):
                adapter.delete(sandbox_id)
        finally:
            adapter.close()


def test_an_unknown_compat_mode_is_exit_2_and_one_line(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    code, _out, err = cli_main(capsys, "serve", "forkd", "--port", "0", "--compat", "forkd-0.4")
    line = one_usage_line(code, err)
    assert "--compat" in line and "forkd-0.4" in line and "forkd-0.5.2" in line
    from conformance.reference import rest_server

    monkeypatch.setenv("SC_COMPAT_TOKEN", "t0k3n")
    assert rest_server.main(["--port", "0", "--token-env", "SC_COMPAT_TOKEN", "--compat", "forkd-0.4"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "unknown --compat 'forkd-0.4'" in err
    monkeypatch.setenv("FORKD_COMPAT", "forkd-0.5.2")  # the image's way to choose, read when no --compat is given
    assert rest_server.build_parser().parse_args([]).compat == "forkd-0.5.2"


def test_the_reference_server_refuses_to_start_without_a_token() -> None:
    """Subprocess: the server's own process, its exit 2 and one line."""
    completed = subprocess.run([sys.executable, "-m", "conformance.reference.rest_server", "--port", "0",
                                "--token-env", "SC_NO_SUCH_TOKEN"], capture_output=True, text=True, timeout=30,
                               env={k: v for k, v in os.environ.items() if k != "SC_NO_SUCH_TOKEN"}, check=False)
    assert completed.returncode == 2 and completed.stdout == ""
    assert len(completed.stderr.strip().splitlines()) == 1 and "SC_NO_SUCH_TOKEN" in completed.stderr


def test_serve_runs_the_reference_server_in_the_foreground(tmp_path: Path) -> None:
    """Subprocess: the CLI's serve command."""
    process = subprocess.Popen([sys.executable, "-m", "conformance.cli", "serve", "forkd", "--port", "0",
                                "--host", "127.0.0.1", "--compat", "forkd-0.5.2"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env={**os.environ, TOKEN_ENV: "serve-token-1234"})
    try:
        (tmp_path / "serve.log").write_text("(stderr not kept)")
        url = _first_line(process, tmp_path / "serve.log").removeprefix("listening on ").strip()
        assert httpx.get(url + "/healthz", timeout=10).status_code == 200
        headers = {"Authorization": "Bearer serve-token-1234"}
        (info,) = httpx.post(url + "/v1/sandboxes", json={"snapshot_tag": "default"}, headers=headers, timeout=10).json()
        assert "state" not in info  # forkd 0.5.2's SandboxInfo, as --compat asked
        assert httpx.delete(f"{url}/v1/sandboxes/{info['id']}", headers=headers, timeout=10).status_code == 204
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
        assert process.stdout is not None
        process.stdout.close()


# -- the command line ------------------------------------------------------------------------------
# Subprocess, all of them: the CLI's exit 2 and its one line.


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        (["--rest", "http://127.0.0.1:9"], ("http://127.0.0.1:9", "cannot be reached")),
        (["--rest", "ftp://example.test"], ("--rest 'ftp://example.test' is not a usable URL",)),
        (["--rest", "http://"], ("is not a usable URL",)),
        (["--rest", "http://127.0.0.1:9", "--profile", "nosuch"], ("unknown profile 'nosuch'",)),
        (["--rest", "http://127.0.0.1:9", "--profile", "/nonexistent/p.yaml"], ("/nonexistent/p.yaml does not exist",)),
        (["--profile", "forkd"], ("--profile applies to REST providers only",)),
        (["--rest", "http://127.0.0.1:9", "--plugin", "x"], ("not allowed with argument",)),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_bad_rest_input_ends_with_exit_2_and_one_line(arguments: list[str], fragments: tuple[str, ...],
                                                      tmp_path: Path) -> None:
    run = run_cli("run", *arguments, report_dir=tmp_path, timeout=60, env={**os.environ, TOKEN_ENV: "t0k3n-x"})
    _assert_one_line_error(run, *fragments)


def test_a_bad_profile_file_ends_with_exit_2_naming_the_field(tmp_path: Path) -> None:
    profile = tmp_path / "bad.yaml"
    profile.write_text(_edited("exec/timeout/unit", "h"))
    run = run_cli("run", "--rest", "http://127.0.0.1:9", "--profile", str(profile), report_dir=tmp_path, timeout=60,
                  env={**os.environ, TOKEN_ENV: "t0k3n-x"})
    _assert_one_line_error(run, str(profile), "at /exec/timeout/unit")


def test_an_unset_token_or_a_refused_token_ends_with_exit_2_and_one_line(tmp_path: Path) -> None:
    with inprocess.rest_server(_token()) as url:  # the server on a thread, the CLI a process
        without = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        run = run_cli("run", "--rest", url, report_dir=tmp_path, timeout=60, env=without)
        _assert_one_line_error(run, "FORKD_TOKEN", "not set")
        run = run_cli("run", "--rest", url, report_dir=tmp_path, timeout=60, env=_with_token("the-wrong-token-42"))
        _assert_one_line_error(run, "refused the token from $FORKD_TOKEN", "HTTP 401")
        assert "the-wrong-token-42" not in run.stderr


# -- the whole suite -------------------------------------------------------------------------------


def _assert_green(run: SuiteRun | inprocess.InProcessRun) -> dict[str, Any]:
    assert run.exit_code == 0, run.stdout[-3000:] + run.stderr[-2000:]
    results = run.results
    for scenario in results["scenarios"]:
        if scenario["outcome"] != "passed":
            assert scenario["outcome"] == "skipped", f"{scenario['id']} ended {scenario['outcome']}: {scenario.get('message')}"
            assert scenario["message"].startswith(ACCEPTED_SKIPS), f"{scenario['id']}: {scenario['message']}"
    provider = results["provider"]
    assert (provider["kind"], provider["dialect"], provider["transport"]) == ("forkd", "rest", "http")
    assert results["sandboxes"]["leaked"] == []
    assert results["sandboxes"]["created"] == results["sandboxes"]["deleted"] > 0
    assert len(set(results["sandboxes"]["ids"])) == results["sandboxes"]["created"]  # what sweep --from-results reads
    return results


@pytest.mark.slow
@pytest.mark.parametrize("compat", ["patched", "forkd-0.5.2"])
def test_the_reference_rest_server_passes_the_whole_suite_over_rest(compat: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """In both of the bundled server's modes: the proposed controller patch, and forkd 0.5.2 (a timeout is a
    late 500 EAGAIN, a signal a negative exit code, no state in SandboxInfo, memory_limit_mib enforced)."""
    token = _token()
    with inprocess.rest_server(token, COMPAT[compat]) as url:
        run = rest_suite(url, token, monkeypatch, tmp_path / "reports")
    results = _assert_green(run)
    passed = {s["id"] for s in results["scenarios"] if s["outcome"] == "passed"}
    rest_ids = {s["id"] for s in results["scenarios"] if s["feature"] == "rest.feature"}
    assert rest_ids and rest_ids <= passed
    gaps_seen = {"timeout-is-not-an-exit-code", "exec-unknown-sandbox-is-an-error", "exec-deleted-sandbox-is-an-error",
                 "delete-unknown", "delete-twice", "create-describe-delete", "resources-memory"}
    assert gaps_seen <= passed


def test_a_token_never_appears_in_results_junit_or_the_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token, lines = f"PLANTED-{uuid.uuid4().hex}-TOKEN", []
    # A mutant that fails scenarios, so failure diagnostics (transcripts, stderr) are written too.
    with inprocess.rest_server(token, REGISTRY["rest-auth-not-enforced"], log=lines) as url:
        run = rest_suite(url, token, monkeypatch, tmp_path / "reports", features=("rest.feature", "delete.feature"))
    log = "\n".join(lines)
    assert len(lines) > 10, lines  # the server logged the run's requests
    assert run.exit_code == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.with_outcome("failed") >= {"rest-missing-credential"}
    failure = next(s for s in run.results["scenarios"] if s["id"] == "rest-missing-credential")
    assert any("POST http://127.0.0.1:" in line for line in failure["transcript"])
    for where, text in (("results.json", (run.report_dir / "results.json").read_text()),
                        ("junit.xml", (run.report_dir / "junit.xml").read_text()),
                        ("summary.md", (run.report_dir / "summary.md").read_text()),
                        ("report.html", (run.report_dir / "report.html").read_text()),
                        ("stdout", run.stdout), ("stderr", run.stderr), ("the server's log", log)):
        # the near misses rest-near-miss-credential sends are the token one character short or long
        assert token[:-1] not in text, f"the token, or a near miss of it, appears in {where}"


@pytest.mark.slow
def test_the_suite_runs_green_through_an_image_and_leaves_no_container(rest_server_image: str, tmp_path: Path) -> None:
    """Subprocess: a container image (--image)."""
    from conformance import containers

    run_id = f"run-image-{uuid.uuid4().hex[:10]}"
    run = run_cli("run", "--image", rest_server_image, "--run-id", run_id, report_dir=tmp_path / "reports",
                  timeout=900, env={k: v for k, v in os.environ.items() if k != TOKEN_ENV})
    try:
        results = _assert_green(run)
        assert results["provider"]["command"].startswith("http://")
        assert {s["id"] for s in results["scenarios"] if s["feature"] == "rest.feature"} <= run.with_outcome("passed")
    finally:
        left = containers.labelled(run_id)
        containers.remove_labelled(run_id)
    assert left == [], f"containers left behind with the run label: {left}"


@pytest.mark.slow
def test_an_interrupted_image_run_still_removes_its_container(rest_server_image: str, tmp_path: Path) -> None:
    """Subprocess: a container image (--image) and SIGINT to the CLI."""
    import signal

    from conformance import containers

    run_id = f"run-image-{uuid.uuid4().hex[:10]}"
    process = subprocess.Popen([sys.executable, "-m", "conformance.cli", "run", "--image", rest_server_image,
                                "--run-id", run_id, "--report-dir", str(tmp_path / "reports")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while not containers.labelled(run_id):
            assert process.poll() is None, f"the run ended before its container started: {process.stderr.read()}"
            assert time.monotonic() < deadline, "the container never started"
            time.sleep(0.2)
        time.sleep(2.0)  # into the run
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 1
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        left = containers.labelled(run_id)
        containers.remove_labelled(run_id)
    assert left == [], f"an interrupted run left containers behind: {left}"


def test_an_exec_is_read_until_the_providers_late_timeout_answer_can_have_come() -> None:
    """forkd 0.5.2 answers a timeout 5 s after it: a --call-timeout shorter than that must not cut it off."""
    mock = Mock(lambda r: httpx.Response(500, json={"error": EAGAIN_MESSAGE}), [])
    http = HttpTransport("http://provider.test", Credentials("bearer", None, "secret-token-123"),
                         transport=httpx.MockTransport(mock))
    adapter = RestAdapter(parse_profile(FORKD_TEXT, "test profile"), http, call_timeout_s=1.0, call_timeout_given=True)
    adapter.exec("sb-1", ExecRequest("sleep 5", timeout_s=0.4))
    # the timeout as sent (rounded up to 1 s), the 5 s forkd 0.5.2 may answer late, then the call timeout
    assert mock.seen[-1].extensions["timeout"]["read"] >= 1 + 5 + 1


def test_a_near_miss_of_the_token_is_one_character_short_or_long_and_never_a_padding_variant() -> None:
    from conformance.dialects.rest.adapter import near_misses

    assert near_misses("secret-token-123") == ("secret-token-12", "secret-token-123x")
    assert near_misses("c2VjcmV0dG9rZW4x==") == ("c2VjcmV0dG9rZW4", "c2VjcmV0dG9rZW4xy")  # base64 padding left out
    assert near_misses("tokenx") == ("token", "tokenxy")
