"""The reference plugin in the fabro provider-plugin sketch dialect, as the forkd plugin speaks it.

Same host-directory backend as the v1 plugin. Like the forkd plugin it owns exactly one sandbox per
process; it declares honestly what it serves (no streaming, no native filesystem, no previews),
refuses the rest with ``-32001`` and the sketch's literal message, and reports every command's
outcome with ``outcome_kind`` and ``stage``.
"""

from __future__ import annotations

import copy
from typing import Any

from conformance import __version__
from conformance.reference.host_backend import BackendError, HostBackend, HostSandbox
from conformance.reference.stdio_server import METHOD_NOT_FOUND, RpcFailure, StdioJsonRpcServer, StopServing

UNSUPPORTED = -32001
UNSUPPORTED_MESSAGE = "this sandbox provider does not support it"
INVALID_STATE = -32602
PROTOCOL_ERROR = -32600
PROVIDER_FAILURE = -32603
DEFAULT_TIMEOUT_SECS = 30

CAPABILITIES: dict[str, Any] = {
    "exec": {"streaming": False, "cancel": False},
    "stdio": False,
    "fs": {"native": False, "upload": False, "download": False},
    "grep": False,
    "glob": False,
    "previewUrls": False,
    "snapshots": {"dockerfile": False},
    "network": {"modes": ["allow_all"]},
    "lifecycle": {"stop": True, "autoStop": False},
    "clone": {"github": False},
}

# Methods of the sketch this plugin refuses, with the capability flag that would authorize them.
REFUSED = {
    "exec/stream": ("exec", "streaming"),
    "fs/readFile": ("fs", "native"),
    "fs/writeFile": ("fs", "native"),
    "fs/listDirectory": ("fs", "native"),
    "fs/grep": ("grep", None),
    "fs/glob": ("glob", None),
    "net/previewUrl": ("previewUrls", None),
    "sandbox/setAutostop": ("lifecycle", "autoStop"),
}


def unsupported() -> RpcFailure:
    return RpcFailure(UNSUPPORTED, UNSUPPORTED_MESSAGE)


