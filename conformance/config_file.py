"""The configuration file: ``[tool.sandbox-conformance]`` in ``pyproject.toml``, or ``sandbox-conformance.toml``.

It is found by walking up from the working directory (``--config FILE`` names one, ``--no-config`` ignores
them), checked against ``schemas/config/sandbox-conformance.json`` and then for what a schema cannot say
(one kind of provider, a known report format, files that exist), and merged *under* the parsed command line:
``apply`` fills every option the command line left unset from the file, then from the built-in defaults.
``RunConfig.from_arguments`` builds the one frozen configuration from the result, so nothing below this
module knows a file was involved. Every problem is a one-line ``UsageError`` naming the file and the key.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.errors import UsageError

FILE_NAME = "sandbox-conformance.toml"
PYPROJECT = "pyproject.toml"
TOOL_TABLE = ("tool", "sandbox-conformance")
SCHEMA = "config/sandbox-conformance.json"
PROVIDER_KINDS = ("plugin", "rest", "image")

# What the command line defaults to when neither it nor a file says (argparse's defaults are None, so a
# flag that was given can be told apart from one that was not).
DEFAULTS = {"dialect": "auto", "open_ack": "on", "sandboxes_per_process": "auto", "report_dir": "reports",
            "strict": False}
# The selection flags of `run`; any of them given replaces the file's [selection] as a whole. --shard is
# not one: it partitions whatever is selected, the file's selection included.
SELECTION_FLAGS = ("scenario", "feature", "tags", "keyword")
# What a name under a table of names must look like, as the schema says, for the message that names it.
NAME_RULES = {"providers": ("provider name", "letters, digits, _ . - (starting with a letter or digit)"),
              "env": ("env name", "letters, digits and _ (not starting with a digit)")}


@dataclass(frozen=True)
class ConfigFile:
    path: Path  # absolute
    table: dict[str, Any]  # the sandbox-conformance table, checked

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def providers(self) -> dict[str, dict[str, Any]]:
        return self.table.get("providers", {})

    def problem(self, key: str, text: str) -> UsageError:
        return UsageError(f"{self.path}: key '{key}' {text}")

    def relative(self, value: str) -> str:
        """A path of the file, as an absolute path: relative ones are relative to the file's directory."""
        return str(self.directory / Path(value).expanduser()) if not Path(value).expanduser().is_absolute() \
            else str(Path(value).expanduser())

    def default_provider(self) -> str | None:
        """The provider `run` uses when the command line names none: ``provider``, else the only one."""
        if "provider" in self.table:
            return self.table["provider"]
        if len(self.providers) == 1:
            return next(iter(self.providers))
        if self.providers:
            raise UsageError(f"{self.path} names {len(self.providers)} providers and no default 'provider': "
                             f"give --provider ({', '.join(sorted(self.providers))})")
        return None


def discover(start: Path) -> Path | None:
    """The nearest ``sandbox-conformance.toml``, or ``pyproject.toml`` with a ``[tool.sandbox-conformance]``
    table, in ``start`` or a directory above it; in one directory the dedicated file wins."""
    for directory in (start, *start.parents):
        candidate = directory / FILE_NAME
        if candidate.is_file():
            return candidate
        pyproject = directory / PYPROJECT
        if pyproject.is_file() and _tool_table(_parse(pyproject)) is not None:
            return pyproject
    return None


MAX_FILE_BYTES = 1024**2  # a configuration file is a few KiB; this bounds reading something that never ends


def _parse(path: Path) -> dict[str, Any]:
    from conformance.user_input import MAX_DIGITS, read_text

    text = read_text(path, str(path), MAX_FILE_BYTES)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"{path} nests tables or lists too deeply to read") from None
    except ValueError:  # tomllib converts an integer of more than 4300 digits with int(), which refuses it
        raise UsageError(f"{path} holds an integer too long to read (a setting takes at most {MAX_DIGITS} "
                         "digits)") from None


def _tool_table(document: dict[str, Any]) -> Any:
    tool = document.get(TOOL_TABLE[0])
    return tool.get(TOOL_TABLE[1]) if isinstance(tool, dict) else None


def load(path: Path) -> ConfigFile:
    """Read and check one configuration file."""
    path = path.resolve()
    document = _parse(path)
    if path.name == PYPROJECT:
        table = _tool_table(document)
        if table is None:
            raise UsageError(f"{path} has no [tool.sandbox-conformance] table")
        prefix = "tool.sandbox-conformance."
    else:
        table, prefix = document, ""
    config = ConfigFile(path, table)
    _check_schema(config, prefix)
    _check_meaning(config)
    return config


# -- checking --------------------------------------------------------------------------------------


