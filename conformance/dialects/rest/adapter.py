"""A REST provider behind the shared adapter, driven by its profile.

The profile says which HTTP request each neutral operation is and how to read the answer; this module
turns answers into the neutral shapes: statuses into ``ApplicationErrorAnswer`` kinds, an exec answer
into a result, a timeout signal into termination ``timed_out``, a missing sandbox into an ``infra``
outcome. What the profile maps nothing onto is not expressible.
"""

from __future__ import annotations

import math
import os
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

from conformance.adapter import (
    Capabilities,
    EventRoute,
    ExecOutcome,
    ExecRequest,
    HealthInfo,
    ProviderAdapter,
    ProviderIdentity,
    SandboxHandle,
    SandboxRequest,
    SandboxStatus,
)
from conformance.adapter import Credentials as CredentialsFacet
from conformance.dialects.commands import bash_argv, shell_string
from conformance.dialects.rest import templates
from conformance.dialects.rest.profile import CREATE_PLACEHOLDERS, Operation, Profile
from conformance.errors import (
    ApplicationErrorAnswer,
    CallTimeout,
    HarnessError,
    NotExpressible,
    ProviderCrashed,
    ProviderStartError,
    SchemaViolation,
    UsageError,
    WireViolation,
)
from conformance.transcript import REDACTOR
from conformance.transports.http import Credentials, HttpAnswer, HttpTransport, RetryPolicy

NAME = "rest"
PREVIEW_CHARS = 300
AUTH_STATUSES = (401, 403)


def status_kind(status: int) -> str:
    """The neutral error kind an HTTP status stands for."""
    if status in AUTH_STATUSES:
        return "auth"
    kinds = {404: "not_found", 400: "invalid_spec", 422: "invalid_spec", 408: "timeout", 409: "invalid_state",
             429: "rate_limited", 501: "unsupported"}
    if status in kinds:
        return kinds[status]
    return "provider" if status >= 500 else "unknown"


def read_token(profile: Profile, environ: Mapping[str, str] | None = None) -> str | None:
    """The token from the variable the profile names; ``UsageError`` when it is unset or empty."""
    if profile.auth_scheme == "none":
        return None
    environ = os.environ if environ is None else environ
    token = environ.get(profile.token_env or "")
    if not token:
        raise UsageError(f"{profile.source} reads its token from the environment variable {profile.token_env}, "
                         "which is not set")
    REDACTOR.add(token)
    return token


