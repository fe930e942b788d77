"""What every JSON-RPC dialect shares: schema-driven message rules and the handshake bookkeeping of an
adapter that talks to a plugin over a ``JsonRpcConnection``."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from conformance import schemas
from conformance.adapter import (
    Capabilities,
    ProviderAdapter,
    ProviderIdentity,
    SandboxStatus,
    Wire,
    WireVocabulary,
)
from conformance.dialects.jsonrpc import JsonRpcConnection, JsonRpcRaw, Violation
from conformance.errors import (
    ConformanceError,
    NotExpressible,
    ProtocolErrorAnswer,
    ProviderCallError,
    ProviderStartError,
)
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


# How long closing a provider waits for the answer to its shutdown (never longer than a call may take).
SHUTDOWN_AT_CLOSE_S = 2.0


class SchemaRules:
    """Message checks read from ``schemas/<folder>/``: ``envelope.json`` for the message forms and
    ``methods/<method>.json`` for params and results. Dialects add notifications and errors."""

    folder = ""
    # The longest line a peer may send, newline excluded; None: no limit of the protocol's own (the
    # connection then applies the run's --max-message-bytes, or DEFAULT_MAX_MESSAGE_BYTES).
    max_message_bytes: int | None = None

    def __init__(self) -> None:
        self._envelope = schemas.schema_path(self.folder, "envelope.json")
        self._notification_methods = _notification_methods(self._envelope) if self.folder else frozenset()

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
        if form == "Success" and _plainly_success(message):
            return []
        if form == "Notification" and _plainly_notification(message, self._notification_methods):
            return []
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

    def checked_notification(self, method: str, params: Any) -> tuple[list[SchemaProblem], bytes | None]:
        """The notification's schema problems, and its payload's bytes when checking it decoded them."""
        return self.notification_problems(method, params), None

    def notification_route(self, method: str, params: Any) -> tuple[str, str] | None:
        return None

    def error_answer(self, method: str, error: dict[str, Any]) -> ProviderCallError:
        return protocol_error(method, error)


# Fast paths for the messages nearly every line is (an answer, a notification). Each says "valid" only
# when the envelope schema would, and otherwise hands the message to the schema, which decides and
# explains; tests/test_hostile_wire.py runs both over the schema examples and mutations of them.


def _notification_methods(envelope: str) -> frozenset[str]:
    """The notification methods the envelope's Notification form lists (empty: no fast path)."""
    contents = schemas.registry().resolver().lookup(f"{envelope}#/$defs/Notification").contents
    method = contents.get("properties", {}).get("method", {}) if isinstance(contents, dict) else {}
    enum = method.get("enum") if isinstance(method, dict) else None
    return frozenset(m for m in enum if isinstance(m, str)) if isinstance(enum, list) else frozenset()


def _plainly_success(message: Any) -> bool:
    request_id = message.get("id")
    return (type(message.get("jsonrpc")) is str and message["jsonrpc"] == "2.0"
            and type(request_id) is int and request_id >= 0
            and "result" in message and "error" not in message and "method" not in message)


def _plainly_notification(message: Any, methods: frozenset[str]) -> bool:
    method = message.get("method")
    return (type(message.get("jsonrpc")) is str and message["jsonrpc"] == "2.0"
            and type(method) is str and method in methods and "params" in message
            and "id" not in message and "result" not in message and "error" not in message)


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

    def list_params(self, labels: Mapping[str, str] | None) -> Any:
        return self._adapter.list_params_as_given(labels)

    def described(self, answer: Any) -> SandboxStatus:
        return self._adapter.read_described(answer)

    def listed(self, answer: Any) -> list[SandboxStatus]:
        return self._adapter.read_listed(answer)

    def hold_reading(self, seconds: float) -> None:
        self._adapter.connection.hold_reading(seconds)

    def close_input(self) -> None:
        self.keep_messages().close_input()

    def wait_exit(self, timeout_s: float) -> int | None:
        return self.keep_messages().wait_exit(timeout_s)

    @property
    def ended_mid_call(self) -> bool:
        return self._adapter.connection.ended_mid_call

    def wait_output_closed(self, timeout_s: float) -> bool:
        # The reader hands on every line before it marks the connection closed.
        deadline = time.monotonic() + timeout_s
        while not self._adapter.connection.closed:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True