_TYPE_NAMES = {"number": "a number", "integer": "a whole number", "string": "a string", "boolean": "true or false",
               "object": "a table", "array": "a list"}


def _shown(value: Any, key: str) -> str:
    """A wrong value as the message shows it; never one under ``env`` (those are secrets), never long."""
    if ".env" in f".{key}" or isinstance(value, (dict, list)):
        return {dict: "a table", list: "a list", str: "a string"}.get(type(value), type(value).__name__)
    text = json.dumps(value, default=str)  # TOML has dates and times, JSON has not
    return text if len(text) <= 60 else text[:57] + "..."


def _check_schema(config: ConfigFile, prefix: str) -> None:
    from jsonschema import Draft202012Validator

    from conformance import bundle

    schema = json.loads((bundle.schemas_dir() / SCHEMA).read_text(encoding="utf-8"))
    errors = sorted(Draft202012Validator(schema).iter_errors(config.table), key=lambda e: list(map(str, e.path)))
    if not errors:
        return
    error = errors[0]
    key = prefix + ".".join(str(part) for part in error.absolute_path)
    kind, expected = error.validator, error.validator_value
    if kind == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        unknown = min(set(error.instance) - set(known))
        close = difflib.get_close_matches(unknown, known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(known)})"
        name = f"{key}.{unknown}" if key else prefix + unknown
        raise config.problem(name, f"is not a setting{hint}")
    if "propertyNames" in error.relative_schema_path:
        # jsonschema reports the name's own failure (its pattern) at the table's path; the name is shown, a
        # value never is (under env, values are secrets)
        what, rule = NAME_RULES[str(error.absolute_path[-1]) if error.absolute_path else ""]
        raise UsageError(f"{config.path}: key '{key}': {what} {error.instance!r} must be {rule}")
    if kind == "type":
        wanted = [expected] if isinstance(expected, str) else expected
        raise config.problem(key, f"must be {' or '.join(_TYPE_NAMES.get(t, t) for t in wanted)}, "
                                  f"got {_shown(error.instance, key)}")
    if kind == "enum":
        raise config.problem(key, f"must be one of {', '.join(map(str, expected))}, got {_shown(error.instance, key)}")
    if kind == "exclusiveMinimum":
        raise config.problem(key, f"must be greater than {expected}, got {_shown(error.instance, key)}")
    if kind == "pattern" and key.endswith("sha256"):
        raise config.problem(key, "must be a sha256 digest (64 lowercase hex digits)")
    if kind == "minLength":
        raise config.problem(key, "must not be empty")
    if kind == "uniqueItems":
        raise config.problem(key, "lists a value twice")
    raise config.problem(key, error.message)


def _check_meaning(config: ConfigFile) -> None:
    """What the schema cannot say: known report formats and dialects, one kind per provider, a default
    that names a provider, files that exist."""
    from conformance.providers import DIALECTS
    from conformance.reporting.writer import REPORT_FORMATS

    for name in config.table.get("report-formats", []):
        if name not in REPORT_FORMATS:
            raise config.problem("report-formats", f"names an unknown format {name!r} (known: "
                                 f"{', '.join(REPORT_FORMATS)}; results.json is always written)")
    default = config.table.get("provider")
    if default is not None and default not in config.providers:
        raise config.problem("provider", f"names no provider of this file: {default!r}{_closest(default, config)}")
    for name, provider in config.providers.items():
        key = f"providers.{name}"
        kinds = [kind for kind in PROVIDER_KINDS if kind in provider]
        if len(kinds) != 1:
            raise config.problem(key, f"needs exactly one of plugin, rest or image, has {', '.join(kinds) or 'none'}")
        if "sha256" in provider and kinds != ["plugin"]:
            raise config.problem(f"{key}.sha256", "pins a plugin executable: it needs plugin")
        if "profile" in provider and kinds == ["plugin"]:
            raise config.problem(f"{key}.profile", "applies to REST providers only (rest or image)")
        if "dialect" in provider and provider["dialect"] not in (DIALECTS if kinds == ["plugin"] else ("auto", "rest")):
            choices = DIALECTS if kinds == ["plugin"] else ("auto", "rest")
            raise config.problem(f"{key}.dialect", f"must be one of {', '.join(choices)}, got {provider['dialect']!r}")
        if kinds == ["plugin"]:
            try:
                argv = shlex.split(provider["plugin"])
            except ValueError as exc:
                raise config.problem(f"{key}.plugin", f"is not a valid command line: {exc}") from None
            if not argv:
                raise config.problem(f"{key}.plugin", "must not be empty")
        if "open-ack" in provider and kinds != ["plugin"]:
            raise config.problem(f"{key}.open-ack", "applies to sandbox-driver-v2 plugins only, not REST providers")
        _check_values(config, key, provider)
        spec = provider.get("create-spec")
        if isinstance(spec, str):
            if not spec.startswith("@"):
                raise config.problem(f"{key}.create-spec", "must be a table or \"@FILE\" (a JSON file)")
            if not Path(config.relative(spec[1:])).is_file():
                raise config.problem(f"{key}.create-spec", f"names a file that does not exist: "
                                                           f"{config.relative(spec[1:])}")
    baseline = config.table.get("expected-failures")
    if baseline is not None and not Path(config.relative(baseline)).is_file():
        raise config.problem("expected-failures", f"names a file that does not exist: {config.relative(baseline)}")


