"""Self-check of the b3_* mutants: each starts and answers initialize; for each, the fault is reachable.

``python -m tests.redteam.selfcheck_3`` (from the worktree root, PYTHONPATH set). A reachability check is a
function of a live client that returns True when the plugin behaves as the protocol says: the honest
reference plugin must pass it and the mutant must fail it.
"""

from __future__ import annotations

import base64
import json
import os
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


def check(name: str):
    def register(fn):
        CHECKS[name] = fn
        return fn
    return register


# -- handshake / capabilities


@check("b3_handle_caps_claim_fork")
def _(cl):
    caps = cl.init()["result"]["capabilities"]
    handle = cl.create()["capabilities"]
    return all(caps["lifecycle"][k] or not v for k, v in handle["lifecycle"].items())


@check("b3_caps_omit_masked_fields")
def _(cl):
    caps = cl.init()["result"]["capabilities"]
    return {"stdin_stream", "environment"} <= set(caps["exec"]) and "shell_command" in caps["access"]


@check("b3_preview_url_ungated")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("access/preview_url", {"sandbox_id": sid, "port": 8080})
    return kind(resp) == "unsupported" and detail(resp).get("capability") == "access.preview_urls"


@check("b3_volume_list_ungated")
def _(cl):
    cl.init()
    resp = cl.call("volume/list", {})
    return kind(resp) == "unsupported" and detail(resp).get("capability") == "volumes"


@check("b3_snapshot_live_silently_fs")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("sandbox/snapshot", {"sandbox_id": sid, "options": {"name": None, "include_memory": True}})
    return kind(resp) == "unsupported"


@check("b3_snapshot_image_cap_name")
def _(cl):
    cl.init()
    resp = cl.call("snapshot/create", {"spec": {"name": None, "source": {"image": {"reference": "alpine"}}}})
    return kind(resp) == "unsupported" and detail(resp).get("capability", "").startswith("snapshots.from_image.")


@check("b3_stream_ignores_stdin")
def _(cl):
    sid, _ = setup(cl)
    rid = stream_id(cl, sid, "s1", "cat", stdin_b64=e64(b"hello stdin"))
    resp = cl.response(rid, 15)
    return ok(resp) and d64(resp["result"]["result"]["stdout_b64"]) == b"hello stdin"


# -- envelope / errors


@check("b3_malformed_id_null")
def _(cl):
    cl.init()
    cl.raw(b"{not json\n")
    found = cl.wait_for(lambda m: "error" in m, 5)
    return found is not None and found[1].get("id") == 0


@check("b3_batch_ignored")
def _(cl):
    cl.init()
    cl.raw(b'[{"jsonrpc":"2.0","id":5,"method":"provider/health","params":null}]\n')
    found = cl.wait_for(lambda m: "error" in m, 5)
    return found is not None and found[1]["error"]["code"] == -32600


@check("b3_negative_id_answered")
def _(cl):
    cl.init()
    cl.raw(b'{"jsonrpc":"2.0","id":-1,"method":"provider/health","params":null}\n')
    found = cl.wait_for(lambda m: "error" in m or m.get("id") == -1, 5)
    return found is not None and found[1].get("id") != -1 and found[1]["error"]["code"] == -32600


@check("b3_params_null_rejected")
def _(cl):
    cl.init()
    cl.raw(b'{"jsonrpc":"2.0","id":7,"method":"provider/health","params":null}\n')
    return ok(cl.response(7, 5))


@check("b3_unknown_method_with_data")
def _(cl):
    cl.init()
    e = err(cl.call("sandbox/frobnicate", {}))
    return e.get("code") == -32601 and "data" not in e


@check("b3_not_found_resource_capitalized")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/describe", {"sandbox_id": "host-doesnotexist"})
    return kind(resp) == "not_found" and detail(resp).get("resource") == "sandbox"


@check("b3_invalid_spec_no_reason")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/create", {"spec": {"source": "host_directory", "region": "eu-1"}})
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "region" \
        and isinstance(detail(resp).get("reason"), str)