class JsonRpcAdapter(ProviderAdapter):
    """An adapter whose provider is a JSON-RPC plugin: identity and capabilities come from the first
    successful ``initialize`` answer; diagnostics come from the control connection."""

    version_key = "protocol_version"  # where the initialize answer names its protocol version
    capability_flags: Callable[[Any], dict[str, bool]] = staticmethod(lambda raw: {})
    isolation_of: Callable[[Any], str | None] = staticmethod(lambda raw: None)
    capability_spellings: Mapping[str, tuple[str, ...]] = {}  # canonical name -> other spellings of it
    vocabulary: WireVocabulary  # each dialect names its own

    def __init__(self, connection: JsonRpcConnection, command: str, call_timeout_s: float) -> None:
        super().__init__()
        self.connection = connection
        self.command = command
        self.call_timeout_s = call_timeout_s
        self.handshake_problems: list[Any] = []  # of the latest initialize answer (the wire facet shows them)
        self.initialize_result: Any = None  # the first successful initialize answer
        self.negotiation = ""  # how the dialect was settled, for the identity (set by whoever opened it)
        self.negotiation_detail = ""  # the refusal that settled it, in the plugin's words
        self._identity: ProviderIdentity | None = None
        self._capabilities: Capabilities | None = None
        self.wire: JsonRpcWire = JsonRpcWire(self, self.vocabulary)
        connection.add_observer(self._observe)

    # How raw probes build a list request and read core answers (the wire facet's list_params, described and
    # listed): a dialect with those methods says how; the others cannot express them.

    def list_params_as_given(self, labels: Mapping[str, str] | None) -> Any:
        raise NotExpressible(self.dialect, "a list request with its label filter as given")

    def read_described(self, answer: Any) -> SandboxStatus:
        raise NotExpressible(self.dialect, "a describe answer received raw")

    def read_listed(self, answer: Any) -> list[SandboxStatus]:
        raise NotExpressible(self.dialect, "a list answer received raw")

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
        self._capabilities = Capabilities(raw, type(self).capability_flags(raw), self.capability_spellings,
                                          isolation=type(self).isolation_of(raw))

    @property
    def identity(self) -> ProviderIdentity:
        if self._identity is None:
            raise ProviderStartError("the provider has not completed its handshake")
        return replace(self._identity, negotiation=self.negotiation, negotiation_detail=self.negotiation_detail)

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

    # The dialect's rule that a plugin exits once its input closes, cited when one had to be killed.
    exit_on_input_closed_rule: str | None = None
    # The dialect's rule that a plugin answers shutdown and exits; set where the suite ends a provider as
    # a host does, with a shutdown before closing its input (None: the input is only closed).
    shutdown_rule: str | None = None

    def close(self) -> None:
        if self._close_noted:  # closed before (cleanup may reach one adapter twice): findings once
            return
        shutdown_asked = self._ask_shutdown()
        self.connection.close()
        self._close_noted = True
        self._note_close(getattr(self.connection.transport, "close_outcome", None), shutdown_asked)

    _close_noted = False

    def _ask_shutdown(self) -> bool:
        """Send shutdown, as a host ends a plugin, unless a scenario sent one or the provider is gone; the
        answer is not judged here (session.feature judges it), only waited for, briefly."""
        if self.shutdown_rule is None or self.connection.shutdown_sent or not self.alive:
            return False
        try:
            self.connection.call("shutdown", None, timeout_s=min(SHUTDOWN_AT_CLOSE_S, self.call_timeout_s))
        except ConformanceError:  # an error answer, no answer, or it could not be sent: the close goes on
            pass
        return self.connection.shutdown_sent  # only a shutdown the provider was sent is cited

    def _note_close(self, outcome: Any, shutdown_asked: bool = False) -> None:
        """A plugin that had to be killed at close, or that left processes holding its output, is a
        violation of the connection, taken after the close (``take_violations``) like any other."""
        if outcome is None:
            return
        if not outcome.exited_on_eof:
            rules = [rule for rule in (self.shutdown_rule if shutdown_asked else None,
                                       self.exit_on_input_closed_rule) if rule]
            cited = f" ({'; '.join(rules)})" if rules else ""
            asked = "a shutdown and " if shutdown_asked else ""
            self.connection._violation(
                f"the provider did not exit within {outcome.grace_s:g}s of {asked}its input closing{cited}; "
                f"the suite ended it with {outcome.forced}")
        if outcome.leftovers:
            self.connection._violation(
                "the provider exited leaving processes outside its process group that hold its output open "
                "(the suite stopped reading them; the end of the run ends what still runs): "
                f"{'; '.join(outcome.leftovers)}")
