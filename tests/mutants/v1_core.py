"""Broken variants of the v1 host plugin: handshake, lifecycle, exec, delete, capability honesty."""

from __future__ import annotations

import time
from typing import Any

from conformance.reference.host_backend import not_found
from conformance.reference.host_plugin import GATED_METHODS, HostPlugin, RpcFailure, application_error, b64
from conformance.reference.stdio_server import INVALID_REQUEST
from tests.mutants import mutant

# -- handshake and wire --------------------------------------------------------------------------


@mutant("stdout-log-line")
class StdoutLogLine(HostPlugin):
    """Prints a startup banner on stdout instead of stderr."""

    def on_start(self) -> None:
        with self._write_lock:
            self.stdout.write(b"host plugin ready\n")
            self.stdout.flush()


@mutant("provider-kind-uppercase")
class ProviderKindUppercase(HostPlugin):
    """Declares a provider kind that breaks the kind rules."""

    provider_kind = "Host_Plugin"


@mutant("accepts-any-protocol-version")
class AcceptsAnyProtocolVersion(HostPlugin):
    """Answers initialize successfully whatever version the host asks for."""

    def m_initialize(self, params: dict[str, Any]) -> Any:
        return super().m_initialize({"protocol_version": 1})


@mutant("version-mismatch-unnamed")
class VersionMismatchUnnamed(HostPlugin):
    """Refuses a version mismatch without saying which versions are involved."""

    def m_initialize(self, params: dict[str, Any]) -> Any:
        if params["protocol_version"] != 1:
            raise application_error("invalid_spec", "unsupported protocol version",
                                    {"field": "protocol_version", "reason": "unsupported"})
        return super().m_initialize(params)


@mutant("unknown-method-invalid-request")
class UnknownMethodInvalidRequest(HostPlugin):
    """Answers an unknown method with -32600 instead of -32601."""

    def unknown_method(self, method: str) -> RpcFailure:
        return RpcFailure(INVALID_REQUEST, f"unknown method: {method}")


@mutant("malformed-line-ignored")
class MalformedLineIgnored(HostPlugin):
    """Silently drops lines that are not JSON."""

    def malformed(self, reason: str) -> None:
        print(f"dropping malformed line: {reason}", file=self.stderr, flush=True)


@mutant("malformed-line-exits")
class MalformedLineExits(HostPlugin):
    """Answers a malformed line, then stops serving."""

    def handle_line(self, raw: bytes) -> bool:
        keep_going = super().handle_line(raw)
        try:
            import json

            json.loads(raw)
        except ValueError:
            return False
        return keep_going


# -- lifecycle -----------------------------------------------------------------------------------


@mutant("handle-without-working-directory")
class HandleWithoutWorkingDirectory(HostPlugin):
    """Leaves working_directory out of HandleInfo."""

    def handle_info(self, sandbox: Any) -> dict[str, Any]:
        info = super().handle_info(sandbox)
        del info["working_directory"]
        return info


@mutant("handle-without-capabilities")
class HandleWithoutCapabilities(HostPlugin):
    """Leaves the per-sandbox capability set out of HandleInfo."""

    def handle_info(self, sandbox: Any) -> dict[str, Any]:
        info = super().handle_info(sandbox)
        del info["capabilities"]
        return info


@mutant("sandbox-id-with-whitespace")
class SandboxIdWithWhitespace(HostPlugin):
    """Mints sandbox ids that contain a space."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        info = super().m_sandbox_create(params)
        sandbox = self.backend.get(info["status"]["id"])
        with self.backend._lock:
            del self.backend._sandboxes[sandbox.id]
            sandbox.id = sandbox.id.replace("host-", "host ")
            self.backend._sandboxes[sandbox.id] = sandbox
        return self.handle_info(sandbox)


@mutant("describe-reports-other-id")
class DescribeReportsOtherId(HostPlugin):
    """describe answers with a status whose id is not the one asked for."""

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        answer = super().m_sandbox_describe(params)
        answer["status"]["id"] = answer["status"]["id"] + "-0"
        return answer


@mutant("describe-deleted-as-running")
class DescribeDeletedAsRunning(HostPlugin):
    """Keeps describing a deleted sandbox as running."""

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        sandbox = self.backend.get(params["sandbox_id"], include_deleted=True)
        status = self.status(sandbox)
        if status["state"] == "deleted":
            status["state"] = "running"
        return {"status": status}


# -- delete --------------------------------------------------------------------------------------


@mutant("delete-unknown-errors")
class DeleteUnknownErrors(HostPlugin):
    """delete of an id it never minted fails with not_found."""

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"], include_deleted=True)
        return super().m_sandbox_delete(params)


@mutant("delete-twice-errors")
class DeleteTwiceErrors(HostPlugin):
    """A second delete of a deleted sandbox fails with not_found."""

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["sandbox_id"]
        with self.backend._lock:
            known = self.backend._sandboxes.get(sandbox_id)
        if known is not None and known.state == "deleted":
            raise not_found("sandbox", sandbox_id)
        return super().m_sandbox_delete(params)


@mutant("delete-in-progress-errors")
class DeleteInProgressErrors(HostPlugin):
    """A slow delete; a delete that arrives while one is running fails with invalid_state."""

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["sandbox_id"]
        with self.backend._lock:
            known = self.backend._sandboxes.get(sandbox_id)
            if known is not None and known.state == "deleting":
                raise application_error("invalid_state", "cannot Delete a sandbox in state Deleting",
                                        {"current": "deleting", "action": "delete"})
            if known is not None and known.state == "running":
                known.state = "deleting"
        if known is not None and known.state == "deleting":
            time.sleep(0.3)
            with self.backend._lock:
                known.state = "running"
        return super().m_sandbox_delete(params)


# -- exec ----------------------------------------------------------------------------------------


@mutant("exit-code-always-zero")
class ExitCodeAlwaysZero(HostPlugin):
    """Reports exit code 0 whatever the command returned."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        if result["exit_code"] is not None:
            result["exit_code"] = 0
        return result


