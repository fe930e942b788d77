"""Self-check of the b2_* mutants: each starts and answers initialize; for many, the fault is reachable.

``python -m tests.redteam.selfcheck_2`` (from the worktree root, PYTHONPATH set). A reachability check is a
function of a live client that returns True when the plugin behaves as the protocol says: the honest
reference plugin must pass it and the mutant must fail it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

# The client and helpers every self-check shares.
from tests.redteam.selfcheck_client import (  # noqa: F401 -- re-exported for the later self-checks
    Client,
    HONEST,
    INIT,
    PY,
    d64,
    e64,
    err,
    kind,
    mutant_cmd,
    ok,
    run,
    sid_of,
    stream,
)


# ---------------------------------------------------------------- checks: True = conforming

CHECKS: dict[str, Callable[[Client], bool]] = {}


def check(name: str):
    def register(fn):
        CHECKS[name] = fn
        return fn
    return register


@check("b2_second_initialize_caps_change")
def _(cl):
    return cl.init()["result"]["capabilities"] == cl.init()["result"]["capabilities"]


@check("b2_version_zero_accepted")
def _(cl):
    return not ok(cl.call("initialize", {"protocol_version": 0}))


@check("b2_version_mismatch_names_one")
def _(cl):
    msg = err(cl.call("initialize", {"protocol_version": 99})).get("message", "")
    return "99" in msg and re.search(r"\b1\b", msg) is not None


@check("b2_initialize_rejects_unknown_fields")
def _(cl):
    return ok(cl.call("initialize", {"protocol_version": 1, "client": {"name": "x"}}))


@check("b2_resize_unsupported_names_fork")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    resp = cl.call("sandbox/resize", {"sandbox_id": sid, "resources": {"cpu": 2}})
    return (err(resp).get("data") or {}).get("detail", {}).get("capability") == "lifecycle.resize"


@check("b2_activate_method_not_found")
def _(cl):
    cl.init()
    resp = cl.call("snapshot/activate", {"snapshot_id": "snap-x"})
    return kind(resp) == "unsupported" and err(resp)["data"]["detail"]["capability"] == "snapshots.activation"


@check("b2_large_id_wrapped")
def _(cl):
    cl.init()
    big = 2**32 + 7
    cl.send("provider/health", {}, request_id=big)
    return cl.response(big, 5) is not None


@check("b2_id_zero_as_notification")
def _(cl):
    cl.send("initialize", {"protocol_version": 1}, request_id=0)
    return cl.response(0, 5) is not None


@check("b2_whitespace_line_malformed")
def _(cl):
    cl.init()
    cl.raw(b"   \n\r\n")
    rid = cl.send("provider/health", {})
    cl.response(rid, 5)
    time.sleep(0.2)
    return all(m.get("id") in (10, rid) for m in cl.log if "method" not in m)


@check("b2_unknown_method_in_known_group")
def _(cl):
    cl.init()
    return err(cl.call("sandbox/frobnicate", {"sandbox_id": "x"})).get("code") == -32601


@check("b2_missing_field_32602")
def _(cl):
    cl.init()
    return err(cl.call("sandbox/describe", {})).get("code") == -32600


@check("b2_invalid_state_retryable")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("sandbox/stop", {"sandbox_id": sid})
    resp = run(cl, sid, "true")
    return kind(resp) == "invalid_state" and err(resp)["data"]["report"]["retryable"] is False


@check("b2_delete_twice_not_found")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    return ok(cl.call("sandbox/delete", {"sandbox_id": sid})) and ok(cl.call("sandbox/delete", {"sandbox_id": sid}))


@check("b2_undelete_missing_capabilities")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("sandbox/delete", {"sandbox_id": sid})
    return "capabilities" in cl.call("sandbox/undelete", {"sandbox_id": sid})["result"]


@check("b2_fork_gate_before_options")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    return kind(cl.call("sandbox/fork", {"sandbox_id": sid, "options": {"include_memory": False}})) == "invalid_spec"


@check("b2_checkpoint_unsupported")
def _(cl):
    cl.init()
    return err(cl.call("sandbox/checkpoint", {"sandbox_id": "x"})).get("code") == -32601


@check("b2_sandbox_kind_substituted")
def _(cl):
    cl.init()
    resp = cl.call("sandbox/create", {"spec": {"source": "host_directory", "sandbox_kind": "virtual_machine"}})
    return kind(resp) == "invalid_spec" or (ok(resp) and resp["result"]["status"]["sandbox_kind"] == "virtual_machine")


@check("b2_set_labels_merges")
def _(cl):
    cl.init()
    sid = sid_of(cl.create(labels={"a": "1", "b": "2"}))
    cl.call("sandbox/set_labels", {"sandbox_id": sid, "labels": {"a": "1"}})
    return cl.call("sandbox/describe", {"sandbox_id": sid})["result"]["status"]["labels"] == {"a": "1"}


@check("b2_exit_code_signed_byte")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    return run(cl, sid, "exit 255")["result"]["exit_code"] == 255


@check("b2_stdin_truncated_pipe_buffer")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    out = run(cl, sid, "wc -c", stdin_b64=e64(b"z" * 200_000))["result"]
    return d64(out["stdout_b64"]).strip() == b"200000"


@check("b2_run_timeout_as_error")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    resp = run(cl, sid, "sleep 5", timeout_ms=300)
    return ok(resp) and resp["result"]["termination"] == "timed_out"


@check("b2_bash_env_from_spec_kept")
def _(cl):
    cl.init()
    info = cl.create()
    sid = sid_of(info)
    cl.call("fs/write", {"sandbox_id": sid, "path": "rc.sh", "content_b64": e64(b"echo INJECTED\n")})
    rc = os.path.join(info["working_directory"], "rc.sh")
    out = run(cl, sid, "echo body", env={"BASH_ENV": rc})["result"]
    return b"INJECTED" not in d64(out["stdout_b64"])


@check("b2_exec_pipefail")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    return d64(run(cl, sid, "false | true; echo $?")["result"]["stdout_b64"]).strip() == b"0"


@check("b2_run_stderr_not_sanitized")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    out = run(cl, sid, r"printf '\033[31mX\033[0m' >&2", output_sanitization="strip_ansi")["result"]
    return d64(out["stderr_b64"]) == b"X"


@check("b2_stream_last_chunk_late")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    resp, outputs = stream(cl, sid, "echo one; sleep 0.2; echo two")
    return b"".join(d64(m["params"]["data_b64"]) for m in outputs) == b"one\ntwo\n"


@check("b2_limit_stops_notifications")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    resp, outputs = stream(cl, sid, "head -c 10000 /dev/zero", limit=100)
    return sum(len(d64(m["params"]["data_b64"])) for m in outputs) == 10000


@check("b2_odd_limit_accounting")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    resp, _outputs = stream(cl, sid, "head -c 1000 /dev/zero", limit=101)
    s = resp["result"]["stdout_capture"]
    return s["retained_bytes"] + s["omitted_bytes"] == s["observed_bytes"] == 1000


@check("b2_cancel_unknown_error")
def _(cl):
    cl.init()
    return ok(cl.call("exec/cancel", {"exec_id": "never-started"}))


@check("b2_truncated_when_omitted")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    resp, _outputs = stream(cl, sid, "head -c 1000 /dev/zero", limit=100)
    return resp["result"]["stdout_capture"]["truncated"] is False


@check("b2_stream_notifications_unsanitized")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    resp, outputs = stream(cl, sid, r"printf '\033[31mX\033[0m'", output_sanitization="strip_ansi")
    return b"".join(d64(m["params"]["data_b64"]) for m in outputs) == b"X"


def _file(cl, data=b"abc", path="f.txt"):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("fs/write", {"sandbox_id": sid, "path": path, "content_b64": e64(data)})
    return sid


@check("b2_read_past_eof_invalid")
def _(cl):
    sid = _file(cl)
    resp = cl.call("fs/read", {"sandbox_id": sid, "path": "f.txt", "offset": 10})
    return ok(resp) and d64(resp["result"]["content_b64"]) == b""


@check("b2_read_length_zero_whole")
def _(cl):
    sid = _file(cl)
    resp = cl.call("fs/read", {"sandbox_id": sid, "path": "f.txt", "length": 0})
    return ok(resp) and d64(resp["result"]["content_b64"]) == b""


@check("b2_append_missing_file_io")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    return ok(cl.call("fs/write", {"sandbox_id": sid, "path": "new.txt", "content_b64": e64(b"x"), "append": True}))


@check("b2_append_no_parents")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    return ok(cl.call("fs/write", {"sandbox_id": sid, "path": "d/e/n.txt", "content_b64": e64(b"x"), "append": True}))


@check("b2_set_permissions_octal_digits")
def _(cl):
    sid = _file(cl)
    cl.call("fs/set_permissions", {"sandbox_id": sid, "path": "f.txt", "mode": 420})
    return cl.call("fs/metadata", {"sandbox_id": sid, "path": "f.txt"})["result"]["metadata"]["mode"] == 420


@check("b2_exists_relative_cwd")
def _(cl):
    sid = _file(cl, path="only-in-sandbox-b2.txt")
    return cl.call("fs/exists", {"sandbox_id": sid, "path": "only-in-sandbox-b2.txt"})["result"]["exists"] is True


@check("b2_stdio_duplicate_id_replaces")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    spec = {"command": "sleep 5", "env": {}}
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1", "spec": spec})
    resp = cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1", "spec": spec})
    cl.call("exec/stdio_terminate", {"process_id": "p1"})
    return not ok(resp)


@check("b2_stdio_input_holds_lock")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1", "spec": {"command": "sleep 5", "env": {}}})
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p2", "spec": {"command": "echo hi", "env": {}}})
    cl.send("exec/stdio_input", {"process_id": "p1", "data_b64": e64(b"y" * 300_000)})
    time.sleep(0.3)
    return cl.call("exec/stdio_output", {"process_id": "p2"}, timeout=3) is not None


@check("b2_stdio_wait_terminated_enum")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1", "spec": {"command": "sleep 30", "env": {}}})
    cl.call("exec/stdio_terminate", {"process_id": "p1"})
    term = cl.call("exec/stdio_wait", {"process_id": "p1"})["result"]["termination"]
    return term in ("exited", "timed_out", "cancelled", "killed", "unknown")


@check("b2_stdio_output_lossy_utf8")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1",
                                "spec": {"command": r"printf '\377\376A'", "env": {}}})
    got = b""
    for _ in range(5):
        data = cl.call("exec/stdio_output", {"process_id": "p1"})["result"]["data_b64"]
        if data is None:
            break
        got += d64(data)
    return got == b"\xff\xfeA"


@check("b2_pty_output_sanitized")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("pty/open", {"sandbox_id": sid, "pty_id": "t1",
                         "options": {"size": {"rows": 24, "cols": 80}, "env": {"PS1": "$ "}}})
    cl.call("pty/input", {"pty_id": "t1", "data_b64": e64(b"printf '\\033[31mRED\\033[0m'; exit\n")})
    got = b""
    for _ in range(20):
        resp = cl.call("pty/output", {"pty_id": "t1"}, timeout=5)
        data = (resp or {}).get("result", {}).get("data_b64")
        if data is None:
            break
        got += d64(data)
        if b"\x1b[31mRED" in got:
            break
    return b"\x1b[31mRED" in got


@check("b2_pty_resize_swapped")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("pty/open", {"sandbox_id": sid, "pty_id": "t1",
                         "options": {"size": {"rows": 24, "cols": 80}, "env": {"PS1": "$ "}}})
    cl.call("pty/resize", {"pty_id": "t1", "size": {"rows": 33, "cols": 111}})
    cl.call("pty/input", {"pty_id": "t1", "data_b64": e64(b"echo SZ=$(stty size)=; exit\n")})
    got = b""
    for _ in range(20):
        resp = cl.call("pty/output", {"pty_id": "t1"}, timeout=5)
        data = (resp or {}).get("result", {}).get("data_b64")
        if data is None:
            break
        got += d64(data)
        if re.search(rb"SZ=\d+ \d+=", got):
            break
    return b"SZ=33 111=" in got


def _provision(cl):
    cl.init()
    sid = sid_of(cl.create())
    rid = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "s1", "source": "provision"})
    cl.response(rid, 10)
    return [m for m in cl.before(rid) if m["method"] == "logs/output"]


@check("b2_logs_output_after_response")
def _(cl):
    return len(_provision(cl)) == 2


@check("b2_logs_last_line_dropped")
def _(cl):
    return len(_provision(cl)) == 2


@check("b2_logs_cancel_ignored_active")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    rid = cl.send("logs/follow", {"sandbox_id": sid, "stream_id": "s1", "source": "entrypoint"})
    time.sleep(0.3)
    cl.call("stream/cancel", {"stream_id": "s1"})
    return cl.response(rid, 3) is not None


ROUTE = {"route_id": "Route-ABC", "correlation_id": "corr-1"}


def _events(cl):
    return [m["params"] for m in cl.log if m.get("method") == "host/event"]


@check("b2_event_create_completed_no_id")
def _(cl):
    cl.init()
    sid = sid_of(cl.create(name="n1", events=ROUTE))
    done = [e for e in _events(cl) if e["event"]["type"] == "operation_completed"]
    return len(done) == 1 and done[0]["event"]["subject"].get("id") == sid


@check("b2_event_route_id_lowercased")
def _(cl):
    cl.init()
    cl.create(name="n1", events=ROUTE)
    return all(e["route_id"] == "Route-ABC" for e in _events(cl)) and len(_events(cl)) == 2


def _failed_create(cl):
    cl.init()
    cl.call("sandbox/create", {"spec": {"source": "host_directory", "network": "block_all"}, "events": ROUTE})
    return [e["event"] for e in _events(cl)]


@check("b2_event_failed_reuses_sequence")
def _(cl):
    evs = _failed_create(cl)
    return [e["id"]["sequence"] for e in evs] == [1, 2] and evs[1]["type"] == "operation_failed"


@check("b2_event_failed_no_correlation")
def _(cl):
    evs = _failed_create(cl)
    return len(evs) == 2 and all(e.get("correlation_id") == "corr-1" for e in evs)


@check("b2_event_delete_completed_late")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    rid = cl.send("sandbox/delete", {"sandbox_id": sid, "events": ROUTE})
    cl.response(rid)
    return [m["params"]["event"]["type"] for m in cl.before(rid) if m["method"] == "host/event"] == \
        ["operation_started", "operation_completed"]


@check("b2_event_delete_unknown_silent")
def _(cl):
    cl.init()
    rid = cl.send("sandbox/delete", {"sandbox_id": "sb-never", "events": ROUTE})
    cl.response(rid)
    return [m["params"]["event"]["type"] for m in cl.before(rid) if m["method"] == "host/event"] == \
        ["operation_started", "operation_completed"]


@check("b2_shutdown_keeps_reading")
def _(cl):
    cl.init()
    cl.call("shutdown", {})
    try:
        cl.proc.wait(timeout=3)
        return True
    except subprocess.TimeoutExpired:
        return False


@check("b2_shutdown_waits_running_exec")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.send("exec/stream", {"sandbox_id": sid, "exec_id": "long", "spec": {"command": "sleep 30", "env": {}}})
    time.sleep(0.3)
    cl.call("shutdown", {})
    try:
        cl.proc.wait(timeout=5)
        return True
    except subprocess.TimeoutExpired:
        return False


@check("b2_eof_leaves_interactive")
def _(cl):
    cl.init()
    sid = sid_of(cl.create())
    cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1", "spec": {"command": "sleep 20", "env": {}}})
    cl.send("exec/stdio_output", {"process_id": "p1"})
    time.sleep(0.3)
    cl.proc.stdin.close()
    try:
        cl.proc.wait(timeout=5)
        return True
    except subprocess.TimeoutExpired:
        return False


# ---------------------------------------------------------------- driver


def starts(name: str) -> bool:
    try:
        out = subprocess.run(mutant_cmd(name), input=INIT, capture_output=True, timeout=15).stdout
    except subprocess.TimeoutExpired:
        return False
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    return any(m.get("id") == 1 and m.get("result", {}).get("protocol_version") == 1 for m in lines)


def conforms(cmd: list[str], fn: Callable[[Client], bool]) -> bool | str:
    cl = Client(cmd)
    try:
        return bool(fn(cl))
    except Exception as exc:  # noqa: BLE001 - a mutant may answer garbage
        return f"error: {exc!r}"
    finally:
        cl.close()


def main() -> int:
    from tests.redteam import load
    names = sorted(n for n in load() if n.startswith("b2_"))
    failures = 0
    with ThreadPoolExecutor(8) as pool:
        started = dict(zip(names, pool.map(starts, names)))
        for name in names:
            if not started[name]:
                failures += 1
                print(f"FAIL start {name}")
        print(f"{sum(started.values())}/{len(names)} mutants start and answer initialize")
        jobs = {name: (pool.submit(conforms, HONEST, fn), pool.submit(conforms, mutant_cmd(name), fn))
                for name, fn in CHECKS.items()}
        reached = 0
        for name, (honest, mutant) in jobs.items():
            h, m = honest.result(), mutant.result()
            good = h is True and m is not True
            reached += good
            failures += not good
            print(f"{'ok  ' if good else 'FAIL'} reach {name}: honest={h} mutant={m}")
    print(f"{reached}/{len(CHECKS)} faults reached (honest conforms, mutant does not)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