def _check_values(config: ConfigFile, key: str, provider: dict[str, Any]) -> None:
    """The values a flag's own check would refuse later, refused here naming the file's key instead."""
    import math

    from conformance import user_input
    from conformance.config import valid_byte_count

    for setting in ("call-timeout", "startup-timeout"):
        timeout = provider.get(setting)
        if timeout is None:
            continue
        if isinstance(timeout, float) and not math.isfinite(timeout):  # the schema's exclusiveMinimum lets nan and inf by
            raise config.problem(f"{key}.{setting}", f"must be a finite number of seconds, got {timeout}")
        try:
            user_input.seconds(timeout, "")
        except UsageError as exc:
            raise config.problem(f"{key}.{setting}", str(exc).strip()) from None
    if "max-message-bytes" in provider:
        try:
            valid_byte_count(str(provider["max-message-bytes"]), "")
        except UsageError as exc:
            raise config.problem(f"{key}.max-message-bytes", str(exc).strip().replace(
                "(e.g. 1048576 or 1MiB)", "(e.g. 1048576 or \"1MiB\")")) from None
    spec = provider.get("create-spec")
    if isinstance(spec, dict):
        where = _first_non_json(spec)
        if where is not None:
            raise config.problem(".".join([f"{key}.create-spec", *where]),
                                 "is a TOML date or time, which a creation spec (JSON) cannot hold: quote it")