@mutant("nonzero-exit-as-error")
class NonzeroExitAsError(HostPlugin):
    """Turns a command's non-zero exit into an exec error instead of a result."""

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        result = super().m_exec_run(params)
        if result["exit_code"] not in (0, None):
            raise application_error("exec", f"command failed with exit code {result['exit_code']}", {"exec": {
                "label": "command", "termination": "exited", "exit_code": result["exit_code"],
                "stdout_b64": result["stdout_b64"], "stderr_b64": result["stderr_b64"]}})
        return result


@mutant("stderr-merged-into-stdout")
class StderrMergedIntoStdout(HostPlugin):
    """Reports stderr bytes as part of stdout (while still claiming separated streams)."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        result["stdout_b64"] = b64(run.stdout + run.stderr)
        result["stderr_b64"] = ""
        return result


@mutant("exec-env-ignored")
class ExecEnvIgnored(HostPlugin):
    """Drops the command's env."""

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        return super().run_spec(sandbox_id, {**spec, "env": {}}, **kwargs)


@mutant("exec-working-dir-ignored")
class ExecWorkingDirIgnored(HostPlugin):
    """Runs every command in the workspace, whatever working_dir says."""

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        return super().run_spec(sandbox_id, {**spec, "working_dir": None}, **kwargs)


@mutant("output-decoded-as-text")
class OutputDecodedAsText(HostPlugin):
    """Round-trips command output through lossy UTF-8 text."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        result = super().exec_result(run)
        result["stdout_b64"] = b64(run.stdout.decode("utf-8", errors="replace").encode("utf-8"))
        return result


# -- capability honesty --------------------------------------------------------------------------


@mutant("undeclared-answers-provider-error")
class UndeclaredAnswersProviderError(HostPlugin):
    """Refuses undeclared operations with a generic provider error instead of `unsupported`."""

    def unsupported(self, method: str, capability: str) -> RpcFailure:
        return self.internal_error(method, RuntimeError(f"{method} is not implemented"))


@mutant("unsupported-names-the-method")
class UnsupportedNamesTheMethod(HostPlugin):
    """Says `unsupported` but names the method instead of the dotted capability."""

    def unsupported(self, method: str, capability: str) -> RpcFailure:
        return application_error("unsupported", f"{method} is not supported", {"capability": method})


@mutant("declared-operations-refused")
class DeclaredOperationsRefused(HostPlugin):
    """Declares its optional operations, then refuses every one of them as unsupported."""

    def dispatch(self, method: str, params: Any) -> Any:
        capability = GATED_METHODS.get(method)
        if capability is not None:
            raise self.unsupported(method, capability)
        return super().dispatch(method, params)


@mutant("exit-code-null")
class ExitCodeNull(HostPlugin):
    """Reports termination exited but never an exit code."""

    def exec_result(self, run: Any) -> dict[str, Any]:
        return {**super().exec_result(run), "exit_code": None}


@mutant("stdin-declared-but-unsupported")
class StdinDeclaredButUnsupported(HostPlugin):
    """Declares exec.stdin, then refuses every command that carries stdin."""

    def decode_stdin(self, spec: dict[str, Any]) -> bytes | None:
        if spec.get("stdin_b64") is not None:
            raise self.unsupported("exec/run", "exec.stdin")
        return None


# The capability object's field path of every capability whose enum name is spelled differently
# (protocol section 5.1): upstream writers use both spellings in unsupported details. Written out from the
# protocol on purpose, not imported from the dialect's table: a control that borrowed the suite's own
# table would pass even where that table is wrong.
FIELD_PATHS = {
    "access.preview_urls.signed": "access.signed_preview_urls",
    "access.ssh.ttl": "access.ssh_ttl",
    "access.ssh.revoke": "access.ssh_revoke",
    "snapshots.filesystem": "snapshots.filesystem_from_sandbox",
    "snapshots.live_process_state": "snapshots.live_process_state_from_sandbox",
    "snapshots.from_image.container": "snapshots.from_image_kinds.container",
    "snapshots.from_image.virtual_machine": "snapshots.from_image_kinds.virtual_machine",
    "snapshots.from_dockerfile.container": "snapshots.from_dockerfile_kinds.container",
    "snapshots.from_dockerfile.virtual_machine": "snapshots.from_dockerfile_kinds.virtual_machine",
}


@mutant("control-unsupported-field-paths")
class ControlUnsupportedFieldPaths(HostPlugin):
    """Legal: names a refused capability by the capability object's field path (access.ssh_revoke,
    access.signed_preview_urls, snapshots.live_process_state_from_sandbox, ...) instead of its enum name."""

    def dispatch(self, method: str, params: Any) -> Any:
        try:
            return super().dispatch(method, params)
        except RpcFailure as failure:
            detail = failure.data.get("detail") if isinstance(failure.data, dict) else None
            if isinstance(detail, dict) and detail.get("capability") in FIELD_PATHS:
                detail["capability"] = FIELD_PATHS[detail["capability"]]
                failure.message = failure.data["report"]["message"] = (
                    f"capability {detail['capability']} is not supported by this provider")
            raise


@mutant("control-list-filter-defaults-empty")
class ControlListFilterDefaultsEmpty(HostPlugin):
    """Legal: reads a sandbox/list request without a filter as no filter (a lenient reader) instead of
    refusing it as invalid request, as upstream's reference does."""

    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        return super().m_sandbox_list({"filter": {}, **(params or {})})