@check("b3_causes_null")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/describe", {"sandbox_id": "host-doesnotexist"})
    return isinstance(err(resp)["data"]["report"].get("causes"), list)


# -- transport / concurrency


@check("b3_reader_64k_line_limit")
def _(cl):
    sid, _ = setup(cl)
    data = os.urandom(120_000)
    if not ok(cl.call("fs/write", {"sandbox_id": sid, "path": "big.bin", "content_b64": e64(data)})):
        return False
    resp = cl.call("fs/read", {"sandbox_id": sid, "path": "big.bin"})
    return ok(resp) and d64(resp["result"]["content_b64"]) == data


@check("b3_writer_unlocked_pieces")
def _(cl):
    sid, _ = setup(cl)
    rids = [stream_id(cl, sid, f"w{i}", "head -c 3000000 /dev/urandom") for i in range(3)]
    for rid in rids:
        cl.response(rid, 30)
    return not any("unparsable" in m for m in cl.log)


@check("b3_extra_exec_exit_notification")
def _(cl):
    sid, _ = setup(cl)
    cl.response(stream_id(cl, sid, "s1", "echo hi"), 10)
    time.sleep(0.2)
    allowed = {"exec/output", "logs/output", "host/event", "host/log"}
    return all(m["method"] in allowed for m in cl.log if "method" in m)


@check("b3_sandbox_lock_during_exec")
def _(cl):
    sid, _ = setup(cl)
    stream_id(cl, sid, "slow", "sleep 4")
    time.sleep(0.3)
    return cl.call("sandbox/describe", {"sandbox_id": sid}, timeout=1.5) is not None


@check("b3_exec_output_wrong_exec_id")
def _(cl):
    sid, _ = setup(cl)
    ra = stream_id(cl, sid, "A", "echo a1; sleep 1; echo a2")
    time.sleep(0.3)
    rb = stream_id(cl, sid, "B", "echo b1")
    cl.response(ra, 10)
    cl.response(rb, 10)
    return outputs(cl, "A") == b"a1\na2\n" and outputs(cl, "B") == b"b1\n"


# -- lifecycle


@check("b3_stop_keeps_processes")
def _(cl):
    sid, _ = setup(cl)
    rid = stream_id(cl, sid, "s1", "sleep 20")
    time.sleep(0.4)
    cl.call("sandbox/stop", {"sandbox_id": sid})
    return cl.response(rid, 4) is not None


@check("b3_start_from_archived_invalid_state")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/archive", {"sandbox_id": sid})
    resp = cl.call("sandbox/start", {"sandbox_id": sid})
    return ok(resp) and cl.call("sandbox/describe", {"sandbox_id": sid})["result"]["status"]["state"] == "running"


@check("b3_resume_no_sigcont")
def _(cl):
    sid, _ = setup(cl)
    rid = stream_id(cl, sid, "s1", "sleep 0.8; echo done", timeout_ms=8000)
    time.sleep(0.2)
    cl.call("sandbox/pause", {"sandbox_id": sid})
    time.sleep(0.3)
    cl.call("sandbox/resume", {"sandbox_id": sid})
    resp = cl.response(rid, 4)
    return ok(resp) and resp["result"]["result"]["termination"] == "exited"


@check("b3_list_filter_any_label")
def _(cl):
    cl.init()
    a = sid_of(cl.create(labels={"team": "x", "tier": "1"}))
    cl.create(labels={"team": "x", "tier": "2"})
    got = cl.call("sandbox/list", {"filter": {"labels": {"team": "x", "tier": "1"}}})["result"]["sandboxes"]
    return [s["id"] for s in got] == [a]


@check("b3_attach_drops_name")
def _(cl):
    sid, _ = setup(cl, name="named-one")
    return cl.call("sandbox/attach", {"sandbox_id": sid})["result"]["status"]["name"] == "named-one"


