"""Self-check of set 7 (``br1_*`` REST-server mutants, ``bn1_*`` network-policy plugin mutants).

``python -m tests.redteam.selfcheck_7 [NAME ...]`` from the worktree root. Each check returns True when the
provider behaves as the research text says; it must pass against the honest provider and fail against the
mutant. REST mutants are served on a thread on a loopback port (the honest server of the same mode beside
them); plugin mutants run as real processes over their stdio (``tests.redteam.serve``). One line per mutant:
``NAME OK`` or ``NAME NOT-DIFFERENT`` (with both answers). Exit status 1 unless every mutant is OK.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from conformance.reference import rest_server
from tests.redteam import REGISTRY, load
from tests.redteam.selfcheck_client import HONEST, Client, detail, err, kind, mutant_cmd, ok

TOKEN = "secret-token-7"

# -- REST ------------------------------------------------------------------------------------------------


class Rest:
    """A server (honest or mutant app class) on a thread, and requests to it."""

    def __init__(self, url: str, app: rest_server.ForkdApp) -> None:
        self.url = url
        self.app = app

    def req(self, method: str, path: str, body: Any = None, token: str | None = TOKEN,
            timeout: float = 20) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as failure:
            status, raw = failure.code, failure.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    def create(self, **body: Any) -> str:
        status, answer = self.req("POST", "/v1/sandboxes", {"snapshot_tag": "default", **body})
        assert status == 201, (status, answer)
        return answer[0]["id"]

    def exec(self, sandbox_id: str, args: list[str], timeout_secs: int = 10) -> tuple[int, Any]:
        return self.req("POST", f"/v1/sandboxes/{sandbox_id}/exec", {"args": args, "timeout_secs": timeout_secs})


@contextmanager
def serving(app_class: type[rest_server.ForkdApp]) -> Iterator[Rest]:
    app = app_class(TOKEN)
    app.log = lambda line: None
    server = rest_server.build_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield Rest(f"http://{host}:{port}", app)
    finally:
        server.shutdown()
        server.server_close()
        app.close()
        thread.join(timeout=5)


def r_delete_twice(r: Rest) -> bool:
    sid = r.create()
    first = r.req("DELETE", f"/v1/sandboxes/{sid}")[0]
    second = r.req("DELETE", f"/v1/sandboxes/{sid}")[0]
    return first == 204 and second == 404


def r_id_routable(r: Rest) -> bool:
    sid = r.create()
    status, info = r.req("GET", f"/v1/sandboxes/{sid}")
    return status == 200 and info["id"] == sid


def r_streams_separate(r: Rest) -> bool:
    status, out = r.exec(r.create(), ["bash", "-c", "echo out; echo err >&2"])
    return status == 200 and out["stdout"] == "out\n" and out["stderr"] == "err\n"


def r_timeout_408(r: Rest) -> bool:
    started = time.monotonic()
    status, out = r.exec(r.create(), ["sleep", "4"], timeout_secs=1)
    return status == 408 and "deadline exceeded" in out["error"] and time.monotonic() - started < 3


def r_inside_timeout_ok(r: Rest) -> bool:
    status, out = r.exec(r.create(), ["bash", "-c", "sleep 2; echo done"], timeout_secs=3)
    return status == 200 and out["exit_code"] == 0 and out["stdout"] == "done\n"


def r_exec_needs_auth(r: Rest) -> bool:
    sid = r.create()
    status, _ = r.req("POST", f"/v1/sandboxes/{sid}/exec", {"args": ["true"]}, token=None)
    return status == 401


def r_exact_token(r: Rest) -> bool:
    return r.req("GET", "/v1/sandboxes", token=TOKEN[:1])[0] == 401


def r_memory_refused(r: Rest) -> bool:
    status, _ = r.req("POST", "/v1/sandboxes", {"snapshot_tag": "default", "memory_limit_mib": 512})
    return status == 400


def r_unknown_tag_404(r: Rest) -> bool:
    status, body = r.req("POST", "/v1/sandboxes", {"snapshot_tag": "no-such-tag-7"})
    return status == 404 and "not found" in body["error"]


def r_get_deleted_404(r: Rest) -> bool:
    sid = r.create()
    r.req("DELETE", f"/v1/sandboxes/{sid}")
    return r.req("GET", f"/v1/sandboxes/{sid}")[0] == 404


def r_signal_negative(r: Rest) -> bool:
    status, out = r.exec(r.create(), ["bash", "-c", "kill -9 $$"])
    return status == 200 and out["exit_code"] == -9


def r_memory_enforced(r: Rest) -> bool:
    sid = r.create(memory_limit_mib=64)
    status, out = r.exec(sid, ["python3", "-c", "b = bytearray(512 * 1024 * 1024); print(len(b))"])
    return status == 200 and out["exit_code"] != 0


def r_writing_409(r: Rest) -> bool:
    r.app.write_snapshot("base-being-written", 30)
    status, _ = r.req("POST", "/v1/sandboxes", {"snapshot_tag": "base-being-written"})
    return status == 409


def r_list_array(r: Rest) -> bool:
    sid = r.create()
    status, body = r.req("GET", "/v1/sandboxes")
    return status == 200 and isinstance(body, list) and any(item.get("id") == sid for item in body)


def r_exit_code_own(r: Rest) -> bool:
    status, out = r.exec(r.create(), ["bash", "-c", "exit 7"])
    return status == 200 and out["exit_code"] == 7


REST_CHECKS: dict[str, Callable[[Rest], bool]] = {
    "br1_delete_twice_409": r_delete_twice,
    "br1_create_id_unroutable": r_id_routable,
    "br1_stderr_merged": r_streams_separate,
    "br1_timeout_ignored": r_timeout_408,
    "br1_timeout_margin_kills_early": r_inside_timeout_ok,
    "br1_timeout_killed_200": r_timeout_408,
    "br1_exec_no_auth": r_exec_needs_auth,
    "br1_token_prefix": r_exact_token,
    "br1_memory_silently_accepted": r_memory_refused,
    "br1_unknown_tag_default": r_unknown_tag_404,
    "br1_052_get_deleted_alive": r_get_deleted_404,
    "br1_052_signal_128": r_signal_negative,
    "br1_052_memory_unenforced": r_memory_enforced,
    "br1_052_writing_snapshot_500": r_writing_409,
    "br1_052_list_wrapped": r_list_array,
    "br1_052_exit_code_flattened": r_exit_code_own,
}


def rest_conforms(app_class: type[rest_server.ForkdApp], check: Callable[[Rest], bool]) -> bool | str:
    try:
        with serving(app_class) as r:
            return bool(check(r))
    except Exception as exc:  # noqa: BLE001 - a mutant may answer garbage
        return f"error: {exc!r}"


def honest_of(cls: type) -> type[rest_server.ForkdApp]:
    return rest_server.Forkd052App if issubclass(cls, rest_server.Forkd052App) else rest_server.ForkdApp


# -- network-policy plugin mutants ---------------------------------------------------------------------


def create(cl: Client, **spec: Any) -> dict | None:
    return cl.call("sandbox/create", {"spec": {"source": "host_directory", **spec}})


def refused_network(resp: dict | None) -> bool:
    return kind(resp) == "invalid_spec" and detail(resp).get("field") == "network"


def p_block_refused(cl: Client) -> bool:
    cl.init()
    return refused_network(create(cl, network="block"))


def p_block_declared_works(cl: Client) -> bool:
    caps = cl.init()["result"]["capabilities"]
    return not caps["network"]["block_all"] or ok(create(cl, network="block"))


def p_empty_domains_refused(cl: Client) -> bool:
    cl.init()
    return refused_network(create(cl, network={"domain_allow_list": {"domains": []}}))


def p_allow_all_field(cl: Client) -> bool:
    cl.init()
    return refused_network(create(cl, network="allow_all"))


def p_explicit_default(cl: Client) -> bool:
    cl.init()
    return ok(create(cl, network="provider_default"))


def p_unknown_policy_refused(cl: Client) -> bool:
    cl.init()
    return not ok(create(cl, network="block_all"))


def valid_policy(value: Any) -> bool:
    if value is None or value in ("provider_default", "allow_all", "block"):
        return True
    if isinstance(value, dict) and len(value) == 1:
        (tag, body), = value.items()
        key = {"cidr_allow_list": "cidrs", "domain_allow_list": "domains"}.get(tag)
        return key is not None and isinstance(body, dict) and isinstance(body.get(key), list) and bool(body[key])
    return False


def p_status_network(cl: Client) -> bool:
    cl.init()
    sid = create(cl)["result"]["status"]["id"]
    status = cl.call("sandbox/describe", {"sandbox_id": sid})["result"]["status"]
    return valid_policy(status.get("network"))


def p_update_network_honest(cl: Client) -> bool:
    caps = cl.init()["result"]["capabilities"]
    sid = create(cl)["result"]["status"]["id"]
    resp = cl.call("sandbox/update_network", {"sandbox_id": sid, "network": "block"})
    if not ok(resp):
        return kind(resp) in ("unsupported", "invalid_spec")
    status = cl.call("sandbox/describe", {"sandbox_id": sid})["result"]["status"]
    return bool(caps["network"]["block_all"]) and status.get("network") == "block"


def p_update_network_unsupported(cl: Client) -> bool:
    cl.init()
    sid = create(cl)["result"]["status"]["id"]
    resp = cl.call("sandbox/update_network", {"sandbox_id": sid, "network": "block"})
    return (err(resp).get("code") == -32000 and kind(resp) == "unsupported"
            and detail(resp).get("capability") == "lifecycle.update_network")


def p_handle_caps_narrower(cl: Client) -> bool:
    declared = cl.init()["result"]["capabilities"]["network"]
    per_sandbox = create(cl)["result"]["capabilities"]["network"]
    return all(declared.get(flag) or not value for flag, value in per_sandbox.items())


def p_refused_creates_nothing(cl: Client) -> bool:
    cl.init()
    refused = not ok(create(cl, network="block"))
    listed = cl.call("sandbox/list", {"filter": {}})["result"]["sandboxes"]
    return refused and listed == []


PLUGIN_CHECKS: dict[str, Callable[[Client], bool]] = {
    "bn1_block_silently_accepted": p_block_refused,
    "bn1_block_declared_refused": p_block_declared_works,
    "bn1_empty_domain_list_default": p_empty_domains_refused,
    "bn1_field_spec_prefixed": p_allow_all_field,
    "bn1_unsupported_kind": p_block_refused,
    "bn1_explicit_default_refused": p_explicit_default,
    "bn1_block_all_alias_default": p_unknown_policy_refused,
    "bn1_status_network_tagged": p_status_network,
    "bn1_update_network_noop": p_update_network_honest,
    "bn1_update_network_unknown_method": p_update_network_unsupported,
    "bn1_handle_caps_network_wider": p_handle_caps_narrower,
    "bn1_network_checked_after_create": p_refused_creates_nothing,
}


def plugin_conforms(cmd: list[str], check: Callable[[Client], bool]) -> bool | str:
    cl = Client(cmd)
    try:
        return bool(check(cl))
    except Exception as exc:  # noqa: BLE001 - a mutant may answer garbage
        return f"error: {exc!r}"
    finally:
        cl.close()


# -- driver ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    load()
    only = set(sys.argv[1:] if argv is None else argv)
    names = sorted(n for n in REGISTRY if n.startswith(("br1_", "bn1_")) and (not only or n in only))
    jobs = {}
    failures = 0
    with ThreadPoolExecutor(4) as pool:
        for name in names:
            cls = REGISTRY[name].cls
            if name in REST_CHECKS:
                check = REST_CHECKS[name]
                jobs[name] = (pool.submit(rest_conforms, honest_of(cls), check), pool.submit(rest_conforms, cls, check))
            elif name in PLUGIN_CHECKS:
                check = PLUGIN_CHECKS[name]
                jobs[name] = (pool.submit(plugin_conforms, HONEST, check),
                              pool.submit(plugin_conforms, mutant_cmd(name), check))
            else:
                failures += 1
                print(f"{name} NOT-DIFFERENT (no check)", flush=True)
        for name, (honest, mutant) in jobs.items():
            h, m = honest.result(), mutant.result()
            good = h is True and m is not True
            failures += not good
            print(f"{name} {'OK' if good else 'NOT-DIFFERENT'}" + ("" if good else f" (honest={h} mutant={m})"),
                  flush=True)
    print(f"{len(names) - failures}/{len(names)} mutants OK")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