class RestAdapter(ProviderAdapter):
    """One REST provider reached through ``transport`` as ``profile`` describes it."""

    dialect = NAME
    capabilities_without_method = {"lifecycle.stop": "stop a sandbox"}  # no profile operation stops one

    def __init__(self, profile: Profile, transport: HttpTransport, run_labels: Mapping[str, str] | None = None,
                 base_spec: Mapping[str, Any] | None = None, call_timeout_s: float = 30.0,
                 call_timeout_given: bool = False) -> None:
        super().__init__()
        self.profile = profile
        self.transport = transport
        self.run_labels = dict(run_labels or {})
        self.base_spec = dict(base_spec or {})
        self.request_timeout_s = request_timeout(profile, call_timeout_s, call_timeout_given)
        self._version = "unknown"
        self._closed = threading.Event()
        self.credentials = RestCredentials(self)
        transport.add_observer(self._observe)

    @property
    def exec_reports(self) -> frozenset[str]:  # type: ignore[override]
        """Text stdout/stderr and an exit code; a signal only where the profile says how one is answered.
        Never a duration or a stage."""
        profile = self.profile
        return frozenset({"signal"}) if profile.signal or profile.negative_exit_code == "signal" else frozenset()

    # -- identity, capabilities and the handshake ------------------------------------------------

    @property
    def identity(self) -> ProviderIdentity:
        return ProviderIdentity(kind=self.profile.name, version=self._version, protocol_version=None,
                                dialect=NAME, transport="http", command=self.transport.base_url)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(self.profile.capabilities, dict(self.profile.capabilities))

    def handshake(self, protocol_version: Any = None, timeout_s: float | None = None, strict: bool = True) -> Any:
        raise NotExpressible(NAME, "an initialize handshake (REST has none; its health check stands in)")

    def connect(self) -> None:
        """The health check, then a probe that the provider accepts the token.

        Raises ``ProviderStartError`` naming the URL when the provider cannot be reached, is not healthy,
        or refuses the token.
        """
        url = self.transport.base_url
        health = self.profile.health
        try:
            answer = self._send(health, idempotent=True)
        except (CallTimeout, ProviderCrashed) as exc:
            raise ProviderStartError(f"the REST provider at {url} cannot be reached: {exc}") from None
        except WireViolation as exc:  # an answer past the body cap
            raise ProviderStartError(f"the REST provider at {url} is not healthy: {exc}") from None
        if answer.status not in health.success:
            raise ProviderStartError(f"the REST provider at {url} is not healthy: {health.method} {health.path} "
                                     f"answered HTTP {answer.status} (expected {_listed(health.success)})"
                                     f"{self._quoted_error(answer)}")
        if self.profile.health_version:
            found, version = templates.resolve(_json_or_none(answer), self.profile.health_version)
            if found and isinstance(version, str | int | float) and str(version):
                self._version = str(version)
        if self.profile.auth_scheme == "none":
            return
        probe = self._credentials_probe()
        if probe is not None and probe.status in AUTH_STATUSES:
            raise ProviderStartError(
                f"the REST provider at {url} refused the token from ${self.profile.token_env}: "
                f"{probe.method} {probe.url.removeprefix(url)} answered HTTP {probe.status}{self._quoted_error(probe)}")

    def _credentials_probe(self) -> HttpAnswer | None:
        """A request that needs the token and changes nothing: a list, else a get of an id nobody has."""
        try:
            if self.profile.list is not None:
                return self._send(self.profile.list, idempotent=True)
            if self.profile.get is not None:
                return self._send(self.profile.get, {"id": "sandbox-conformance-credentials-probe"}, idempotent=True)
        except (CallTimeout, ProviderCrashed) as exc:
            raise ProviderStartError(f"the REST provider at {self.transport.base_url} stopped answering: {exc}") from None
        except WireViolation as exc:  # an answer past the body cap
            raise ProviderStartError(f"the REST provider at {self.transport.base_url} answered the token check "
                                     f"badly: {exc}") from None
        return None

    def health(self) -> HealthInfo:
        health = self.profile.health
        try:
            answer = self._send(health, idempotent=True)
        except (CallTimeout, ProviderCrashed) as exc:
            return HealthInfo("unreachable", str(exc))
        except WireViolation as exc:  # an answer past the body cap
            return HealthInfo("unknown", str(exc))
        if answer.status in health.success:
            return HealthInfo("ok", None, _json_or_none(answer))
        status = "unauthorized" if answer.status in AUTH_STATUSES else "unknown"
        return HealthInfo(status, f"HTTP {answer.status}{self._quoted_error(answer)}", _json_or_none(answer))

    # -- sandboxes -------------------------------------------------------------------------------

    def create(self, request: SandboxRequest) -> SandboxHandle:
        if request.events is not None:
            raise NotExpressible(NAME, "control-plane events")
        asked = {"from_snapshot": request.from_snapshot, "memory_mb": request.memory_mb,
                 "cpu_cores": request.cpu_cores, "name": request.name, "labels": request.labels or None,
                 "env": request.env or None, "network": request.network}
        wanted = [name for name, value in asked.items() if value is not None and name not in self.profile.create_fields]
        wanted += sorted(set(request.extra) - self.profile.create_extra)
        if wanted:
            raise NotExpressible(NAME, f"creating a sandbox with {', '.join(wanted)} (profile {self.profile.name} "
                                       "maps no field onto it)")
        values = {placeholder: asked[field] for placeholder, field in CREATE_PLACEHOLDERS.items()}
        if self.profile.supports_labels:
            values["labels"] = {**self.run_labels, **request.labels}  # the run label only where labels exist
        body = self._fill("create", self.profile.create.body, values)
        defaults = self.profile.create_defaults
        if defaults or self.base_spec or request.extra:
            if not isinstance(body, dict):
                raise UsageError(f"{self.profile.source}: create.body must be an object to carry extra fields")
            # weakest first: the profile's defaults, then --create-spec, the scenario's fields, its extra fields
            body = {**defaults, **self.base_spec, **body, **request.extra}
        answer = self._create_when_ready(body)
        if answer.status not in self.profile.create.success:
            raise self._error("create", answer, sent=body)
        document = self._json(answer, "the create answer")
        pointer, sandbox_id = templates.first(document, self.profile.create_id)
        if not isinstance(sandbox_id, str | int) or isinstance(sandbox_id, bool) or str(sandbox_id) == "":
            where = pointer or " or ".join(self.profile.create_id)
            raise SchemaViolation(f"the create answer (HTTP {answer.status})", where,
                                  f"no sandbox id at {where} (found {sandbox_id!r})", document)
        sandbox_id = str(sandbox_id)
        self.ledger.record_created(sandbox_id, self.owner)
        state = self._state(document, self.profile.create_state, self.profile.get_default_state)
        status = SandboxStatus(sandbox_id, state, labels=dict(values.get("labels") or {}), raw=document)
        return SandboxHandle(id=sandbox_id, status=status, working_directory=None, runtime_directory=None,
                             capabilities=None, raw=document)

    def _create_when_ready(self, body: Any) -> HttpAnswer:
        """Send the create; while it is answered "not ready yet" (a status the profile lists under
        create.not_ready, which creates nothing), send it again after a growing pause, up to the
        profile's wait. The last answer is the create's."""
        profile = self.profile
        deadline = time.monotonic() + profile.create_not_ready_wait_s
        pause = 0.2
        while True:
            answer = self._send(profile.create, body=body)
            if answer.status not in profile.create_not_ready or self._closed.is_set():
                return answer
            left = deadline - time.monotonic()
            if left <= 0:
                return answer
            self._closed.wait(min(pause, left))
            pause = min(pause * 2, 2.0)

    def describe(self, sandbox_id: str) -> SandboxStatus:
        get = self.profile.get
        if get is None:
            raise NotExpressible(NAME, f"describing a sandbox (profile {self.profile.name} has no get)")
        answer = self._send(get, {"id": sandbox_id}, idempotent=True)
        if answer.status not in get.success:
            raise self._error("describe", answer, missing=get.gone)
        document = self._json(answer, "the get answer")
        found_id = sandbox_id
        if self.profile.get_id:
            pointer, value = templates.first(document, self.profile.get_id)
            if pointer is None or not isinstance(value, str | int) or isinstance(value, bool):
                raise SchemaViolation(f"the get answer (HTTP {answer.status})", " or ".join(self.profile.get_id),
                                      "no sandbox id", document)
            found_id = str(value)
        state = self._state(document, self.profile.get_state, self.profile.get_default_state)
        return SandboxStatus(found_id, state, raw=document)

    def attach(self, sandbox_id: str, events: EventRoute | None = None) -> SandboxHandle:
        """A REST provider needs no session with a sandbox: attaching is getting it by its id."""
        if events is not None:
            raise NotExpressible(NAME, "control-plane events")
        status = self.describe(sandbox_id)
        return SandboxHandle(id=status.id, status=status, working_directory=None, runtime_directory=None,
                             capabilities=None, raw=status.raw)

    def list(self, labels: Mapping[str, str] | None = None) -> list[SandboxStatus]:
        operation = self.profile.list
        if operation is None:
            raise NotExpressible(NAME, f"listing sandboxes (profile {self.profile.name} has no list)")
        if labels and self.profile.list_labels is None:
            raise NotExpressible(NAME, f"listing sandboxes by labels (profile {self.profile.name} reads no labels)")
        answer = self._send(operation, idempotent=True)
        if answer.status not in operation.success:
            raise self._error("list", answer)
        document = self._json(answer, "the list answer")
        found, items = templates.resolve(document, self.profile.list_items)
        if not found or not isinstance(items, list):
            raise SchemaViolation(f"the list answer (HTTP {answer.status})", self.profile.list_items or "/",
                                  "not an array of sandboxes", document)
        statuses = []
        for index, item in enumerate(items):
            has_id, sandbox_id = templates.resolve(item, self.profile.list_id)
            if not has_id or not isinstance(sandbox_id, str | int) or isinstance(sandbox_id, bool):
                raise SchemaViolation(f"the list answer (HTTP {answer.status})",
                                      f"{self.profile.list_items}/{index}{self.profile.list_id}", "no sandbox id", document)
            item_labels: dict[str, str] = {}
            if self.profile.list_labels is not None:
                _found, value = templates.resolve(item, self.profile.list_labels)
                item_labels = {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
            if labels and any(item_labels.get(k) != v for k, v in labels.items()):
                continue
            state = self._state(item, self.profile.list_state, self.profile.list_default_state)
            statuses.append(SandboxStatus(str(sandbox_id), state, labels=item_labels, raw=item))
        return statuses

    def delete(self, sandbox_id: str, events: EventRoute | None = None) -> None:
        if events is not None:
            raise NotExpressible(NAME, "control-plane events")
        operation = self.profile.delete
        answer = self._send(operation, {"id": sandbox_id}, idempotent=True)
        if answer.status not in operation.success and answer.status not in operation.gone:
            raise self._error("delete", answer)
        self.ledger.record_deleted(sandbox_id)

    # -- exec ------------------------------------------------------------------------------------

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecOutcome:
        profile = self.profile
        argv = bash_argv(request, NAME, fold_working_dir=profile.exec_working_dir == "fold",
                         fold_env=profile.exec_env == "fold")
        values: dict[str, Any] = {
            "id": sandbox_id,
            "command": argv if profile.exec_command == "argv" else shell_string(argv),
            "timeout": self._timeout_value(request.timeout_s),
            "working_dir": request.working_dir if profile.exec_working_dir == "field" else None,
            "env": dict(request.env) or None if profile.exec_env == "field" else None,
        }
        body = self._fill("exec", profile.exec.body, values)
        deadline_s = values["timeout"] / (1 if profile.timeout_unit == "s" else 1000)  # the deadline as sent
        # read until the provider's own timeout answer can have come (forkd 0.5.2's comes 5 s late), and then
        # the request timeout: a short --call-timeout must not cut a timeout answer off
        read_for_s = max(request.timeout_s, deadline_s) + profile.timeout_answer_late_s + self.request_timeout_s
        sent = time.monotonic()
        answer = self._send(profile.exec, values, body=body, timeout_s=read_for_s)
        elapsed_s = time.monotonic() - sent
        success = answer.status in profile.exec.success
        if any(signal.matches(answer.status, answer.text, success, elapsed_s, deadline_s)
               for signal in profile.timed_out):
            document = _json_or_none(answer)
            return ExecOutcome("ran", "timed_out", None, None, self._stream(document, profile.stdout),
                               self._stream(document, profile.stderr), None, raw=document)
        if not success:
            error = self._error("exec", answer, missing=profile.missing)
            return ExecOutcome("infra", None, None, None, b"", b"", None, error=error, raw=_json_or_none(answer))
        document = self._json(answer, "the exec answer")
        found, exit_code = templates.resolve(document, profile.exit_code)
        if not found or not (exit_code is None or (isinstance(exit_code, int) and not isinstance(exit_code, bool))):
            raise SchemaViolation(f"the exec answer (HTTP {answer.status})", profile.exit_code,
                                  f"the exit code must be an integer (found {exit_code!r})", document)
        signal = self._signal(document, exit_code)
        if signal is not None:
            exit_code = None  # ended by a signal: the program gave no exit code
        termination = "killed" if signal is not None else "exited" if exit_code is not None else "unknown"
        return ExecOutcome(
            outcome="ran", termination=termination, exit_code=exit_code,
            signal=signal, stdout=self._stream(document, profile.stdout, required=True),
            stderr=self._stream(document, profile.stderr, required=True), duration_s=None, raw=document,
        )

    def _signal(self, document: Any, exit_code: int | None) -> int | None:
        """The signal that ended the command, where the profile says how an answer names one: a field
        (``exec.signal``), or a negative exit code (``exec.negative_exit_code: signal``)."""
        profile = self.profile
        if profile.signal is not None:
            found, value = templates.resolve(document, profile.signal)
            if found and value is not None:
                if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                    raise SchemaViolation("the exec answer", profile.signal,
                                          f"the signal must be a positive integer (found {value!r})", document)
                return value
        if profile.negative_exit_code == "signal" and exit_code is not None and exit_code < 0:
            return -exit_code
        return None

    def _timeout_value(self, timeout_s: float) -> int:
        scaled = timeout_s if self.profile.timeout_unit == "s" else timeout_s * 1000
        return max(self.profile.timeout_minimum, math.ceil(scaled - 1e-9))

    def _stream(self, document: Any, pointer: str | None, required: bool = False) -> bytes:
        if pointer is None:
            return b""
        found, value = templates.resolve(document, pointer)
        if not found or value is None:
            if required:
                raise SchemaViolation("the exec answer", pointer, "missing", document)
            return b""
        if not isinstance(value, str):
            raise SchemaViolation("the exec answer", pointer, f"output must be a string (found {type(value).__name__})",
                                  document)
        return value.encode("utf-8")

    # -- requests and answers --------------------------------------------------------------------

    def _send(self, operation: Operation, values: Mapping[str, Any] | None = None, body: Any = None,
              idempotent: bool = False, timeout_s: float | None = None) -> HttpAnswer:
        path = templates.fill_path(operation.path, values or {})
        return self.transport.request(operation.method, path, body, idempotent=idempotent,
                                      timeout_s=timeout_s or self.request_timeout_s)

    def _fill(self, operation: str, template: Any, values: Mapping[str, Any]) -> Any:
        try:
            return templates.fill(template, values)
        except templates.TemplateError as exc:
            raise HarnessError(f"{self.profile.source}: {operation}.body: {exc}") from None

    def _json(self, answer: HttpAnswer, what: str) -> Any:
        try:
            return answer.json()
        except ValueError:
            raise SchemaViolation(f"{what} (HTTP {answer.status})", "/", "the body is not JSON",
                                  answer.text[:PREVIEW_CHARS]) from None

    @staticmethod
    def _state(document: Any, pointer: str | None, default: str) -> str:
        if pointer is not None:
            found, value = templates.resolve(document, pointer)
            if found and isinstance(value, str) and value:
                return value
        return default

    def _message(self, answer: HttpAnswer) -> str | None:
        found, value = templates.resolve(_json_or_none(answer), self.profile.error_message)
        return value if found and isinstance(value, str) and value.strip() else None

    def _quoted_error(self, answer: HttpAnswer) -> str:
        message = self._message(answer)
        return f": {message}" if message else ""

    def _error(self, operation: str, answer: HttpAnswer, missing: tuple[int, ...] = (),
               sent: Any = None) -> ApplicationErrorAnswer:
        """An error answer in the neutral taxonomy: the kind from the status (``missing`` statuses mean
        not_found), the message from the body's error field."""
        kind = "not_found" if answer.status in missing else status_kind(answer.status)
        message = self._message(answer)
        detail: dict[str, Any] = {}
        if message is None:
            detail["body"] = answer.text[:PREVIEW_CHARS] or "(empty)"  # no error field to read
        if kind == "invalid_spec" and isinstance(sent, dict):
            named = self._named_field(sent, message or answer.text)
            if named is not None:
                detail["field"] = named
        path = answer.url.removeprefix(self.transport.base_url)
        return ApplicationErrorAnswer(method=f"{operation} ({answer.method} {path})", code=None, message=message or "",
                                      data=_json_or_none(answer), http_status=answer.status, kind=kind, detail=detail)

    def _named_field(self, sent: dict[str, Any], text: str) -> str | None:
        """The neutral name of the create field a refusal names (``resources.memory_mb`` for the body key
        the profile maps memory_mb onto), so GAP 2 can tell a refusal of sizes from any other."""
        mapped = {}
        template = self.profile.create.body if isinstance(self.profile.create.body, dict) else {}
        for key, value in template.items():
            match = templates.PLACEHOLDER.fullmatch(value) if isinstance(value, str) else None
            if match is not None and key in sent:
                mapped[key] = match.group(1)
        for key in sorted(mapped, key=len, reverse=True):
            if key in text:
                placeholder = mapped[key]
                return f"resources.{placeholder}" if placeholder in ("memory_mb", "cpu_cores") else CREATE_PLACEHOLDERS[placeholder]
        return None

    # -- lifetime --------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return not self._closed.is_set()

    def close(self) -> None:
        self._closed.set()
        self.transport.close()


# The credentials a scenario may ask for: none, a wrong token, and near misses of the real one.
CREDENTIAL_KINDS = ("none", "wrong", "one character short", "one character too many")
# The shortest token a near miss is made of: a shorter one's near miss is too short to redact (transcript.Redactor).
NEAR_MISS_MIN_TOKEN = 5


class RestCredentials(CredentialsFacet):
    """The same REST provider reached without its token or with a wrong one."""

    def __init__(self, adapter: RestAdapter) -> None:
        self._adapter = adapter

    def with_credentials(self, kind: str) -> RestAdapter:
        adapter = self._adapter
        profile, transport = adapter.profile, adapter.transport
        if profile.auth_scheme == "none":
            raise NotExpressible(NAME, f"a request with {'no' if kind == 'none' else 'wrong'} credentials "
                                       f"(profile {profile.name} uses no authentication)")
        if kind not in CREDENTIAL_KINDS:
            raise HarnessError(f"unknown credentials kind {kind!r}")
        secret = self._secret(kind, transport.credentials.secret)
        channel = f"{transport.channel}-{'no-token' if kind == 'none' else kind.replace(' ', '-')}"
        other = RestAdapter(profile, transport.with_credentials(transport.credentials.replaced(secret), channel),
                            adapter.run_labels, adapter.base_spec, adapter.request_timeout_s, call_timeout_given=True)
        other.ledger = adapter.ledger  # whatever it creates by mistake is cleaned up with real credentials
        other.owner = adapter.owner
        other._version = adapter._version
        other._transcript = adapter._transcript
        return other

    @staticmethod
    def _secret(kind: str, real: str | None) -> str | None:
        """The token a request of ``kind`` carries. A near miss of the real token (one character short, one
        too many: a server that compares a prefix, or only as many characters as it was sent) is itself
        kept out of everything the suite writes, as the token is (``near_misses``)."""
        if kind == "none":
            return None
        if kind == "wrong" or not real:
            # a wrong token that looks like a real one, so a provider cannot tell it apart by its shape
            return f"sandbox-conformance-wrong-{secrets.token_hex(16)}"
        if len(real) < NEAR_MISS_MIN_TOKEN:
            raise NotExpressible(NAME, f"a near miss of a token shorter than {NEAR_MISS_MIN_TOKEN} characters (it "
                                       "could not be kept out of the reports)")
        short, long = near_misses(real)
        near = short if kind == "one character short" else long
        REDACTOR.add(near)
        return near


def near_misses(token: str) -> tuple[str, str]:
    """The token one character short and one character too many. Padding and blanks at its end are left out
    first: a server that strips or decodes them would rightly take ``abc=`` for ``abc==``."""
    core = token.rstrip("= \t\r\n")
    extra = "x" if core[-1:] != "x" else "y"
    return core[:-1], core + extra


def _listed(statuses: tuple[int, ...]) -> str:
    return " or ".join(str(s) for s in statuses)


def _json_or_none(answer: HttpAnswer) -> Any:
    try:
        return answer.json()
    except ValueError:
        return None


def open_rest_adapter(profile: Profile, base_url: str, run_labels: Mapping[str, str] | None = None,
                      base_spec: Mapping[str, Any] | None = None, call_timeout_s: float = 30.0,
                      channel: str = "http", environ: Mapping[str, str] | None = None,
                      transport: Any = None, call_timeout_given: bool = False) -> RestAdapter:
    """An adapter for the provider at ``base_url``, its token read from the environment (not yet connected).

    ``call_timeout_given``: the user chose ``call_timeout_s`` (--call-timeout), so it is every request's
    deadline, over the profile's ``request_timeout_s``."""
    token = read_token(profile, environ)
    credentials = Credentials(profile.auth_scheme, profile.auth_name, token)
    http = HttpTransport(base_url, credentials,
                         timeout_s=request_timeout(profile, call_timeout_s, call_timeout_given),
                         retries=RetryPolicy(profile.retry_attempts, profile.retry_backoff_s), channel=channel,
                         transport=transport, max_answer_bytes=profile.max_answer_bytes)
    return RestAdapter(profile, http, run_labels, base_spec, call_timeout_s, call_timeout_given)


def request_timeout(profile: Profile, call_timeout_s: float, call_timeout_given: bool) -> float:
    """The deadline of one request: the call timeout the user gave, else the profile's, else the default."""
    if call_timeout_given or profile.request_timeout_s is None:
        return call_timeout_s
    return profile.request_timeout_s