@check("b3_create_same_name_same_id")
def _(cl):
    cl.init()
    return sid_of(cl.create(name="twin")) != sid_of(cl.create(name="twin"))


@check("b3_status_created_at_rfc3339")
def _(cl):
    sid, _ = setup(cl)
    created = cl.call("sandbox/describe", {"sandbox_id": sid})["result"]["status"]["created_at"]
    return isinstance(created, dict) and "secs_since_epoch" in created


@check("b3_refresh_activity_unknown_ok")
def _(cl):
    cl.init()
    return kind(cl.call("sandbox/refresh_activity", {"sandbox_id": "host-doesnotexist"})) == "not_found"


@check("b3_platform_os_capitalized")
def _(cl):
    sid, _ = setup(cl)
    os_name = cl.call("sandbox/platform_info", {"sandbox_id": sid})["result"]["platform"]["os"]
    return os_name == os_name.lower() and os_name != ""


@check("b3_health_unwrapped")
def _(cl):
    cl.init()
    return cl.call("provider/health", {})["result"].get("health", {}).get("status") == "ok"


@check("b3_labels_unicode_mojibake")
def _(cl):
    sid, _ = setup(cl, labels={"owner": "café ✓"})
    return cl.call("sandbox/describe", {"sandbox_id": sid})["result"]["status"]["labels"] == {"owner": "café ✓"}


@check("b3_snapshot_delete_unknown_not_found")
def _(cl):
    sid, _ = setup(cl)
    snap = cl.call("sandbox/snapshot", {"sandbox_id": sid, "options": {"name": None}})["result"]["snapshot_id"]
    return ok(cl.call("snapshot/delete", {"snapshot_id": snap})) and ok(cl.call("snapshot/delete", {"snapshot_id": snap}))


@check("b3_snapshot_list_ignores_name")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/snapshot", {"sandbox_id": sid, "options": {"name": "alpha"}})
    cl.call("sandbox/snapshot", {"sandbox_id": sid, "options": {"name": "beta"}})
    got = cl.call("snapshot/list", {"filter": {"name": "alpha"}})["result"]["snapshots"]
    return [s["name"] for s in got] == ["alpha"]


@check("b3_create_snapshot_by_display_name_only")
def _(cl):
    sid, _ = setup(cl)
    cl.call("fs/write", {"sandbox_id": sid, "path": "keep.txt", "content_b64": e64(b"kept")})
    snap = cl.call("sandbox/snapshot", {"sandbox_id": sid, "options": {"name": "mysnap"}})["result"]["snapshot_id"]
    resp = cl.call("sandbox/create", {"spec": {"source": {"snapshot": {"name": snap}}}})
    if not ok(resp):
        return False
    read = cl.call("fs/read", {"sandbox_id": sid_of(resp["result"]), "path": "keep.txt"})
    return ok(read) and d64(read["result"]["content_b64"]) == b"kept"


# -- exec/run


@check("b3_signal_negative")
def _(cl):
    sid, _ = setup(cl)
    res = run(cl, sid, "kill -TERM $$", timeout_ms=10000)["result"]
    return res["signal"] == 15


@check("b3_absolute_working_dir_rebased")
def _(cl):
    sid, info = setup(cl)
    resp = run(cl, sid, "pwd", working_dir=info["working_directory"], timeout_ms=10000)
    return ok(resp) and d64(resp["result"]["stdout_b64"]).strip() == info["working_directory"].encode()


@check("b3_env_sandbox_overrides_spec")
def _(cl):
    sid, _ = setup(cl, env={"WHO": "sandbox"})
    out = run(cl, sid, "echo $WHO", env={"WHO": "exec"}, timeout_ms=10000)["result"]
    return d64(out["stdout_b64"]) == b"exec\n"


@check("b3_env_empty_value_dropped")
def _(cl):
    sid, _ = setup(cl)
    out = run(cl, sid, 'echo "${EMPTY+set}"', env={"EMPTY": ""}, timeout_ms=10000)["result"]
    return d64(out["stdout_b64"]) == b"set\n"


