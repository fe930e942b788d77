"""Self-check of the bp1_* mutants (``tests/redteam/blind_pairs_1.py``): each starts and answers initialize, and
each fault is reachable over the wire.

``python -m tests.redteam.selfcheck_pairs_1 [NAME ...]`` (from the worktree root, PYTHONPATH set). A probe is a
function of a live client that returns True when the plugin behaves as the protocol says; it must pass against
the honest reference and fail against the mutant. Each probe exercises the two features its mutant combines
(and, where one feature alone would say nothing, checks the honest single-feature behaviour too). The v1
mutants are driven with ``selfcheck_client.Client`` against ``host_plugin``; the ``bp1_v2_*`` mutants with the
raw v2 host of ``selfcheck_v2_1`` (its own Unix-socket data channels) against ``host_plugin --dialect
sandbox-driver-v2``. Every plugin runs as a real process over its stdio.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.redteam import selfcheck_client as v1
from tests.redteam import selfcheck_v2_1 as v2
from tests.redteam.selfcheck_client import (
    Client,
    d64,
    detail,
    e64,
    kind,
    ok,
    setup,
    sid_of,
    stdio_all,
    stream_id,
)

PREFIX = "bp1_"
V2_PREFIX = "bp1_v2_"
UNKNOWN_SID = "host-00000000000000000000"

V1_CHECKS: dict[str, Callable[[Client], bool]] = {}
V2_CHECKS: dict[str, Callable[[v2.Plugin], bool]] = {}


def check(name: str):
    def register(fn):
        (V2_CHECKS if name.startswith("v2_") else V1_CHECKS)[PREFIX + name] = fn
        return fn
    return register


# ------------------------------------------------------------------------------------------------ helpers


def _tag() -> str:
    return f"bp1-{uuid.uuid4().hex[:12]}"


def _call_ok(cl: Client, method: str, params: dict[str, Any]) -> bool:
    return ok(cl.call(method, params))


def _listed(cl: Client, labels: dict[str, str] | None = None) -> dict[str, dict]:
    resp = cl.call("sandbox/list", {"filter": {"labels": labels} if labels is not None else {}})
    return {s["id"]: s for s in resp["result"]["sandboxes"]}


def _state(cl: Client, sid: str) -> str | None:
    return (cl.call("sandbox/describe", {"sandbox_id": sid}).get("result") or {}).get("status", {}).get("state")


def _not_found_sandbox(resp: dict | None) -> bool:
    return kind(resp) == "not_found" and detail(resp).get("resource") == "sandbox"


def _run(cl: Client, sid: str, command: str, **spec: Any) -> dict:
    resp = cl.call("exec/run", {"sandbox_id": sid, "spec": {"command": command, "env": spec.pop("env", {}),
                                                            "timeout_ms": 20000, **spec}}, timeout=30)
    return (resp or {}).get("result") or {}


def _snapshot(cl: Client, sid: str) -> str:
    resp = cl.call("sandbox/snapshot", {"sandbox_id": sid, "options": {"name": None, "include_memory": False}})
    return resp["result"]["snapshot_id"]


def _route_events(cl: Client, action: str) -> list[dict]:
    return [m["params"] for m in list(cl.log) if m.get("method") == "host/event"
            and m["params"]["event"].get("action") == action]


def _stdio_open(cl: Client, sid: str, process_id: str, command: str) -> dict | None:
    return cl.call("exec/stdio_open", {"sandbox_id": sid, "process_id": process_id,
                                       "spec": {"command": command, "env": {}}})


# ------------------------------------------------------------------------------------------------ state x query


@check("list_paused_state_running")
def _(cl):
    sid, _ = setup(cl)
    _call_ok(cl, "sandbox/pause", {"sandbox_id": sid})
    listed = _listed(cl).get(sid) or {}
    return _state(cl, sid) == "paused" and listed.get("state") == "paused"


@check("label_filter_skips_stopped")
def _(cl):
    tag = _tag()
    sid, _ = setup(cl, labels={"t": tag})
    _call_ok(cl, "sandbox/stop", {"sandbox_id": sid})
    listed = _listed(cl, {"t": tag})
    return _state(cl, sid) == "stopped" and set(listed) == {sid} and listed[sid]["state"] == "stopped"


@check("attach_archived_not_found")
def _(cl):
    sid, _ = setup(cl)
    _call_ok(cl, "sandbox/archive", {"sandbox_id": sid})
    resp = cl.call("sandbox/attach", {"sandbox_id": sid})
    return ok(resp) and resp["result"]["status"]["id"] == sid and resp["result"]["status"]["state"] == "archived"


@check("undelete_missing_from_list")
def _(cl):
    sid, _ = setup(cl)
    _call_ok(cl, "sandbox/delete", {"sandbox_id": sid})
    restored = _call_ok(cl, "sandbox/undelete", {"sandbox_id": sid})
    return restored and _state(cl, sid) == "running" and sid in _listed(cl)


@check("set_labels_filter_stale")
def _(cl):
    old, new = _tag(), _tag()
    sid, _ = setup(cl, labels={"t": old})
    _call_ok(cl, "sandbox/set_labels", {"sandbox_id": sid, "labels": {"t": new}})
    return sid in _listed(cl, {"t": new}) and sid not in _listed(cl, {"t": old})


@check("platform_info_deleted_ok")
def _(cl):
    sid, _ = setup(cl)
    before = cl.call("sandbox/platform_info", {"sandbox_id": sid})
    _call_ok(cl, "sandbox/delete", {"sandbox_id": sid})
    return ok(before) and _not_found_sandbox(cl.call("sandbox/platform_info", {"sandbox_id": sid}))


@check("attach_negative_cache")
def _(cl):
    sid, _ = setup(cl)
    _call_ok(cl, "sandbox/delete", {"sandbox_id": sid})
    gone = _not_found_sandbox(cl.call("sandbox/attach", {"sandbox_id": sid}))
    restored = _call_ok(cl, "sandbox/undelete", {"sandbox_id": sid})
    again = cl.call("sandbox/attach", {"sandbox_id": sid})
    return gone and restored and ok(again) and again["result"]["status"]["id"] == sid


@check("label_filter_includes_deleted")
def _(cl):
    tag = _tag()
    sid, _ = setup(cl, labels={"t": tag})
    _call_ok(cl, "sandbox/delete", {"sandbox_id": sid})
    return sid not in _listed(cl) and sid not in _listed(cl, {"t": tag})


@check("labels_shared_default")
def _(cl):
    first, _ = setup(cl)
    second = sid_of(cl.create())
    _call_ok(cl, "sandbox/set_labels", {"sandbox_id": first, "labels": {"k": "v"}})
    status = cl.call("sandbox/describe", {"sandbox_id": second})["result"]["status"]
    mine = cl.call("sandbox/describe", {"sandbox_id": first})["result"]["status"]
    return mine["labels"] == {"k": "v"} and status["labels"] == {}


# ------------------------------------------------------------------------------------------------ setting x option


@check("snapshot_restore_drops_labels")
def _(cl):
    tag = _tag()
    source, _ = setup(cl)
    snapshot = _snapshot(cl, source)
    info = cl.create(source={"snapshot": {"name": snapshot}}, labels={"t": tag})
    return info["status"]["labels"] == {"t": tag} and set(_listed(cl, {"t": tag})) == {sid_of(info)}


@check("snapshot_restore_drops_env")
def _(cl):
    source, _ = setup(cl)
    snapshot = _snapshot(cl, source)
    restored = sid_of(cl.create(source={"snapshot": {"name": snapshot}}, env={"BP1_VAR": "kept"}))
    return d64(_run(cl, restored, 'echo "$BP1_VAR"').get("stdout_b64")) == b"kept\n"


@check("start_loses_env")
def _(cl):
    sid, _ = setup(cl, env={"BP1_VAR": "kept"})
    before = d64(_run(cl, sid, 'echo "$BP1_VAR"').get("stdout_b64"))
    stopped = _call_ok(cl, "sandbox/stop", {"sandbox_id": sid})
    started = _call_ok(cl, "sandbox/start", {"sandbox_id": sid})
    after = d64(_run(cl, sid, 'echo "$BP1_VAR"').get("stdout_b64"))
    return before == b"kept\n" and stopped and started and after == b"kept\n"


@check("stdin_drops_spec_env")
def _(cl):
    sid, _ = setup(cl)
    plain = d64(_run(cl, sid, 'echo "$BP1_VAR"', env={"BP1_VAR": "bar"}).get("stdout_b64"))
    fed = d64(_run(cl, sid, 'read x; echo "$x-$BP1_VAR"', env={"BP1_VAR": "bar"},
                   stdin_b64=e64(b"in\n")).get("stdout_b64"))
    return plain == b"bar\n" and fed == b"in-bar\n"


@check("two_bad_fields_joined")
def _(cl):
    cl.init()
    one = cl.call("sandbox/create", {"spec": {"source": "host_directory", "user": "nobody"}})
    two = cl.call("sandbox/create", {"spec": {"source": "host_directory", "user": "nobody", "region": "r1"}})
    return (kind(one) == "invalid_spec" and detail(one).get("field") == "user"
            and kind(two) == "invalid_spec" and detail(two).get("field") in ("user", "region"))


# ------------------------------------------------------------------------------------------------ accounting


@check("tail_ring_unwrapped")
def _(cl):
    sid, _ = setup(cl)
    resp = cl.response(stream_id(cl, sid, "x1", "head -c 60 /dev/zero | tr '\\0' a", limit=100), 20)
    answer = resp["result"]
    stats = answer["stdout_capture"]
    return (d64(answer["result"]["stdout_b64"]) == b"a" * 60 and stats["observed_bytes"] == 60
            and stats["retained_bytes"] == 60 and stats["omitted_bytes"] == 0)


@check("sanitizer_shared_streams")
def _(cl):
    sid, _ = setup(cl)
    result = _run(cl, sid, r"printf '\033]0;title'; sleep 0.5; printf 'hello\n' >&2; sleep 0.5; "
                           r"printf '\007done\n'", output_sanitization="strip_ansi")
    return d64(result.get("stdout_b64")) == b"done\n" and d64(result.get("stderr_b64")) == b"hello\n"


@check("stdio_output_sanitized")
def _(cl):
    sid, _ = setup(cl)
    opened = ok(_stdio_open(cl, sid, "p1", r"printf '\033[1mX\033[0m\n'"))
    return opened and stdio_all(cl, "p1") == b"\x1b[1mX\x1b[0m\n"


@check("stream_signal_missing")
def _(cl):
    sid, _ = setup(cl)
    buffered = _run(cl, sid, "kill -9 $$")
    streamed = cl.response(stream_id(cl, sid, "x1", "kill -9 $$"), 20)["result"]["result"]
    return buffered.get("signal") == 9 and streamed.get("signal") == 9


@check("cancel_with_timeout_timed_out")
def _(cl):
    sid, _ = setup(cl)
    rid = stream_id(cl, sid, "x1", "echo up; sleep 30", timeout_ms=60000)
    started = cl.wait_for(lambda m: m.get("method") == "exec/output" and m["params"]["exec_id"] == "x1", 10)
    cl.call("exec/cancel", {"exec_id": "x1"})
    resp = cl.response(rid, 15)
    return started is not None and ok(resp) and resp["result"]["result"]["termination"] == "cancelled"


# ------------------------------------------------------------------------------------------------ two sandboxes


@check("handle_route_last_create")
def _(cl):
    cl.init()
    first = sid_of(cl.create(events={"route_id": "route-a", "correlation_id": "corr-a"}))
    cl.create(events={"route_id": "route-b", "correlation_id": "corr-b"})
    stopped = _call_ok(cl, "sandbox/stop", {"sandbox_id": first})
    reported = _route_events(cl, "stop")
    return stopped and bool(reported) and all(e["route_id"] == "route-a" for e in reported)


@check("per_call_route_sticks")
def _(cl):
    cl.init()
    sid = sid_of(cl.create(events={"route_id": "route-a", "correlation_id": "corr-a"}))
    stopped = _call_ok(cl, "sandbox/stop", {"sandbox_id": sid, "events": {"route_id": "route-stop"}})
    started = _call_ok(cl, "sandbox/start", {"sandbox_id": sid})
    on_stop, on_start = _route_events(cl, "stop"), _route_events(cl, "start")
    return (stopped and started and bool(on_stop) and all(e["route_id"] == "route-stop" for e in on_stop)
            and bool(on_start) and all(e["route_id"] == "route-a" for e in on_start))


@check("delete_ends_other_stdio")
def _(cl):
    first, _ = setup(cl)
    second = sid_of(cl.create())
    opened = ok(_stdio_open(cl, second, "p1", "cat"))
    deleted = _call_ok(cl, "sandbox/delete", {"sandbox_id": first})
    cl.call("exec/stdio_input", {"process_id": "p1", "data_b64": e64(b"hi\n")})
    resp = cl.call("exec/stdio_output", {"process_id": "p1"}, timeout=5)
    echoed = d64(((resp or {}).get("result") or {}).get("data_b64")) == b"hi\n"
    cl.call("exec/stdio_terminate", {"process_id": "p1"})
    return opened and deleted and echoed


@check("pause_freezes_other_sandbox")
def _(cl):
    first, _ = setup(cl)
    second = sid_of(cl.create())
    rid = stream_id(cl, second, "xb", "echo up; sleep 1; echo done")
    started = cl.wait_for(lambda m: m.get("method") == "exec/output" and m["params"]["exec_id"] == "xb", 10)
    paused = _call_ok(cl, "sandbox/pause", {"sandbox_id": first})
    resp = cl.response(rid, 8)
    return (started is not None and paused and ok(resp) and resp["result"]["result"]["termination"] == "exited"
            and d64(resp["result"]["result"]["stdout_b64"]) == b"up\ndone\n")


@check("stdio_id_per_sandbox")
def _(cl):
    first, _ = setup(cl)
    second = sid_of(cl.create())
    opened = ok(_stdio_open(cl, first, "p1", "cat"))
    again = _stdio_open(cl, second, "p1", "cat")
    cl.call("exec/stdio_terminate", {"process_id": "p1"})
    return opened and kind(again) == "invalid_spec" and detail(again).get("field") == "process_id"


# ------------------------------------------------------------------------------------------------ sibling methods


@check("fs_read_unknown_sandbox_file")
def _(cl):
    cl.init()
    on_exec = cl.call("exec/run", {"sandbox_id": UNKNOWN_SID, "spec": {"command": "true", "env": {}, "timeout_ms": 5000}})
    on_read = cl.call("fs/read", {"sandbox_id": UNKNOWN_SID, "path": "f"})
    return _not_found_sandbox(on_exec) and _not_found_sandbox(on_read)


@check("fs_exists_unknown_sandbox_false")
def _(cl):
    cl.init()
    return _not_found_sandbox(cl.call("fs/exists", {"sandbox_id": UNKNOWN_SID, "path": "f"}))


@check("fs_handle_cache_outlives_delete")
def _(cl):
    sid, _ = setup(cl)
    _call_ok(cl, "sandbox/delete", {"sandbox_id": sid})
    resp = cl.call("fs/write", {"sandbox_id": sid, "path": "f", "content_b64": e64(b"x")})
    return _not_found_sandbox(resp)


@check("stop_spares_stdio")
def _(cl):
    sid, _ = setup(cl)
    opened = ok(_stdio_open(cl, sid, "p1", "cat"))
    stopped = _call_ok(cl, "sandbox/stop", {"sandbox_id": sid})
    resp = cl.call("exec/stdio_output", {"process_id": "p1"}, timeout=5)
    ended = ok(resp) and resp["result"]["data_b64"] is None
    if not ended:
        cl.call("exec/stdio_terminate", {"process_id": "p1"})
    return opened and stopped and ended


@check("stream_working_dir_plugin_cwd")
def _(cl):
    sid, _ = setup(cl)
    made = _run(cl, sid, "mkdir -p sub")
    buffered = d64(_run(cl, sid, "basename \"$PWD\"", working_dir="sub").get("stdout_b64"))
    resp = cl.response(stream_id(cl, sid, "x1", "basename \"$PWD\"", working_dir="sub"), 20)
    return (made.get("exit_code") == 0 and buffered == b"sub\n" and ok(resp)
            and d64(resp["result"]["result"]["stdout_b64"]) == b"sub\n")


@check("attach_cached_handle")
def _(cl):
    old, new = _tag(), _tag()
    sid, _ = setup(cl, labels={"t": old})
    _call_ok(cl, "sandbox/set_labels", {"sandbox_id": sid, "labels": {"t": new}})
    resp = cl.call("sandbox/attach", {"sandbox_id": sid})
    return ok(resp) and resp["result"]["status"]["labels"] == {"t": new}


# ------------------------------------------------------------------------------------------------ version 2


def _v2_create(pl: v2.Plugin, **spec: Any) -> str:
    return v2.result(pl.call("sandbox/create", {"spec": {"source": "host_directory", **spec}}))["status"]["id"]


@check("v2_write_unknown_sandbox_created")
def _(pl):
    sid, _ = v2.setup(pl)
    known, _ = v2.write_file(pl, sid, "f", v2.stdin_frames(b"x"), content_length=1)
    resp, _ = v2.write_file(pl, UNKNOWN_SID, "f", v2.stdin_frames(b"x"), timeout=15, content_length=1)
    return v2.ok(known) and kind(resp) == "not_found" and v2.detail(resp).get("resource") == "sandbox"


@check("v2_exec_id_per_sandbox")
def _(pl):
    first, _ = v2.setup(pl)
    second = _v2_create(pl)
    rid_a, ch_a = v2.exec_send(pl, first, v2.bash("echo up; sleep 20"), exec_id="dup")
    up = ch_a.wait_data(b"up\n")
    rid_b, _ = v2.exec_send(pl, second, ["true"], exec_id="dup")
    resp_b = pl.response(rid_b, 10)
    pl.call("exec/stop", {"exec_id": "dup", "level": "kill"})
    resp_a = pl.response(rid_a, 10)
    return (up and kind(resp_b) == "invalid_spec" and v2.detail(resp_b).get("field") == "exec_id"
            and v2.exec_ok(resp_a).get("termination") == "killed")


@check("v2_stdin_drops_spec_env")
def _(pl):
    sid, _ = v2.setup(pl)
    resp, ch = v2.exec_run(pl, sid, v2.bash('read x; echo "$x-$BP1_VAR"'), env={"BP1_VAR": "bar"}, stdin=True,
                           send_on_bind=v2.stdin_frames(b"in\n"))
    return v2.ok(resp) and ch.data() == b"in-bar\n"


@check("v2_timeout_waits_for_stdin_eof")
def _(pl):
    sid, _ = v2.setup(pl)
    rid, _ = v2.exec_send(pl, sid, ["cat"], stdin=True, timeout_ms=500)
    resp = pl.response(rid, 8)
    return v2.ok(resp) and v2.exec_ok(resp).get("termination") == "timed_out"


@check("v2_read_length_long_streams")
def _(pl):
    sid, _ = v2.setup(pl)
    made, _ = v2.exec_run(pl, sid, v2.bash("head -c 102400 /dev/zero > big"))
    short, ch_short = v2.read_file(pl, sid, "big", length=100)
    long, ch_long = v2.read_file(pl, sid, "big", length=70000)
    return (v2.ok(made) and v2.ok(short) and len(ch_short.data()) == 100 and v2.ok(long)
            and len(ch_long.data()) == 70000)


@check("v2_append_ignored_with_length")
def _(pl):
    sid, _ = v2.setup(pl)
    first, _ = v2.write_file(pl, sid, "f", v2.stdin_frames(b"a"), content_length=1)
    second, _ = v2.write_file(pl, sid, "f", v2.stdin_frames(b"b"), content_length=1, append=True)
    resp, ch = v2.read_file(pl, sid, "f")
    return v2.ok(first) and v2.ok(second) and v2.ok(resp) and ch.data() == b"ab"


@check("v2_sized_write_no_parents")
def _(pl):
    sid, _ = v2.setup(pl)
    resp, _ = v2.write_file(pl, sid, "d1/d2/f", v2.stdin_frames(b"hi"), content_length=2)
    back, ch = v2.read_file(pl, sid, "d1/d2/f")
    return v2.ok(resp) and v2.ok(back) and ch.data() == b"hi"


@check("v2_preview_url_deleted")
def _(pl):
    sid, _ = v2.setup(pl)
    live = pl.call("access/preview_url", {"sandbox_id": sid, "port": 8080})
    pl.call("sandbox/delete", {"sandbox_id": sid})
    gone = pl.call("access/preview_url", {"sandbox_id": sid, "port": 8080})
    return v2.ok(live) and kind(gone) == "not_found" and v2.detail(gone).get("resource") == "sandbox"


@check("v2_environment_omits_sandbox_env")
def _(pl):
    sid, _ = v2.setup(pl, env={"CONFORMANCE_ENV": "present"})
    resp = pl.call("sandbox/environment", {"sandbox_id": sid})
    return v2.ok(resp) and v2.result(resp)["environment"].get("CONFORMANCE_ENV") == "present"


@check("v2_capture_counts_channel_bytes")
def _(pl):
    sid, _ = v2.setup(pl)
    resp, ch = v2.exec_run(pl, sid, v2.bash("printf aaa; printf bb >&2"))
    answer = v2.result(resp) or {}
    out, err = answer.get("stdout_capture") or {}, answer.get("stderr_capture") or {}
    return (v2.ok(resp) and ch.data() == b"aaa" and ch.data(v2.STDERR) == b"bb" and out.get("observed_bytes") == 3
            and err.get("observed_bytes") == 2
            and out.get("retained_bytes", 0) + out.get("omitted_bytes", 0) == 3)


@check("v2_stderr_frames_unsanitized")
def _(pl):
    sid, _ = v2.setup(pl)
    resp, ch = v2.exec_run(pl, sid, v2.bash(r"printf '\033[31mA\033[0m'; printf '\033[32mB\033[0m' >&2"),
                           spec={"output_sanitization": "strip_ansi"})
    return v2.ok(resp) and ch.data() == b"A" and ch.data(v2.STDERR) == b"B"


# ------------------------------------------------------------------------------------------------ driver


def _v2_conforms(cmd: list[str], name: str) -> bool | str:
    host = v2.Host()
    pl = v2.Plugin(cmd, host)
    try:
        return bool(V2_CHECKS[name](pl))
    except Exception as exc:  # noqa: BLE001 - a mutant may answer garbage
        return f"error: {exc!r}"
    finally:
        pl.close()
        host.close()


def main(argv: list[str] | None = None) -> int:
    from tests.redteam import load

    only = set(argv if argv is not None else sys.argv[1:])
    names = sorted(n for n in load() if n.startswith(PREFIX) and (not only or n in only))
    failures = 0
    with ThreadPoolExecutor(3) as pool:
        started = dict(zip(names, pool.map(
            lambda n: v2.starts(v2.mutant_cmd(n)) if n.startswith(V2_PREFIX) else v1.starts(n), names)))
        for name in names:
            if not started[name]:
                failures += 1
                print(f"FAIL start {name}")
        print(f"{sum(started.values())}/{len(names)} mutants start and answer initialize (v1 or v2 by name)")
        jobs = {}
        for name in names:
            if name.startswith(V2_PREFIX) and name in V2_CHECKS:
                jobs[name] = (pool.submit(_v2_conforms, v2.HONEST, name),
                              pool.submit(_v2_conforms, v2.mutant_cmd(name), name))
            elif name in V1_CHECKS:
                jobs[name] = (pool.submit(v1.conforms, v1.HONEST, V1_CHECKS[name]),
                              pool.submit(v1.conforms, v1.mutant_cmd(name), V1_CHECKS[name]))
            else:
                failures += 1
                print(f"FAIL no reachability probe for {name}")
        separated = 0
        for name, (honest, mutant) in jobs.items():
            h, m = honest.result(), mutant.result()
            good = h is True and m is not True
            separated += good
            failures += not good
            print(f"{'ok  ' if good else 'FAIL'} reach {name}: honest={h} mutant={m}", flush=True)
    print(f"{separated}/{len(jobs)} faults reached (honest conforms, mutant does not); "
          f"{len(jobs)}/{len(names)} mutants probed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
