"""Self-check of the b5_* mutants: each starts and answers initialize; for each, the fault is reachable.

``python -m tests.redteam.selfcheck_5`` (from the worktree root, PYTHONPATH set). A reachability check is a
function of a live client that returns True when the plugin behaves as the protocol says: the honest
reference plugin must pass it and the mutant must fail it. The client and the helpers are selfcheck_4's.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from tests.redteam.selfcheck_4 import (
    INIT,
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
    stdio_all,
    stream_id,
)

CHECKS: dict[str, Callable[[Client], bool]] = {}


def check(name: str):
    def register(fn):
        CHECKS[name] = fn
        return fn
    return register


def _unsupported(resp, *names):
    return kind(resp) == "unsupported" and detail(resp).get("capability") in names


def _create(cl, **spec):
    return cl.call("sandbox/create", {"spec": {"source": "host_directory", **spec}})


def _rejects(cl, field, **spec):
    cl.init()
    resp = _create(cl, **spec)
    return kind(resp) == "invalid_spec" and detail(resp).get("field", "").startswith(field)


def _listed(cl, flt):
    resp = cl.call("sandbox/list", {"filter": flt})
    return [s["id"] for s in resp["result"]["sandboxes"]] if ok(resp) else None


def _sanitized(cl, command, mode):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, command, output_sanitization=mode))


def _snapshot(cl, sid, name=None):
    return cl.call("sandbox/snapshot", {"sandbox_id": sid, "options": {"name": name}})


def _stream_resp(cl, sid, exec_id, command, limit=None, timeout=20, **spec):
    return cl.response(stream_id(cl, sid, exec_id, command, limit, **spec), timeout)


# -- handshake / capabilities / gates


@check("b5_kind_underscore")
def _(cl):
    k = cl.init()["result"]["provider"]["kind"]
    return re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?", k) is not None


@check("b5_provider_version_empty")
def _(cl):
    v = cl.init()["result"]["provider"]["version"]
    return isinstance(v, str) and v != ""


@check("b5_activate_names_snapshots")
def _(cl):
    cl.init()
    return _unsupported(cl.call("snapshot/activate", {"snapshot_id": "snap-0123456789abcdef0123"}),
                        "snapshots.activation")


@check("b5_ssh_revoke_names_ssh")
def _(cl):
    sid, _ = setup(cl)
    return _unsupported(cl.call("access/ssh_revoke", {"sandbox_id": sid, "token": "t"}),
                        "access.ssh.revoke", "access.ssh_revoke")


@check("b5_update_network_names_network")
def _(cl):
    sid, _ = setup(cl)
    return _unsupported(cl.call("sandbox/update_network", {"sandbox_id": sid, "network": "block"}),
                        "lifecycle.update_network")


@check("b5_set_timers_null_noop")
def _(cl):
    sid, _ = setup(cl)
    timers = {k: None for k in ("auto_stop_after_idle", "auto_pause_after_idle", "auto_archive_after_stop",
                                "auto_delete_after_stop", "ttl")}
    return _unsupported(cl.call("sandbox/set_timers", {"sandbox_id": sid, "timers": timers}), "lifecycle.timers")


@check("b5_fork_check_inverted")
def _(cl):
    sid, _ = setup(cl)
    return _unsupported(cl.call("sandbox/fork", {"sandbox_id": sid, "options": {"name": None, "include_memory": True}}),
                        "lifecycle.fork")


@check("b5_unsupported_retryable")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("sandbox/resize", {"sandbox_id": sid, "resources": {"cpu_cores": 2}})
    return kind(resp) == "unsupported" and err(resp)["data"]["report"].get("retryable") is False


# -- envelope / params


@check("b5_unknown_method_id_zero")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/teleport", {"sandbox_id": "x"}, timeout=5)
    return err(resp).get("code") == -32601


@check("b5_exec_spec_denies_unknown_fields")
def _(cl):
    sid, _ = setup(cl)
    resp = _run(cl, sid, "echo hi", stop_grace_ms=100)
    return _out(resp) == b"hi\n"


@check("b5_exec_env_optional")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("exec/run", {"sandbox_id": sid, "spec": {"command": "echo hi", "timeout_ms": 5000}})
    return err(resp).get("code") == -32600


@check("b5_health_rejects_empty_params")
def _(cl):
    cl.init()
    resp = cl.call("provider/health", {})
    return ok(resp) and resp["result"]["health"]["status"] == "ok"


@check("b5_crlf_line_endings")
def _(cl):
    out = subprocess.run(cl.proc.args, input=INIT, capture_output=True, timeout=15, check=False).stdout
    return out.endswith(b"\n") and b"\r" not in out


# -- transport / concurrency


@check("b5_pty_output_blocks_resize")
def _(cl):
    sid, _ = setup(cl)
    got = pty_session(cl, sid, b"echo $((40+2))\n", rb"\n42\r?\n")
    if b"42" not in got:
        return False
    for _ in range(10):  # drain until an output poll stays pending
        rid = cl.send("pty/output", {"pty_id": "t1"})
        if cl.response(rid, 1.0) is None:
            break
    t0 = time.monotonic()
    good = ok(cl.call("pty/resize", {"pty_id": "t1", "size": {"rows": 30, "cols": 100}}, timeout=4))
    return good and time.monotonic() - t0 < 2


@check("b5_stdio_terminate_waits_output")
def _(cl):
    sid, _ = setup(cl)
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1", "spec": {"command": "sleep 30", "env": {}}})
    cl.send("exec/stdio_output", {"process_id": "p1"})
    time.sleep(0.3)
    return ok(cl.call("exec/stdio_terminate", {"process_id": "p1"}, timeout=4))


@check("b5_stop_kills_other_sandbox")
def _(cl):
    a, _ = setup(cl)
    b = sid_of(cl.create())
    rid = stream_id(cl, a, "a1", "sleep 2; echo done")
    time.sleep(0.4)
    cl.call("sandbox/stop", {"sandbox_id": b})
    resp = cl.response(rid, 10)
    r = resp["result"]["result"]
    return r["termination"] == "exited" and r["exit_code"] == 0 and outputs(cl, "a1", "stdout") == b"done\n"


# -- lifecycle / status / spec


@check("b5_start_leaves_starting")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/stop", {"sandbox_id": sid})
    cl.call("sandbox/start", {"sandbox_id": sid})
    return _describe(cl, sid)["result"]["status"]["state"] == "running" and _out(_run(cl, sid, "echo hi")) == b"hi\n"


@check("b5_undelete_drops_labels")
def _(cl):
    sid, _ = setup(cl, labels={"team": "a"})
    cl.call("sandbox/delete", {"sandbox_id": sid})
    resp = cl.call("sandbox/undelete", {"sandbox_id": sid})
    return ok(resp) and resp["result"]["status"]["labels"] == {"team": "a"} \
        and _describe(cl, sid)["result"]["status"]["labels"] == {"team": "a"}


@check("b5_undelete_new_id")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "f.txt", b"kept")
    cl.call("sandbox/delete", {"sandbox_id": sid})
    resp = cl.call("sandbox/undelete", {"sandbox_id": sid})
    return ok(resp) and resp["result"]["status"]["id"] == sid and _read(cl, sid, "f.txt") == b"kept"


@check("b5_labels_empty_value_dropped")
def _(cl):
    sid, info = setup(cl, labels={"note": "", "team": "a"})
    return info["status"]["labels"] == {"note": "", "team": "a"} and sid in (_listed(cl, {"labels": {"note": ""}}) or [])


@check("b5_list_filter_missing_as_empty")
def _(cl):
    sid, _ = setup(cl, labels={"team": "a"})
    listed = _listed(cl, {"labels": {"tier": ""}})
    return listed is not None and sid not in listed


@check("b5_platform_info_unknown_ok")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/platform_info", {"sandbox_id": "host-nope"})
    return kind(resp) == "not_found" and detail(resp).get("resource") == "sandbox"


@check("b5_spec_empty_strings_accepted")
def _(cl):
    return _rejects(cl, "region", region="")


@check("b5_create_ignores_volumes")
def _(cl):
    return _rejects(cl, "volumes", volumes=[{"volume": "v1", "mount_path": "/data", "subpath": None}])


@check("b5_network_allow_all_accepted")
def _(cl):
    return _rejects(cl, "network", network="allow_all")


@check("b5_working_directory_ignored")
def _(cl):
    with tempfile.TemporaryDirectory() as tmp:
        return _rejects(cl, "working_directory", working_directory=tmp)


@check("b5_labels_not_persisted")
def _(cl):
    cl.close()
    with tempfile.TemporaryDirectory() as registry:
        env = {"SANDBOX_CONFORMANCE_HOST_REGISTRY": registry}
        first = Client(cl.proc.args, env)
        try:
            first.init()
            sid = sid_of(first.create(labels={"gen": "1"}))
            first.call("sandbox/set_labels", {"sandbox_id": sid, "labels": {"gen": "2"}})
        finally:
            first.close()
        second = Client(cl.proc.args, env)
        try:
            second.init()
            resp = second.call("sandbox/attach", {"sandbox_id": sid})
            good = ok(resp) and resp["result"]["status"]["labels"] == {"gen": "2"}
            second.call("sandbox/delete", {"sandbox_id": sid})
            return good
        finally:
            second.close()


@check("b5_empty_name_null")
def _(cl):
    sid, info = setup(cl, name="")
    return info["status"]["name"] == "" and _describe(cl, sid)["result"]["status"]["name"] == ""


# -- exec


@check("b5_exec_errexit")
def _(cl):
    sid, _ = setup(cl)
    resp = _run(cl, sid, "false; echo after")
    return _out(resp) == b"after\n" and resp["result"]["exit_code"] == 0


@check("b5_exec_posix_mode")
def _(cl):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, "shopt -oq posix && echo posix || echo normal")) == b"normal\n"


@check("b5_stream_via_sh")
def _(cl):
    sid, _ = setup(cl)
    _stream_resp(cl, sid, "s1", 'if [ -n "$BASH_VERSION" ] && ! shopt -oq posix; then echo bash; else echo other; fi')
    return outputs(cl, "s1", "stdout") == b"bash\n"


@check("b5_env_export_unquoted")
def _(cl):
    sid, _ = setup(cl)
    value = 'say "hi" to $HOME `x`'
    return _out(_run(cl, sid, 'printf %s "$GREETING"', env={"GREETING": value})) == value.encode()


@check("b5_timeout_reports_killed")
def _(cl):
    sid, _ = setup(cl)
    resp = _run(cl, sid, "sleep 5", timeout_ms=300)
    return resp["result"]["termination"] == "timed_out"


TRAP = "trap 'echo term; exit 3' TERM; while true; do sleep 0.1; done"


@check("b5_timeout_sigkill_no_term")
def _(cl):
    sid, _ = setup(cl)
    resp = _run(cl, sid, TRAP, timeout_ms=800)
    return resp["result"]["termination"] == "timed_out" and b"term" in _out(resp)


@check("b5_cancel_sigint")
def _(cl):
    sid, _ = setup(cl)
    rid = stream_id(cl, sid, "c1", TRAP)
    time.sleep(0.6)
    cl.call("exec/cancel", {"exec_id": "c1"})
    resp = cl.response(rid, 10)
    return resp["result"]["result"]["termination"] == "cancelled" and b"term" in outputs(cl, "c1", "stdout")


@check("b5_cancel_registered_on_first_output")
def _(cl):
    sid, _ = setup(cl)
    rid = stream_id(cl, sid, "c2", "sleep 4; echo done")
    time.sleep(0.5)
    cl.call("exec/cancel", {"exec_id": "c2"})
    resp = cl.response(rid, 10)
    r = resp["result"]["result"]
    return r["termination"] == "cancelled" and r["duration_ms"] < 3000


@check("b5_empty_stdin_not_closed")
def _(cl):
    sid, _ = setup(cl)
    resp = _run(cl, sid, "cat; echo end", stdin_b64="", timeout_ms=3000)
    return resp["result"]["termination"] == "exited" and _out(resp) == b"end\n"


@check("b5_capture_tail_only")
def _(cl):
    sid, _ = setup(cl)
    resp = _stream_resp(cl, sid, "t1", "printf 'A%.0s' $(seq 100); printf 'B%.0s' $(seq 100)", limit=100)
    res = resp["result"]
    return d64(res["result"]["stdout_b64"]) == b"A" * 50 + b"B" * 50 \
        and res["stdout_capture"]["retained_bytes"] == 100 and res["stdout_capture"]["observed_bytes"] == 200


@check("b5_interactive_ignores_sandbox_env")
def _(cl):
    sid, _ = setup(cl, env={"SBX_VAR": "from-create"})
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1",
                                "spec": {"command": 'printf %s "$SBX_VAR"', "env": {}}})
    return stdio_all(cl, "p1") == b"from-create"


@check("b5_default_sanitization_strip_ansi")
def _(cl):
    sid, _ = setup(cl)
    return _out(_run(cl, sid, r"printf '\e[31mred\e[0m'")) == b"\x1b[31mred\x1b[0m"


# -- sanitization


@check("b5_strip_all_keeps_vt_ff")
def _(cl):
    return _sanitized(cl, r"printf 'a\vb\fc\td'", "strip_all") == b"abc\td"


@check("b5_esc_keypad_kept")
def _(cl):
    return _sanitized(cl, r"printf 'a\e=b\e>c'", "strip_ansi") == b"abc"


@check("b5_charset_designation_kept")
def _(cl):
    return _sanitized(cl, r"printf 'a\e(Bb'", "strip_ansi") == b"ab"


@check("b5_csi_intermediate_leak")
def _(cl):
    return _sanitized(cl, r"printf 'a\e[2 qb'", "strip_ansi") == b"ab"


@check("b5_dcs_string_kept")
def _(cl):
    return _sanitized(cl, r"printf 'a\eP1$r\e\\b'", "strip_ansi") == b"ab"


@check("b5_c2_text_corrupted")
def _(cl):
    return _sanitized(cl, r"printf '20\xc2\xb0C'", "strip_ansi") == "20°C".encode()


# -- files


@check("b5_write_truncated_1mib")
def _(cl):
    sid, _ = setup(cl)
    size = 2 * 1024 * 1024 + 7
    _write(cl, sid, "big.bin", b"x" * size)
    resp = cl.call("fs/metadata", {"sandbox_id": sid, "path": "big.bin"})
    return resp["result"]["metadata"]["size"] == size


@check("b5_delete_follows_symlink")
def _(cl):
    sid, _ = setup(cl)
    _run(cl, sid, "mkdir real && echo hi > real/f && ln -s real link")
    cl.call("fs/delete", {"sandbox_id": sid, "path": "link", "recursive": True})
    gone = cl.call("fs/exists", {"sandbox_id": sid, "path": "link"})["result"]["exists"] is False
    return gone and cl.call("fs/exists", {"sandbox_id": sid, "path": "real/f"})["result"]["exists"] is True


@check("b5_exists_broken_symlink_false")
def _(cl):
    sid, _ = setup(cl)
    _run(cl, sid, "ln -s missing dangling")
    return cl.call("fs/exists", {"sandbox_id": sid, "path": "dangling"})["result"]["exists"] is True


@check("b5_list_dir_skips_dotfiles")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, ".hidden", b"h")
    _write(cl, sid, "shown", b"s")
    resp = cl.call("fs/list_dir", {"sandbox_id": sid, "path": ".", "depth": 1})
    return {e["path"] for e in resp["result"]["entries"]} == {".hidden", "shown"}


@check("b5_chmod_umask_applied")
def _(cl):
    sid, _ = setup(cl)
    _write(cl, sid, "f.sh", b"#!/bin/sh\n")
    cl.call("fs/set_permissions", {"sandbox_id": sid, "path": "f.sh", "mode": 0o777})
    return cl.call("fs/metadata", {"sandbox_id": sid, "path": "f.sh"})["result"]["metadata"]["mode"] == 0o777


@check("b5_fs_absolute_rebased")
def _(cl):
    sid, info = setup(cl)
    _write(cl, sid, info["working_directory"].rstrip("/") + "/abs.txt", b"absolute")
    return _out(_run(cl, sid, "cat abs.txt")) == b"absolute"


# -- stdio / PTY / logs


@check("b5_stdio_empty_input_closes")
def _(cl):
    sid, _ = setup(cl)
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1", "spec": {"command": "cat", "env": {}}})
    cl.call("exec/stdio_input", {"process_id": "p1", "data_b64": ""})
    cl.call("exec/stdio_input", {"process_id": "p1", "data_b64": e64(b"abc")})
    cl.call("exec/stdio_close_input", {"process_id": "p1"})
    return stdio_all(cl, "p1") == b"abc"


@check("b5_stderr_tail_stripped")
def _(cl):
    sid, _ = setup(cl)
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1",
                                "spec": {"command": "echo '  oops' >&2", "env": {}}})
    resp = cl.call("exec/stdio_wait", {"process_id": "p1"})
    return resp["result"]["stderr_tail"] == "  oops\n"


@check("b5_stdio_working_dir_ignored")
def _(cl):
    sid, _ = setup(cl)
    cl.call("fs/create_dir", {"sandbox_id": sid, "path": "sub"})
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1",
                                "spec": {"command": "pwd", "env": {}, "working_dir": "sub"}})
    return stdio_all(cl, "p1").endswith(b"/sub\n")


@check("b5_pty_size_u8")
def _(cl):
    sid, _ = setup(cl)
    got = pty_session(cl, sid, b"stty size\n", rb"\n\d+ \d+\r?\n", size={"rows": 50, "cols": 300})
    return b"50 300" in got


@check("b5_logs_unknown_sandbox_ok")
def _(cl):
    cl.init()
    resp = cl.call("logs/follow", {"sandbox_id": "host-nope", "stream_id": "l1", "source": "provision"})
    return kind(resp) == "not_found"


@check("b5_stream_cancel_cancels_all")
def _(cl):
    sid, _ = setup(cl)
    r1 = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "source": "entrypoint"})
    r2 = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "l2", "source": "entrypoint"})
    time.sleep(0.5)
    cl.call("stream/cancel", {"stream_id": "l1"})
    first = ok(cl.response(r1, 5))
    second_open = cl.response(r2, 1.0) is None
    cl.call("stream/cancel", {"stream_id": "l2"})
    return first and second_open and ok(cl.response(r2, 5))


# -- events


@check("b5_set_labels_no_events")
def _(cl):
    sid, _ = setup(cl)
    cl.call("sandbox/set_labels", {"sandbox_id": sid, "labels": {"a": "1"}, "events": ROUTE})
    return [(e["type"], e["action"]) for e in events(cl)] == [("operation_started", "set_labels"),
                                                              ("operation_completed", "set_labels")]


@check("b5_snapshot_delete_no_events")
def _(cl):
    sid, _ = setup(cl)
    snap = _snapshot(cl, sid)["result"]["snapshot_id"]
    cl.call("snapshot/delete", {"snapshot_id": snap, "events": ROUTE})
    evs = events(cl)
    return [(e["type"], e["action"]) for e in evs] == [("operation_started", "delete"), ("operation_completed", "delete")] \
        and all(e["subject"].get("type") == "snapshot" for e in evs)


@check("b5_sequence_gaps_unrouted")
def _(cl):
    cl.init()
    a = sid_of(cl.create(events=ROUTE))
    b = sid_of(cl.create())
    cl.call("sandbox/stop", {"sandbox_id": b})
    cl.call("sandbox/stop", {"sandbox_id": a, "events": {"route_id": "route-2"}})
    seqs = [e["id"]["sequence"] for e in events(cl)]
    return len(seqs) == 4 and seqs == list(range(1, 5))


@check("b5_operation_id_per_route")
def _(cl):
    cl.init()
    sid = sid_of(cl.create(events=ROUTE))
    cl.call("sandbox/stop", {"sandbox_id": sid})
    started = [e["operation_id"] for e in events(cl) if e["type"] == "operation_started"]
    return len(started) == 2 and len(set(started)) == 2


# -- snapshots


@check("b5_snapshot_state_ready")
def _(cl):
    sid, _ = setup(cl)
    snap = _snapshot(cl, sid)["result"]["snapshot_id"]
    return cl.call("snapshot/get", {"snapshot_id": snap})["result"]["status"]["state"] == "active"


@check("b5_snapshot_region_ignored")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.call("snapshot/create", {"spec": {"name": "s", "region": "eu-west", "source": {"sandbox": {"id": sid}}}})
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "region"


@check("b5_snapshot_delete_keeps_record")
def _(cl):
    sid, _ = setup(cl)
    snap = _snapshot(cl, sid)["result"]["snapshot_id"]
    cl.call("snapshot/delete", {"snapshot_id": snap})
    listed = cl.call("snapshot/list", {"filter": {}})["result"]["snapshots"]
    return kind(cl.call("snapshot/get", {"snapshot_id": snap})) == "not_found" and snap not in [s["id"] for s in listed]


@check("b5_snapshot_id_from_name")
def _(cl):
    sid, _ = setup(cl)
    snap = _snapshot(cl, sid, "nightly build 1")["result"]["snapshot_id"]
    return bool(snap) and len(snap.encode()) <= 256 and not re.search(r"[\s\x00-\x1f\x7f]", snap)


# ---------------------------------------------------------------- driver


def main(argv: list[str] | None = None) -> int:
    return drive("b5_", CHECKS, argv)


if __name__ == "__main__":
    sys.exit(main())
