"""REST provider profiles: a YAML file (or a built-in name) validated against
``schemas/rest-profile/profile.json``, then checked for what a schema cannot say (placeholders each
operation knows). Every problem is one ``UsageError`` line naming the profile and the field."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from conformance import schemas
from conformance.dialects.rest import templates
from conformance.errors import UsageError
from conformance.transports.http import DEFAULT_MAX_ANSWER_BYTES

PROFILES_DIR = Path(__file__).resolve().parent.parent.parent / "profiles"
SCHEMA_REF = schemas.SCHEMA_BASE + "rest-profile/profile.json"
DEFAULT_PROFILE = "forkd"

# Placeholders each body template may use, and the request field each stands for.
CREATE_PLACEHOLDERS = {"snapshot": "from_snapshot", "memory_mb": "memory_mb", "cpu_cores": "cpu_cores",
                       "name": "name", "labels": "labels", "env": "env"}
EXEC_PLACEHOLDERS = {"command", "timeout", "working_dir", "env"}
PATH_PLACEHOLDERS = {"id"}


@dataclass(frozen=True)
class Operation:
    """One HTTP operation of the profile."""

    method: str
    path: str
    success: tuple[int, ...]
    gone: tuple[int, ...] = ()
    body: Any = None


@dataclass(frozen=True)
class TimedOutSignal:
    """One way a provider says a command outlived its timeout: an answer's status (any of ``statuses``),
    its body (containing ``body_contains``, matching the regular expression ``body_matches``) and, with
    ``after_deadline``, its timing: it came no sooner than the deadline the request asked for. Every
    condition given must hold."""

    statuses: tuple[int, ...] = ()
    body_contains: str | None = None
    body_matches: str | None = None
    after_deadline: bool = False

    def matches(self, status: int, body: str, success: bool, elapsed_s: float | None = None,
                deadline_s: float | None = None) -> bool:
        """Whether an answer is this signal. ``elapsed_s`` is the time from sending the request to its
        answer, ``deadline_s`` the timeout the request asked for (as sent, in seconds)."""
        if self.statuses and status not in self.statuses:
            return False
        if not self.statuses and success:
            return False  # a body phrase alone must never turn a command's own output into a timeout
        if self.body_contains is not None and self.body_contains not in body:
            return False
        if self.body_matches is not None and re.search(self.body_matches, body) is None:
            return False
        if self.after_deadline:
            # An answer before the deadline cannot be the deadline passing, whatever it says.
            return elapsed_s is not None and deadline_s is not None and elapsed_s >= deadline_s
        return True


@dataclass(frozen=True)
class Profile:
    """A validated profile; ``raw`` is the document as loaded."""

    name: str
    source: str  # "built-in forkd" or the file's path, for messages
    raw: dict[str, Any]
    base_url: str | None
    auth_scheme: str
    token_env: str | None
    auth_name: str | None
    request_timeout_s: float | None
    max_answer_bytes: int  # the longest answer body read; a longer one fails its request
    retry_attempts: int
    retry_backoff_s: float
    error_message: str
    capabilities: dict[str, bool]
    health: Operation
    health_version: str | None
    create: Operation
    create_id: list[str]
    create_state: str | None
    create_extra: frozenset[str]
    # Body members sent when neither the scenario nor --create-spec sets them (an API that requires a field
    # the suite has no neutral term for: forkd's create needs a snapshot tag).
    create_defaults: dict[str, Any]
    create_not_ready: tuple[int, ...]
    create_not_ready_wait_s: float
    exec: Operation
    exec_command: str
    exec_working_dir: str
    exec_env: str
    timeout_unit: str
    timeout_minimum: int
    timeout_answer_late_s: float  # how long after the timeout a provider may still answer (forkd 0.5.2: 5)
    stdout: str | None
    stderr: str | None
    exit_code: str
    timed_out: tuple[TimedOutSignal, ...]
    missing: tuple[int, ...]
    signal: str | None
    negative_exit_code: str
    delete: Operation
    get: Operation | None
    get_id: list[str] | None
    get_state: str | None
    get_default_state: str
    list: Operation | None
    list_items: str
    list_id: str
    list_state: str | None
    list_default_state: str
    list_labels: str | None
    container_port: int | None
    startup_timeout_s: float
    create_fields: frozenset[str] = field(default_factory=frozenset)  # request fields the create can carry

    @property
    def supports_labels(self) -> bool:
        return "labels" in self.create_fields

    def port(self) -> int | None:
        """The port the provider listens on inside its image: declared, or base_url's."""
        if self.container_port is not None:
            return self.container_port
        if self.base_url is None:
            return None
        parts = urlsplit(self.base_url)
        return parts.port or (443 if parts.scheme == "https" else 80)