@check("b3_timeout_floor_seconds")
def _(cl):
    sid, _ = setup(cl)
    res = run(cl, sid, "sleep 0.2", timeout_ms=900)["result"]
    return res["termination"] == "exited" and res["exit_code"] == 0


@check("b3_stdin_trailing_newline")
def _(cl):
    sid, _ = setup(cl)
    out = run(cl, sid, "wc -c", stdin_b64=e64(b"abc"), timeout_ms=10000)["result"]
    return d64(out["stdout_b64"]).strip() == b"3"


@check("b3_stdin_broken_pipe_error")
def _(cl):
    sid, _ = setup(cl)
    resp = run(cl, sid, "head -c 1 >/dev/null", stdin_b64=e64(b"q" * 2_000_000), timeout_ms=10000)
    return ok(resp) and resp["result"]["exit_code"] == 0


@check("b3_run_trailing_newline_trimmed")
def _(cl):
    sid, _ = setup(cl)
    return d64(run(cl, sid, "printf 'a\\n\\n'", timeout_ms=10000)["result"]["stdout_b64"]) == b"a\n\n"


@check("b3_run_stdout_64k")
def _(cl):
    sid, _ = setup(cl)
    out = run(cl, sid, "head -c 100000 /dev/zero", timeout_ms=10000)["result"]
    return len(d64(out["stdout_b64"])) == 100000


@check("b3_run_login_shell")
def _(cl):
    sid, _ = setup(cl)
    out = run(cl, sid, "shopt -q login_shell && echo login || echo nologin", timeout_ms=10000)["result"]
    return d64(out["stdout_b64"]).strip().endswith(b"nologin")


@check("b3_run_stderr_into_stdout")
def _(cl):
    sid, _ = setup(cl)
    out = run(cl, sid, "echo out; echo err >&2", timeout_ms=10000)["result"]
    return d64(out["stdout_b64"]) == b"out\n" and d64(out["stderr_b64"]) == b"err\n"


# -- exec/stream


@check("b3_capture_head_only")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.response(stream_id(cl, sid, "s1", "seq 1 5000", limit=100), 15)
    full = outputs(cl, "s1", "stdout")
    return d64(resp["result"]["result"]["stdout_b64"]) == full[:50] + full[-50:]


@check("b3_capture_observed_raw")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.response(stream_id(cl, sid, "s1", r"printf '\033[31mX\033[0m'", output_sanitization="strip_ansi"), 15)
    return resp["result"]["stdout_capture"]["observed_bytes"] == len(outputs(cl, "s1", "stdout")) == 1


@check("b3_limit_shared_between_streams")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.response(stream_id(cl, sid, "s1", "head -c 1000 /dev/zero; head -c 1000 /dev/zero >&2", limit=100), 15)
    return resp["result"]["stderr_capture"]["retained_bytes"] == 100 \
        and len(d64(resp["result"]["result"]["stderr_b64"])) == 100


@check("b3_stderr_notifications_deferred")
def _(cl):
    sid, _ = setup(cl)
    cl.response(stream_id(cl, sid, "s1", "echo first >&2; sleep 0.3; echo second"), 15)
    order = [m["params"]["stream"] for m in cl.log if m.get("method") == "exec/output"]
    return order[:1] == ["stderr"]


@check("b3_cancel_termination_exited")
def _(cl):
    sid, _ = setup(cl)
    rid = stream_id(cl, sid, "s1", "sleep 20")
    time.sleep(0.4)
    cl.call("exec/cancel", {"exec_id": "s1"})
    resp = cl.response(rid, 8)
    return ok(resp) and resp["result"]["result"]["termination"] == "cancelled"


@check("b3_cancel_prefix_match")
def _(cl):
    sid, _ = setup(cl)
    cl.response(stream_id(cl, sid, "x1", "true"), 10)
    rid = stream_id(cl, sid, "x10", "sleep 1.5")
    time.sleep(0.3)
    cl.call("exec/cancel", {"exec_id": "x1"})
    resp = cl.response(rid, 10)
    return ok(resp) and resp["result"]["result"]["termination"] == "exited"


