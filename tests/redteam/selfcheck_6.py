"""Self-check of the b6_* mutants: each starts and answers initialize; for each, the fault is reachable.

``python -m tests.redteam.selfcheck_6`` (from the worktree root, PYTHONPATH set). A reachability check is a
function of a live client that returns True when the plugin behaves as the protocol says: the honest
reference plugin must pass it and the mutant must fail it. Both run as real processes over their stdio.
Parallelism is modest (3 threads) so the check shares the machine politely.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

from tests.redteam.selfcheck_4 import (
    ROUTE,
    Client,
    _describe,
    _out,
    _read,
    _run,
    _write,
    d64,
    detail,
    drive,
    e64,
    err,
    events,
    kind,
    ok,
    outputs,
    pty_session,
    setup,
    sid_of,
    stream_id,
)

CHECKS: dict[str, Callable[[Client], bool]] = {}
CHECK_ENV: dict[str, dict[str, str]] = {}
UNKNOWN_SID = "host-00000000000000000000"


def check(name: str, env: dict[str, str] | None = None):
    def register(fn):
        CHECKS[name] = fn
        if env:
            CHECK_ENV[name] = env
        return fn
    return register


def _unsupported(resp, *names):
    return kind(resp) == "unsupported" and detail(resp).get("capability") in names


def _create(cl, **spec):
    return cl.call("sandbox/create", {"spec": {"source": "host_directory", **spec}})


def _rejects(cl, field, **spec):
    cl.init()
    resp = _create(cl, **spec)
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == field


def _listed(cl, flt):
    resp = cl.call("sandbox/list", {"filter": flt})
    return {s["id"]: s for s in resp["result"]["sandboxes"]} if ok(resp) else None


def _snapshot(cl, sid, name=None):
    return cl.call("sandbox/snapshot", {"sandbox_id": sid, "options": {"name": name}})


def _from_snapshot(cl, snap):
    return cl.call("sandbox/create", {"spec": {"source": {"snapshot": {"name": snap}}}})


def _stream_resp(cl, sid, exec_id, command, limit=None, timeout=20, **spec):
    return cl.response(stream_id(cl, sid, exec_id, command, limit, **spec), timeout)


def _sanitized(cl, command, mode):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, command, output_sanitization=mode))


def _metadata(cl, sid, path):
    resp = cl.call("fs/metadata", {"sandbox_id": sid, "path": path})
    return resp["result"]["metadata"] if ok(resp) else {}


def _stdio_wait(cl, sid, command):
    if not ok(cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1",
                                          "spec": {"command": command, "env": {}}})):
        return {}
    cl.call("exec/stdio_close_input", {"process_id": "p1"})
    resp = cl.call("exec/stdio_wait", {"process_id": "p1"}, timeout=10)
    return resp["result"] if ok(resp) else {}


def _within_days(ts, days=2):
    return isinstance(ts, dict) and abs(ts.get("secs_since_epoch", 0) - time.time()) < days * 86400


# -- handshake / capabilities / gates


@check("b6_reinitialize_skips_version_check")
def _(cl):
    cl.init()
    resp = cl.call("initialize", {"protocol_version": 2})
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "protocol_version"


@check("b6_caps_network_group_omitted")
def _(cl):
    return isinstance(cl.init()["result"]["capabilities"].get("network"), dict)


@check("b6_resume_gate_typo")
def _(cl):
    sid, _ = setup(cl)
    return ok(cl.call("sandbox/pause", {"sandbox_id": sid})) and ok(cl.call("sandbox/resume", {"sandbox_id": sid}))


@check("b6_health_missing_permissions_null")
def _(cl):
    cl.init()
    return cl.call("provider/health")["result"]["health"].get("missing_permissions") == []


@check("b6_unsupported_kind_not_supported")
def _(cl):
    sid, _ = setup(cl)
    return _unsupported(cl.call("sandbox/resize", {"sandbox_id": sid, "resources": {"cpu_cores": 2}}),
                        "lifecycle.resize")


@check("b6_initialize_version_defaulted")
def _(cl):
    resp = cl.call("initialize", {})
    return err(resp).get("code") == -32600


@check("b6_volume_methods_not_found")
def _(cl):
    cl.init()
    return _unsupported(cl.call("volume/get", {"volume_id": "vol-1"}), "volumes")


# -- envelope / errors


@check("b6_malformed_json_dropped")
def _(cl):
    cl.init()
    cl.raw(b"{this is not json\n")
    found = cl.wait_for(lambda m: m.get("id") == 0 and err(m).get("code") == -32600, 4)
    return found is not None


@check("b6_numeric_string_id_served")
def _(cl):
    cl.init()
    cl.raw(b'{"jsonrpc":"2.0","id":"7","method":"provider/health","params":null}\n')
    rejected = cl.wait_for(lambda m: m.get("id") == 0 and err(m).get("code") == -32600, 4)
    served = any(m.get("id") == "7" and "result" in m for m in list(cl.log))
    return rejected is not None and not served


@check("b6_unknown_sandbox_invalid_params")
def _(cl):
    cl.init()
    resp = _describe(cl, UNKNOWN_SID)
    return kind(resp) == "not_found" and detail(resp).get("resource") == "sandbox"


@check("b6_not_found_code_32004")
def _(cl):
    cl.init()
    resp = _describe(cl, UNKNOWN_SID)
    return err(resp).get("code") == -32000 and kind(resp) == "not_found"


@check("b6_detail_inside_report")
def _(cl):
    cl.init()
    resp = _describe(cl, UNKNOWN_SID)
    return detail(resp).get("resource") == "sandbox" and detail(resp).get("id") == UNKNOWN_SID


@check("b6_notification_null_id")
def _(cl):
    sid, _ = setup(cl)
    _stream_resp(cl, sid, "n1", "echo a; echo b >&2")
    notes = [m for m in list(cl.log) if m.get("method") == "exec/output"]
    return len(notes) >= 2 and all("id" not in m for m in notes)


# -- transport / concurrency


@check("b6_reader_drops_partial_block")
def _(cl):
    cl.init()
    ids = list(range(100, 220))
    cl.raw(b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "provider/health", "params": None}).encode()
                    + b"\n" for i in ids))
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        answered = {m.get("id") for m in list(cl.log) if "method" not in m}
        if all(i in answered for i in ids):
            return True
        time.sleep(0.1)
    return False


@check("b6_logs_follow_on_reader_thread")
def _(cl):
    sid, _ = setup(cl)
    cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "source": "entrypoint"})
    time.sleep(0.3)
    good = ok(cl.call("provider/health", timeout=3))
    if good:
        cl.call("stream/cancel", {"stream_id": "l1"})
    else:
        cl.proc.kill()
    return good


@check("b6_response_id_shared_field")
def _(cl):
    sid, _ = setup(cl)
    slow = cl.send("exec/run", {"sandbox_id": sid, "spec": {"command": "sleep 1; echo slow", "env": {},
                                                            "timeout_ms": 10000}})
    time.sleep(0.2)
    fast = cl.send("provider/health")
    resp = cl.response(slow, 6)
    return ok(resp) and _out(resp) == b"slow\n" and ok(cl.response(fast, 2))


# -- lifecycle / status


@check("b6_pause_no_sigstop")
def _(cl):
    sid, _ = setup(cl)
    stream_id(cl, sid, "p1", "for i in $(seq 1 60); do echo $i; sleep 0.1; done")
    time.sleep(0.8)
    if not ok(cl.call("sandbox/pause", {"sandbox_id": sid})):
        return False
    time.sleep(0.3)
    before = len(outputs(cl, "p1"))
    time.sleep(1.2)
    after = len(outputs(cl, "p1"))
    cl.call("sandbox/resume", {"sandbox_id": sid})
    return before > 0 and before == after


@check("b6_describe_deleted_tombstone")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/delete", {"sandbox_id": sid})
    return kind(_describe(cl, sid)) == "not_found"


@check("b6_list_stale_state")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/stop", {"sandbox_id": sid})
    listed = _listed(cl, {})
    return listed is not None and listed.get(sid, {}).get("state") == "stopped"


@check("b6_created_at_millis")
def _(cl):
    sid, _ = setup(cl)
    return _within_days(_describe(cl, sid)["result"]["status"].get("created_at"))


@check("b6_labels_null_when_empty")
def _(cl):
    _, info = setup(cl)
    return info["status"].get("labels") == {}


@check("b6_stop_unknown_ok")
def _(cl):
    cl.init()
    return kind(cl.call("sandbox/stop", {"sandbox_id": UNKNOWN_SID})) == "not_found"


@check("b6_delete_leaves_workspace")
def _(cl):
    sid, info = setup(cl)
    wd = info["working_directory"]
    _write(cl, sid, "keep.txt", b"x")
    cl.call("sandbox/delete", {"sandbox_id": sid})
    other = sid_of(cl.create())
    return _out(_run(cl, other, f"test -e '{wd}' && echo yes || echo no")) == b"no\n"


@check("b6_archive_reports_stopped")
def _(cl):
    sid, _ = setup(cl)
    return ok(cl.call("sandbox/archive", {"sandbox_id": sid})) and \
        _describe(cl, sid)["result"]["status"]["state"] == "archived"


@check("b6_working_directory_relative")
def _(cl):
    _, info = setup(cl)
    return os.path.isabs(info["working_directory"])


@check("b6_list_filter_case_insensitive")
def _(cl):
    sid, _ = setup(cl, labels={"env": "Prod"})
    listed = _listed(cl, {"labels": {"env": "prod"}})
    exact = _listed(cl, {"labels": {"env": "Prod"}})
    return listed is not None and sid not in listed and sid in (exact or {})


# -- creation-spec validation


@check("b6_create_ignores_user")
def _(cl):
    return _rejects(cl, "user", user="root")


@check("b6_provider_config_ignored")
def _(cl):
    return _rejects(cl, "provider_config", provider_config={"auto_pull": False})


@check("b6_create_ignores_ephemeral")
def _(cl):
    return _rejects(cl, "ephemeral", ephemeral=True)


@check("b6_image_source_accepted")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/create", {"spec": {"source": {"image": {"reference": "ubuntu:24.04"}}}})
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "source"


@check("b6_invalid_spec_field_prefixed")
def _(cl):
    return _rejects(cl, "region", region="eu-west-1")


@check("b6_source_defaulted")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/create", {"spec": {"name": "no-source"}})
    return resp is not None and "error" in resp


# -- exec


@check("b6_duration_at_spawn")
def _(cl):
    sid, _ = setup(cl)
    return _run(cl, sid, "sleep 0.5")["result"]["duration_ms"] >= 400


@check("b6_inherit_safelist_only", env={"FOO_SETTING": "inherited-1"})
def _(cl):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, 'echo "$FOO_SETTING"')) == b"inherited-1\n"


@check("b6_stream_ignores_timeout")
def _(cl):
    sid, _ = setup(cl)
    resp = _stream_resp(cl, sid, "t1", "sleep 5", timeout=3.5, timeout_ms=500)
    return ok(resp) and resp["result"]["result"]["termination"] == "timed_out"


@check("b6_output_stream_short_names")
def _(cl):
    sid, _ = setup(cl)
    _stream_resp(cl, sid, "s1", "echo a; echo b >&2")
    names = {m["params"]["stream"] for m in list(cl.log) if m.get("method") == "exec/output"}
    return names == {"stdout", "stderr"}


@check("b6_observed_from_retained")
def _(cl):
    sid, _ = setup(cl)
    resp = _stream_resp(cl, sid, "o1", "head -c 1000 /dev/zero | tr '\\0' y", limit=100)
    cap = resp["result"]["stdout_capture"]
    return (cap["observed_bytes"], cap["retained_bytes"], cap["omitted_bytes"]) == (1000, 100, 900)


@check("b6_absent_limit_retains_nothing")
def _(cl):
    sid, _ = setup(cl)
    resp = _stream_resp(cl, sid, "a1", "echo hello")
    return d64(resp["result"]["result"]["stdout_b64"]) == b"hello\n"


@check("b6_odd_limit_head_rounds_up")
def _(cl):
    sid, _ = setup(cl)
    resp = _stream_resp(cl, sid, "h1", "printf '%s' {0..9}{0..9}", limit=11)
    full = outputs(cl, "h1", "stdout")
    return len(full) == 200 and d64(resp["result"]["result"]["stdout_b64"]) == full[:5] + full[-6:]


@check("b6_duration_ms_fractional")
def _(cl):
    sid, _ = setup(cl)
    return type(_run(cl, sid, "sleep 0.05")["result"]["duration_ms"]) is int


@check("b6_signal_zero_for_exit")
def _(cl):
    sid, _ = setup(cl)
    return _run(cl, sid, "true")["result"].get("signal") is None


@check("b6_unknown_sanitization_raw")
def _(cl):
    sid, _ = setup(cl)
    resp = _run(cl, sid, "echo hi", output_sanitization="strip_colour")
    return resp is not None and "error" in resp


@check("b6_run_streams_swapped")
def _(cl):
    sid, _ = setup(cl)
    resp = _run(cl, sid, "echo out; echo err >&2")
    return _out(resp) == b"out\n" and d64(resp["result"]["stderr_b64"]) == b"err\n"


# -- sanitization


@check("b6_c1_st_not_terminator")
def _(cl):
    return _sanitized(cl, "printf '\\302\\2350;title\\302\\234visible\\n'", "strip_ansi") == b"visible\n"


@check("b6_strip_all_keeps_c1_controls")
def _(cl):
    return _sanitized(cl, "printf 'a\\302\\205b\\n'", "strip_all") == b"ab\n"


@check("b6_csi_tilde_final_leaks")
def _(cl):
    return _sanitized(cl, "printf 'a\\033[3~b\\033[200~c\\n'", "strip_ansi") == b"abc\n"


# -- files


@check("b6_append_ignored")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "f.txt", b"ab")
    _write(cl, sid, "f.txt", b"cd", append=True)
    return _read(cl, sid, "f.txt") == b"abcd"


@check("b6_write_no_truncate")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "f.txt", b"hello world")
    _write(cl, sid, "f.txt", b"bye")
    return _read(cl, sid, "f.txt") == b"bye"


@check("b6_rename_copies")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "a.txt", b"moved")
    if not ok(cl.call("fs/rename", {"sandbox_id": sid, "from": "a.txt", "to": "b.txt"})):
        return False
    gone = cl.call("fs/exists", {"sandbox_id": sid, "path": "a.txt"})["result"]["exists"] is False
    return gone and _read(cl, sid, "b.txt") == b"moved"


@check("b6_metadata_size_allocated")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "f.txt", b"0123456789")
    return _metadata(cl, sid, "f.txt").get("size") == 10


@check("b6_metadata_mode_type_bits")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "f.txt", b"x")
    cl.call("fs/set_permissions", {"sandbox_id": sid, "path": "f.txt", "mode": 0o640})
    return _metadata(cl, sid, "f.txt").get("mode") == 0o640


@check("b6_exists_files_only")
def _(cl):
    sid, _ = setup(cl)
    cl.call("fs/create_dir", {"sandbox_id": sid, "path": "d1"})
    return cl.call("fs/exists", {"sandbox_id": sid, "path": "d1"})["result"]["exists"] is True


@check("b6_chmod_drops_exec_bits")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "run.sh", b"#!/bin/bash\necho ran\n")
    cl.call("fs/set_permissions", {"sandbox_id": sid, "path": "run.sh", "mode": 0o755})
    return _metadata(cl, sid, "run.sh").get("mode") == 0o755 and _out(_run(cl, sid, "./run.sh")) == b"ran\n"


@check("b6_read_missing_empty")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("fs/read", {"sandbox_id": sid, "path": "missing.txt"})
    return resp is not None and "error" in resp


# -- stdio / PTY


@check("b6_stdio_wait_zero_exit_null")
def _(cl):
    sid, _ = setup(cl)
    result = _stdio_wait(cl, sid, "true")
    return result.get("termination") == "exited" and result.get("exit_code") == 0


@check("b6_stderr_tail_no_ellipsis")
def _(cl):
    sid, _ = setup(cl)
    tail = _stdio_wait(cl, sid, "head -c 10000 /dev/zero | tr '\\0' x >&2").get("stderr_tail", "")
    return tail.startswith("…") and tail.endswith("x")


@check("b6_stdio_terminate_unknown_ok")
def _(cl):
    cl.init()
    resp = cl.call("exec/stdio_terminate", {"process_id": "no-such-process"})
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "process_id"


@check("b6_pty_eio_retried")
def _(cl):
    sid, _ = setup(cl)
    opts = {"size": {"rows": 24, "cols": 80}, "env": {"PS1": "$ "}}
    if not ok(cl.call("pty/open", {"sandbox_id": sid, "pty_id": "t1", "options": opts})):
        return False
    cl.call("pty/input", {"pty_id": "t1", "data_b64": e64(b"exit\n")})
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        resp = cl.call("pty/output", {"pty_id": "t1"}, timeout=4)
        if not ok(resp):
            return False
        if resp["result"].get("data_b64") is None:
            return True
    return False


@check("b6_pty_resize_unknown_ok")
def _(cl):
    cl.init()
    resp = cl.call("pty/resize", {"pty_id": "no-such-pty", "size": {"rows": 30, "cols": 100}})
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "pty_id"


@check("b6_pty_env_ignored")
def _(cl):
    sid, _ = setup(cl)
    got = pty_session(cl, sid, b"echo v=$MYVAR.\n", rb"v=zz9\.", env={"PS1": "$ ", "MYVAR": "zz9"})
    return b"v=zz9." in got


# -- logs


@check("b6_logs_lines_unterminated")
def _(cl):
    sid, _ = setup(cl)
    rid = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "source": "provision"})
    if not ok(cl.response(rid, 5)):
        return False
    chunks = [d64(m["params"]["data_b64"]) for m in cl.before(rid) if m["method"] == "logs/output"]
    return len(chunks) >= 2 and all(c.endswith(b"\n") for c in chunks)


@check("b6_logs_follow_outlives_delete")
def _(cl):
    sid, _ = setup(cl)
    rid = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "source": "entrypoint"})
    time.sleep(0.3)
    cl.call("sandbox/delete", {"sandbox_id": sid})
    good = ok(cl.response(rid, 4))
    if not good:
        cl.call("stream/cancel", {"stream_id": "l1"})
    return good


# -- events


@check("b6_events_default_route")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("sandbox/stop", {"sandbox_id": sid})
    time.sleep(0.2)
    return not events(cl)


@check("b6_failure_reported_completed")
def _(cl):
    cl.init()
    cl.call("sandbox/stop", {"sandbox_id": UNKNOWN_SID, "events": ROUTE})
    return [e["type"] for e in events(cl)] == ["operation_started", "operation_failed"]


@check("b6_event_time_monotonic")
def _(cl):
    cl.init()
    cl.create(events=ROUTE)
    evs = events(cl)
    return len(evs) >= 2 and all(_within_days(e.get("occurred_at")) for e in evs)


@check("b6_correlation_defaults_to_route")
def _(cl):
    cl.init()
    cl.create(events={"route_id": "route-9"})
    evs = events(cl)
    return len(evs) >= 2 and all(e.get("correlation_id") is None for e in evs)


@check("b6_completed_without_action")
def _(cl):
    cl.init()
    cl.create(events=ROUTE)
    evs = events(cl)
    return [(e["type"], e.get("action")) for e in evs] == [("operation_started", "create"),
                                                           ("operation_completed", "create")]


# -- snapshots


@check("b6_snapshot_dereferences_symlinks")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "target.txt", b"T")
    _run(cl, sid, "ln -s target.txt link.txt")
    snap = _snapshot(cl, sid)["result"]["snapshot_id"]
    new = _from_snapshot(cl, snap)
    return ok(new) and _metadata(cl, sid_of(new["result"]), "link.txt").get("kind") == "symlink"


@check("b6_snapshot_skips_dotfiles")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, ".env", b"A=1\n")
    _write(cl, sid, "visible.txt", b"v")
    snap = _snapshot(cl, sid)["result"]["snapshot_id"]
    new = _from_snapshot(cl, snap)
    return ok(new) and _read(cl, sid_of(new["result"]), ".env") == b"A=1\n"


@check("b6_snapshot_filter_prefix")
def _(cl):
    sid, _ = setup(cl)
    _snapshot(cl, sid, "nightly")
    _snapshot(cl, sid, "nightly-2")
    resp = cl.call("snapshot/list", {"filter": {"name": "nightly"}})
    return ok(resp) and [s["name"] for s in resp["result"]["snapshots"]] == ["nightly"]


# ---------------------------------------------------------------- driver


def main(argv: list[str] | None = None) -> int:
    return drive("b6_", CHECKS, argv, CHECK_ENV, workers=3)


if __name__ == "__main__":
    sys.exit(main())
