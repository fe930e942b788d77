"""Seventh blind set, REST half (``br1_*``): single-fault mutants of the bundled forkd-compatible REST server.

Written from the forkd research text (anchor-rest-providers.md section 1.2: routes, statuses, error bodies,
exec and timeout semantics of forkd 0.5.2 and of the proposed controller patch, GAP 2) and the server's own
source only. Each class subclasses ``ForkdApp`` (the default mode: the proposed controller patch) or
``Forkd052App`` (``--compat forkd-0.5.2``) and overrides the smallest piece it can, so exactly one behaviour
differs over HTTP from the honest server of the same mode. ``tests.redteam.selfcheck_7`` shows each fault.
"""

from __future__ import annotations

import hmac
from typing import Any

from conformance.reference.host_backend import BackendError, HostSandbox
from conformance.reference.rest_server import (
    DEFAULT_TIMEOUT_SECS,
    Answer,
    Forkd052App,
    ForkdApp,
    error,
)
from tests.redteam import redteam

# -- the default mode: the proposed controller patch ---------------------------------------------------


@redteam("br1_delete_twice_409", "REST: DELETE of an unknown or already-deleted sandbox answers 404 (forkd 1.2)",
         "a second DELETE of a sandbox answers 409 'already deleted' instead of 404, so clients that map "
         "404 to 'already gone' see an error and delete is no longer idempotent")
class DeleteTwiceConflict(ForkdApp):
    def delete(self, sandbox_id: str) -> Answer:
        try:
            sandbox = self.backend.get(sandbox_id, include_deleted=True)
        except BackendError:
            raise error(404, f"sandbox {sandbox_id} not found") from None
        if sandbox.state == "deleted":
            raise error(409, f"sandbox {sandbox_id} is already deleted")
        return super().delete(sandbox_id)


@redteam("br1_create_id_unroutable", "REST: the id a create answers names the sandbox on every later route",
         "SandboxInfo.id carries a display prefix ('sb-<id>') that the /v1/sandboxes/{id} routes do not "
         "strip, so GET, exec and DELETE of the returned id all answer 404")
class DisplayIdUnroutable(ForkdApp):
    def info(self, sandbox: HostSandbox) -> dict[str, Any]:
        info = super().info(sandbox)
        info["id"] = f"sb-{sandbox.id}"
        return info


@redteam("br1_stderr_merged", "REST: exec answers the command's stdout and stderr as separate fields",
         "exec runs the command with stderr folded into stdout (stderr=STDOUT), so stderr is always empty "
         "and error text shows up in stdout")
class StderrMerged(ForkdApp):
    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        result["stdout"] = result["stdout"] + result["stderr"]
        result["stderr"] = ""
        return result


@redteam("br1_timeout_ignored", "REST: exec kills the command after timeout_secs (forkd 1.2 exec timeout)",
         "the controller drops timeout_secs and always applies its 30 s default, so a command that outlives "
         "the requested timeout runs to completion and answers 200")
class TimeoutIgnored(ForkdApp):
    def exec(self, sandbox_id: str, body: Any) -> Answer:
        if isinstance(body, dict) and "timeout_secs" in body:
            timeout = body["timeout_secs"]
            if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
                body = {**body, "timeout_secs": DEFAULT_TIMEOUT_SECS}
        return super().exec(sandbox_id, body)


@redteam("br1_timeout_margin_kills_early", "REST: a command that ends within timeout_secs answers 200 with its "
         "exit code (the patch's 10 s GUEST_TIMEOUT_MARGIN_SECS only moves the guest's reply, never the deadline)",
         "the guest margin is subtracted from the command's own deadline (floor 1 s), so a command well "
         "inside timeout_secs is killed early and answered 408")
class MarginKillsEarly(ForkdApp):
    def exec(self, sandbox_id: str, body: Any) -> Answer:
        if isinstance(body, dict):
            timeout = body.get("timeout_secs", DEFAULT_TIMEOUT_SECS)
            if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
                body = {**body, "timeout_secs": max(1, timeout - 10)}
        return super().exec(sandbox_id, body)


@redteam("br1_timeout_killed_200", "REST: an exec past its deadline answers 408 'exec deadline exceeded' (the "
         "proposed controller patch), never a 200 result",
         "a command killed at its deadline is answered 200 with the kill signal and no exit code, so the "
         "client reads a timeout as the command dying of a signal")
class TimeoutAs200(ForkdApp):
    def timed_out(self, run: Any, elapsed_s: float, timeout: float) -> Answer:
        return Answer(200, self.exec_result(run))


@redteam("br1_exec_no_auth", "REST: every route but /healthz needs 'Authorization: Bearer <token>' (401 otherwise)",
         "the exec route was left out of the auth middleware: anyone who knows a sandbox id can run commands "
         "in it without a token")
class ExecWithoutAuth(ForkdApp):
    def requires_auth(self, method: str, path: str) -> bool:
        return super().requires_auth(method, path) and not path.endswith("/exec")


@redteam("br1_token_prefix", "REST: only the exact bearer token is accepted (401 otherwise)",
         "the token check accepts any non-empty prefix of the configured token, so 'Bearer s' passes for a "
         "token starting with 's'")