def builtin_names() -> list[str]:
    return sorted(path.stem for path in PROFILES_DIR.glob("*.yaml"))


def profile_path(reference: str) -> Path | None:
    """The file a profile reference names, or ``None`` when it names a built-in profile (the one rule
    telling the two apart)."""
    if "/" in reference or reference.endswith((".yaml", ".yml", ".json")) or Path(reference).exists():
        return Path(reference)
    return None


def load_profile(reference: str | None) -> Profile:
    """A built-in profile by name, or a profile file by path. Raises ``UsageError`` (one line) on any problem."""
    reference = reference or DEFAULT_PROFILE
    path = profile_path(reference)
    if path is not None:
        source = f"profile {reference}"
        if not path.is_file():
            raise UsageError(f"{source} does not exist" if not path.exists() else f"{source} is not a file")
    else:
        path = PROFILES_DIR / f"{reference}.yaml"
        source = f"built-in profile {reference}"
        if not path.is_file():
            raise UsageError(f"unknown profile {reference!r}: the built-in profiles are "
                             f"{', '.join(builtin_names()) or 'none'}; give a path to a YAML file for another")
    from conformance.user_input import MAX_YAML_BYTES, read_text

    return parse_profile(read_text(path, source, MAX_YAML_BYTES), source)


def parse_profile(text: str, source: str = "profile") -> Profile:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise UsageError(f"{source} is not valid YAML: {problem}{where}") from None
    except RecursionError:
        raise UsageError(f"{source} nests lists or mappings too deeply to read") from None
    problems = schemas.problems(SCHEMA_REF, document)
    if problems:
        first = problems[0]
        raise UsageError(f"{source} is invalid at {first.pointer or '/'}: {first.reason}")
    for pointer, reason in _semantic_problems(document):
        raise UsageError(f"{source} is invalid at {pointer}: {reason}")
    return _build(document, source)


def _semantic_problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    """What the schema cannot check: which placeholders each template may use, and that folds agree."""
    found: list[tuple[str, str]] = []
    for operation in ("health", "create", "exec", "delete", "get", "list"):
        spec = document.get(operation)
        if not isinstance(spec, dict):
            continue
        allowed = set() if operation in ("health", "create", "list") else PATH_PLACEHOLDERS
        for name, _optional, _pointer in templates.placeholders(spec["path"]):
            if name not in allowed:
                may = ", ".join("{" + a + "}" for a in sorted(allowed)) or "none"
                found.append((f"/{operation}/path", f"unknown placeholder {{{name}}} (this path may use {may})"))
    body_rules = (("create", set(CREATE_PLACEHOLDERS)), ("exec", EXEC_PLACEHOLDERS))
    for operation, allowed in body_rules:
        for name, _optional, pointer in templates.placeholders(document[operation].get("body")):
            if name not in allowed:
                found.append((f"/{operation}/body{pointer}",
                              f"unknown placeholder {{{name}}} (allowed: {', '.join(sorted(allowed))})"))
    exec_spec = document["exec"]
    for index, signal in enumerate(exec_spec.get("timed_out", [])):
        pattern = signal.get("body_matches")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                found.append((f"/exec/timed_out/{index}/body_matches", f"is not a regular expression: {exc}"))
        if signal.get("after_deadline") and not ({"status", "body_contains", "body_matches"} & set(signal)):
            found.append((f"/exec/timed_out/{index}", ("after_deadline alone would read any late error as a "
                                                       "timeout: give a status or a body pattern too")))
    used = templates.names(exec_spec.get("body"))
    if "command" not in used:
        found.append(("/exec/body", "the body must carry the command: put \"{command}\" where it goes"))
    for part in ("working_dir", "env"):
        if exec_spec.get(part, "fold") == "field" and part not in used:
            found.append((f"/exec/{part}", f"is 'field', but the body has no {{{part}}} placeholder"))
        if exec_spec.get(part, "fold") == "fold" and part in used:
            found.append((f"/exec/{part}", f"is 'fold', so the body must not use {{{part}}} as well"))
    return found


