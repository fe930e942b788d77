"""What the fabro-sketch dialect knows about its messages: schemas, errors, capability names."""

from __future__ import annotations

from typing import Any

from conformance import schemas
from conformance.errors import ApplicationErrorAnswer, ProtocolErrorAnswer, ProviderCallError
from conformance.schemas import SchemaProblem

NAME = "fabro-sketch"
FOLDER = "fabro-sketch"
PROTOCOL_VERSION = 1
UNSUPPORTED_CODE = -32001
UNSUPPORTED_MESSAGE = "this sandbox provider does not support it"

# Sketch error codes → the protocol-neutral kinds the steps judge.
_KINDS = {UNSUPPORTED_CODE: "unsupported", -32602: "invalid_state", -32603: "provider"}
# Sketch capability flags that mean the same as a canonical sandbox-driver name.
_ALIASES = {"access.preview_urls": "previewUrls"}


def capability_flags(raw: Any) -> dict[str, bool]:
    """Every boolean leaf of the sketch's declaration by its dotted path, plus canonical aliases."""
    flags: dict[str, bool] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, bool):
            flags[prefix] = value
        elif isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else key, inner)

    if isinstance(raw, dict):
        walk("", raw)
    for name, wire in _ALIASES.items():
        flags[name] = flags.get(wire, False)
    return flags


def method_ref(method: str, part: str) -> str:
    return schemas.schema_path(FOLDER, "methods", f"{method.replace('/', '.')}.json") + f"#/$defs/{part}"


class SketchRules:
    """Schema checks and error normalization for sketch messages."""

    def __init__(self) -> None:
        self._envelope = schemas.schema_path(FOLDER, "envelope.json")

    def envelope_problems(self, message: Any) -> list[SchemaProblem]:
        form = "FromPlugin"
        if isinstance(message, dict):
            if "method" in message and "id" not in message:
                form = "Notification"
            elif "error" in message:
                form = "Failure"
            elif "result" in message:
                form = "Success"
        return schemas.problems(f"{self._envelope}#/$defs/{form}", message)

    def params_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        ref = method_ref(method, "params")
        return schemas.problems(ref, params) if schemas.exists(ref) else []

    def result_problems(self, method: str, result: Any) -> list[SchemaProblem]:
        ref = method_ref(method, "result")
        return schemas.problems(ref, result) if schemas.exists(ref) else []

    def notification_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        return []

    def notification_route(self, method: str, params: Any) -> tuple[str, str] | None:
        return None

    def error_answer(self, method: str, error: dict[str, Any]) -> ProviderCallError:
        code = error.get("code")
        message = str(error.get("message", ""))
        kind = _KINDS.get(code) if isinstance(code, int) else None
        if kind is None:
            return ProtocolErrorAnswer(method=method, code=code if isinstance(code, int) else None, message=message,
                                       data=error.get("data"))
        return ApplicationErrorAnswer(method=method, code=code, message=message, data=error.get("data"), kind=kind)


def looks_like(initialize_result: Any) -> bool:
    """Does an ``initialize`` answer come from a sketch plugin?"""
    return isinstance(initialize_result, dict) and "protocolVersion" in initialize_result
