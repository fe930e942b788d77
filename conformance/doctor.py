"""``sandbox-conformance doctor``: can the configured provider be reached? One line per check, each
passed (✓), failed (✗) or not applicable (–); plain ASCII when stdout is no terminal or NO_COLOR is set.

Exit 0 when no check failed, 1 when one did, 2 for bad input (as every command: one line). The checks run
in the order a failure would explain the next: the plugin file, its execute bit, its sha256 pin, then the
handshake (started as `run` starts it, closed again — no sandbox is created); a REST provider's health
check; the Docker engine (only --image needs one); the report directory.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import TextIO

from conformance import config_file
from conformance.config import call_timeout, check_report_dir, load_create_spec, startup_timeout, valid_byte_count
from conformance.errors import ConformanceError
from conformance.inert import inert_line
from conformance.options import IMAGE_EXTRA_HINT
from conformance.providers import (
    ProviderConfig,
    file_sha256,
    interpreted_script,
    open_provider,
    parse_env_pairs,
    pin_problem,
    plugin_executable,
    profile_reference,
    register_secrets,
)
from conformance.transcript import REDACTOR
from conformance.user_input import env_names

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "n/a"
SYMBOLS = {PASS: "✓", FAIL: "✗", NOT_APPLICABLE: "–"}
ASCII_SYMBOLS = {PASS: "[ok]  ", FAIL: "[FAIL]", NOT_APPLICABLE: "[--]  "}
DOCKER_PING_TIMEOUT_S = 5


@dataclass(frozen=True)
class Check:
    verdict: str
    text: str


def provider_config(args: argparse.Namespace) -> ProviderConfig:
    """The provider as `run` would reach it (the configuration file merged under the flags)."""
    rest_target = args.rest is not None or args.image is not None
    config = ProviderConfig(
        plugin=args.plugin, dialect=args.dialect, env=parse_env_pairs(args.env),
        pass_env=env_names(args.pass_env, "--pass-env"),
        create_spec=load_create_spec(args.create_spec), run_id="doctor",
        call_timeout_s=call_timeout(args), call_timeout_given=args.call_timeout is not None,
        startup_timeout_s=startup_timeout(args),
        sandboxes_per_process=args.sandboxes_per_process, rest_url=args.rest,
        profile=profile_reference(args.profile, rest_target), image=args.image, open_ack=args.open_ack == "on",
        max_message_bytes=valid_byte_count(args.max_message_bytes, "--max-message-bytes"), sha256=args.sha256,
        pin_hint=getattr(args, "pin_hint", None),
    )
    if args.image is None:
        config.validate()
    else:
        config.rest_profile()
    return config


def checks(args: argparse.Namespace) -> list[Check]:
    args = config_file.apply(args)
    provider = provider_config(args)
    register_secrets(provider)  # whatever a failing plugin says about the values it was handed stays hidden
    found: list[Check] = []
    if args.config_file is not None:
        named = f", provider {args.provider_name}" if args.provider_name else ""
        found.append(Check(PASS, f"configuration file {args.config_file}{named}"))
    if provider.is_rest or provider.image is not None:
        found.append(Check(NOT_APPLICABLE, "plugin executable, execute bit, sha256 pin: not used by a REST provider"))
        found += _rest_checks(provider)
    else:
        found += _plugin_checks(provider)
    found.append(_docker_check(provider))
    found.append(_report_dir_check(args.report_dir))
    return found


def _plugin_checks(provider: ProviderConfig) -> list[Check]:
    executable = plugin_executable(provider)
    program = provider.argv[0]
    if executable is None:
        return [Check(FAIL, f"plugin executable not found: {program} (no such file, nor a name on PATH)"),
                Check(NOT_APPLICABLE, "execute bit: not checked (no executable)"),
                Check(NOT_APPLICABLE, "sha256 pin: not checked (no executable)"),
                Check(NOT_APPLICABLE, "handshake: not tried (no executable)")]
    found = [Check(PASS, f"plugin executable found: {executable}")]
    runnable = os.access(executable, os.X_OK)
    found.append(Check(PASS, "execute bit set") if runnable
                 else Check(FAIL, f"execute bit not set on {executable} (chmod +x it)"))
    if provider.sha256 is None:
        script = interpreted_script(provider.argv)
        whose = f"the script {script}'s" if script else "the executable's"
        found.append(Check(NOT_APPLICABLE, f"sha256 pin: none ({whose} is {file_sha256(script or executable)})"))
    else:
        problem = pin_problem(provider)
        found.append(Check(FAIL, problem) if problem else Check(PASS, f"sha256 pin matches {provider.sha256}"))
    if any(check.verdict == FAIL for check in found):
        found.append(Check(NOT_APPLICABLE, "handshake: not tried (a check above failed)"))
    else:
        found.append(_handshake(provider))
    return found


def _handshake(provider: ProviderConfig) -> Check:
    """Start the plugin, complete the handshake as `run`'s preflight does, close it."""
    try:
        adapter = open_provider(provider, channel="doctor")
    except ConformanceError as exc:
        return Check(FAIL, f"handshake failed: {exc}")
    try:
        how = "; ".join(part for part in (adapter.identity.negotiation, adapter.identity.negotiation_detail) if part)
        return Check(PASS, f"handshake completed: {adapter.dialect}" + (f" — {how}" if how else ""))
    finally:
        adapter.close()


def _rest_checks(provider: ProviderConfig) -> list[Check]:
    if provider.image is not None:
        return [Check(NOT_APPLICABLE, "health check: not tried (`run` starts the image and waits for its health)")]
    try:
        adapter = open_provider(provider, channel="doctor")
    except ConformanceError as exc:
        return [Check(FAIL, f"REST provider {provider.rest_url} unreachable: {exc}")]
    adapter.close()
    return [Check(PASS, f"REST provider {provider.rest_url} answers its health check and accepts the credentials")]


def _docker_check(provider: ProviderConfig) -> Check:
    if provider.image is None:
        return Check(NOT_APPLICABLE, "Docker engine: not needed (no --image)")
    try:
        import docker
        from docker.errors import DockerException
    except ImportError:
        return Check(FAIL, f"Docker engine: not checked: {IMAGE_EXTRA_HINT}")

    try:
        client = docker.from_env(timeout=DOCKER_PING_TIMEOUT_S)
        version = client.version().get("Version", "?")
        client.close()
    except (DockerException, OSError) as exc:  # requests' connection errors are OSErrors
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Check(FAIL, f"Docker engine unreachable: {first}")
    return Check(PASS, f"Docker engine reachable (version {version})")


def _report_dir_check(report_dir: str) -> Check:
    try:
        directory = check_report_dir(report_dir)
    except ConformanceError as exc:
        return Check(FAIL, str(exc).replace("--report-dir", "report directory", 1))
    return Check(PASS, f"report directory {directory.resolve()} writable")


def fancy(out: TextIO) -> bool:
    return out.isatty() and not os.environ.get("NO_COLOR")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    found = checks(args)
    symbols = SYMBOLS if fancy(out) else ASCII_SYMBOLS
    for check in found:
        print(f"{symbols[check.verdict]} {inert_line(REDACTOR.text(check.text))}", file=out)
    return 1 if any(check.verdict == FAIL for check in found) else 0