class SketchHostPlugin(StdioJsonRpcServer):
    """fabro sketch over the host-directory backend, one sandbox per process.

    Seams: those of ``StdioJsonRpcServer`` (streams and ``environ`` as constructor arguments,
    ``lines``, ``accept_line``, ``handle_line``, ``exit_now``, ``on_start``/``on_stop``), plus
    ``make_backend()``, ``declared_capabilities()`` and one ``m_<group>_<verb>(params)`` per method.
    """

    provider_kind = "host"
    log_prefix = "sketch-plugin"

    def __init__(self, backend: HostBackend | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backend = backend if backend is not None else self.make_backend()
        self.capabilities = self.declared_capabilities()
        self.sandbox: HostSandbox | None = None

    def make_backend(self) -> HostBackend:
        """The backend of a plugin constructed without one; it sees the server's ``environ``."""
        return HostBackend(environ=self.environ)

    def declared_capabilities(self) -> dict[str, Any]:
        return copy.deepcopy(CAPABILITIES)

    def declares(self, group: str, flag: str | None) -> bool:
        value = self.capabilities.get(group)
        return bool(value.get(flag)) if flag is not None and isinstance(value, dict) else bool(value)

    def on_start(self) -> None:
        self.log(f"{__version__} serving the fabro provider-plugin sketch; one sandbox per process")

    def on_stop(self) -> None:
        self.backend.close()

    def malformed(self, reason: str) -> None:
        self.respond_error(None, RpcFailure(PROTOCOL_ERROR, f"malformed JSON-RPC request: {reason}"))

    def dispatch(self, method: str, params: Any) -> Any:
        params = params if isinstance(params, dict) else {}
        if method in REFUSED and not self.declares(*REFUSED[method]):
            raise unsupported()
        handler = getattr(self, "m_" + method.replace("/", "_"), None)
        if handler is None:
            raise self.unknown_method(method)
        try:
            return handler(params)
        except BackendError as error:
            raise self.backend_failure(error) from None
        except KeyError as missing:
            raise RpcFailure(INVALID_STATE, f"missing or invalid field: {missing}") from None

    def unknown_method(self, method: str) -> RpcFailure:
        return RpcFailure(METHOD_NOT_FOUND, f"unknown method: {method}")

    def backend_failure(self, error: BackendError) -> RpcFailure:
        code = INVALID_STATE if error.kind in ("not_found", "invalid_state", "invalid_spec") else PROVIDER_FAILURE
        return RpcFailure(code, error.message)

    def internal_error(self, method: str, exc: Exception) -> RpcFailure:
        return RpcFailure(PROVIDER_FAILURE, f"{method} failed: {exc}")

    # -- session ---------------------------------------------------------------------------------

    def m_initialize(self, params: dict[str, Any]) -> Any:
        return {
            "protocolVersion": 1,
            "provider": {"kind": self.provider_kind, "version": __version__,
                         "displayName": "host-directory reference provider (fabro sketch)"},
            "capabilities": self.capabilities,
            "limits": {"maxMessageBytes": 4 * 1024 * 1024},
        }

    def m_shutdown(self, params: dict[str, Any]) -> Any:
        raise StopServing({})

    # -- the one sandbox -------------------------------------------------------------------------

    def owned(self, params: dict[str, Any]) -> HostSandbox:
        """The process's sandbox, which ``params['id']`` must name."""
        if self.sandbox is None:
            raise RpcFailure(INVALID_STATE, "sandbox not yet created")
        sandbox_id = params["id"] if "id" in params else self.sandbox.id
        if sandbox_id != self.sandbox.id:
            raise RpcFailure(INVALID_STATE, f"no such sandbox in this process: {sandbox_id}")
        return self.sandbox

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        if self.sandbox is not None:
            raise RpcFailure(INVALID_STATE, "this process already owns a sandbox")
        tag = params.get("snapshot_tag")
        self.sandbox = self.backend.create(None, {}, {}, from_snapshot=tag)
        return {"id": self.sandbox.id, "state": self.sandbox.state, "snapshot_tag": tag}

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        sandbox = self.owned(params)
        alive = sandbox.state == "running"
        return {"id": sandbox.id, "state": sandbox.state, "liveness": "alive" if alive else "gone"}

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        sandbox_id = params["id"]
        if self.sandbox is not None and self.sandbox.id == sandbox_id:
            self.backend.delete(sandbox_id)
        return {"id": sandbox_id, "deleted": True}  # unknown ids are already gone: idempotent

    def m_sandbox_start(self, params: dict[str, Any]) -> Any:
        sandbox = self.owned(params)
        self.backend.start(sandbox)
        return {"id": sandbox.id, "state": sandbox.state}

    def m_sandbox_stop(self, params: dict[str, Any]) -> Any:
        self.backend.stop(self.owned(params))
        return {}

    def m_sandbox_reclaim(self, params: dict[str, Any]) -> Any:
        return {}

    def m_exec(self, params: dict[str, Any]) -> Any:
        args = params["args"]
        if not isinstance(args, list) or not args or not all(isinstance(a, str) for a in args):
            raise RpcFailure(INVALID_STATE, "args must be a non-empty list of strings")
        sandbox = self.owned(params)
        timeout = params.get("timeout_secs", DEFAULT_TIMEOUT_SECS)
        run = self.backend.run(sandbox, "", {}, argv=args, timeout_s=float(timeout))
        return {
            "exit_code": run.exit_code,
            "stdout": run.stdout.decode("utf-8", errors="replace"),
            "stderr": run.stderr.decode("utf-8", errors="replace"),
            "termination": run.termination,
            "stage": "exec",
            "outcome_kind": "ran",
        }
