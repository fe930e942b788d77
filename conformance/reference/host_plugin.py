"""The reference sandbox-driver v1 plugin: host-directory sandboxes, honest capabilities.

Run it as ``sandbox-conformance-host-plugin`` (or ``python -m conformance.reference.host_plugin``);
``serve(argv, stdin, stdout, stderr, environ)`` runs it inside another process instead.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import copy
import json
import os
import platform
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, NoReturn, TextIO

from conformance import __version__
from conformance.reference.host_backend import BackendError, HostBackend, HostSandbox, invalid_spec
from conformance.reference.host_events import EventSource
from conformance.reference.host_fs import FilesystemMethods
from conformance.reference.host_interactive import InteractiveMethods
from conformance.reference.sanitize import MODES as SANITIZATION_MODES
from conformance.reference.stdio_server import (
    METHOD_NOT_FOUND,
    ArgumentsEnd,
    RpcFailure,
    StdioJsonRpcServer,
    StopServing,
    parse_arguments,
)

PROTOCOL_VERSION = 1
APPLICATION_ERROR = -32000
INVALID_PARAMS = -32600

BASE_CAPABILITIES: dict[str, Any] = {
    "isolation": "none",
    "lifecycle": {
        "pause": True, "archive": True, "fork": False, "resize": False, "recover": False,
        "undelete": True, "refresh_activity": True, "timers": False, "labels": True,
        "update_network": False, "snapshot_sandbox": True,
    },
    "exec": {
        "live_streaming": True, "streams_separated": True, "stdin": True, "cancel": True,
        "stdio_process": True, "stdin_stream": False, "environment": False,
    },
    "fs": {"native": True, "upload": True, "download": True, "permissions": True},
    "search": {"supported": False, "native": False},
    "git": {"supported": False, "native": False},
    "services": {"supported": False, "native": False},
    "pty": {"resize": True},
    "logs": {"provision": True, "entrypoint": True},
    "access": {
        "preview_urls": False, "signed_preview_urls": False, "ssh": False, "ssh_ttl": False,
        "ssh_revoke": False, "shell_command": False, "web_terminal": False, "vnc": False, "vpn": False,
    },
    "network": {"allow_all": False, "block_all": False, "cidr_allow_list": False,
                "domain_allow_list": False, "outbound_proxy": False},
    "snapshots": {
        "from_image": False, "from_dockerfile": False,
        "from_image_kinds": {"container": False, "virtual_machine": False},
        "from_dockerfile_kinds": {"container": False, "virtual_machine": False},
        "filesystem_from_sandbox": True, "live_process_state_from_sandbox": False,
        "build_logs": False, "activation": False,
    },
    "volumes": None,
}

# Methods an undeclared capability makes `unsupported`, with the dotted name the answer must carry.
GATED_METHODS: dict[str, str] = {
    "sandbox/pause": "lifecycle.pause",
    "sandbox/resume": "lifecycle.pause",
    "sandbox/archive": "lifecycle.archive",
    "sandbox/recover": "lifecycle.recover",
    "sandbox/refresh_activity": "lifecycle.refresh_activity",
    "sandbox/undelete": "lifecycle.undelete",
    "sandbox/fork": "lifecycle.fork",
    "sandbox/resize": "lifecycle.resize",
    "sandbox/snapshot": "lifecycle.snapshot_sandbox",
    "sandbox/set_timers": "lifecycle.timers",
    "sandbox/set_labels": "lifecycle.labels",
    "sandbox/update_network": "lifecycle.update_network",
    "exec/stdio_open": "exec.stdio_process",
    "exec/stdio_input": "exec.stdio_process",
    "exec/stdio_close_input": "exec.stdio_process",
    "exec/stdio_output": "exec.stdio_process",
    "exec/stdio_terminate": "exec.stdio_process",
    "exec/stdio_wait": "exec.stdio_process",
    "pty/open": "pty",
    "pty/input": "pty",
    "pty/output": "pty",
    "pty/resize": "pty",
    "pty/close": "pty",
    "logs/follow": "logs",
    "fs/set_permissions": "fs.permissions",
    "snapshot/create": "snapshots",
    "snapshot/get": "snapshots",
    "snapshot/list": "snapshots",
    "snapshot/delete": "snapshots",
    "snapshot/activate": "snapshots.activation",
    "snapshot/deactivate": "snapshots.activation",
    "snapshot/build_logs": "snapshots",
    "volume/create": "volumes",
    "volume/get": "volumes",
    "volume/list": "volumes",
    "volume/delete": "volumes",
    "access/preview_url": "access.preview_urls",
    "access/signed_preview_url": "access.preview_urls.signed",
    "access/ssh_create": "access.ssh",
    "access/ssh_revoke": "access.ssh.revoke",
    "access/web_terminal": "access.web_terminal",
    "access/vnc": "access.vnc",
}

# Creation-spec fields this provider cannot honour, with the value that means "not asked for".
UNHONOURED_SPEC_FIELDS: dict[str, Any] = {
    "user": None, "sandbox_kind": None, "region": None, "public": None, "provider_config": None,
    "ephemeral": False, "volumes": [], "workspace_ownership": None,
}


def application_error(kind: str, message: str, detail: dict[str, Any] | None = None,
                      retryable: bool = False) -> RpcFailure:
    data: dict[str, Any] = {"report": {"kind": kind, "message": message, "retryable": retryable, "causes": []}}
    if detail:
        data["detail"] = detail
    return RpcFailure(APPLICATION_ERROR, message, data)


def unsupported(capability: str) -> RpcFailure:
    return application_error("unsupported", f"capability {capability} is not supported by this provider",
                             {"capability": capability})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# Methods that emit control-plane events when their request carries `events`: (action, subject type).
EVENT_ACTIONS = {
    "sandbox/create": ("create", "sandbox"), "sandbox/attach": ("attach", "sandbox"),
    "sandbox/start": ("start", "sandbox"), "sandbox/stop": ("stop", "sandbox"),
    "sandbox/delete": ("delete", "sandbox"), "sandbox/pause": ("pause", "sandbox"),
    "sandbox/resume": ("resume", "sandbox"), "sandbox/set_labels": ("set_labels", "sandbox"),
    "sandbox/refresh_activity": ("refresh_activity", "sandbox"), "sandbox/archive": ("archive", "sandbox"),
    "sandbox/undelete": ("undelete", "sandbox"),
    "snapshot/create": ("create", "snapshot"), "snapshot/delete": ("delete", "snapshot"),
}


# Methods that make a handle: their `events` route is the route of the handle's later operations that
# carry no `events` of their own (early v1; late v1 adds a per-call `events` object, which wins).
HANDLE_METHODS = ("sandbox/create", "sandbox/attach")


class HostPlugin(FilesystemMethods, InteractiveMethods, StdioJsonRpcServer):
    """sandbox-driver v1 over the host-directory backend.

    Seams: those of ``StdioJsonRpcServer`` (streams and ``environ`` as constructor arguments,
    ``lines``, ``accept_line``, ``handle_line``, ``exit_now``, ``on_start``/``on_stop``), plus
    ``make_backend()`` (the backend built when none is passed; it reads ``self.environ``),
    ``declared_capabilities()``, and one ``m_<group>_<verb>(params)`` method per JSON-RPC method.
    """

    provider_kind = "host"
    log_prefix = "host-plugin"

    def __init__(self, backend: HostBackend | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backend = backend if backend is not None else self.make_backend()
        self.capabilities = self.declared_capabilities()
        self.events = EventSource(self.provider_kind, self.notify)
        self._handle_routes: dict[str, dict[str, Any]] = {}  # sandbox id -> route of its create/attach
        self._execs: dict[str, threading.Event] = {}
        self._execs_lock = threading.Lock()
        self.init_interactive()

    def make_backend(self) -> HostBackend:
        """The backend of a plugin constructed without one; it sees the server's ``environ``."""
        return HostBackend(environ=self.environ)

    # -- capabilities ----------------------------------------------------------------------------

    def declared_capabilities(self) -> dict[str, Any]:
        return copy.deepcopy(BASE_CAPABILITIES)

    def declares(self, dotted: str) -> bool:
        if dotted in ("pty", "logs", "snapshots", "volumes"):
            return self.capabilities.get(dotted) is not None
        aliases = {"access.preview_urls.signed": "access.signed_preview_urls",
                   "access.ssh.revoke": "access.ssh_revoke", "access.ssh.ttl": "access.ssh_ttl",
                   "snapshots.filesystem": "snapshots.filesystem_from_sandbox",
                   "snapshots.live_process_state": "snapshots.live_process_state_from_sandbox"}
        group, _, leaf = aliases.get(dotted, dotted).partition(".")
        value = self.capabilities.get(group)
        return isinstance(value, dict) and bool(value.get(leaf))

    # -- dispatch --------------------------------------------------------------------------------

    def dispatch(self, method: str, params: Any) -> Any:
        handler = getattr(self, "m_" + method.replace("/", "_"), None)
        if method == "sandbox/fork" and isinstance(params, dict) and {"sandbox_id", "options"} <= set(params):
            # only params that decode: a fork naming no sandbox or no options is an invalid request (-32600)
            self.check_fork_options(params.get("options") or {})
        capability = GATED_METHODS.get(method)
        if capability is not None and not self.declares(capability):
            raise self.unsupported(method, capability)
        if handler is None:
            raise self.unknown_method(method)
        params = params if isinstance(params, dict) else {}
        action, subject_type = EVENT_ACTIONS.get(method, (None, "sandbox"))
        route = params.get("events") if isinstance(params.get("events"), dict) else None
        if route is None and action and subject_type == "sandbox" and method not in HANDLE_METHODS:
            # Early v1: a handle's later operations report on the route of its create/attach.
            route = self._handle_routes.get(str(params.get("sandbox_id")))
        operation = (self.events.operation(route, action, self.event_subject(subject_type, params))
                     if action and route else None)
        try:
            result = handler(params)
        except BackendError as error:
            failure = self.backend_failure(method, error)
            if operation is not None:
                operation.failed(failure.data["report"])
            raise failure from None
        except KeyError as missing:
            raise RpcFailure(INVALID_PARAMS, f"invalid params for {method}: missing field {missing}") from None
        if operation is not None:
            operation.completed(self.event_subject(subject_type, params, result))
        self.remember_handle_route(method, params, result, route)
        return result

    def remember_handle_route(self, method: str, params: dict[str, Any], result: Any,
                              route: dict[str, Any] | None) -> None:
        """A create or attach that asked for events gives the handle its route; a delete ends it."""
        status = result.get("status") if isinstance(result, dict) else None
        if method in HANDLE_METHODS and route is not None and isinstance(status, dict) and "id" in status:
            self._handle_routes[str(status["id"])] = route
        elif method == "sandbox/delete":
            self._handle_routes.pop(str(params.get("sandbox_id")), None)

    def event_subject(self, subject_type: str, params: dict[str, Any], result: Any = None) -> dict[str, Any]:
        """What an event is about; a create knows the new id only once it is done."""
        subject: dict[str, Any] = {"type": subject_type}
        status = result.get("status") if isinstance(result, dict) else None
        if subject_type == "snapshot":
            resource_id = (result or {}).get("snapshot_id") if isinstance(result, dict) else None
            resource_id = resource_id or params.get("snapshot_id")
        else:
            resource_id = status["id"] if isinstance(status, dict) else params.get("sandbox_id")
        if resource_id:
            subject["id"] = resource_id
        name = (params.get("spec") or {}).get("name") if isinstance(params.get("spec"), dict) else None
        if name:
            subject["name"] = name
        return subject

    def check_fork_options(self, options: dict[str, Any]) -> None:
        """A fork keeps memory and running processes; asking for less is an invalid spec, whoever asks."""
        if not options.get("include_memory", False):
            raise application_error("invalid_spec", "invalid spec: include_memory: fork must preserve memory and "
                                    "running processes", {"field": "include_memory",
                                                          "reason": "fork must preserve memory and running processes"})

    def unsupported(self, method: str, capability: str) -> RpcFailure:
        return unsupported(capability)

    def unknown_method(self, method: str) -> RpcFailure:
        return RpcFailure(METHOD_NOT_FOUND, f"unknown method {method}")

    def backend_failure(self, method: str, error: BackendError) -> RpcFailure:
        return application_error(error.kind, error.message, error.detail)

    def internal_error(self, method: str, exc: Exception) -> RpcFailure:
        return application_error("provider", f"host error: {exc}",
                                 {"provider": {"provider": self.provider_kind, "code": None,
                                               "message": str(exc), "retryable": False, "detail": None}})

    # -- session ---------------------------------------------------------------------------------

    def on_start(self) -> None:
        self.log(f"{__version__} serving sandbox-driver protocol {PROTOCOL_VERSION}; sandboxes in {self.backend.root}")

    def m_initialize(self, params: dict[str, Any]) -> Any:
        asked = params["protocol_version"]
        if asked != PROTOCOL_VERSION:
            raise application_error(
                "invalid_spec", f"invalid spec: protocol_version: plugin speaks protocol version "
                f"{PROTOCOL_VERSION} but the host asked for {asked}",
                {"field": "protocol_version",
                 "reason": f"plugin speaks protocol version {PROTOCOL_VERSION} but the host asked for {asked}"})
        return {
            "protocol_version": PROTOCOL_VERSION,
            "provider": {"kind": self.provider_kind, "version": __version__},
            "capabilities": self.capabilities,
        }

    def m_shutdown(self, params: dict[str, Any]) -> Any:
        raise StopServing(None)

    def m_provider_health(self, params: dict[str, Any]) -> Any:
        return {"health": {"status": "ok", "message": None, "missing_permissions": []}}

    def on_stop(self) -> None:
        with self._execs_lock:
            for cancel in self._execs.values():
                cancel.set()
        self.stop_interactive()
        self.backend.close()

    # -- handles ---------------------------------------------------------------------------------

    def validate_spec(self, spec: dict[str, Any]) -> None:
        source = spec.get("source")
        from_snapshot = isinstance(source, dict) and set(source) == {"snapshot"}
        if source != "host_directory" and not from_snapshot:
            raise invalid_spec("source", "only host_directory and snapshot sources are supported")
        resources = spec.get("resources") or {}
        for key, value in resources.items():
            if value is not None:
                raise invalid_spec(f"resources.{key}", "the host provider cannot limit resources")
        for key, unset in UNHONOURED_SPEC_FIELDS.items():
            if key in spec and spec[key] != unset:
                raise invalid_spec(key, "not supported by the host provider")
        if spec.get("network", "provider_default") != "provider_default":
            raise invalid_spec("network", "the host provider cannot change the network policy")
        timers = spec.get("timers") or {}
        if any(value is not None for value in timers.values()):
            raise invalid_spec("timers", "the host provider has no lifecycle timers")
        if spec.get("working_directory") is not None:
            raise invalid_spec("working_directory", "the reference host provider always manages its workspace")

    def status(self, sandbox: HostSandbox) -> dict[str, Any]:
        return {
            "id": sandbox.id, "name": sandbox.name, "state": sandbox.state, "provider_state": sandbox.state,
            "error_reason": None, "resources": None, "sandbox_kind": None, "region": None,
            "labels": sandbox.labels, "image": None, "snapshot": None, "network": None,
            "workspace_ownership": "managed", "web_url": None,
            "created_at": {"secs_since_epoch": int(sandbox.created_at),
                           "nanos_since_epoch": int((sandbox.created_at % 1) * 1e9)},
            "updated_at": None,
        }

    def handle_info(self, sandbox: HostSandbox) -> dict[str, Any]:
        return {
            "status": self.status(sandbox),
            "capabilities": self.capabilities,
            "working_directory": str(sandbox.workspace),
            "runtime_directory": str(self.backend.runtime_directory(sandbox)),
        }

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        self.validate_spec(spec)
        source = spec.get("source")
        snapshot = source["snapshot"]["name"] if isinstance(source, dict) else None
        sandbox = self.backend.create(spec.get("name"), spec.get("labels") or {}, spec.get("env") or {},
                                      from_snapshot=snapshot)
        return self.handle_info(sandbox)

    def m_sandbox_attach(self, params: dict[str, Any]) -> Any:
        return self.handle_info(self.backend.get(params["sandbox_id"]))

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        return {"status": self.status(self.backend.get(params["sandbox_id"]))}

    def m_sandbox_list(self, params: dict[str, Any]) -> Any:
        labels = (params["filter"] or {}).get("labels") or {}
        return {"sandboxes": [self.status(s) for s in self.backend.list(labels)]}

    def m_sandbox_platform_info(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])
        return {"platform": {"os": sys.platform.replace("darwin", "macos"), "arch": platform.machine(),
                             "version": platform.release()}}

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        self.backend.delete(params["sandbox_id"])
        return None

    def m_sandbox_start(self, params: dict[str, Any]) -> Any:
        self.backend.start(self.backend.get(params["sandbox_id"]))
        return None

    def m_sandbox_stop(self, params: dict[str, Any]) -> Any:
        self.backend.stop(self.backend.get(params["sandbox_id"]))
        return None

    def m_sandbox_pause(self, params: dict[str, Any]) -> Any:
        self.backend.pause(self.backend.get(params["sandbox_id"]))
        return None

    def m_sandbox_resume(self, params: dict[str, Any]) -> Any:
        self.backend.resume(self.backend.get(params["sandbox_id"]))
        return None

    def m_sandbox_set_labels(self, params: dict[str, Any]) -> Any:
        self.backend.set_labels(self.backend.get(params["sandbox_id"]), params["labels"])
        return None

    def m_sandbox_archive(self, params: dict[str, Any]) -> Any:
        self.backend.archive(self.backend.get(params["sandbox_id"]))
        return None

    def m_sandbox_undelete(self, params: dict[str, Any]) -> Any:
        return self.handle_info(self.backend.undelete(params["sandbox_id"]))

    # -- filesystem snapshots --------------------------------------------------------------------

    def snapshot_status(self, record: dict[str, Any]) -> dict[str, Any]:
        created = record.get("created_at", 0.0)
        return {"id": record["id"], "name": record["name"], "state": record["state"], "sandbox_kind": None,
                "regions": [], "resources": None, "error_reason": None, "size_bytes": record.get("size_bytes"),
                "created_at": {"secs_since_epoch": int(created), "nanos_since_epoch": int((created % 1) * 1e9)}}

    def snapshot_of(self, sandbox_id: str, options: dict[str, Any]) -> dict[str, Any]:
        if options.get("include_memory", False):
            raise unsupported("snapshots.live_process_state")
        sandbox = self.backend.get(sandbox_id)
        return self.backend.create_snapshot(sandbox, options.get("name"))

    def m_sandbox_snapshot(self, params: dict[str, Any]) -> Any:
        return {"snapshot_id": self.snapshot_of(params["sandbox_id"], params["options"])["id"]}

    def m_snapshot_create(self, params: dict[str, Any]) -> Any:
        spec = params["spec"]
        source = spec["source"]
        if "image" in source:
            raise unsupported("snapshots.from_image.container")
        if "dockerfile" in source:
            raise unsupported("snapshots.from_dockerfile.container")
        for field_name in ("sandbox_kind", "region"):
            if spec.get(field_name) is not None:
                raise invalid_spec(field_name, "a snapshot of a sandbox inherits it from the sandbox")
        if any(value is not None for value in (spec.get("resources") or {}).values()):
            raise invalid_spec("resources", "a snapshot of a sandbox inherits them from the sandbox")
        sandbox_source = source["sandbox"]
        record = self.snapshot_of(sandbox_source["id"], {"name": spec.get("name"),
                                                         "include_memory": sandbox_source.get("include_memory", False)})
        return {"snapshot_id": record["id"]}

    def m_snapshot_get(self, params: dict[str, Any]) -> Any:
        return {"status": self.snapshot_status(self.backend.find_snapshot(params["snapshot_id"]))}

    def m_snapshot_list(self, params: dict[str, Any]) -> Any:
        wanted = (params["filter"] or {}).get("name")
        return {"snapshots": [self.snapshot_status(r) for r in self.backend.snapshots()
                              if wanted is None or r["name"] == wanted]}

    def m_snapshot_delete(self, params: dict[str, Any]) -> Any:
        self.backend.delete_snapshot(params["snapshot_id"])
        return None

    def m_snapshot_build_logs(self, params: dict[str, Any]) -> Any:
        raise unsupported("snapshots")  # filesystem snapshots are copied, never built

    def m_sandbox_refresh_activity(self, params: dict[str, Any]) -> Any:
        self.backend.get(params["sandbox_id"])  # no idle timers to reset, but the sandbox must exist
        return None

    # -- exec ------------------------------------------------------------------------------------

    def decode_stdin(self, spec: dict[str, Any]) -> bytes | None:
        stdin = spec.get("stdin_b64")
        if stdin is None:
            return None
        if not self.declares("exec.stdin"):
            raise unsupported("exec.stdin")
        try:
            return base64.b64decode(stdin, validate=True)
        except binascii.Error:
            raise invalid_spec("stdin_b64", "not valid base64") from None

    def run_spec(self, sandbox_id: str, spec: dict[str, Any], **kwargs: Any):
        sanitization = spec.get("output_sanitization")
        if sanitization is None:
            sanitization = "raw"
        if sanitization not in SANITIZATION_MODES:
            # An enum value the protocol does not define: the params cannot be decoded (before any work is done).
            method = "exec/stream" if kwargs.get("on_output") is not None else "exec/run"
            raise RpcFailure(INVALID_PARAMS, f"invalid params for {method}: spec.output_sanitization: unknown "
                                             f"variant {json.dumps(sanitization)}, expected one of raw, strip_ansi, "
                                             "strip_all")
        sandbox = self.backend.get(sandbox_id)
        timeout_ms = spec.get("timeout_ms")
        return self.backend.run(
            sandbox,
            spec["command"],
            spec["env"],
            working_dir=spec.get("working_dir"),
            stdin=self.decode_stdin(spec),
            timeout_s=(timeout_ms / 1000) if timeout_ms is not None else 3600.0,
            sanitization=sanitization,
            **kwargs,
        )

    def exec_result(self, run: Any) -> dict[str, Any]:
        return {
            "stdout_b64": b64(run.stdout), "stderr_b64": b64(run.stderr),
            "exit_code": run.exit_code, "signal": run.signal,
            "termination": run.termination, "duration_ms": run.duration_ms,
        }

    def m_exec_run(self, params: dict[str, Any]) -> Any:
        return self.exec_result(self.run_spec(params["sandbox_id"], params["spec"]))

    def m_exec_stream(self, params: dict[str, Any]) -> Any:
        exec_id = params["exec_id"]
        cancel = threading.Event()
        with self._execs_lock:
            self._execs[exec_id] = cancel

        def forward(stream: str, chunk: bytes) -> None:
            self.notify("exec/output", {"exec_id": exec_id, "stream": stream, "data_b64": b64(chunk)})

        try:
            run = self.run_spec(params["sandbox_id"], params["spec"], on_output=forward, cancel=cancel,
                                retain_limit=params.get("retained_output_limit"))
        finally:
            with self._execs_lock:
                self._execs.pop(exec_id, None)
        return {
            "result": self.exec_result(run),
            "streams_separated": True,
            "live_streaming": True,
            "stdout_capture": run.stdout_capture,
            "stderr_capture": run.stderr_capture,
        }

    def m_exec_cancel(self, params: dict[str, Any]) -> Any:
        with self._execs_lock:
            cancel = self._execs.get(params["exec_id"])
        if cancel is not None:
            cancel.set()
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sandbox-conformance-host-plugin", description=__doc__.splitlines()[0])
    parser.add_argument("--dialect", choices=("sandbox-driver-v1", "sandbox-driver-v2", "fabro-sketch"),
                        default="sandbox-driver-v1", help="the protocol to speak (default: sandbox-driver-v1)")
    return parser