@check("b3_output_b64_unpadded")
def _(cl):
    sid, _ = setup(cl)
    cl.response(stream_id(cl, sid, "s1", "printf a"), 10)
    chunks = [m["params"]["data_b64"] for m in cl.log if m.get("method") == "exec/output"]
    return bool(chunks) and all(len(c) % 4 == 0 for c in chunks)


@check("b3_exec_audit_notice")
def _(cl):
    sid, _ = setup(cl, events=ROUTE)
    run(cl, sid, "echo TOPSECRETOUTPUT", timeout_ms=10000)
    time.sleep(0.2)
    return not any("TOPSECRETOUTPUT" in json.dumps(e) for e in events(cl))


# -- files


def _file(cl, data=b"abcdefgh", path="f.txt"):
    sid, _ = setup(cl)
    cl.call("fs/write", {"sandbox_id": sid, "path": path, "content_b64": e64(data)})
    return sid


def _read(cl, sid, path="f.txt", **extra):
    resp = cl.call("fs/read", {"sandbox_id": sid, "path": path, **extra})
    return d64(resp["result"]["content_b64"]) if ok(resp) else None


@check("b3_read_length_as_end")
def _(cl):
    sid = _file(cl)
    return _read(cl, sid, offset=2, length=3) == b"cde"


@check("b3_append_key_presence")
def _(cl):
    sid = _file(cl)
    cl.call("fs/write", {"sandbox_id": sid, "path": "f.txt", "content_b64": e64(b"x"), "append": False})
    return _read(cl, sid) == b"x"


@check("b3_write_empty_no_truncate")
def _(cl):
    sid = _file(cl)
    cl.call("fs/write", {"sandbox_id": sid, "path": "f.txt", "content_b64": ""})
    return _read(cl, sid) == b""


@check("b3_list_dir_depth_plus_one")
def _(cl):
    sid = _file(cl, path="a/b/c.txt")
    entries = cl.call("fs/list_dir", {"sandbox_id": sid, "path": ".", "depth": 1})["result"]["entries"]
    return [e["path"] for e in entries] == ["a"]


@check("b3_list_dir_absolute_paths")
def _(cl):
    sid = _file(cl, path="d/x.txt")
    entries = cl.call("fs/list_dir", {"sandbox_id": sid, "path": "d", "depth": 1})["result"]["entries"]
    return [e["path"] for e in entries] == ["x.txt"]


@check("b3_metadata_follows_symlink")
def _(cl):
    sid = _file(cl)
    run(cl, sid, "ln -s f.txt link", timeout_ms=10000)
    return cl.call("fs/metadata", {"sandbox_id": sid, "path": "link"})["result"]["metadata"]["kind"] == "symlink"


@check("b3_read_urlsafe_b64")
def _(cl):
    data = b"\xfb\xff\xfe\xfb\xef\xbf"
    sid = _file(cl, data=data)
    text = cl.call("fs/read", {"sandbox_id": sid, "path": "f.txt"})["result"]["content_b64"]
    try:
        return base64.b64decode(text, validate=True) == data
    except ValueError:
        return False


@check("b3_read_default_cap_1mib")
def _(cl):
    data = os.urandom(1_500_000)
    sid = _file(cl, data=data)
    return _read(cl, sid) == data


@check("b3_metadata_nanos_overflow")
def _(cl):
    sid = _file(cl)
    modified = cl.call("fs/metadata", {"sandbox_id": sid, "path": "f.txt"})["result"]["metadata"]["modified_at"]
    return 0 <= modified["nanos_since_epoch"] < 1_000_000_000


@check("b3_resolve_cached_workspace")
def _(cl):
    cl.init()
    a, b = sid_of(cl.create()), sid_of(cl.create())
    cl.call("fs/write", {"sandbox_id": a, "path": "f.txt", "content_b64": e64(b"A")})
    cl.call("fs/write", {"sandbox_id": b, "path": "f.txt", "content_b64": e64(b"B")})
    return _read(cl, a) == b"A" and _read(cl, b) == b"B"


