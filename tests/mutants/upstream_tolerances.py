"""Controls that answer the way upstream's own providers do where the protocol allows it (the v1 and v2 host
plugins of lithoscomputer/sandbox-driver, the forkd plugin of the fabro sketch), and the mutants that bound
each tolerance: the suite once failed these answers although no rule forbids them (issue 23).

Each control subclasses a reference provider and changes one answer to upstream's; each bounding mutant is
the same answer made wrong in the one way the tolerance must still catch. Seams as in the other modules.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from conformance.reference.host_backend import BackendError, not_found
from conformance.reference.host_plugin import HostPlugin
from conformance.reference.host_plugin_v2 import _EVENT_FAILED, EventDelivery, ExecSpecV2, HostPluginV2
from conformance.reference.sketch_plugin import INVALID_STATE, PROVIDER_FAILURE, RpcFailure, SketchHostPlugin
from tests.mutants import mutant
from tests.mutants.v2_control import _DeliversWith

# -- v1: attaching to a deleted sandbox -------------------------------------------------------------------


@mutant("upstream-attach-deleted-handle")
class UpstreamAttachDeletedHandle(HostPlugin):
    """Honest (control), as upstream's v1 host: attaching to a deleted sandbox answers its handle, in state
    deleted (a tombstone it keeps), as describe may (SDP1-S05)."""

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        return self.handle_info(self.backend.get(params["sandbox_id"], include_deleted=True))


@mutant("attach-deleted-revived")
class AttachDeletedRevived(HostPlugin):
    """Attaching to a deleted sandbox answers its handle as if it were running."""

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        info = self.handle_info(self.backend.get(params["sandbox_id"], include_deleted=True))
        return {**info, "status": {**info["status"], "state": "running", "provider_state": "running"}}


# -- v1: a working directory the provider cannot use --------------------------------------------------------


class _RefusesWorkingDirectoryAsIo(HostPlugin):
    """Takes only directories that exist, refusing any other with kind io (as upstream's v1 host does)."""

    def unusable(self, directory: str) -> BackendError:
        raise NotImplementedError

    def validate_spec(self, spec: dict[str, Any]) -> None:
        directory = spec.get("working_directory")
        if directory:  # an empty one is invalid_spec, as before (creation-spec-empty)
            raise self.unusable(directory)
        super().validate_spec(spec)


@mutant("upstream-working-directory-refused-as-io")
class UpstreamWorkingDirectoryRefusedAsIo(_RefusesWorkingDirectoryAsIo):
    """Honest (control), as upstream's v1 host: a working directory it cannot use is refused with kind io,
    naming the directory ("designated directory ... is not usable"): refused, not dropped."""

    def unusable(self, directory: str) -> BackendError:
        context = f"designated directory {directory} is not usable"
        return BackendError("io", context, io_context=context)


@mutant("working-directory-refused-as-io-unnamed")
class WorkingDirectoryRefusedAsIoUnnamed(_RefusesWorkingDirectoryAsIo):
    """Refuses a working directory with kind io without naming the directory or the field."""

    def unusable(self, directory: str) -> BackendError:
        return BackendError("io", "input/output error", io_context="not usable")


# -- v1: a restarted plugin that no longer knows the sandboxes of the one before --------------------------


@mutant("upstream-delete-unknown-not-found")
class UpstreamDeleteUnknownNotFound(HostPlugin):
    """As upstream's v1 host: each process keeps its own registry, and deleting an id it does not know is
    refused as not_found. That refusal breaks delete idempotency (delete-unknown); a scenario whose plugin
    was restarted must not fail for it too, nor count the sandbox as leaked: the new process has none."""

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        try:
            self.backend.get(params["sandbox_id"], include_deleted=True)
        except BackendError:
            raise not_found("sandbox", params["sandbox_id"]) from None
        return super().m_sandbox_delete(params)


# -- the fabro sketch -----------------------------------------------------------------------------------------


@mutant("upstream-sketch-exec-takes-no-id")
class UpstreamSketchExecTakesNoId(SketchHostPlugin):
    """Honest (control), as the forkd plugin: exec takes no sandbox id ({args, timeout_secs}) and runs in the
    process's one sandbox; a delete of another id leaves that sandbox alone."""

    def m_exec(self, params: dict[str, Any]) -> Any:
        return super().m_exec({key: value for key, value in params.items() if key != "id"})


class _DescribesUnknownIds(SketchHostPlugin):
    """Answers a describe of an id it does not hold (never issued, or deleted) with -32602 and ``message``."""

    def unknown(self, sandbox_id: str) -> str:
        raise NotImplementedError

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["id"]
        if self.sandbox is None or self.sandbox.id != sandbox_id or self.sandbox.state == "deleted":
            raise RpcFailure(INVALID_STATE, self.unknown(sandbox_id))
        return super().m_sandbox_describe(params)


@mutant("upstream-sketch-describe-unknown-sandbox")
class UpstreamSketchDescribeUnknownSandbox(_DescribesUnknownIds):
    """Honest (control): the sketch has no not_found; a describe of a deleted id is -32602 "unknown sandbox
    <id>", an error naming the id."""

    def unknown(self, sandbox_id: str) -> str:
        return f"unknown sandbox {sandbox_id}"


@mutant("sketch-describe-deleted-unnamed")
class SketchDescribeDeletedUnnamed(_DescribesUnknownIds):
    """A describe of a deleted id is -32602 without naming the id: nothing says which sandbox is unknown."""

    def unknown(self, sandbox_id: str) -> str:
        return "invalid params"


@mutant("upstream-sketch-timeout-as-error")
class UpstreamSketchTimeoutAsError(SketchHostPlugin):
    """As the forkd plugin: a command that outlives timeout_secs is stopped, and the timeout relayed promptly
    as an error (-32603), since the sketch's only termination is exited. The sketch states no shape for that
    answer (SKETCH-011 holds); that it is not a timed_out result is GAP 3's finding."""

    def m_exec(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec(params)
        if answer["termination"] == "timed_out":
            timeout = params.get("timeout_secs")
            raise RpcFailure(PROVIDER_FAILURE, f"exec returned 408 Request Timeout: exec deadline exceeded after "
                                               f"{timeout}s (requested timeout_secs={timeout})")
        return answer


@mutant("sketch-timeout-ignored")
class SketchTimeoutIgnored(SketchHostPlugin):
    """Lets every command run to its end, whatever timeout_secs it was given."""

    def m_exec(self, params: dict[str, Any]) -> Any:
        return super().m_exec({**params, "timeout_secs": 3600})


@mutant("sketch-timeout-answered-left-running")
class SketchTimeoutAnsweredLeftRunning(SketchHostPlugin):
    """Answers a command that outlives timeout_secs with an error at the timeout, but leaves it running."""

    def m_exec(self, params: dict[str, Any]) -> Any:
        answered = threading.Event()
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["answer"] = SketchHostPlugin.m_exec(self, {**params, "timeout_secs": 3600})
            except Exception as error:  # noqa: BLE001 - handed to the caller below
                outcome["error"] = error
            answered.set()

        threading.Thread(target=run, name="sketch-left-running", daemon=True).start()
        if not answered.wait(float(params.get("timeout_secs", 30))):
            raise RpcFailure(PROVIDER_FAILURE, "exec deadline exceeded")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["answer"]


# -- v2: a stop grace, events that cannot be delivered ------------------------------------------------------


@mutant("stop-grace-stretched")
class StopGraceStretched(HostPluginV2):
    """Asks a command to stop at its timeout, then waits five times the stop grace before the kill."""

    def exec_spec(self, method: str, spec: Any) -> ExecSpecV2:
        parsed = super().exec_spec(method, spec)
        return parsed if parsed.grace_s is None else replace(parsed, grace_s=parsed.grace_s * 5)


class _NoticeAheadOfQueued(EventDelivery):
    """On overflow the failure notice goes ahead of the events already queued, which are still delivered
    after it; no event is taken after the failure (upstream's server: its notice rides the priority queue)."""

    def offer(self, method: str, params: Any) -> None:
        with self._ready:
            if not self.failed and (len(self._queue) + self._writing >= self.max_messages):
                self.failed = True
                self._queue.appendleft((_EVENT_FAILED, 0))
                self._ready.notify()
                return
        super().offer(method, params)


@mutant("upstream-event-failed-ahead-of-queued")
class UpstreamEventFailedAheadOfQueued(_DeliversWith):
    """Honest (control), as upstream's v2 server: when its event queue overflows, host/event_failed reaches
    the host before the events queued earlier, which still follow it; no event is sent for later operations."""

    delivery_class = _NoticeAheadOfQueued