def _first_non_json(value: Any) -> list[str] | None:
    """The key path of the first value in ``value`` that JSON cannot represent (TOML's dates and times)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
    if items is None:
        return None if isinstance(value, (str, int, float, bool)) else []
    for name, item in items:
        where = _first_non_json(item)
        if where is not None:
            return [str(name), *where]
    return None


def _closest(name: str, config: ConfigFile) -> str:
    close = difflib.get_close_matches(name, sorted(config.providers), n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (it has: {', '.join(sorted(config.providers)) or 'none'})"


# -- merging under the command line ----------------------------------------------------------------


def chosen_file(args: argparse.Namespace, cwd: Path | None = None) -> Path | None:
    if getattr(args, "no_config", False):
        if args.config is not None:
            raise UsageError("--config and --no-config are mutually exclusive")
        return None
    if args.config is not None:
        path = Path(args.config)
        if not path.exists():
            raise UsageError(f"--config {args.config}: no such file")
        if path.is_dir():
            raise UsageError(f"--config {args.config} is a directory, not a configuration file")
        if not path.is_file():
            raise UsageError(f"--config {args.config} is not a regular file (a device, a pipe or a socket)")
        return path
    return discover((cwd or Path.cwd()).resolve())


def apply(args: argparse.Namespace, cwd: Path | None = None) -> argparse.Namespace:
    """``args`` with every option the command line left unset taken from the configuration file (if any),
    then from ``DEFAULTS``; adds ``config_file``, ``provider_name``, ``file_env_names``, ``sha256`` and
    ``report_formats``. The command line always wins: a provider flag (--plugin, --rest, --image) replaces
    the file's provider, a selection flag its selection, any other flag that one value. ``--env`` adds to
    the file's env (a name given in both takes the flag's value), ``--pass-env`` to its pass-env."""
    from conformance.reporting.writer import REPORT_FORMATS

    path = chosen_file(args, cwd)
    config = load(path) if path is not None else None
    args.config_file = str(config.path) if config is not None else None
    args.provider_name = None
    args.file_env_names = ()
    args.sha256 = None
    args.pin_hint = None
    args.report_formats = REPORT_FORMATS
    name = _provider_name(args, config)
    if name is not None:
        assert config is not None
        args.provider_name = name
        _fill_provider(args, config, name)
    if config is not None:
        _fill_run(args, config)
    for option, value in DEFAULTS.items():
        if hasattr(args, option) and getattr(args, option) is None:
            setattr(args, option, value)
    return args


def _provider_name(args: argparse.Namespace, config: ConfigFile | None) -> str | None:
    given = [flag for flag, option in (("--plugin", "plugin"), ("--rest", "rest"), ("--image", "image"))
             if getattr(args, option, None) is not None]
    wanted = getattr(args, "provider", None)
    if wanted is not None:
        if given:
            raise UsageError(f"--provider and {given[0]} are mutually exclusive (a named provider says how to reach it)")
        if config is None:
            raise UsageError(f"--provider {wanted}: no configuration file found (give --config FILE)")
        if wanted not in config.providers:
            raise UsageError(f"--provider {wanted!r} is not a provider of {config.path}{_closest(wanted, config)}")
        return wanted
    if given or config is None:
        return None
    return config.default_provider()


def _fill_provider(args: argparse.Namespace, config: ConfigFile, name: str) -> None:
    provider = config.providers[name]
    key = f"providers.{name}"
    if "image" in provider and not hasattr(args, "image"):
        raise config.problem(f"{key}.image", "is started by `run`; this command needs a running provider (--rest URL)")
    if "plugin" in provider:
        args.plugin = _plugin_command(config, provider["plugin"])
    args.rest = provider.get("rest")
    if hasattr(args, "image"):
        args.image = provider.get("image")
    profile = provider.get("profile")
    if args.profile is None and profile is not None:
        # a built-in profile name stays a name; anything that looks like a file is the file's path
        is_file = "/" in profile or profile.endswith((".yaml", ".yml"))
        args.profile = config.relative(profile) if is_file else profile
    args.sha256 = provider.get("sha256")
    if args.sha256 is not None:
        which = f" --provider {name}" if len(config.providers) > 1 else ""
        args.pin_hint = (f"run `sandbox-conformance pin --config {shlex.quote(str(config.path))}{which}` to trust the "
                         f"new file, or remove `sha256` from [providers.{name}] there")
    file_env = provider.get("env", {})
    given_on_command_line = {pair.partition("=")[0] for pair in args.env}
    args.file_env_names = tuple(env_name for env_name in file_env if env_name not in given_on_command_line)
    args.env = [f"{env_name}={value}" for env_name, value in file_env.items()] + list(args.env)
    args.pass_env = list(dict.fromkeys([*provider.get("pass-env", []), *args.pass_env]))
    if args.dialect is None:
        args.dialect = provider.get("dialect")
    if args.create_spec is None and "create-spec" in provider:
        spec = provider["create-spec"]
        args.create_spec = "@" + config.relative(spec[1:]) if isinstance(spec, str) else json.dumps(spec)
    if args.call_timeout is None:
        args.call_timeout = provider.get("call-timeout")
    if getattr(args, "startup_timeout", None) is None:
        args.startup_timeout = provider.get("startup-timeout")
    for option, setting in (("max_message_bytes", "max-message-bytes"),
                            ("sandboxes_per_process", "sandboxes-per-process")):
        if hasattr(args, option) and getattr(args, option) is None and setting in provider:
            setattr(args, option, str(provider[setting]))
    if hasattr(args, "open_ack") and args.open_ack is None and "open-ack" in provider:
        args.open_ack = "on" if provider["open-ack"] else "off"


def _plugin_command(config: ConfigFile, command: str) -> str:
    """The plugin command line with a relative executable path (``./target/release/plugin``) made absolute
    against the file's directory (a bare name is looked up on PATH, as a shell would), and so the script an
    interpreter runs (``python3 plugin.py``) when the file's directory has it."""
    from conformance.providers import interpreted_script

    argv = shlex.split(command)
    changed = False
    script = interpreted_script(argv, str(config.directory))
    if script is not None and not os.path.isabs(script):
        argv[argv.index(script)] = os.path.normpath(config.directory / script)
        changed = True
    if "/" in argv[0] and not os.path.isabs(os.path.expanduser(argv[0])):
        argv[0] = os.path.normpath(config.directory / argv[0])
        changed = True
    return shlex.join(argv) if changed else command


def _fill_run(args: argparse.Namespace, config: ConfigFile) -> None:
    table = config.table
    if hasattr(args, "report_dir") and args.report_dir is None and "report-dir" in table:
        args.report_dir = config.relative(table["report-dir"])
    if "report-formats" in table:
        args.report_formats = tuple(table["report-formats"])
    if hasattr(args, "expected_failures") and args.expected_failures is None and "expected-failures" in table:
        args.expected_failures = config.relative(table["expected-failures"])
    if hasattr(args, "strict") and args.strict is None and "strict" in table:
        args.strict = table["strict"]
    selection = table.get("selection")
    if selection and hasattr(args, "scenario") and not any(getattr(args, flag, None) for flag in SELECTION_FLAGS):
        args.scenario = list(selection.get("scenarios", []))
        args.feature = list(selection.get("features", []))
        args.tags = selection.get("tags") or None
        args.selection_from = str(config.path)


__all__ = ["ConfigFile", "apply", "discover", "load"]