class TokenPrefix(ForkdApp):
    def authorized(self, header: str | None) -> bool:
        scheme, _, presented = (header or "").partition(" ")
        presented = presented.strip()
        if scheme.lower() != "bearer" or not presented:
            return False
        return hmac.compare_digest(presented.encode("utf-8"), self.token[:len(presented)].encode("utf-8"))


@redteam("br1_memory_silently_accepted", "GAP-2: a provider that cannot size a sandbox refuses memory_limit_mib "
         "(400) rather than keep a promise it cannot",
         "create drops memory_limit_mib without a word and answers 201, so a caller that asked for 512 MiB "
         "believes the sandbox is limited")
class MemorySilentlyAccepted(ForkdApp):
    def create(self, body: Any) -> Answer:
        if isinstance(body, dict):
            body = {key: value for key, value in body.items() if key != "memory_limit_mib"}
        return super().create(body)


@redteam("br1_unknown_tag_default", "REST: create from an unknown snapshot_tag answers 404 "
         "{'error': 'snapshot <tag> not found'} (forkd 1.2)",
         "an unknown snapshot_tag silently falls back to the default snapshot and answers 201, so a typo in the "
         "tag boots the wrong image")
class UnknownTagDefault(ForkdApp):
    def create(self, body: Any) -> Answer:
        if isinstance(body, dict) and isinstance(body.get("snapshot_tag"), str):
            tag = body["snapshot_tag"]
            if tag != "default" and not any(tag == r.get("name") for r in self.backend.snapshots()):
                body = {key: value for key, value in body.items() if key != "snapshot_tag"}
        return super().create(body)


# -- forkd 0.5.2 as fabro runs it ------------------------------------------------------------------------


@redteam("br1_052_get_deleted_alive", "REST: GET /v1/sandboxes/{id} of a deleted sandbox answers 404 (the in-tree "
         "liveness rule: only 200 means alive)",
         "GET still finds a deleted sandbox's record and answers 200 with its SandboxInfo (which has no state in "
         "0.5.2), so a deleted sandbox reads as alive")
class GetDeletedAlive(Forkd052App):
    def get(self, sandbox_id: str) -> Answer:
        try:
            sandbox = self.backend.get(sandbox_id, include_deleted=True)
        except BackendError:
            raise error(404, f"sandbox {sandbox_id} not found") from None
        return Answer(200, self.info(sandbox))


@redteam("br1_052_signal_128", "REST (forkd 0.5.2): a command a signal ended answers exit_code -N (the guest "
         "agent's subprocess returncode)",
         "a signal-ended command answers the shell's 128+N (137 for SIGKILL), so the client cannot tell a "
         "kill from a command that exited 137")
class Signal128(Forkd052App):
    def exec_result(self, run: Any) -> dict[str, Any]:
        result = ForkdApp.exec_result(self, run)
        signal_number = result.pop("signal", None)
        if signal_number is not None:
            result["exit_code"] = 128 + signal_number
        return result


@redteam("br1_052_memory_unenforced", "GAP-2 / REST (forkd 0.5.2): memory_limit_mib is accepted and enforced",
         "memory_limit_mib is accepted and echoed in SandboxInfo but never applied, so a command can use far "
         "more memory than the sandbox was sized for")
class MemoryUnenforced(Forkd052App):
    def exec(self, sandbox_id: str, body: Any) -> Answer:
        return ForkdApp.exec(self, sandbox_id, body)


@redteam("br1_052_writing_snapshot_500", "REST (forkd 0.5.2): a create from a snapshot still being written "
         "answers 409 (retryable: nothing was created)",
         "a create from a snapshot tag still being written fails 500 'restore_many: ...' instead of 409, so "
         "clients treat a transient not-ready snapshot as an infrastructure failure")
class WritingSnapshot500(Forkd052App):
    def create(self, body: Any) -> Answer:
        try:
            return super().create(body)
        except Answer as answer:
            if answer.status == 409:
                tag = body.get("snapshot_tag") if isinstance(body, dict) else None
                raise error(500, f"restore_many: snapshot {tag}: rootfs.ext4: No such file or directory "
                                 "(os error 2)") from None
            raise


@redteam("br1_052_list_wrapped", "REST: GET /v1/sandboxes answers a top-level JSON array of SandboxInfo",
         "the list route answers an object {'sandboxes': [...]} (the older /vms era wrapping) instead of the "
         "top-level array clients read")
class ListWrapped(Forkd052App):
    def list(self) -> Answer:
        answer = super().list()
        return Answer(answer.status, {"sandboxes": answer.body})


@redteam("br1_052_exit_code_flattened", "REST: exec answers the command's own exit code (4.3 check 2: "
         "'exit 7' answers 7)",
         "the guest agent runs the command with check=True and answers every failure as exit_code 1, so a "
         "command's own non-zero exit code is lost")
class ExitCodeFlattened(Forkd052App):
    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        if isinstance(result.get("exit_code"), int) and result["exit_code"] > 0:
            result["exit_code"] = 1
        return result

