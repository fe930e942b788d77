"""The run configuration: built and validated once, frozen, and the only way settings travel.

``RunConfig`` comes from the command line (``RunConfig.from_arguments``), is handed to pytest as a
plugin object, reaches xdist workers serialized (``to_json``/``from_json``), and is rendered back into
the command that re-runs one scenario (``reproduce``). Nothing re-parses options further down.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance import config_file as config_files
from conformance import options, user_input
from conformance.errors import UsageError
from conformance.providers import (
    DIALECTS,
    SANDBOXES_PER_PROCESS,
    ProviderConfig,
    parse_env_pairs,
    profile_reference,
)
from conformance.reporting.writer import REPORT_FORMATS
from conformance.scenario_tags import TagExpression

if TYPE_CHECKING:
    from conformance.reporting.catalogue import CatalogueEntry

PROG = options.PROG
DEFAULT_CALL_TIMEOUT_S = options.DEFAULT_CALL_TIMEOUT_S
DEFAULT_REPORT_DIR = "reports"
REPRO_DIR = "repro"  # in a run's report directory: the reports of its reproduce commands, one directory each
_REPRO_UNSAFE = re.compile(r"[^A-Za-z0-9_.,=+-]")  # an outline row's id carries brackets and spaces


@dataclass(frozen=True)
class Selection:
    """Which scenarios run: ids (an outline row or its bare id), feature files, a tag expression, a
    pytest keyword expression. Empty means every scenario."""

    scenarios: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    tags: str | None = None
    keyword: str | None = None
    shard: tuple[int, int] | None = None  # (index, count), 1-based: --shard 2/3 runs the second of three parts

    def __post_init__(self) -> None:
        if self.shard is not None:
            index, count = self.shard
            if count < 1 or not 1 <= index <= count:
                raise UsageError(f"--shard must be i/n with 1 <= i <= n, not {index}/{count}")
        if self.tags:
            try:
                TagExpression(self.tags)
            except ValueError as exc:
                raise UsageError(f"--tags: {exc}") from None
            except RecursionError:
                raise UsageError("--tags nests parentheses too deeply") from None

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f.removeprefix("features/") for f in self.features)

    def wants(self, scenario_id: str, feature: str, tags: set[str]) -> bool:
        if self.scenarios:
            base = scenario_id.split("[", 1)[0]
            if scenario_id not in self.scenarios and base not in self.scenarios:
                return False
        if self.features and not any(feature_matches(feature, f) for f in self.feature_names):
            return False
        return not self.tags or TagExpression(self.tags).matches(tags)

    def shard_of(self, selected_ids: Iterable[str]) -> set[str]:
        """The ids of ``selected_ids`` this shard runs (all of them without --shard).

        The partition is balanced by the scenarios' recorded durations (``reporting.durations``): it depends
        on nothing but the ids and the shipped durations file (stable across runs, machines and xdist
        workers), and every id lands in exactly one shard."""
        if self.shard is None:
            return set(selected_ids)
        from conformance.reporting import durations

        index, count = self.shard
        return set(durations.balanced_partition(selected_ids, count, durations.recorded())[index - 1])

    def check_known(self, catalogue: Sequence[CatalogueEntry]) -> None:
        """``UsageError`` naming the first --scenario or --feature that no scenario of ``catalogue`` answers
        to, with the closest known ones: a typo is exit 2 before any provider starts, not an empty run.
        Known is what ``wants`` matches: an outline row's id or its bare id; a feature path or its tail."""
        ids = {entry.id for entry in catalogue} | {entry.base_id for entry in catalogue}
        for wanted in self.scenarios:
            if wanted not in ids:
                raise UsageError(f"--scenario {wanted!r} is not a scenario id{closest_hint(wanted, ids)}")
        features = {entry.feature for entry in catalogue}
        for wanted in self.feature_names:
            if not any(feature_matches(feature, wanted) for feature in features):
                tails = features | {feature.rsplit("/", 1)[-1] for feature in features}
                raise UsageError(f"--feature {wanted!r} is not a feature file{closest_hint(wanted, tails)}")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``--shard i/n`` as (i, n); ``UsageError`` for anything but two whole numbers with 1 <= i <= n."""
    if text is None:
        return None
    index, slash, count = text.partition("/")
    if not (slash and index.isascii() and index.isdigit() and count.isascii() and count.isdigit()):
        raise UsageError(f"--shard must be i/n (e.g. 2/3), not {text!r}")
    if max(len(index), len(count)) > user_input.MAX_DIGITS:  # before int(), which raises past 4300 digits
        raise UsageError(f"--shard must be i/n (e.g. 2/3), not a number of {max(len(index), len(count))} digits")
    shard = (int(index), int(count))
    Selection(shard=shard)  # the range check lives in one place
    return shard


def feature_matches(feature: str, wanted: str) -> bool:
    """``exec.feature`` names every feature file of that name (``v2/exec.feature`` too); a path names one."""
    return feature == wanted or feature.endswith("/" + wanted)


def closest_hint(wanted: str, known: Iterable[str], count: int = 3) -> str:
    """``" (closest: a, b)"`` for the known names nearest to a mistyped one, or a pointer to ``list``."""
    import difflib

    close = difflib.get_close_matches(wanted, sorted(known), n=count, cutoff=0.6)
    return f" (closest: {', '.join(close)})" if close else f" (see `{PROG} list`)"


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs. Frozen: a resolved variant (the detected dialect, a container's URL)
    is a new object made with ``dataclasses.replace``."""

    provider: ProviderConfig = field(default_factory=ProviderConfig)
    selection: Selection = field(default_factory=Selection)
    report_dir: str = DEFAULT_REPORT_DIR
    seed: int = 0
    strict: bool = False
    expected_failures: str | None = None  # an absolute path
    update_baseline: str | None = None  # an absolute path
    repeat: int = 1
    workers: str | None = None  # pytest-xdist's -n
    verbose: bool = False
    maxfail: int = 0  # stop after this many failed scenarios (pytest's --maxfail; -x is 1); 0 runs them all
    pytest_args: tuple[str, ...] = ()  # what followed `--` on the command line, handed to pytest as given
    invoked_as: tuple[str, ...] = (PROG,)  # how the user started the CLI, for the reproduce command
    report_formats: tuple[str, ...] = REPORT_FORMATS  # written beside results.json
    # The configuration file the run read (absolute), the named provider it took from it, and the env names
    # that came from the file: the reproduce command refers to the file for those instead of repeating them.
    config_file: str | None = None
    provider_name: str | None = None
    file_env_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.repeat < 1:
            raise UsageError(f"--repeat must be at least 1, not {self.repeat}")
        if self.seed < 0:
            raise UsageError(f"--seed must not be negative, not {self.seed}")
        if self.maxfail < 0:
            raise UsageError(f"--maxfail must be at least 1, not {self.maxfail}")

    @property
    def run_id(self) -> str:
        return self.provider.run_id

    # -- serialization (xdist workers) -----------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        data = json.loads(text)
        provider = data.pop("provider")
        provider["pass_env"] = tuple(provider["pass_env"])
        provider["in_process"] = tuple(provider["in_process"]) if provider.get("in_process") else None
        selection = data.pop("selection")
        return cls(
            provider=ProviderConfig(**provider),
            # JSON turns the shard's (index, count) into a list, like the id tuples
            selection=Selection(**{k: tuple(v) if isinstance(v, list) else v for k, v in selection.items()}),
            **{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()},
        )

    # -- the reproduce command -------------------------------------------------------------------

    def reproduce(self, scenario_id: str | None = None) -> str:
        """The command that re-runs ``scenario_id`` (or the whole selection) as this run did.

        Every value handed to the provider is a secret: it is rendered as ``"${NAME:?…}"`` — double
        quoted, so the shell expands it, and failing with a message naming the variable to export when
        it is not set. Everything else is literal, the seed and timeouts included.
        """
        provider = self.provider
        parts: list[str] = [shlex.join(self.invoked_as), "run"]

        def option(name: str, value: Any = None) -> None:
            parts.append(name if value is None else f"{name} {shlex.quote(str(value))}")

        # The file the run read is named, so its values apply again; every flag below repeats a value of
        # this run and overrides the file's with the same. A named provider's command and env stay in the file.
        if self.config_file is not None:
            option("--config", self.config_file)
        else:  # this run read no file; pasted where one would be found, the command must not read it either
            option("--no-config")
        if self.provider_name is not None:
            option("--provider", self.provider_name)
        else:
            self._provider_target(option)
        if provider.dialect != "auto":
            option("--dialect", provider.dialect)
        if not provider.open_ack:
            option("--open-ack", "off")
        if provider.sandboxes_per_process != "auto":
            option("--sandboxes-per-process", provider.sandboxes_per_process)
        if provider.create_spec is not None:
            option("--create-spec", json.dumps(provider.create_spec, separators=(",", ":")))
        for name in provider.env:
            if name in self.file_env_names and self.provider_name is not None:
                continue
            parts.append(f'--env "{name}=${{{name}:?export {name} first}}"')
        for name in provider.pass_env:
            option("--pass-env", name)
        if provider.call_timeout_given or provider.call_timeout_s != DEFAULT_CALL_TIMEOUT_S:
            option("--call-timeout", _number(provider.call_timeout_s))
        if provider.startup_timeout_s is not None:
            option("--startup-timeout", _number(provider.startup_timeout_s))
        if provider.max_message_bytes is not None:
            option("--max-message-bytes", provider.max_message_bytes)
        if scenario_id is not None:
            option("--report-dir", self.repro_dir(scenario_id))
        option("--seed", self.seed)
        if self.strict:
            option("--strict")
        elif self.config_file is not None:  # the file may say strict = true; this run was not
            option("--no-strict")
        if scenario_id is not None:
            option("--scenario", scenario_id)
        return " ".join(parts)

    def repro_dir(self, scenario_id: str) -> str:
        """Where a reproduce command's reports go: ``repro/<id>/`` in this run's report directory, beside its
        reports, never over them (a pasted command replaced a whole run's results.json with one scenario's).
        A reproduction's own reproduce command writes where it did; the path is relative when the report
        directory is under the working directory (the command pastes in the directory it ran in)."""
        slug = _REPRO_UNSAFE.sub("_", scenario_id)
        report_dir = Path(self.report_dir)
        if not (report_dir.name == slug and report_dir.parent.name == REPRO_DIR):
            report_dir = report_dir / REPRO_DIR / slug
        cwd = Path.cwd()
        return os.path.relpath(report_dir, cwd) if report_dir.is_relative_to(cwd) else str(report_dir)

    def _provider_target(self, option: Any) -> None:
        """The flags that say which provider to reach."""
        provider = self.provider
        if provider.image is not None:  # the container's URL is gone once the run ends; the image is not
            option("--image", provider.image)
        elif provider.rest_url is not None:
            option("--rest", provider.rest_url)
        if provider.is_rest and provider.profile is not None:
            option("--profile", provider.profile)
        if provider.plugin is not None or provider.in_process is not None:
            option("--plugin", provider.display)

    def variables_to_export(self) -> list[str]:
        """The environment variables a pasted reproduce command needs (their values are never shown)."""
        in_file = set(self.file_env_names) if self.provider_name is not None else set()
        names = [name for name in self.provider.env if name not in in_file]
        if self.provider.is_rest and self.provider.image is None:
            token_env = self.provider.token_env()
            if token_env:
                names.append(token_env)
        return names

    # -- building --------------------------------------------------------------------------------

    @classmethod
    def from_arguments(cls, args: Any, invoked_as: Sequence[str] | None = None) -> RunConfig:
        """The configuration of ``sandbox-conformance run`` from its parsed arguments; ``UsageError``
        (one line naming the problem) for anything that cannot work."""
        from conformance.reporting.catalogue import all_scenarios

        if not hasattr(args, "config_file"):  # the file is merged under the flags once, here or by the caller
            args = config_files.apply(args)
        try:
            selection = Selection(scenarios=tuple(args.scenario), features=tuple(args.feature), tags=args.tags,
                                  keyword=args.keyword, shard=parse_shard(args.shard))
            selection.check_known(all_scenarios())
        except UsageError as exc:
            if getattr(args, "selection_from", None):
                raise UsageError(f"{args.selection_from}: [selection]: {exc}") from None
            raise
        rest_target = args.rest is not None or args.image is not None
        seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
        provider = ProviderConfig(
            plugin=args.plugin, dialect=args.dialect, env=parse_env_pairs(args.env),
            pass_env=user_input.env_names(args.pass_env, "--pass-env"),
            create_spec=load_create_spec(args.create_spec),
            # each repetition of --repeat N labels its sandboxes with the run id and -rN
            run_id=f"run-{uuid.uuid4().hex[:12]}" if args.run_id is None else
            user_input.run_id(args.run_id, suffix=f"-r{args.repeat}" if args.repeat > 1 else ""),
            call_timeout_s=call_timeout(args), call_timeout_given=args.call_timeout is not None,
            startup_timeout_s=startup_timeout(args),
            sandboxes_per_process=args.sandboxes_per_process,
            rest_url=args.rest, profile=profile_reference(args.profile, rest_target), image=args.image,
            open_ack=args.open_ack == "on",
            max_message_bytes=valid_byte_count(args.max_message_bytes, "--max-message-bytes"),
            sha256=args.sha256, pin_hint=getattr(args, "pin_hint", None),
        )
        if args.image is not None and not provider.open_ack:
            raise UsageError("--open-ack applies to sandbox-driver-v2 plugins only, not REST providers")
        if args.image is None:
            provider.validate()
        elif provider.profile is not None:
            provider.rest_profile()  # a bad profile is exit 2 before any container starts
        if args.expected_failures:
            from conformance.reporting.baseline import Baseline

            Baseline.load(args.expected_failures)
        if args.update_baseline:
            check_writable_file(args.update_baseline)
        check_report_dir(args.report_dir)
        return cls(
            provider=provider,
            selection=selection,
            report_dir=str(Path(args.report_dir).resolve()),
            seed=seed, strict=args.strict,
            expected_failures=str(Path(args.expected_failures).resolve()) if args.expected_failures else None,
            update_baseline=str(Path(args.update_baseline).resolve()) if args.update_baseline else None,
            repeat=args.repeat, workers=None if args.workers is None else str(args.workers), verbose=args.verbose,
            maxfail=1 if args.exitfirst else (args.maxfail or 0), pytest_args=tuple(args.pytest_args),
            invoked_as=tuple(invoked_as) if invoked_as else invoked_command(),
            report_formats=tuple(args.report_formats), config_file=args.config_file,
            provider_name=args.provider_name, file_env_names=tuple(args.file_env_names),
        )

    def with_provider(self, **changes: Any) -> RunConfig:
        return replace(self, provider=replace(self.provider, **changes))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def invoked_command(argv0: str | None = None) -> tuple[str, ...]:
    """How the user started this CLI, as a command that works when pasted in the same directory."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    name = Path(argv0).name
    if name in ("cli.py", "__main__.py") or not argv0:  # python -m conformance.cli
        return (sys.executable, "-m", "conformance.cli")
    return (argv0,)


def call_timeout(args: Any) -> float:
    """``--call-timeout`` when given (checked), else the default."""
    if args.call_timeout is None:
        return DEFAULT_CALL_TIMEOUT_S
    return valid_timeout(args.call_timeout, "--call-timeout")


def startup_timeout(args: Any) -> float | None:
    """``--startup-timeout`` when given (checked), else None (the provider configuration's default)."""
    value = getattr(args, "startup_timeout", None)
    return None if value is None else valid_timeout(value, "--startup-timeout")


def valid_timeout(value: Any, flag: str) -> float:
    return user_input.seconds(value, flag)


_BYTE_UNITS = {"": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
MAX_MESSAGE_BYTES = 4 * 1024**3  # a line read whole into memory: more is no limit at all on any machine


def valid_byte_count(value: str | None, flag: str) -> int | None:
    """A positive whole number of bytes, optionally in KiB, MiB or GiB, at most 4 GiB; None when not given."""
    if value is None:
        return None
    text = value.strip()
    for unit, factor in sorted(_BYTE_UNITS.items(), key=lambda item: -len(item[0])):
        number = text.removesuffix(unit).strip() if unit else text
        if (not unit or text.endswith(unit)) and number.isascii() and number.isdigit():
            count = int(number) * factor if len(number) <= user_input.MAX_DIGITS else MAX_MESSAGE_BYTES + 1
            if count == 0:
                break
            if count > MAX_MESSAGE_BYTES:
                raise UsageError(f"{flag} must be at most 4GiB ({MAX_MESSAGE_BYTES} bytes), not {user_input.shown(text)}")
            return count
    raise UsageError(f"{flag} must be a positive whole number of bytes (e.g. 1048576 or 1MiB), not "
                     f"{user_input.shown(value)}")


MAX_CREATE_SPEC_BYTES = 1024**2


def load_create_spec(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    source = "--create-spec"
    if value.startswith("@"):
        path = Path(value[1:])
        source = f"--create-spec file {path}"
        value = user_input.read_text(path, source, MAX_CREATE_SPEC_BYTES)
    spec = user_input.load_json(value, source)
    if not isinstance(spec, dict):
        raise UsageError(f"{source} must be a JSON object")
    return spec


def check_report_dir(path: str) -> Path:
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--report-dir {path} is not writable: {exc.strerror}") from None
    return directory


def check_writable_file(path: str) -> None:
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"--update-baseline {path} is a directory")
    if not target.parent.is_dir():
        raise UsageError(f"--update-baseline {path}: the directory {target.parent} does not exist")


__all__ = ["DIALECTS", "PROG", "SANDBOXES_PER_PROCESS", "RunConfig", "Selection"]