def _statuses(spec: dict[str, Any], key: str, default: tuple[int, ...] = ()) -> tuple[int, ...]:
    return tuple(spec.get(key, default))


def _operation(spec: dict[str, Any], default_method: str, success_key: str = "success",
               default_success: tuple[int, ...] = ()) -> Operation:
    return Operation(method=spec.get("method", default_method), path=spec["path"],
                     success=_statuses(spec, success_key, default_success), gone=_statuses(spec, "gone"),
                     body=spec.get("body"))


def _pointers(value: str | list[str] | None) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _build(document: dict[str, Any], source: str) -> Profile:
    auth = document["auth"]
    retries = document.get("retries", {})
    exec_spec = document["exec"]
    timeout = exec_spec.get("timeout", {})
    get_spec = document.get("get")
    list_spec = document.get("list")
    container = document.get("container", {})
    create_fields = frozenset(CREATE_PLACEHOLDERS[name] for name in templates.names(document["create"].get("body")))
    return Profile(
        name=document["name"], source=source, raw=document, base_url=document.get("base_url"),
        auth_scheme=auth["scheme"], token_env=auth.get("token_env"), auth_name=auth.get("name"),
        request_timeout_s=document.get("request_timeout_s"),
        max_answer_bytes=document.get("max_answer_bytes", DEFAULT_MAX_ANSWER_BYTES),
        retry_attempts=retries.get("attempts", 1), retry_backoff_s=retries.get("backoff_s", 0.2),
        error_message=document.get("errors", {}).get("message", "/error"),
        capabilities=dict(document.get("capabilities", {})),
        health=_operation(document["health"], "GET", "expect", (200,)),
        health_version=document["health"].get("version"),
        create=_operation(document["create"], "POST"),
        create_id=_pointers(document["create"]["id"]) or [],
        create_state=document["create"].get("state"),
        create_extra=frozenset(document["create"].get("extra", [])),
        create_defaults=dict(document["create"].get("defaults", {})),
        create_not_ready=_statuses(document["create"].get("not_ready", {}), "status"),
        create_not_ready_wait_s=document["create"].get("not_ready", {}).get("wait_s", 30.0),
        exec=_operation(exec_spec, "POST"),
        exec_command=exec_spec.get("command", "argv"),
        exec_working_dir=exec_spec.get("working_dir", "fold"),
        exec_env=exec_spec.get("env", "fold"),
        timeout_unit=timeout.get("unit", "s"), timeout_minimum=timeout.get("minimum", 1),
        timeout_answer_late_s=float(timeout.get("answer_late_s", 0)),
        stdout=exec_spec.get("stdout"), stderr=exec_spec.get("stderr"), exit_code=exec_spec["exit_code"],
        timed_out=tuple(TimedOutSignal(_statuses(s, "status"), s.get("body_contains"), s.get("body_matches"),
                                       s.get("after_deadline", False))
                        for s in exec_spec.get("timed_out", [])),
        missing=_statuses(exec_spec, "missing"),
        signal=exec_spec.get("signal"),
        negative_exit_code=exec_spec.get("negative_exit_code", "exit_code"),
        delete=_operation(document["delete"], "DELETE"),
        get=_operation(get_spec, "GET") if get_spec else None,
        get_id=_pointers(get_spec.get("id")) if get_spec else None,
        get_state=get_spec.get("state") if get_spec else None,
        get_default_state=(get_spec or {}).get("default_state", "unknown"),
        list=_operation(list_spec, "GET") if list_spec else None,
        list_items=(list_spec or {}).get("items", ""),
        list_id=(list_spec or {}).get("id", "/id"),
        list_state=(list_spec or {}).get("state"),
        list_default_state=(list_spec or {}).get("default_state", "unknown"),
        list_labels=(list_spec or {}).get("labels"),
        container_port=container.get("port"),
        startup_timeout_s=container.get("startup_timeout_s", 60.0),
        create_fields=create_fields,
    )
