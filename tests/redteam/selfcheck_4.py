"""Self-check of the b4_* mutants: each starts and answers initialize; for each, the fault is reachable.

``python -m tests.redteam.selfcheck_4`` (from the worktree root, PYTHONPATH set). A reachability check is a
function of a live client that returns True when the plugin behaves as the protocol says: the honest
reference plugin must pass it and the mutant must fail it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

# The client and helpers every self-check shares.
from tests.redteam.selfcheck_client import (  # noqa: F401 -- re-exported for the later self-checks
    HONEST,
    INIT,
    PY,
    ROUTE,
    Client,
    d64,
    detail,
    drive,
    e64,
    err,
    events,
    kind,
    mutant_cmd,
    ok,
    outputs,
    pty_session,
    run,
    setup,
    sid_of,
    stdio_all,
    stream,
    stream_id,
)

# ---------------------------------------------------------------- checks: True = conforming

CHECKS: dict[str, Callable[[Client], bool]] = {}
CHECK_ENV: dict[str, dict[str, str]] = {}


def check(name: str, env: dict[str, str] | None = None):
    def register(fn):
        CHECKS[name] = fn
        if env:
            CHECK_ENV[name] = env
        return fn
    return register

def _run(cl, sid, command, **spec):
    spec.setdefault("timeout_ms", 20000)
    return run(cl, sid, command, **spec)


def _out(resp):
    return d64(((resp or {}).get("result") or {}).get("stdout_b64"))


def _sout(resp):
    return d64((((resp or {}).get("result") or {}).get("result") or {}).get("stdout_b64"))


def _write(cl, sid, path, data: bytes, **extra):
    return cl.call("fs/write", {"sandbox_id": sid, "path": path, "content_b64": e64(data), **extra})


def _read(cl, sid, path, **extra):
    resp = cl.call("fs/read", {"sandbox_id": sid, "path": path, **extra})
    return d64(resp["result"]["content_b64"]) if ok(resp) else None


def _describe(cl, sid):
    return cl.call("sandbox/describe", {"sandbox_id": sid})


def _stream_full(cl, sid, command, exec_id="s1", limit=None, timeout=20, **spec):
    rid = stream_id(cl, sid, exec_id, command, limit, **spec)
    resp = cl.response(rid, timeout)
    return resp, outputs(cl, exec_id, "stdout"), outputs(cl, exec_id, "stderr")


def _sanitized(cl, command, mode):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, command, output_sanitization=mode))


# -- handshake / capabilities


@check("b4_isolation_host")
def _(cl):
    return cl.init()["result"]["capabilities"]["isolation"] in ("none", "container", "vm")


@check("b4_version_newer_downgraded")
def _(cl):
    resp = cl.call("initialize", {"protocol_version": 2})
    return kind(resp) == "invalid_spec" and "1" in err(resp)["message"] and "2" in err(resp)["message"]


@check("b4_version_mismatch_decode_error")
def _(cl):
    resp = cl.call("initialize", {"protocol_version": 7})
    return err(resp).get("code") == -32000 and kind(resp) == "invalid_spec" \
        and detail(resp).get("field") == "protocol_version"


@check("b4_attach_caps_minimal")
def _(cl):
    sid, _ = setup(cl)
    caps = cl.call("sandbox/attach", {"sandbox_id": sid})["result"]["capabilities"]
    paused = ok(cl.call("sandbox/pause", {"sandbox_id": sid}))
    cl.call("sandbox/resume", {"sandbox_id": sid})
    return caps["lifecycle"]["pause"] == paused and (caps["pty"] is not None) and (caps["logs"] is not None)


@check("b4_logs_entrypoint_unsupported")
def _(cl):
    sid, _ = setup(cl)
    rid = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "source": "entrypoint"})
    time.sleep(0.5)
    cl.call("stream/cancel", {"stream_id": "l1"})
    return ok(cl.response(rid, 5))


@check("b4_access_methods_not_found")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("access/ssh_create", {"sandbox_id": sid, "ttl_ms": None})
    return kind(resp) == "unsupported" and detail(resp).get("capability") == "access.ssh"


@check("b4_snapshot_create_from_sandbox_unsupported")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("snapshot/create", {"spec": {"name": "s", "source": {"sandbox": {"id": sid}}}})
    return ok(resp) and resp["result"]["snapshot_id"]


# -- envelope / errors


@check("b4_bad_params_id_zero")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/describe", {}, timeout=5)
    return err(resp).get("code") == -32600


@check("b4_error_message_generic")
def _(cl):
    cl.init()
    e = err(cl.call("sandbox/describe", {"sandbox_id": "host-nope"}))
    return e.get("message") == e.get("data", {}).get("report", {}).get("message") and "nope" in e.get("message", "")


@check("b4_missing_jsonrpc_served")
def _(cl):
    cl.init()
    cl.raw(b'{"id":5,"method":"provider/health","params":null}\n')
    found = cl.wait_for(lambda m: "error" in m or m.get("id") == 5, 5)
    return found is not None and "error" in found[1] and found[1]["error"]["code"] == -32600


@check("b4_float_id_accepted")
def _(cl):
    cl.init()
    cl.raw(b'{"jsonrpc":"2.0","id":5.0,"method":"provider/health","params":null}\n')
    found = cl.wait_for(lambda m: "error" in m or "result" in m and m.get("id") == 5, 5)
    return found is not None and "error" in found[1] and found[1]["error"]["code"] == -32600


@check("b4_not_found_without_id")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/describe", {"sandbox_id": "host-nope"})
    return kind(resp) == "not_found" and detail(resp).get("id") == "host-nope"


ACTIONS = {"create", "attach", "start", "stop", "delete", "activate", "deactivate", "pause", "resume", "archive",
           "fork", "resize", "snapshot", "snapshot_sandbox", "recover", "undelete", "refresh_activity", "set_timers",
           "set_labels", "update_network", "unknown"}


@check("b4_invalid_state_action_exec")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/stop", {"sandbox_id": sid})
    resp = _run(cl, sid, "true")
    return kind(resp) == "invalid_state" and detail(resp).get("action") in ACTIONS \
        and detail(resp).get("current") == "stopped"


@check("b4_invalid_state_current_target")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/stop", {"sandbox_id": sid})
    resp = cl.call("sandbox/pause", {"sandbox_id": sid})
    return kind(resp) == "invalid_state" and detail(resp).get("current") == "stopped"


@check("b4_causes_full_traceback")
def _(cl):
    sid, _ = setup(cl)
    resp = _run(cl, sid, "true", env={"A": 1})
    causes = (err(resp).get("data") or {}).get("report", {}).get("causes")
    return "error" in (resp or {}) and isinstance(causes, list) and len(causes) <= 8 \
        and all(len(c.encode()) <= 503 for c in causes)


@check("b4_snapshot_not_found_resource_sandbox")
def _(cl):
    cl.init()
    resp = cl.call("snapshot/get", {"snapshot_id": "snap-0123456789abcdef0123"})
    return kind(resp) == "not_found" and detail(resp).get("resource") == "snapshot"


# -- transport / concurrency


@check("b4_worker_pool_four")
def _(cl):
    sid, _ = setup(cl)
    for i in range(4):
        cl.send("logs/follow", {"sandbox_id": sid, "stream_id": f"l{i}", "source": "entrypoint"})
    time.sleep(0.5)
    good = ok(cl.call("provider/health", None, timeout=3))
    for i in range(4):
        cl.send("stream/cancel", {"stream_id": f"l{i}"})
    return good


@check("b4_stdio_output_holds_table_lock")
def _(cl):
    sid, _ = setup(cl)
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "a", "spec": {"command": "sleep 3; echo hi", "env": {}}})
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "b", "spec": {"command": "cat", "env": {}}})
    cl.send("exec/stdio_output", {"process_id": "a"})
    time.sleep(0.3)
    t0 = time.monotonic()
    good = ok(cl.call("exec/stdio_input", {"process_id": "b", "data_b64": e64(b"x\n")}, timeout=5))
    return good and time.monotonic() - t0 < 1.5


# -- lifecycle / status


@check("b4_start_running_invalid_state")
def _(cl):
    sid, _ = setup(cl)
    return ok(cl.call("sandbox/start", {"sandbox_id": sid}))


@check("b4_stop_state_not_updated")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/stop", {"sandbox_id": sid})
    return _describe(cl, sid)["result"]["status"]["state"] == "stopped"


def _listed(cl, flt):
    resp = cl.call("sandbox/list", {"filter": flt})
    return [s["id"] for s in resp["result"]["sandboxes"]] if ok(resp) else None


@check("b4_list_includes_deleted")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/delete", {"sandbox_id": sid})
    return sid not in _listed(cl, {})


@check("b4_list_empty_filter_needs_labels")
def _(cl):
    sid, _ = setup(cl)
    return sid in (_listed(cl, {"labels": {}}) or [])


@check("b4_list_filter_null_labels_rejected")
def _(cl):
    sid, _ = setup(cl)
    return sid in (_listed(cl, {"labels": None}) or [])


@check("b4_set_labels_empty_ignored")
def _(cl):
    sid, _ = setup(cl, labels={"a": "1"})
    cl.call("sandbox/set_labels", {"sandbox_id": sid, "labels": {}})
    return _describe(cl, sid)["result"]["status"]["labels"] == {}


@check("b4_name_truncated_dns_label")
def _(cl):
    name = "sandbox-with-a-rather-long-display-name-" + "x" * 40
    sid, info = setup(cl, name=name)
    return info["status"]["name"] == name and _describe(cl, sid)["result"]["status"]["name"] == name


def _rejects(cl, field, **spec):
    cl.init()
    resp = cl.call("sandbox/create", {"spec": {"source": "host_directory", **spec}})
    return kind(resp) == "invalid_spec" and detail(resp).get("field", "").startswith(field)


@check("b4_create_ignores_ttl")
def _(cl):
    return _rejects(cl, "timers", timers={"ttl": {"secs": 3600, "nanos": 0}})


@check("b4_create_ignores_gpus")
def _(cl):
    return _rejects(cl, "resources", resources={"gpus": 1})


@check("b4_create_network_dict_accepted")
def _(cl):
    return _rejects(cl, "network", network={"cidr_allow_list": {"cidrs": ["10.0.0.0/8"]}})


def _snapshot(cl, sid):
    return cl.call("sandbox/snapshot", {"sandbox_id": sid, "options": {"name": None}})["result"]["snapshot_id"]


@check("b4_snapshot_source_ignored")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "keep.txt", b"kept")
    snap = _snapshot(cl, sid)
    other = sid_of(cl.call("sandbox/create", {"spec": {"source": {"snapshot": {"name": snap}}}})["result"])
    return _read(cl, other, "keep.txt") == b"kept"


@check("b4_snapshot_live_reference")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "f.txt", b"before")
    snap = _snapshot(cl, sid)
    _write(cl, sid, "f.txt", b"after")
    other = sid_of(cl.call("sandbox/create", {"spec": {"source": {"snapshot": {"name": snap}}}})["result"])
    return _read(cl, other, "f.txt") == b"before"


@check("b4_undelete_empty_workspace")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "f.txt", b"precious")
    cl.call("sandbox/delete", {"sandbox_id": sid})
    if not ok(cl.call("sandbox/undelete", {"sandbox_id": sid})):
        return False
    return _read(cl, sid, "f.txt") == b"precious"


@check("b4_delete_while_deleting_invalid_state")
def _(cl):
    sid, _ = setup(cl)
    a = cl.send("sandbox/delete", {"sandbox_id": sid})
    b = cl.send("sandbox/delete", {"sandbox_id": sid})
    return ok(cl.response(a, 10)) and ok(cl.response(b, 10))


@check("b4_attach_deleted_tombstone")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/delete", {"sandbox_id": sid})
    return kind(cl.call("sandbox/attach", {"sandbox_id": sid})) == "not_found"


@check("b4_platform_arch_goarch")
def _(cl):
    sid, _ = setup(cl)
    arch = cl.call("sandbox/platform_info", {"sandbox_id": sid})["result"]["platform"]["arch"]
    return arch not in ("amd64", "arm64", "x64", "386")


@check("b4_health_status_healthy")
def _(cl):
    cl.init()
    return cl.call("provider/health", None)["result"]["health"]["status"] in ("ok", "unreachable", "unauthorized",
                                                                              "unknown")


@check("b4_id_from_timestamp_seconds")
def _(cl):
    cl.init()
    ids = {sid_of(cl.create()) for _ in range(3)}
    return len(ids) == 3


@check("b4_working_directory_parent")
def _(cl):
    sid, info = setup(cl)
    return _out(_run(cl, sid, "pwd")).decode().strip() == info["working_directory"]


@check("b4_archive_stopped_invalid_state")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/stop", {"sandbox_id": sid})
    return ok(cl.call("sandbox/archive", {"sandbox_id": sid}))


@check("b4_list_first_page_only")
def _(cl):
    cl.init()
    mine = {sid_of(cl.create(labels={"batch": "b4"})) for _ in range(55)}
    return mine <= set(_listed(cl, {"labels": {"batch": "b4"}}))


@check("b4_shutdown_refused_when_busy")
def _(cl):
    sid, _ = setup(cl)
    stream_id(cl, sid, "s1", "sleep 5")
    time.sleep(0.5)
    resp = cl.call("shutdown", None, timeout=5)
    try:
        cl.proc.wait(timeout=8)
    except subprocess.TimeoutExpired:
        return False
    return ok(resp)


# -- exec


@check("b4_spec_env_secrets_filtered")
def _(cl):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, 'echo "${GITHUB_TOKEN-unset}"', env={"GITHUB_TOKEN": "ghp_abc"})) == b"ghp_abc\n"


@check("b4_secret_filter_case_sensitive", env={"B4_SERVICE_API_KEY": "sk-live-123"})
def _(cl):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, 'echo "${B4_SERVICE_API_KEY-unset}"')) == b"unset\n"


RC = "/tmp/b4-selfcheck-bashenv.sh"


@check("b4_bash_env_from_create_env")
def _(cl):
    with open(RC, "w") as handle:
        handle.write("echo SOURCED\n")
    sid, _ = setup(cl, env={"BASH_ENV": RC})
    return b"SOURCED" not in _out(_run(cl, sid, "echo hi"))


@check("b4_env_names_uppercased")
def _(cl):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, 'echo "${my_var-unset}"', env={"my_var": "v"})) == b"v\n"


@check("b4_timeout_absent_zero")
def _(cl):
    sid, _ = setup(cl)
    resp = run(cl, sid, "sleep 0.2; echo hi")
    return ok(resp) and resp["result"]["termination"] == "exited" and _out(resp) == b"hi\n"


@check("b4_timeout_kills_leader_only")
def _(cl):
    sid, _ = setup(cl)
    resp, _, _ = _stream_full(cl, sid, "(sleep 6; echo late) & sleep 30", timeout_ms=500)
    r = resp["result"]
    return r["result"]["termination"] == "timed_out" and not r["stdout_capture"].get("truncated") \
        and r["result"]["duration_ms"] < 2500


@check("b4_cancel_sigkill_no_grace")
def _(cl):
    sid, _ = setup(cl)
    rid = stream_id(cl, sid, "s1", "trap 'echo bye; exit 0' TERM; echo ready; while true; do sleep 0.1; done")
    cl.wait_for(lambda m: m.get("method") == "exec/output", 5)
    cl.call("exec/cancel", {"exec_id": "s1"})
    resp = cl.response(rid, 10)
    return resp["result"]["result"]["termination"] == "cancelled" and b"bye" in _sout(resp)


@check("b4_cancel_whole_sandbox")
def _(cl):
    sid, _ = setup(cl)
    r1 = stream_id(cl, sid, "s1", "sleep 5")
    r2 = stream_id(cl, sid, "s2", "sleep 1; echo done")
    time.sleep(0.3)
    cl.call("exec/cancel", {"exec_id": "s1"})
    resp2 = cl.response(r2, 10)
    cl.response(r1, 10)
    return resp2["result"]["result"]["termination"] == "exited" and _sout(resp2) == b"done\n"


@check("b4_stdin_blocks_timeout")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("exec/run", {"sandbox_id": sid, "spec": {"command": "sleep 20", "env": {}, "timeout_ms": 1000,
                                                            "stdin_b64": e64(b"z" * (1 << 20))}}, timeout=8)
    return ok(resp) and resp["result"]["termination"] == "timed_out"


@check("b4_run_stdout_nul_truncated")
def _(cl):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, r"printf 'a\0b\0c'")) == b"a\0b\0c"


@check("b4_stream_output_lossy_utf8")
def _(cl):
    sid, _ = setup(cl)
    _, out, _ = _stream_full(cl, sid, r"printf '\xff\xfe\x80ok'")
    return out == b"\xff\xfe\x80ok"


@check("b4_null_limit_retains_nothing")
def _(cl):
    sid, _ = setup(cl)
    resp, _, _ = _stream_full(cl, sid, "echo retained")
    return _sout(resp) == b"retained\n" and resp["result"]["stdout_capture"]["omitted_bytes"] == 0


@check("b4_capture_stats_swapped")
def _(cl):
    sid, _ = setup(cl)
    resp, _, _ = _stream_full(cl, sid, "printf aaaa; printf b >&2")
    r = resp["result"]
    return r["stdout_capture"]["observed_bytes"] == 4 and r["stderr_capture"]["observed_bytes"] == 1


# -- sanitization


@check("b4_strip_all_drops_cr")
def _(cl):
    return _sanitized(cl, r"printf 'a\r\nb\tc\x01d'", "strip_all") == b"a\r\nb\tcd"


@check("b4_strip_ansi_drops_controls")
def _(cl):
    return _sanitized(cl, r"printf 'a\x07b\x08c\033[1md'", "strip_ansi") == b"a\x07b\x08cd"


@check("b4_sanitizer_per_chunk")
def _(cl):
    return _sanitized(cl, r"printf 'x\033['; sleep 0.3; printf '31my'", "strip_ansi") == b"xy"


@check("b4_sanitize_no_c1_forms")
def _(cl):
    return _sanitized(cl, r"printf 'a\xc2\x9b31mb'", "strip_ansi") == b"ab"


@check("b4_osc_st_terminator_ignored")
def _(cl):
    return _sanitized(cl, r"printf 'a\033]8;;http://x\033\\link\033]8;;\033\\b\n'", "strip_ansi") == b"alinkb\n"


@check("b4_csi_private_params_leak")
def _(cl):
    return _sanitized(cl, r"printf 'a\033[?25lb\033[?25h'", "strip_ansi") == b"ab"


# -- files


@check("b4_read_offset_ignored_without_length")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "f.txt", b"hello world")
    return _read(cl, sid, "f.txt", offset=6) == b"world"


@check("b4_write_text_mode")
def _(cl):
    sid, _ = setup(cl)
    blob = bytes(range(256))
    _write(cl, sid, "b.bin", blob)
    return _read(cl, sid, "b.bin") == blob


@check("b4_delete_ignores_recursive_false")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "d/f.txt", b"x")
    resp = cl.call("fs/delete", {"sandbox_id": sid, "path": "d", "recursive": False})
    exists = cl.call("fs/exists", {"sandbox_id": sid, "path": "d/f.txt"})["result"]["exists"]
    return "error" in resp and exists


def _entries(cl, sid, path=".", depth=1):
    return {e["path"]: e for e in cl.call("fs/list_dir", {"sandbox_id": sid, "path": path, "depth": depth})
            ["result"]["entries"]}


@check("b4_list_dir_follows_symlinks")
def _(cl):
    sid, _ = setup(cl)
    _run(cl, sid, "echo x > f; mkdir d; ln -s f lf; ln -s d ld")
    entries = _entries(cl, sid, ".", 2)
    return entries["lf"]["kind"] == "symlink" and entries["ld"]["kind"] == "symlink"


@check("b4_list_dir_nested_basename")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "sub/file.txt", b"x")
    return "sub/file.txt" in _entries(cl, sid, ".", 2)


@check("b4_list_dir_capped_1000")
def _(cl):
    sid, _ = setup(cl)
    _run(cl, sid, "mkdir many && cd many && for i in $(seq 1 1100); do : > f$i; done")
    return len(_entries(cl, sid, "many", 1)) == 1100


# -- stdio / PTY


@check("b4_stderr_tail_boundary_ellipsis")
def _(cl):
    _stdio(cl, "head -c 8192 /dev/zero | tr '\\0' e >&2")
    tail = cl.call("exec/stdio_wait", {"process_id": "p1"})["result"]["stderr_tail"]
    return tail == "e" * 8192


@check("b4_stdio_env_ignored")
def _(cl):
    sid, _ = setup(cl)
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1",
                                "spec": {"command": 'echo "${B4X-unset}"', "env": {"B4X": "set"}}})
    return stdio_all(cl, "p1") == b"set\n"


@check("b4_stdio_failed_open_leaks_id")
def _(cl):
    sid, _ = setup(cl)
    bad = cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1",
                                      "spec": {"command": "true", "env": {}, "working_dir": "no/such/dir"}})
    good = cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1",
                                       "spec": {"command": "echo ok", "env": {}}})
    return "error" in bad and ok(good)


@check("b4_stdio_stderr_merged")
def _(cl):
    _stdio(cl, "echo out; echo err >&2")
    out = stdio_all(cl, "p1")
    tail = cl.call("exec/stdio_wait", {"process_id": "p1"})["result"]["stderr_tail"]
    return out == b"out\n" and tail == "err\n"


@check("b4_stdio_input_partial_write")
def _(cl):
    _stdio(cl, "cat")
    size = 300 * 1024
    rid = cl.send("exec/stdio_input", {"process_id": "p1", "data_b64": e64(b"q" * size)})
    got = b""
    closed = False
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if not closed and cl.response(rid, 0.01) is not None:
            cl.call("exec/stdio_close_input", {"process_id": "p1"})
            closed = True
        resp = cl.call("exec/stdio_output", {"process_id": "p1"}, timeout=2)
        data = (resp or {}).get("result", {}).get("data_b64", "")
        if data is None:
            break
        got += d64(data)
    return len(got) == size


@check("b4_stdio_terminate_kills_siblings")
def _(cl):
    sid = _stdio(cl, "sleep 30")
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p2", "spec": {"command": "cat", "env": {}}})
    cl.call("exec/stdio_terminate", {"process_id": "p1"})
    cl.call("exec/stdio_input", {"process_id": "p2", "data_b64": e64(b"alive\n")})
    resp = cl.call("exec/stdio_output", {"process_id": "p2"}, timeout=5)
    cl.call("exec/stdio_terminate", {"process_id": "p2"})
    return d64(((resp or {}).get("result") or {}).get("data_b64")) == b"alive\n"


@check("b4_pty_term_overrides_env")
def _(cl):
    sid, _ = setup(cl)
    got = pty_session(cl, sid, b"echo T=$TERM.\n", rb"T=[a-z0-9-]+\.", env={"PS1": "$ ", "TERM": "dumb"})
    return b"T=dumb." in got


@check("b4_pty_input_unknown_ok")
def _(cl):
    cl.init()
    resp = cl.call("pty/input", {"pty_id": "nope", "data_b64": e64(b"x")})
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "pty_id"


@check("b4_pty_end_io_error")
def _(cl):
    sid, _ = setup(cl)
    cl.call("pty/open", {"sandbox_id": sid, "pty_id": "t1",
                         "options": {"size": {"rows": 24, "cols": 80}, "env": {"PS1": "$ "}}})
    cl.call("pty/input", {"pty_id": "t1", "data_b64": e64(b"exit\n")})
    for _ in range(50):
        resp = cl.call("pty/output", {"pty_id": "t1"}, timeout=5)
        if not ok(resp):
            return False
        if resp["result"]["data_b64"] is None:
            return True
    return False


@check("b4_stdio_wait_exit_code_after_signal")
def _(cl):
    _stdio(cl, "kill -9 $$")
    r = cl.call("exec/stdio_wait", {"process_id": "p1"})["result"]
    return r["exit_code"] is None or r["termination"] != "exited"


# -- logs


@check("b4_logs_provision_reversed")
def _(cl):
    sid, _ = setup(cl)
    rid = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "source": "provision"})
    cl.response(rid, 5)
    text = b"".join(d64(m["params"]["data_b64"]) for m in cl.before(rid) if m["method"] == "logs/output").decode()
    return text.index("created workspace") < text.index("is running")


# -- events


@check("b4_event_provider_not_kind")
def _(cl):
    kind_ = cl.init()["result"]["provider"]["kind"]
    cl.create(events=ROUTE)
    return bool(events(cl)) and all(e["provider"] == kind_ for e in events(cl))


@check("b4_per_call_events_ignored")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/stop", {"sandbox_id": sid, "events": {"route_id": "r-stop"}})
    return {e["type"] for e in events(cl)} == {"operation_started", "operation_completed"}


@check("b4_correlation_from_handle_route")
def _(cl):
    cl.init()
    sid = sid_of(cl.create(events={"route_id": "r-create", "correlation_id": "c-create"}))
    cl.call("sandbox/stop", {"sandbox_id": sid, "events": {"route_id": "r-stop", "correlation_id": "c-stop"}})
    stop = [m["params"] for m in cl.log if m.get("method") == "host/event" and m["params"]["route_id"] == "r-stop"]
    return len(stop) == 2 and all(p["event"].get("correlation_id") == "c-stop" for p in stop)


@check("b4_resume_event_action_pause")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/pause", {"sandbox_id": sid})
    cl.call("sandbox/resume", {"sandbox_id": sid, "events": {"route_id": "r-resume"}})
    acts = {e["action"] for e in events(cl)}
    return acts == {"resume"}


@check("b4_failed_event_after_error")
def _(cl):
    cl.init()
    rid = cl.send("sandbox/create", {"spec": {"source": "host_directory", "region": "x"}, "events": ROUTE})
    cl.response(rid, 5)
    return any(m.get("method") == "host/event" and m["params"]["event"]["type"] == "operation_failed"
               for m in cl.before(rid))


@check("b4_snapshot_event_subject_sandbox")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("snapshot/create", {"spec": {"name": "s", "source": {"sandbox": {"id": sid}}}, "events": ROUTE})
    snap = resp["result"]["snapshot_id"]
    done = [e for e in events(cl) if e["type"] == "operation_completed"]
    return len(done) == 1 and done[0]["subject"].get("type") == "snapshot" and done[0]["subject"].get("id") == snap


# -- shutdown / EOF


@check("b4_eof_exit_status_nonzero")
def _(cl):
    cl.init()
    cl.proc.stdin.close()
    try:
        return cl.proc.wait(timeout=8) == 0
    except subprocess.TimeoutExpired:
        return False


def _stdio(cl, command, pid="p1"):
    sid, _ = setup(cl)
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": pid, "spec": {"command": command, "env": {}}})
    return sid

# ---------------------------------------------------------------- driver





def main(argv: list[str] | None = None) -> int:
    return drive("b4_", CHECKS, argv, CHECK_ENV)


if __name__ == "__main__":
    sys.exit(main())