# -- stdio / PTY


def _stdio(cl, command, pid="p1"):
    sid, _ = setup(cl)
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": pid, "spec": {"command": command, "env": {}}})
    return sid


@check("b3_stderr_tail_oldest")
def _(cl):
    _stdio(cl, "for i in $(seq 1 3000); do echo line$i >&2; done")
    stdio_all(cl, "p1")
    tail = cl.call("exec/stdio_wait", {"process_id": "p1"})["result"]["stderr_tail"]
    return tail.endswith("line3000\n") and tail.startswith("…")


@check("b3_stdio_output_exit_drops")
def _(cl):
    _stdio(cl, "echo hello")
    time.sleep(0.6)
    return stdio_all(cl, "p1") == b"hello\n"


@check("b3_stdio_terminate_pid_only")
def _(cl):
    _stdio(cl, "sleep 30; echo never")
    time.sleep(0.3)
    cl.call("exec/stdio_terminate", {"process_id": "p1"})
    resp = cl.call("exec/stdio_output", {"process_id": "p1"}, timeout=4)
    return resp is not None and resp["result"]["data_b64"] is None


@check("b3_stdio_unknown_not_found")
def _(cl):
    cl.init()
    resp = cl.call("exec/stdio_wait", {"process_id": "nope"})
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "process_id"


@check("b3_stdio_output_holds_stdin_lock")
def _(cl):
    _stdio(cl, "cat")
    rid = cl.send("exec/stdio_output", {"process_id": "p1"})
    time.sleep(0.3)
    answered = cl.call("exec/stdio_input", {"process_id": "p1", "data_b64": e64(b"ping\n")}, timeout=3) is not None
    cl.call("exec/stdio_terminate", {"process_id": "p1"})
    cl.response(rid, 3)
    return answered


@check("b3_pty_working_dir_ignored")
def _(cl):
    sid = _file(cl, path="sub/x.txt")
    got = pty_session(cl, sid, b"echo WD=$(basename $PWD)=; exit\n", rb"WD=\w+=", working_dir="sub")
    return b"WD=sub=" in got


@check("b3_pty_close_unknown_fails")
def _(cl):
    cl.init()
    return ok(cl.call("pty/close", {"pty_id": "never-opened"}))


@check("b3_pty_duplicate_replaces")
def _(cl):
    sid, _ = setup(cl)
    opts = {"size": {"rows": 24, "cols": 80}, "env": {}}
    cl.call("pty/open", {"sandbox_id": sid, "pty_id": "t1", "options": opts})
    resp = cl.call("pty/open", {"sandbox_id": sid, "pty_id": "t1", "options": opts})
    cl.call("pty/close", {"pty_id": "t1"})
    return not ok(resp)


@check("b3_pty_initial_size_ignored")
def _(cl):
    sid, _ = setup(cl)
    got = pty_session(cl, sid, b"echo SZ=$(stty size)=; exit\n", rb"SZ=\d+ \d+=", size={"rows": 40, "cols": 100})
    return b"SZ=40 100=" in got


# -- logs


@check("b3_logs_stream_id_is_sandbox")
def _(cl):
    sid, _ = setup(cl)
    rid = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "s1", "source": "provision"})
    cl.response(rid, 10)
    lines = [m for m in cl.before(rid) if m["method"] == "logs/output"]
    return bool(lines) and all(m["params"]["stream_id"] == "s1" for m in lines)


@check("b3_stream_cancel_unknown_fails")
def _(cl):
    cl.init()
    return ok(cl.call("stream/cancel", {"stream_id": "never-followed"}))


@check("b3_logs_precancel_ignored")
def _(cl):
    sid, _ = setup(cl)
    cl.call("stream/cancel", {"stream_id": "s1"})
    rid = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "s1", "source": "entrypoint"})
    resp = cl.response(rid, 3)
    if resp is None:
        cl.call("stream/cancel", {"stream_id": "s1"})
    return resp is not None