def plugin_class_for(dialect: str) -> type[StdioJsonRpcServer]:
    from conformance.reference.host_plugin_v2 import HostPluginV2
    from conformance.reference.sketch_plugin import SketchHostPlugin

    return {"fabro-sketch": SketchHostPlugin, "sandbox-driver-v2": HostPluginV2}.get(dialect, HostPlugin)


def serve(argv: list[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO, environ: Mapping[str, str],
          *, plugin_class: type[StdioJsonRpcServer] | None = None,
          exit_now: Callable[[int], NoReturn] | None = None) -> int:
    """Run the plugin on the given streams until its input ends; the exit code it would exit with.

    ``argv`` is the command line without the program name (``--dialect``, as ``main()`` parses it);
    ``stdin``/``stdout`` are binary, ``stderr`` is text; ``environ`` is the plugin's environment (what
    its backend reads and its commands inherit; it is copied, ``os.environ`` is never read or changed).
    Help goes to ``stdout`` and usage errors to ``stderr`` (exit code 2), never ``SystemExit``.
    ``plugin_class`` replaces the class ``--dialect`` chooses. A crash (``exit_now``) does not return.
    """
    try:
        args = parse_arguments(build_parser(), argv, stdout, stderr)
    except ArgumentsEnd as end:
        return end.status
    chosen = plugin_class or plugin_class_for(args.dialect)
    return chosen(stdin=stdin, stdout=stdout, stderr=stderr, environ=environ, exit_now=exit_now).serve()


def main(argv: list[str] | None = None) -> int:
    return serve(sys.argv[1:] if argv is None else argv, sys.stdin.buffer, sys.stdout.buffer, sys.stderr,
                 os.environ)


if __name__ == "__main__":
    sys.exit(main())
