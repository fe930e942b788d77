"""Broken variants of the reference plugin in the fabro-sketch dialect."""

from __future__ import annotations

from typing import Any

from conformance.reference.host_backend import BackendError
from conformance.reference.sketch_plugin import (
    INVALID_STATE,
    PROTOCOL_ERROR,
    PROVIDER_FAILURE,
    UNSUPPORTED,
    RpcFailure,
    SketchHostPlugin,
)
from tests.mutants import mutant


@mutant("sketch-unsupported-wrong-code")
class SketchUnsupportedWrongCode(SketchHostPlugin):
    """Refuses undeclared operations with a generic provider failure (-32603)."""

    def dispatch(self, method: str, params: Any) -> Any:
        try:
            return super().dispatch(method, params)
        except RpcFailure as failure:
            if failure.code == UNSUPPORTED:
                raise RpcFailure(PROVIDER_FAILURE, failure.message) from None
            raise


@mutant("sketch-unsupported-wrong-message")
class SketchUnsupportedWrongMessage(SketchHostPlugin):
    """Uses -32001 but words the refusal its own way."""

    def dispatch(self, method: str, params: Any) -> Any:
        try:
            return super().dispatch(method, params)
        except RpcFailure as failure:
            if failure.code == UNSUPPORTED:
                raise RpcFailure(UNSUPPORTED, f"{method} is not supported") from None
            raise


@mutant("sketch-unknown-method-invalid-request")
class SketchUnknownMethodInvalidRequest(SketchHostPlugin):
    """Answers an unknown method with -32600, as the forkd plugin really does."""

    def unknown_method(self, method: str) -> RpcFailure:
        return RpcFailure(PROTOCOL_ERROR, f"unknown method: {method}")


@mutant("sketch-malformed-line-ignored")
class SketchMalformedLineIgnored(SketchHostPlugin):
    """Drops lines that are not JSON without answering."""

    def malformed(self, reason: str) -> None:
        self.log(f"dropping a malformed line: {reason}")


@mutant("sketch-delete-unknown-fails")
class SketchDeleteUnknownFails(SketchHostPlugin):
    """Refuses to delete an id this process does not own."""

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        if self.sandbox is None or self.sandbox.id != params["id"]:
            raise RpcFailure(INVALID_STATE, f"no such sandbox: {params['id']}")
        return super().m_sandbox_delete(params)


@mutant("sketch-unknown-tag-boots-default")
class SketchUnknownTagBootsDefault(SketchHostPlugin):
    """Starts an empty sandbox when asked for a snapshot tag it does not know."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        tag = params.get("snapshot_tag")
        try:
            return super().m_sandbox_create(params)
        except Exception:
            if tag is None:
                raise
            return super().m_sandbox_create({**params, "snapshot_tag": None}) | {"snapshot_tag": tag}


@mutant("sketch-unknown-tag-internal-error")
class SketchUnknownTagInternalError(SketchHostPlugin):
    """Fails a create from an unknown snapshot tag with -32603 relaying its controller's 404 (what the
    forkd plugin does with any non-2xx answer), not the sketch's -32602 refusal."""

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        try:
            return super().m_sandbox_create(params)
        except BackendError as error:
            if error.kind != "not_found":
                raise
            raise RpcFailure(PROVIDER_FAILURE, f"create returned 404 Not Found: {error.message}") from None


@mutant("sketch-stage-boot")
class SketchStageBoot(SketchHostPlugin):
    """Reports every command that ran as if it had failed at boot."""

    def m_exec(self, params: dict[str, Any]) -> Any:
        return {**super().m_exec(params), "stage": "boot"}


@mutant("sketch-exec-before-create-127")
class SketchExecBeforeCreate127(SketchHostPlugin):
    """Answers a command sent before any create with exit code 127, as a shell would."""

    def m_exec(self, params: dict[str, Any]) -> Any:
        if self.sandbox is None:
            return {"exit_code": 127, "stdout": "", "stderr": "sandbox: command not found\n",
                    "termination": "exited", "stage": "exec", "outcome_kind": "ran"}
        return super().m_exec(params)


