"""Turning a provider configuration into a connected adapter: spawn, detect the dialect, handshake."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from conformance import leftovers, options
from conformance.adapter import ProviderAdapter
from conformance.dialects import jsonrpc, registry, rest, sandbox_driver_v1, sandbox_driver_v2
from conformance.dialects.jsonrpc_adapter import JsonRpcAdapter, SchemaRules
from conformance.dialects.registry import AdapterSettings
from conformance.dialects.rest.adapter import near_misses
from conformance.errors import (
    ApplicationErrorAnswer,
    CallTimeout,
    ProtocolErrorAnswer,
    ProviderCallError,
    ProviderCrashed,
    ProviderStartError,
    UsageError,
)
from conformance.schemas import SchemaProblem
from conformance.transcript import REDACTOR
from conformance.transports.channels import ChannelServer
from conformance.transports.http import valid_base_url
from conformance.transports.memory import InProcessTransport
from conformance.transports.process import ProcessTransport, scrubbed_environment

# The names live where the command line reads them without importing any dialect (fast --help).
DIALECTS = options.DIALECTS  # of plugins; a REST provider's is "rest"
SANDBOXES_PER_PROCESS = options.SANDBOXES_PER_PROCESS
REFERENCE_PLUGIN_DISPLAY = "sandbox-conformance-host-plugin"


DEFAULT_STARTUP_TIMEOUT_S = 30.0  # a plugin's handshake, its process start included (--startup-timeout)


def reference_plugin_argv(*extra: str) -> list[str]:
    """The bundled reference plugin, started with this interpreter so no PATH lookup is needed."""
    return [sys.executable, "-m", "conformance.reference.host_plugin", *extra]


@dataclass(frozen=True)
class ProviderConfig:
    """Everything needed to reach one provider (part of the run's ``RunConfig``)."""

    plugin: str | None = None  # a command line; None (and no in_process) means the bundled reference plugin
    dialect: str = "auto"
    env: dict[str, str] = field(default_factory=dict)
    pass_env: tuple[str, ...] = ()
    create_spec: dict[str, Any] | None = None
    run_id: str = "local"
    # With the run id, the mark in every plugin process's environment (conformance/leftovers.py): one per
    # invocation, so runs that share a run id never mistake each other's processes for their own.
    run_token: str = field(default_factory=lambda: uuid.uuid4().hex[:16], compare=False)
    call_timeout_s: float = 30.0
    # --startup-timeout: the handshake's deadline. Its answer comes only once the process has started (an
    # interpreter importing its modules on a loaded machine takes seconds), which is not the call latency
    # --call-timeout bounds; not given, it is the call timeout but never less than DEFAULT_STARTUP_TIMEOUT_S.
    startup_timeout_s: float | None = None
    # --call-timeout was given: it is then every request's deadline, over a REST profile's request_timeout_s too.
    call_timeout_given: bool = False
    sandboxes_per_process: str = "auto"
    rest_url: str | None = None  # a REST provider's base URL; the plugin fields are unused then
    profile: str | None = None  # a built-in REST profile name or a profile file (default: forkd)
    image: str | None = None  # the image the REST provider was started from (--image), for reports
    # A stdio plugin served on a thread of this process: ("package.module:function", *argv). The suite's
    # own tests use it; see conformance/transports/memory.py.
    in_process: tuple[str, ...] | None = None
    open_ack: bool = True  # sandbox-driver v2: announce open_ack, so channels wait for the suite's acknowledgment
    # The longest line read from a stdio plugin (--max-message-bytes); None: its protocol's limit (v2's
    # control_message_bytes) or, for a protocol without one, the suite's default (jsonrpc.DEFAULT_MAX_MESSAGE_BYTES).
    max_message_bytes: int | None = None
    sha256: str | None = None  # the plugin executable's pinned digest (a configuration file's `sha256`)
    pin_hint: str | None = None  # how to renew or drop that pin, for the message of a file that changed since

    @property
    def handshake_timeout_s(self) -> float:
        """How long a started process has to answer initialize (``startup_timeout_s``)."""
        if self.startup_timeout_s is not None:
            return self.startup_timeout_s
        return max(self.call_timeout_s, DEFAULT_STARTUP_TIMEOUT_S)

    @property
    def is_rest(self) -> bool:
        return self.rest_url is not None

    def rest_profile(self) -> rest.Profile:
        """The REST profile; ``UsageError`` (one line, naming the field) when it is unknown or invalid."""
        return rest.load_profile(self.profile)

    def token_env(self) -> str | None:
        """The variable a REST provider's token is read from."""
        return self.rest_profile().token_env if self.is_rest else None

    @property
    def argv(self) -> list[str]:
        if self.in_process is not None:
            module = self.in_process[0].partition(":")[0]
            return [sys.executable, "-m", module, *self.in_process[1:]]
        if self.plugin is None:
            return reference_plugin_argv()
        try:
            argv = shlex.split(self.plugin)
        except ValueError as exc:
            raise UsageError(f"--plugin is not a valid command line: {exc}") from None
        if not argv:
            raise UsageError("--plugin is empty")
        return argv

    @property
    def display(self) -> str:
        if self.rest_url is not None:
            return self.rest_url
        if self.in_process is not None:
            return shlex.join(self.argv)
        return REFERENCE_PLUGIN_DISPLAY if self.plugin is None else self.plugin

    @property
    def run_labels(self) -> dict[str, str]:
        return {"sandbox-conformance.run": self.run_id}

    def handed_values(self, source: Mapping[str, str] | None = None) -> list[str]:
        """Every value this run hands the provider: ``--env`` values, forwarded variables, the REST
        token. Each is a secret to the reports, whatever its name."""
        source = os.environ if source is None else source
        values = list(self.env.values())
        values += [source[name] for name in self.pass_env if name in source]
        if self.is_rest:
            token_env = self.token_env()
            if token_env and source.get(token_env):
                values.append(source[token_env])
        return values

    def validate(self) -> None:
        if self.rest_url is not None:
            if not self.open_ack:
                raise UsageError(f"--open-ack applies to {sandbox_driver_v2.NAME} plugins only, not REST providers")
            if self.plugin is not None:
                raise UsageError("--rest and --plugin are mutually exclusive")
            if self.max_message_bytes is not None:
                raise UsageError("--max-message-bytes applies to stdio plugins only, not REST providers")
            if self.dialect not in ("auto", rest.NAME):
                raise UsageError(f"a REST provider speaks the {rest.NAME} dialect, not {self.dialect}")
            problem = valid_base_url(self.rest_url)
            if problem is not None:
                raise UsageError(f"--rest {self.rest_url!r} is not a usable URL: {problem}")
            self.rest_profile()
            return
        if self.profile is not None:
            raise UsageError("--profile applies to REST providers only (give --rest or --image)")
        if self.dialect not in DIALECTS:
            raise UsageError(f"unknown dialect {self.dialect!r} (choose from {', '.join(DIALECTS)})")
        if not self.open_ack and self.dialect not in ("auto", sandbox_driver_v2.NAME):
            raise UsageError(f"--open-ack applies to {sandbox_driver_v2.NAME} plugins only, not {self.dialect}")
        if self.sandboxes_per_process not in SANDBOXES_PER_PROCESS:
            raise UsageError(f"--sandboxes-per-process must be one of {', '.join(SANDBOXES_PER_PROCESS)}")
        self.argv  # noqa: B018 - parses the command line


def plugin_executable(config: ProviderConfig) -> str | None:
    """The file the plugin command starts, as the process will find it: a path as given, a bare name on
    PATH; None when there is none."""
    import shutil

    program = config.argv[0]
    if "/" in program:
        return program if os.path.isfile(program) else None
    return shutil.which(program, mode=os.F_OK)


# Programs that run a script named among their arguments (`python3 ./plugin.py`, `env node plugin.js`): the
# script is what the provider author builds, so it is what a sha256 pin covers and what names the provider.
INTERPRETER = re.compile(r"(python|pypy|node|nodejs|deno|bun|bash|sh|dash|zsh|ruby|perl|php|env)[0-9.]*")


def interpreted_script(argv: Sequence[str], directory: str | None = None) -> str | None:
    """The script an interpreter command runs: its first argument (not an option) that is an existing file,
    looked up in ``directory`` (default: the working directory, where the plugin starts); None when
    ``argv[0]`` is no interpreter or names no script (``python -m module``)."""
    if not INTERPRETER.fullmatch(os.path.basename(argv[0])):
        return None
    for argument in argv[1:]:
        if not argument.startswith("-") and os.path.isfile(os.path.join(directory or "", argument)):
            return argument
    return None


def pinned_file(config: ProviderConfig) -> str | None:
    """The file a sha256 pin covers: the script an interpreter runs, else the plugin executable."""
    return interpreted_script(config.argv) or plugin_executable(config)


def file_sha256(path: str) -> str:
    import hashlib

    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def pin_problem(config: ProviderConfig) -> str | None:
    """Why the plugin executable does not match its sha256 pin; None when it does or nothing is pinned."""
    if config.sha256 is None:
        return None
    pinned = pinned_file(config)
    if pinned is None:
        return f"the sha256 pin cannot be checked: plugin executable not found: {config.argv[0]}"
    try:
        actual = file_sha256(pinned)
    except OSError as exc:
        return f"the sha256 pin cannot be checked: {pinned}: {exc.strerror}"
    if actual != config.sha256:
        what = "plugin script" if pinned != plugin_executable(config) else "plugin executable"
        hint = f"; {config.pin_hint}" if config.pin_hint else ""
        return (f"{what} {pinned} does not match its sha256 pin (the file changed since it was pinned): expected "
                f"{config.sha256}, got {actual}{hint}")
    return None


def verify_pin(config: ProviderConfig) -> None:
    """Checked before the plugin starts: a binary that changed since it was pinned is exit 2."""
    problem = pin_problem(config)
    if problem is not None:
        raise UsageError(problem)


def profile_reference(value: str | None, rest_target: bool) -> str | None:
    """The profile as every process will find it: a built-in name as given, a file by absolute path."""
    if value is None:
        return "forkd" if rest_target else None
    if not rest_target:
        raise UsageError("--profile applies to REST providers only (give --rest or --image)")
    path = rest.profile_path(value)
    return str(path.resolve()) if path is not None else value


def register_secrets(config: ProviderConfig) -> None:
    """Every value handed to the provider is redacted from everything the suite writes; so are the near misses
    of the REST token that rest-near-miss-credential sends, in every process, whichever one sent them."""
    for value in config.handed_values():
        REDACTOR.add(value)
    token_env = config.token_env()
    token = os.environ.get(token_env) if token_env else None
    if token:
        for near in near_misses(token):
            REDACTOR.add(near)


# An environment variable name as the configuration file's schema allows one (env's propertyNames).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_env_pairs(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        # the value is never echoed: it is a secret, and so may be the whole of a pair without '='
        if not sep:
            raise UsageError("--env expects NAME=VALUE, got a value without '=' (not shown: it may be a secret)")
        if not name:
            raise UsageError("--env expects NAME=VALUE, got '=VALUE' without a name (the value is not shown)")
        if not ENV_NAME.fullmatch(name):
            raise UsageError(f"--env name {name!r} must be letters, digits and _ (not starting with a digit)")
        env[name] = value
    return env


class _UndecidedRules(SchemaRules):
    """Rules while the dialect is not known yet: frames are still checked, shapes are not."""

    def envelope_problems(self, message: Any) -> list[SchemaProblem]:
        return []

    def params_problems(self, method: str, params: Any) -> list[SchemaProblem]:
        return []

    def result_problems(self, method: str, result: Any) -> list[SchemaProblem]:
        return []


def _transport(config: ProviderConfig, env: dict[str, str]) -> Any:
    if config.in_process is not None:
        return InProcessTransport(config.in_process[0], config.in_process[1:], env, display=config.display)
    return ProcessTransport(config.argv, env, display=config.display)


def open_provider(config: ProviderConfig, channel: str = "provider", strict_handshake: bool = False,
                  handshake: bool = True) -> ProviderAdapter:
    """Start the provider, detect its dialect and complete the handshake.

    Raises ``ProviderStartError`` when it cannot be started or does not complete the handshake. With
    ``strict_handshake`` a schema violation in the ``initialize`` answer is raised as well; otherwise it
    is left for the handshake scenarios to report. Without ``handshake`` the provider is only started
    (its dialect must then be known: configured, or detected earlier by the session).

    Detection sends the probe dialect's initialize (v2's); a plugin that refuses it naming version 1, or
    answers it as version 1, is ended and a fresh one spoken to in v1. A plugin that refuses a configured
    version naming the other one is likewise restarted in the version it names. ``identity.negotiation``
    says which way it went.

    A REST provider has no process: its adapter is built from the profile, and its health check and a
    credentials probe stand in for the handshake.
    """
    if config.rest_url is not None:
        return _open_rest(config, channel, handshake)
    register_secrets(config)
    opening = _Opening(config, channel, strict_handshake)
    name = config.dialect
    if name == "auto" and not handshake:
        name = sandbox_driver_v1.NAME
    if name == "auto":
        adapter = opening.detect()
    else:
        dialect = registry.plugin_dialect(name)
        adapter = opening.known(dialect, handshake, f"{dialect.label} (asked {dialect.label})")
    if handshake:
        try:
            adapter.settle()
        except BaseException:
            adapter.close()
            raise
    return adapter


class _Opening:
    """One attempt to reach a plugin: its processes (a refused version costs one), their connections
    and data-channel listeners, and the dialect it settles on."""

    def __init__(self, config: ProviderConfig, channel: str, strict_handshake: bool) -> None:
        self.config = config
        self.channel = channel
        self.strict_handshake = strict_handshake
        self.env = scrubbed_environment(config.env, config.pass_env)
        name, value = leftovers.mark_entry(config.run_id, config.run_token)
        self.env[name] = value  # set last: whatever the user declared, the run can find what it started
        self.settings = AdapterSettings(command=config.display, base_spec=config.create_spec,
                                        run_labels=config.run_labels, call_timeout_s=config.call_timeout_s,
                                        sandboxes_per_process=config.sandboxes_per_process,
                                        open_ack=config.open_ack)

    def connect(self, label: str, rules: Any) -> jsonrpc.JsonRpcConnection:
        connection = jsonrpc.JsonRpcConnection(_transport(self.config, self.env), rules, channel=label,
                                               max_message_bytes=self.config.max_message_bytes,
                                               write_timeout_s=self.config.call_timeout_s)
        connection.start()
        return connection

    def _start(self, rules: Any, data_channels: bool) -> tuple[jsonrpc.JsonRpcConnection, ChannelServer | None]:
        connection = self.connect(self.channel, rules)
        if not data_channels:
            return connection, None
        transport = connection.transport
        try:
            # Only the plugin we started may connect back (upstream's host trusts the spawned pid).
            server = ChannelServer(peer_pids=lambda: {transport.peer_pid}).start()
        except BaseException:
            connection.close(grace_s=0.5)
            raise
        return connection, server

    def _failed(self, connection: jsonrpc.JsonRpcConnection, server: ChannelServer | None,
                exc: BaseException, context: str = "") -> ProviderStartError:
        tail = connection.transport.stderr_tail().strip().splitlines()[-1:]
        _close(connection, server)
        hint = f" ({context})" if context else ""
        hint += f" (stderr: {tail[0]})" if tail else ""
        return ProviderStartError(f"provider {self.config.display!r} did not complete the handshake: {exc}{hint}")

    def known(self, dialect: registry.Dialect, handshake: bool, negotiation: str,
              fallback_allowed: bool = True, context: str = "", detail: str = "") -> ProviderAdapter:
        """Speak ``dialect``; a plugin refusing its version naming the other one is restarted in that.
        ``context`` says, in a failure, what led here (an earlier version's refusal)."""
        connection, server = self._start(dialect.rules(), dialect.data_channels)
        try:
            adapter = dialect.build(connection, self.connect, self.settings, server)
        except BaseException:
            _close(connection, server)
            raise
        if isinstance(adapter, JsonRpcAdapter):
            adapter.negotiation, adapter.negotiation_detail = negotiation, detail
        if not handshake:
            return adapter
        try:
            adapter.handshake(timeout_s=self.config.handshake_timeout_s, strict=self.strict_handshake)
        except ApplicationErrorAnswer as refusal:
            named = registry.refused_for(refusal, dialect) if fallback_allowed else None
            if named is None:
                raise self._failed(connection, server, refusal, context) from None
            adapter.close()
            return self.known(named, handshake, _fell_back(named, dialect), fallback_allowed=False,
                              detail=_refusal(dialect, refusal))
        except (CallTimeout, ProviderCrashed, ProviderCallError) as exc:
            raise self._failed(connection, server, exc, context) from None
        except BaseException:
            adapter.close()
            raise
        return adapter

    def detect(self) -> ProviderAdapter:
        """Ask in the probe dialect (v2) and settle on what the answer says."""
        probe = registry.probe()
        connection, server = self._start(_UndecidedRules(), probe.data_channels)
        try:
            result = connection.request("initialize", probe.initialize_params(server, self.settings),
                                        self.config.handshake_timeout_s, check_result=False).result()
        except ProtocolErrorAnswer as answer:
            # Undecided rules read every error as a protocol error; the probe's rules read it properly.
            refusal = probe.rules().error_answer("initialize", {"code": answer.code, "message": answer.message,
                                                                "data": answer.data})
            # Whatever the refusal says, the other version is worth asking: v1 plugins refuse v2 in many ways
            # (a version mismatch, a decode error naming the version, a strict decoder refusing data_transport).
            named = (registry.refused_for(refusal, probe) if isinstance(refusal, ApplicationErrorAnswer) else None) \
                or registry.other_version(probe)
            _close(connection, server)
            return self.known(named, True, _fell_back(named, probe), fallback_allowed=False,
                              context=f"after refusing {probe.label}: {refusal.message}", detail=_refusal(probe, refusal))
        except (CallTimeout, ProviderCrashed, ProviderCallError) as exc:
            raise self._failed(connection, server, exc) from None
        except BaseException:
            _close(connection, server)
            raise
        detected = registry.detect(result)
        if detected is None:
            _close(connection, server)
            _undetectable(result)
        assert detected is not None
        if detected.protocol_version is not None and detected is not probe:
            # It answered the probe in another version's shape (or named the probe's version without its
            # shape): a fresh process is asked in that version, so nothing it kept of the probe (a data
            # transport) carries over; one that refuses it naming the probe's version is the probe's after all.
            _close(connection, server)
            version = result.get("protocol_version") if isinstance(result, dict) else None
            return self.known(detected, True, f"{detected.label} (the plugin answered {probe.label}'s initialize "
                                              f"as protocol version {version})")
        if not detected.data_channels and server is not None:
            server.close()
            server = None
        connection.rules = detected.rules()
        try:
            adapter = detected.build(connection, self.connect, self.settings, server)
        except BaseException:
            _close(connection, server)
            raise
        if isinstance(adapter, JsonRpcAdapter):
            adapter.negotiation = (f"{detected.label} (asked {probe.label})" if detected is probe
                                   else f"{detected.label} (detected from its answer to {probe.label}'s initialize)")
        try:
            adapter.adopt_initialize(result)
            if self.strict_handshake and adapter.handshake_problems:
                problem = adapter.handshake_problems[0]
                raise ProviderStartError(f"the initialize answer violates the {detected.name} schema {problem}")
        except BaseException:
            adapter.close()
            raise
        return adapter


def _fell_back(spoken: registry.Dialect, refused: registry.Dialect) -> str:
    """How a fallback reads where the run begins: information (a v1 plugin asked in v2 first is no error); the
    refusal's own words are the detail (``_refusal``)."""
    return f"{spoken.label} (negotiated: the plugin offers {spoken.label}, not {refused.label})"


def _refusal(refused: registry.Dialect, refusal: ProviderCallError) -> str:
    return f"its answer to the {refused.label} initialize: {refusal.message}"


def _close(connection: jsonrpc.JsonRpcConnection, server: ChannelServer | None) -> None:
    connection.close(grace_s=0.5)
    if server is not None:
        server.close()


def _open_rest(config: ProviderConfig, channel: str, handshake: bool) -> ProviderAdapter:
    assert config.rest_url is not None
    adapter = rest.open_rest_adapter(config.rest_profile(), config.rest_url, run_labels=config.run_labels,
                                     base_spec=config.create_spec, call_timeout_s=config.call_timeout_s,
                                     channel="http" if channel == "provider" else channel,
                                     call_timeout_given=config.call_timeout_given)
    if handshake:
        try:
            adapter.connect()
        except BaseException:
            adapter.close()
            raise
    return adapter


def _undetectable(result: Any) -> str:
    shown = json.dumps(result)[:200]
    raise ProviderStartError(f"cannot tell the dialect from the initialize answer {shown}; pass --dialect")


def with_dialect(config: ProviderConfig, adapter: ProviderAdapter) -> ProviderConfig:
    """The configuration with the dialect (and sketch process mode) the first connection settled on."""
    if config.rest_url is not None:
        return config
    return replace(config, dialect=adapter.dialect, **adapter.settled())