# -- events


def _types(evs):
    return [(e["action"], e["type"]) for e in evs]


@check("b3_undelete_no_events")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/delete", {"sandbox_id": sid})
    cl.call("sandbox/undelete", {"sandbox_id": sid, "events": ROUTE})
    return _types(events(cl)) == [("undelete", "operation_started"), ("undelete", "operation_completed")]


@check("b3_attach_no_events")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/attach", {"sandbox_id": sid, "events": ROUTE})
    return _types(events(cl)) == [("attach", "operation_started"), ("attach", "operation_completed")]


@check("b3_archive_event_action_stop")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/archive", {"sandbox_id": sid, "events": ROUTE})
    return _types(events(cl)) == [("archive", "operation_started"), ("archive", "operation_completed")]


@check("b3_event_failed_error_string")
def _(cl):
    cl.init()
    cl.call("sandbox/create", {"spec": {"source": "host_directory", "region": "x"}, "events": ROUTE})
    failed = [e for e in events(cl) if e["type"] == "operation_failed"]
    return len(failed) == 1 and isinstance(failed[0]["error"], dict) and failed[0]["error"].get("kind") == "invalid_spec"


@check("b3_event_sequence_per_route")
def _(cl):
    cl.init()
    cl.create(events={"route_id": "r-a"})
    cl.create(events={"route_id": "r-b"})
    return [e["id"]["sequence"] for e in events(cl)] == [1, 2, 3, 4]


@check("b3_event_operation_id_per_event")
def _(cl):
    cl.init()
    cl.create(events=ROUTE)
    return len({e["operation_id"] for e in events(cl)}) == 1 and len(events(cl)) == 2


@check("b3_event_duration_plain_ms")
def _(cl):
    cl.init()
    cl.create(events=ROUTE)
    done = [e for e in events(cl) if e["type"] == "operation_completed"]
    return len(done) == 1 and isinstance(done[0]["duration"], dict) and {"secs", "nanos"} <= set(done[0]["duration"])


@check("b3_event_occurred_at_float")
def _(cl):
    cl.init()
    cl.create(events=ROUTE)
    return bool(events(cl)) and all(isinstance(e["occurred_at"], dict) for e in events(cl))


# -- isolation


@check("b3_cross_sandbox_env_leak")
def _(cl):
    cl.init()
    cl.create(env={"LEAKY_VALUE": "from-a"})
    b = sid_of(cl.create())
    return d64(run(cl, b, 'echo "${LEAKY_VALUE-unset}"', timeout_ms=10000)["result"]["stdout_b64"]) == b"unset\n"


# -- shutdown / EOF


@check("b3_eof_drops_inflight_replies")
def _(cl):
    sid, _ = setup(cl)
    rid = cl.send("exec/run", {"sandbox_id": sid, "spec": {"command": "sleep 1; echo x", "env": {}, "timeout_ms": 10000}})
    time.sleep(0.3)
    cl.proc.stdin.close()
    return cl.response(rid, 8) is not None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@check("b3_shutdown_orphans_processes")
def _(cl):
    _stdio(cl, "echo $$; exec sleep 30")
    first = cl.call("exec/stdio_output", {"process_id": "p1"})["result"]["data_b64"]
    pid = int(d64(first).strip())
    cl.call("shutdown", None)
    try:
        cl.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return False
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    alive = _alive(pid)
    if alive:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return not alive


@check("b3_shutdown_exit_status_1")
def _(cl):
    cl.init()
    cl.call("shutdown", None)
    try:
        return cl.proc.wait(timeout=5) == 0
    except subprocess.TimeoutExpired:
        return False


# ---------------------------------------------------------------- driver





def main(argv: list[str] | None = None) -> int:
    return drive("b3_", CHECKS, argv, missing_fails=False)


if __name__ == "__main__":
    sys.exit(main())