@mutant("sketch-deleted-exec-127")
class SketchDeletedExec127(SketchHostPlugin):
    """Answers a command for its deleted sandbox with exit code 127."""

    def m_exec(self, params: dict[str, Any]) -> Any:
        if self.sandbox is not None and self.sandbox.state == "deleted":
            return {"exit_code": 127, "stdout": "", "stderr": "", "termination": "exited",
                    "stage": "exec", "outcome_kind": "ran"}
        return super().m_exec(params)


@mutant("sketch-declared-stop-refused")
class SketchDeclaredStopRefused(SketchHostPlugin):
    """Declares lifecycle.stop, then refuses sandbox/stop as unsupported."""

    def m_sandbox_stop(self, params: dict[str, Any]) -> Any:
        raise RpcFailure(UNSUPPORTED, "this sandbox provider does not support it")


@mutant("sketch-stop-not-offered")
class SketchStopNotOffered(SketchHostPlugin):
    """Control: declares lifecycle.stop false (as the forkd plugin does) and refuses sandbox/stop honestly."""

    def declared_capabilities(self) -> dict[str, Any]:
        capabilities = super().declared_capabilities()
        capabilities["lifecycle"]["stop"] = False
        return capabilities

    def m_sandbox_stop(self, params: dict[str, Any]) -> Any:
        raise RpcFailure(UNSUPPORTED, "this sandbox provider does not support it")


@mutant("sketch-timeout-as-exit-124")
class SketchTimeoutAsExit124(SketchHostPlugin):
    """Reports a command that outlived timeout_secs as exited with code 124, as coreutils timeout would."""

    def m_exec(self, params: dict[str, Any]) -> Any:
        answer = super().m_exec(params)
        if answer["termination"] == "timed_out":
            answer = {**answer, "termination": "exited", "exit_code": 124}
        return answer


@mutant("sketch-create-overwrites")
class SketchCreateOverwrites(SketchHostPlugin):
    """Accepts a second create by silently replacing its one sandbox (as the forkd plugin does: it keeps one
    id), serves any id with the sandbox it has now, and describes statically, echoing the id asked for."""

    def owned(self, params: dict[str, Any]) -> Any:
        if self.sandbox is None:
            raise RpcFailure(INVALID_STATE, "sandbox not yet created")
        return self.sandbox

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        if self.sandbox is not None:
            self.backend.delete(self.sandbox.id)  # gone without a word (forkd would even leave it running)
            self.sandbox = None
        return super().m_sandbox_create(params)

    def m_sandbox_describe(self, params: dict[str, Any]) -> Any:
        sandbox = self.owned(params)
        alive = sandbox.state == "running"
        return {"id": params.get("id"), "state": sandbox.state, "liveness": "alive" if alive else "gone"}


@mutant("sketch-many-sandboxes")
class SketchManySandboxes(SketchHostPlugin):
    """Control: a sketch plugin that owns any number of sandboxes per process (the adapter must notice)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.owned_sandboxes: dict[str, Any] = {}

    def owned(self, params: dict[str, Any]) -> Any:
        sandbox = self.owned_sandboxes.get(params.get("id", ""))
        if sandbox is None:
            raise RpcFailure(INVALID_STATE, f"no such sandbox in this process: {params.get('id')}")
        return sandbox

    def m_sandbox_create(self, params: dict[str, Any]) -> Any:
        self.sandbox = None  # every create makes another sandbox in this same process
        answer = super().m_sandbox_create(params)
        self.owned_sandboxes[answer["id"]] = self.sandbox
        return answer

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        if params["id"] in self.owned_sandboxes:
            self.backend.delete(params["id"])
        return {"id": params["id"], "deleted": True}

    def m_exec(self, params: dict[str, Any]) -> Any:
        self.sandbox = self.owned(params)
        return super().m_exec(params)


@mutant("sketch-ignores-sandbox-id")
class SketchIgnoresSandboxId(SketchHostPlugin):
    """Acts on its own sandbox whatever id a call names (as the forkd plugin does): an exec for another id
    runs in it, and a delete of another id deletes it."""

    def owned(self, params: dict[str, Any]) -> Any:
        return super().owned({key: value for key, value in params.items() if key != "id"})

    def m_sandbox_delete(self, params: dict[str, Any]) -> Any:
        if self.sandbox is not None:
            return super().m_sandbox_delete({**params, "id": self.sandbox.id})
        return super().m_sandbox_delete(params)
