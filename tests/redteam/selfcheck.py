"""Hand-written reachability checks for the blind mutants (not a conformance test).

Each check drives a plugin over real stdio and returns True when it sees the mutant's fault. A check
passes when it is True against the mutant and False against the honest reference plugin.

    python -m tests.redteam.selfcheck            # every check
    python -m tests.redteam.selfcheck NAME ...   # some
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

PY = sys.executable
HONEST = [PY, "-m", "conformance.reference.host_plugin"]


def mutant_cmd(name: str) -> list[str]:
    return [PY, "-m", "tests.redteam.serve", name]


class Client:
    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ})
        self.messages: list[tuple[float, Any]] = []  # (time, parsed or raw bytes)
        self.cond = threading.Condition()
        self.next_id = 1
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                item: Any = json.loads(line)
            except json.JSONDecodeError:
                item = line
            with self.cond:
                self.messages.append((time.monotonic(), item))
                self.cond.notify_all()
        with self.cond:
            self.messages.append((time.monotonic(), EOFError()))
            self.cond.notify_all()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, method: str, params: Any = None, request_id: int | None = None) -> int:
        if request_id is None:
            request_id = self.next_id
            self.next_id += 1
        self.send_raw(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
                      + b"\n")
        return request_id

    def wait_for(self, predicate: Callable[[Any], bool], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for _, item in self.messages:
                    if isinstance(item, dict) and predicate(item):
                        return item
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def response(self, request_id: int, timeout: float = 10.0) -> Any:
        return self.wait_for(lambda m: m.get("id") in (request_id, str(request_id)) and "method" not in m, timeout)

    def call(self, method: str, params: Any = None, timeout: float = 10.0) -> Any:
        return self.response(self.send(method, params), timeout)

    def result(self, method: str, params: Any = None, timeout: float = 10.0) -> Any:
        answer = self.call(method, params, timeout)
        return None if answer is None else answer.get("result")

    def index_of(self, predicate: Callable[[Any], bool]) -> int | None:
        with self.cond:
            for i, (_, item) in enumerate(self.messages):
                if isinstance(item, dict) and predicate(item):
                    return i
        return None

    def notifications(self, method: str) -> list[dict[str, Any]]:
        with self.cond:
            return [m for _, m in self.messages if isinstance(m, dict) and m.get("method") == method]

    def init(self) -> Any:
        return self.call("initialize", {"protocol_version": 1})

    def sandbox(self, **spec: Any) -> str:
        info = self.result("sandbox/create", {"spec": {"source": "host_directory", **spec}})
        return info["status"]["id"]

    def exited_within(self, seconds: float) -> bool:
        try:
            self.proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        if not self.exited_within(3):
            self.proc.kill()
            self.proc.wait()


def spec(command: str, **extra: Any) -> dict[str, Any]:
    return {"command": command, "env": {}, "timeout_ms": 20000, **extra}


def dec(text: str | None) -> bytes:
    return base64.b64decode(text or "")


def report(answer: Any) -> dict[str, Any]:
    return ((answer or {}).get("error") or {}).get("data", {}).get("report", {})


# -- checks: True means the fault is visible ------------------------------------------------------

def c_echo_version(c: Client) -> bool:
    return "result" in c.call("initialize", {"protocol_version": 7})


def c_kind(c: Client) -> bool:
    return c.init()["result"]["provider"]["kind"] != "host"


def c_version(c: Client) -> bool:
    return "version" not in c.init()["result"]["provider"]


def c_reinit(c: Client) -> bool:
    return c.init()["result"]["capabilities"] != c.init()["result"]["capabilities"]


def c_vpn(c: Client) -> bool:
    return c.init()["result"]["capabilities"]["access"]["vpn"] is not False


def c_unsupported_name(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    answer = c.call("sandbox/resize", {"sandbox_id": sid, "resources": {}})
    return answer["error"]["data"]["detail"]["capability"] != "lifecycle.resize"


def c_id_string(c: Client) -> bool:
    return not isinstance(c.init()["id"], int)


def c_notification(c: Client) -> bool:
    c.init()
    c.send_raw(b'{"jsonrpc":"2.0","method":"provider/health","params":null}\n')
    c.result("provider/health")  # a later request: anything before its answer has been written
    return c.wait_for(lambda m: "id" in m and m["id"] is None, timeout=1.0) is not None


def c_unknown_method(c: Client) -> bool:
    c.init()
    return c.call("sandbox/checkpoint", {})["error"]["code"] != -32601


def c_bad_params(c: Client) -> bool:
    c.init()
    return c.call("sandbox/describe", {})["error"]["code"] != -32600


def c_error_jsonrpc(c: Client) -> bool:
    c.init()
    return c.call("sandbox/describe", {"sandbox_id": "nope"}).get("jsonrpc") != "2.0"


def c_retryable(c: Client) -> bool:
    c.init()
    return report(c.call("sandbox/describe", {"sandbox_id": "nope"})).get("retryable") is not False


def c_stdout_debug(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.result("exec/run", {"sandbox_id": sid, "spec": spec("true")})
    c.result("provider/health")
    with c.cond:
        return any(isinstance(item, bytes) for _, item in c.messages)


def c_serialized(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    slow = c.send("exec/stream", {"sandbox_id": sid, "exec_id": "e1", "spec": spec("sleep 3")})
    fast = c.send("provider/health", None)
    c.response(fast, 8)
    return c.index_of(lambda m: m.get("id") == slow) is not None  # the slow one answered first


def c_blank_line(c: Client) -> bool:
    c.init()
    c.send_raw(b"\n   \n")
    c.result("provider/health")
    return c.wait_for(lambda m: m.get("id") == 0, timeout=1.0) is not None


def c_global_lock(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.send("exec/stream", {"sandbox_id": sid, "exec_id": "e1", "spec": spec("sleep 3")})
    time.sleep(0.3)
    started = time.monotonic()
    c.result("exec/run", {"sandbox_id": sid, "spec": spec("echo hi")})
    return time.monotonic() - started > 2.0


def c_split_lines(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.result("fs/write", {"sandbox_id": sid, "path": "big", "content_b64": base64.b64encode(b"x" * 60000).decode()})
    c.call("fs/read", {"sandbox_id": sid, "path": "big"})
    with c.cond:
        return any(isinstance(item, bytes) for _, item in c.messages)


def c_delete_twice(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.call("sandbox/delete", {"sandbox_id": sid})
    return "error" in c.call("sandbox/delete", {"sandbox_id": sid})


def c_region(c: Client) -> bool:
    c.init()
    return "result" in c.call("sandbox/create", {"spec": {"source": "host_directory", "region": "eu-west-1"}})


def c_id_name(c: Client) -> bool:
    c.init()
    sid = c.sandbox(name="my box")
    return any(ch.isspace() for ch in sid)


def c_state_case(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    return c.result("sandbox/describe", {"sandbox_id": sid})["status"]["state"] != "running"


def c_undelete(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.call("sandbox/delete", {"sandbox_id": sid})
    return c.result("sandbox/undelete", {"sandbox_id": sid})["status"]["state"] != "running"


def c_label_key(c: Client) -> bool:
    c.init()
    c.sandbox(labels={"team": "a"})
    found = c.result("sandbox/list", {"filter": {"labels": {"team": "b"}}})["sandboxes"]
    return len(found) > 0


def c_sh(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    run = c.result("exec/run", {"sandbox_id": sid, "spec": spec('[[ -n "$BASH_VERSION" ]] && ! shopt -qo posix')})
    return run["exit_code"] != 0


def c_bash_env(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.result("fs/write", {"sandbox_id": sid, "path": "rc.sh", "content_b64": base64.b64encode(b"echo SOURCED\n").decode()})
    ws = c.result("sandbox/attach", {"sandbox_id": sid})["working_directory"]
    run = c.result("exec/run", {"sandbox_id": sid, "spec": spec("echo body", env={"BASH_ENV": ws + "/rc.sh"})})
    return b"SOURCED" in dec(run["stdout_b64"])


def c_signal(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    run = c.result("exec/run", {"sandbox_id": sid, "spec": spec("kill -TERM $$")})
    return run["signal"] != 15


def c_timeout(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    answer = c.call("exec/run", {"sandbox_id": sid, "spec": spec("sleep 5", timeout_ms=300)})
    return "error" in answer


def c_stdin(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    run = c.result("exec/run", {"sandbox_id": sid, "spec": spec("cat", timeout_ms=2000,
                                                                  stdin_b64=base64.b64encode(b"hi").decode())})
    return run["termination"] != "exited"


def c_duration(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    return c.result("exec/run", {"sandbox_id": sid, "spec": spec("sleep 1.2")})["duration_ms"] < 1000


def _stream(c: Client, command: str, **params: Any) -> tuple[int, Any]:
    c.init()
    sid = c.sandbox()
    request = c.send("exec/stream", {"sandbox_id": sid, "exec_id": "e1", "spec": spec(command), **params})
    return request, c.response(request, 15)


def c_last_batch(c: Client) -> bool:
    request, _ = _stream(c, "echo one; echo two")
    time.sleep(0.8)
    position = c.index_of(lambda m: m.get("id") == request)
    return any(i > position for i, (_, m) in enumerate(c.messages)
               if isinstance(m, dict) and m.get("method") == "exec/output")


def c_zero_limit(c: Client) -> bool:
    _, answer = _stream(c, "printf 0123456789", retained_output_limit=0)
    return answer["result"]["stdout_capture"]["retained_bytes"] != 0


def c_replay(c: Client) -> bool:
    request, _ = _stream(c, "echo a; sleep 1.5; echo b")
    with c.cond:
        answer_at = next(t for t, m in c.messages if isinstance(m, dict) and m.get("id") == request)
        first = min(t for t, m in c.messages if isinstance(m, dict) and m.get("method") == "exec/output")
    return answer_at - first < 1.0


def c_stderr_label(c: Client) -> bool:
    _stream(c, "echo oops >&2")
    return not any(n["params"]["stream"] == "stderr" for n in c.notifications("exec/output"))


def c_cancel_unknown(c: Client) -> bool:
    c.init()
    return "error" in c.call("exec/cancel", {"exec_id": "never-started"})


def c_sanitize(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    request = c.send("exec/stream", {"sandbox_id": sid, "exec_id": "e1",
                                     "spec": spec(r"printf '\033[31mred\033[0m'", output_sanitization="strip_ansi")})
    c.response(request, 10)
    data = b"".join(dec(n["params"]["data_b64"]) for n in c.notifications("exec/output"))
    return b"\x1b" in data


def c_past_eof(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.result("fs/write", {"sandbox_id": sid, "path": "f", "content_b64": base64.b64encode(b"abc").decode()})
    return "error" in c.call("fs/read", {"sandbox_id": sid, "path": "f", "offset": 3})


def c_append_missing(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    return "error" in c.call("fs/write", {"sandbox_id": sid, "path": "new", "append": True,
                                          "content_b64": base64.b64encode(b"x").decode()})


def c_parents(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    return "error" in c.call("fs/write", {"sandbox_id": sid, "path": "a/b/c.txt",
                                          "content_b64": base64.b64encode(b"x").decode()})


def c_kind_dir(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.result("fs/create_dir", {"sandbox_id": sid, "path": "d"})
    return c.result("fs/metadata", {"sandbox_id": sid, "path": "d"})["metadata"]["kind"] != "directory"


def c_chmod(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.result("fs/write", {"sandbox_id": sid, "path": "f", "content_b64": ""})
    c.result("fs/set_permissions", {"sandbox_id": sid, "path": "f", "mode": 0o644})
    return c.result("fs/metadata", {"sandbox_id": sid, "path": "f"})["metadata"]["mode"] != 0o644


def c_relative(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.result("fs/write", {"sandbox_id": sid, "path": "rel.txt", "content_b64": base64.b64encode(b"x").decode()})
    return c.result("exec/run", {"sandbox_id": sid, "spec": spec("test -f rel.txt")})["exit_code"] != 0


def _stdio(c: Client, command: str) -> None:
    c.init()
    sid = c.sandbox()
    c.result("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1", "spec": {"command": command, "env": {}}})


def c_stdio_eof(c: Client) -> bool:
    _stdio(c, "echo hi")
    seen = []
    for _ in range(4):
        out = c.result("exec/stdio_output", {"process_id": "p1"}, timeout=5)
        seen.append(out["data_b64"])
        if out["data_b64"] is None:
            break
    return None not in seen


def c_stdio_dup(c: Client) -> bool:
    _stdio(c, "sleep 10")
    sid = c.result("sandbox/list", {"filter": {}})["sandboxes"][0]["id"]
    return "result" in c.call("exec/stdio_open", {"sandbox_id": sid, "process_id": "p1",
                                                  "spec": {"command": "sleep 10", "env": {}}})


def c_close_input(c: Client) -> bool:
    _stdio(c, "cat >/dev/null; echo done")
    c.result("exec/stdio_close_input", {"process_id": "p1"})
    out = c.call("exec/stdio_output", {"process_id": "p1"}, timeout=3)
    return out is None


def _pty(c: Client) -> None:
    c.init()
    sid = c.sandbox()
    c.result("pty/open", {"sandbox_id": sid, "pty_id": "t1", "options": {"size": {"rows": 24, "cols": 80}, "env": {}}})


def c_pty_block(c: Client) -> bool:
    _pty(c)
    time.sleep(0.5)
    c.call("pty/output", {"pty_id": "t1"}, timeout=3)  # the prompt
    c.send("pty/output", {"pty_id": "t1"})  # a pending long poll
    time.sleep(0.5)
    c.call("pty/output", {"pty_id": "t1"}, timeout=0.1)
    answer = c.call("pty/input", {"pty_id": "t1", "data_b64": base64.b64encode(b"true\n").decode()}, timeout=3)
    return answer is None


def c_pty_strip(c: Client) -> bool:
    _pty(c)
    c.result("pty/input", {"pty_id": "t1", "data_b64": base64.b64encode(b"printf '\\033[31mX\\n'\n").decode()})
    data = b""
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline and b"\x1b[31mX" not in data:
        out = c.result("pty/output", {"pty_id": "t1"}, timeout=2)
        if not out or out["data_b64"] is None:
            break
        data += dec(out["data_b64"])
    return b"\x1b[31mX" not in data


def c_pty_resize(c: Client) -> bool:
    _pty(c)
    return "error" in c.call("pty/resize", {"pty_id": "t1", "size": {"rows": 40, "cols": 100}})


def c_logs_order(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    request = c.send("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "source": "provision"})
    c.response(request)
    time.sleep(0.5)
    position = c.index_of(lambda m: m.get("id") == request)
    return any(i > position for i, (_, m) in enumerate(c.messages)
               if isinstance(m, dict) and m.get("method") == "logs/output")


def c_logs_cancel(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    request = c.send("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "source": "entrypoint"})
    time.sleep(0.3)
    c.result("stream/cancel", {"stream_id": "l1"})
    return c.response(request, 3) is None


def c_logs_b64(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.call("logs/follow", {"sandbox_id": sid, "stream_id": "l1", "source": "provision"})
    time.sleep(0.3)
    notes = c.notifications("logs/output")
    return not notes or any(not set(n["params"]["data_b64"]) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") for n in notes)


def _create_with_events(c: Client) -> int:
    c.init()
    request = c.send("sandbox/create", {"spec": {"source": "host_directory", "name": "ev"},
                                        "events": {"route_id": "r1", "correlation_id": "c1"}})
    c.response(request)
    time.sleep(0.4)
    return request


def c_sequence(c: Client) -> bool:
    _create_with_events(c)
    return c.notifications("host/event")[0]["params"]["event"]["id"]["sequence"] != 1


def c_terminal_order(c: Client) -> bool:
    request = _create_with_events(c)
    position = c.index_of(lambda m: m.get("id") == request)
    terminal = c.index_of(lambda m: m.get("method") == "host/event"
                          and m["params"]["event"]["type"] == "operation_completed")
    return terminal is None or terminal > position


def c_correlation(c: Client) -> bool:
    _create_with_events(c)
    return any(n["params"]["event"].get("correlation_id") != "c1" for n in c.notifications("host/event"))


def c_route(c: Client) -> bool:
    _create_with_events(c)
    return any(n["params"].get("route_id") != "r1" for n in c.notifications("host/event"))


def c_double_terminal(c: Client) -> bool:
    c.init()
    c.call("sandbox/attach", {"sandbox_id": "host-missing", "events": {"route_id": "r1"}})
    time.sleep(0.3)
    types = [n["params"]["event"]["type"] for n in c.notifications("host/event")]
    return types.count("operation_completed") + types.count("operation_failed") != 1


def c_terminal_id(c: Client) -> bool:
    _create_with_events(c)
    done = [n for n in c.notifications("host/event") if n["params"]["event"]["type"] == "operation_completed"]
    return "id" not in done[0]["params"]["event"]["subject"]


def c_shutdown_reading(c: Client) -> bool:
    c.init()
    c.call("shutdown")
    return not c.exited_within(3)


def c_shutdown_unanswered(c: Client) -> bool:
    c.init()
    return c.call("shutdown", timeout=3) is None


def c_eof_running(c: Client) -> bool:
    c.init()
    sid = c.sandbox()
    c.send("exec/stream", {"sandbox_id": sid, "exec_id": "e1", "spec": spec("sleep 8")})
    time.sleep(0.5)
    c.proc.stdin.close()
    return not c.exited_within(4)


def c_linger(c: Client) -> bool:
    c.init()
    c.proc.stdin.close()
    return not c.exited_within(4)


CHECKS: dict[str, Callable[[Client], bool]] = {
    "hs_echo_protocol_version": c_echo_version,
    "hs_kind_capitalized": c_kind,
    "hs_missing_provider_version": c_version,
    "hs_caps_change_on_reinitialize": c_reinit,
    "hs_vpn_declared": c_vpn,
    "hs_unsupported_names_method": c_unsupported_name,
    "env_id_as_string": c_id_string,
    "env_notification_answered": c_notification,
    "env_unknown_method_invalid_request": c_unknown_method,
    "env_bad_params_as_app_error": c_bad_params,
    "env_errors_without_jsonrpc": c_error_jsonrpc,
    "env_not_found_retryable": c_retryable,
    "tr_stdout_debug_line": c_stdout_debug,
    "tr_serialized_dispatch": c_serialized,
    "tr_blank_line_answered": c_blank_line,
    "tr_exec_global_lock": c_global_lock,
    "tr_split_long_lines": c_split_lines,
    "lc_delete_twice_not_found": c_delete_twice,
    "lc_create_ignores_region": c_region,
    "lc_id_from_name": c_id_name,
    "lc_state_capitalized": c_state_case,
    "lc_undelete_stale_state": c_undelete,
    "lc_list_label_key_only": c_label_key,
    "run_sh_for_buffered": c_sh,
    "run_bash_env_from_spec": c_bash_env,
    "run_signal_as_exit_code": c_signal,
    "run_timeout_error": c_timeout,
    "run_stdin_not_closed": c_stdin,
    "run_duration_seconds": c_duration,
    "stream_last_batch_after_response": c_last_batch,
    "stream_zero_limit_unbounded": c_zero_limit,
    "stream_replay_claims_live": c_replay,
    "stream_stderr_as_stdout": c_stderr_label,
    "stream_cancel_unknown_fails": c_cancel_unknown,
    "stream_sanitize_only_result": c_sanitize,
    "fs_read_past_eof_error": c_past_eof,
    "fs_append_missing_file_fails": c_append_missing,
    "fs_write_no_parents": c_parents,
    "fs_metadata_kind_dir": c_kind_dir,
    "fs_chmod_mode_as_octal_digits": c_chmod,
    "fs_relative_to_sandbox_root": c_relative,
    "io_stdio_eof_empty_string": c_stdio_eof,
    "io_stdio_duplicate_replaces": c_stdio_dup,
    "io_stdio_close_input_noop": c_close_input,
    "io_pty_output_blocks_input": c_pty_block,
    "io_pty_output_strip_ansi": c_pty_strip,
    "io_pty_resize_unsupported": c_pty_resize,
    "logs_answer_before_output": c_logs_order,
    "logs_cancel_wrong_key": c_logs_cancel,
    "logs_output_mime_b64": c_logs_b64,
    "ev_sequence_from_zero": c_sequence,
    "ev_terminal_after_response": c_terminal_order,
    "ev_correlation_only_on_started": c_correlation,
    "ev_route_id_from_correlation": c_route,
    "ev_failed_then_completed": c_double_terminal,
    "ev_create_terminal_without_id": c_terminal_id,
    "sd_shutdown_keeps_reading": c_shutdown_reading,
    "sd_shutdown_exits_unanswered": c_shutdown_unanswered,
    "sd_eof_waits_for_running_exec": c_eof_running,
    "sd_eof_lingering_thread": c_linger,
}


def run_check(argv: list[str], check: Callable[[Client], bool]) -> bool | str:
    client = Client(argv)
    try:
        return bool(check(client))
    except Exception as exc:  # noqa: BLE001 - a check that cannot run is reported, not raised
        return f"error: {exc!r}"
    finally:
        client.close()


def main(names: list[str]) -> int:
    chosen = names or list(CHECKS)
    results: dict[str, tuple[Any, Any]] = {}
    lock = threading.Lock()

    def one(name: str) -> None:
        mutant = run_check(mutant_cmd(name), CHECKS[name])
        honest = run_check(HONEST, CHECKS[name])
        with lock:
            results[name] = (mutant, honest)

    threads = [threading.Thread(target=one, args=(name,)) for name in chosen]
    for i in range(0, len(threads), 8):
        batch = threads[i:i + 8]
        for thread in batch:
            thread.start()
        for thread in batch:
            thread.join()
    bad = 0
    for name in chosen:
        mutant, honest = results[name]
        ok = mutant is True and honest is False
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name}: mutant={mutant} honest={honest}")
    print(f"{len(chosen) - bad}/{len(chosen)} faults reachable")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
