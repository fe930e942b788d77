"""What every JSON-RPC dialect shares: schema-driven message rules and the handshake bookkeeping of an
adapter that talks to a plugin over a ``JsonRpcConnection``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from conformance import schemas
from conformance.adapter import Capabilities, ProviderAdapter, ProviderIdentity, Wire, WireVocabulary
from conformance.dialects.jsonrpc import JsonRpcConnection, JsonRpcRaw, Violation
from conformance.errors import ProtocolErrorAnswer, ProviderCallError, ProviderStartError
from conformance.schemas import SchemaProblem


def boolean_leaves(raw: Any) -> dict[str, bool]:
    """Every boolean leaf of a capability declaration by its dotted path (``exec.stdin``)."""
    flags: dict[str, bool] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, bool):
            flags[prefix] = value
        elif isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else key, inner)

    if isinstance(raw, dict):
        walk("", raw)
    return flags


def protocol_error(method: str, error: dict[str, Any]) -> ProtocolErrorAnswer:
    """A JSON-RPC level error answer, as any dialect reads it."""
    code = error.get("code")
    return ProtocolErrorAnswer(method=method, code=code if isinstance(code, int) else None,
                               message=str(error.get("message", "")), data=error.get("data"))


class SchemaRules:
    """Message checks read from ``schemas/<folder>/``: ``envelope.json`` for the message forms and
    ``methods/<method>.json`` for params and results. Dialects add notifications and errors."""

    folder = ""

    def __init__(self) -> None:
        self._envelope = schemas.schema_path(self.folder, "envelope.json")

    def method_ref(self, method: str, part: str) -> str:
        return schemas.schema_path(self.folder, "methods", f"{method.replace('/', '.')}.json") + f"#/$defs/{part}"

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

    def _method_problems(self, method: str, part: str, instance: Any) -> list[SchemaProblem]:
        ref = self.method_ref(method, part)
        return schemas.problems(ref, instance) if schemas.exists(ref) else []

    def params_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        return self._method_problems(method, "params", params)

    def result_problems(self, method: str, result: Any) -> list[SchemaProblem]:
        return self._method_problems(method, "result", result)

    def notification_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        return []

    def notification_route(self, method: str, params: Any) -> tuple[str, str] | None:
        return None

    def error_answer(self, method: str, error: dict[str, Any]) -> ProviderCallError:
        return protocol_error(method, error)


class JsonRpcWire(Wire):
    """The ``wire`` facet of a JSON-RPC adapter: its handshake record, a raw channel on its (control)
    connection, and the dialect's vocabulary.

    The raw channel starts keeping every inbound message the first time it is used (or when
    ``keep_messages`` is called), for the rest of the connection's life; reading the handshake record
    does not.
    """

    def __init__(self, adapter: JsonRpcAdapter, vocabulary: WireVocabulary) -> None:
        self._adapter = adapter
        self.vocabulary = vocabulary
        self._raw: JsonRpcRaw | None = None

    @property
    def handshake_problems(self) -> list[Any]:
        return self._adapter.handshake_problems

    @property
    def initialize_result(self) -> Any:
        return self._adapter.initialize_result

    def keep_messages(self) -> JsonRpcRaw:
        """Start keeping every inbound message for ``next_message`` (idempotent)."""
        if self._raw is None:
            self._raw = JsonRpcRaw(self._adapter.connection)
        return self._raw

    def send_line(self, line: bytes) -> None:
        self.keep_messages().send_line(line)

    def call(self, method: str, params: Any, timeout_s: float = 10.0) -> Any:
        return self.keep_messages().call(method, params, timeout_s)

    def notify(self, method: str, params: Any) -> None:
        self.keep_messages().notify(method, params)

    def next_message(self, timeout_s: float) -> Any:
        return self.keep_messages().next_message(timeout_s)

    def close_input(self) -> None:
        self.keep_messages().close_input()

    def wait_exit(self, timeout_s: float) -> int | None:
        return self.keep_messages().wait_exit(timeout_s)


class JsonRpcAdapter(ProviderAdapter):
    """An adapter whose provider is a JSON-RPC plugin: identity and capabilities come from the first
    successful ``initialize`` answer; diagnostics come from the control connection."""

    version_key = "protocol_version"  # where the initialize answer names its protocol version
    capability_flags: Callable[[Any], dict[str, bool]] = staticmethod(lambda raw: {})
    capability_spellings: Mapping[str, tuple[str, ...]] = {}  # canonical name -> other spellings of it
    vocabulary: WireVocabulary  # each dialect names its own

    def __init__(self, connection: JsonRpcConnection, command: str, call_timeout_s: float) -> None:
        super().__init__()
        self.connection = connection
        self.command = command
        self.call_timeout_s = call_timeout_s
        self.handshake_problems: list[Any] = []  # of the latest initialize answer (the wire facet shows them)
        self.initialize_result: Any = None  # the first successful initialize answer
        self._identity: ProviderIdentity | None = None
        self._capabilities: Capabilities | None = None
        self.wire: JsonRpcWire = JsonRpcWire(self, self.vocabulary)
        connection.add_observer(self._observe)

    def adopt_initialize(self, result: Any) -> None:
        """Take identity and capabilities from an initialize answer (the first successful one wins);
        keep its schema problems for the handshake scenarios."""
        self.handshake_problems = self.connection.rules.result_problems("initialize", result)
        if not isinstance(result, dict):
            raise ProviderStartError(f"initialize answered {result!r}, not an object")
        if self._identity is not None:
            return
        self.initialize_result = result
        provider = result.get("provider") if isinstance(result.get("provider"), dict) else {}
        self._identity = ProviderIdentity(
            kind=str(provider.get("kind", "")), version=str(provider.get("version", "")),
            protocol_version=result.get(self.version_key), dialect=self.dialect, transport="stdio",
            command=self.command,
        )
        raw = result.get("capabilities")
        self._capabilities = Capabilities(raw, type(self).capability_flags(raw), self.capability_spellings)

    @property
    def identity(self) -> ProviderIdentity:
        if self._identity is None:
            raise ProviderStartError("the provider has not completed its handshake")
        return self._identity

    @property
    def capabilities(self) -> Capabilities:
        if self._capabilities is None:
            raise ProviderStartError("the provider has not completed its handshake")
        return self._capabilities

    def stderr_tail(self, since: int | None = None) -> str:
        return self.connection.transport.stderr_tail(since)

    def stderr_position(self) -> int:
        return self.connection.transport.stderr_position()

    def take_violations(self) -> list[Violation]:
        return self.connection.take_violations()

    @property
    def alive(self) -> bool:
        return not self.connection.closed and self.connection.transport.alive

    def close(self) -> None:
        self.connection.close()
