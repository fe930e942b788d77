"""``sandbox-conformance pin``: write (or renew, after a rebuild) a plugin provider's ``sha256`` pin in the
configuration file — that one line, replaced or inserted after ``plugin``; every other byte of the file
stays as the author wrote it. The digest is of the file `run` checks: the script an interpreter runs, else
the plugin executable (``providers.pinned_file``), found from the file as `run` finds it."""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import tomllib
from pathlib import Path
from typing import Any

from conformance import config_file
from conformance.errors import UsageError
from conformance.providers import ProviderConfig, file_sha256, pinned_file
from conformance.toml_lines import LineEditError, TomlLines
from conformance.user_input import read_text


def pin(args: argparse.Namespace) -> str:
    """Pin the provider's plugin file; the line to print. ``UsageError`` (one line) when it cannot."""
    path = config_file.chosen_file(args)
    if path is None:
        raise UsageError("no configuration file found here or above (give --config FILE, or write one with "
                         "`init --plugin COMMAND --pin`)")
    config = config_file.load(path)
    name = args.provider or config.default_provider()
    if name is None:
        raise UsageError(f"{config.path} names no provider to pin")
    if name not in config.providers:
        raise UsageError(f"--provider {name!r} is not a provider of {config.path}{config_file._closest(name, config)}")
    provider = config.providers[name]
    if "plugin" not in provider:
        raise UsageError(f"provider {name} of {config.path} is a REST provider: a pin covers a plugin file")
    command = config_file._plugin_command(config, provider["plugin"])
    pinned = pinned_file(ProviderConfig(plugin=command))
    if pinned is None:
        raise UsageError(f"plugin executable not found: {ProviderConfig(plugin=command).argv[0]} (no such file, nor "
                         f"a name on PATH), from [providers.{name}] of {config.path}")
    digest = file_sha256(pinned)
    where = f"[providers.{name}] of {config.path}"
    if provider.get("sha256") == digest:
        return f"{pinned} already matches its sha256 pin in {where}: {digest} (nothing written)"
    text = read_text(config.path, str(config.path), config_file.MAX_FILE_BYTES)
    prefix = config_file.TOOL_TABLE if config.path.name == config_file.PYPROJECT else ()
    by_hand = f"set sha256 = \"{digest}\" in {where} by hand"
    lines = TomlLines(text)
    try:
        lines.set((*prefix, "providers", name), "sha256", f'"{digest}"', after=("plugin",))
    except LineEditError as exc:
        raise UsageError(f"{config.path} cannot be edited by line ({exc}): {by_hand}") from None
    if not _only_the_pin_changed(text, lines.text, (*prefix, "providers", name), digest):
        raise UsageError(f"{config.path} cannot be edited by line (a dotted key or inline table): {by_hand}")
    _replace(config.path, lines.text)
    was = f" (was {provider['sha256']})" if "sha256" in provider else ""
    return f"pinned {pinned} in {where}: sha256 {digest}{was}"


def _only_the_pin_changed(before: str, after: str, table: tuple[str, ...], digest: str) -> bool:
    """The edited text read back is the document it was, but for the one ``sha256`` value."""
    try:
        read_back = tomllib.loads(after)
    except tomllib.TOMLDecodeError:
        return False
    expected: Any = copy.deepcopy(tomllib.loads(before))
    node = expected
    for key in table:
        node = node[key]
    node["sha256"] = digest
    return bool(read_back == expected)


def _replace(path: Path, text: str) -> None:
    """The file's new text, whole or not at all (a reader never sees half a file); its mode kept."""
    temporary = path.with_name(f".{path.name}.pin")
    try:
        temporary.write_bytes(text.encode("utf-8"))
        shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(f"{path} cannot be written: {exc.strerror}") from None


__all__ = ["pin"]
