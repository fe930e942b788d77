"""``sandbox-conformance``: run the suite against a provider, list what it checks.

Exit codes: 0 the verdict passed · 1 it did not: a MUST failure (a SHOULD failure with --strict), an
error, a stale baseline, a flaky scenario, a leaked sandbox, nothing verified (every selected scenario
skipped or disabled), or an interrupted run · 2 bad usage or configuration, a provider that cannot be
started or handshaken, or a selection that matched no scenario. Every exit-2 problem is reported as one
line, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

# Only what the parser needs is imported here: `--version` and every `--help` build the whole parser, and
# start in a fraction of the time pytest, pytest-bdd, rich, jsonschema and httpx take to import. Each command
# imports what it runs inside its function (tests/test_startup.py checks no heavy module comes with this one).
from conformance import __version__, user_input
from conformance.errors import ConformanceError, UsageError
from conformance.inert import inert, inert_line
from conformance.options import DEFAULT_CALL_TIMEOUT_S, DIALECTS, INIT_TEMPLATES, PROG, SANDBOXES_PER_PROCESS
from conformance.transcript import REDACTOR

if TYPE_CHECKING:
    from conformance.config import RunConfig

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# What `list --dialect` takes: the plugin dialects `run --dialect` names, and REST's.
LISTED_DIALECTS = (*(name for name in DIALECTS if name != "auto"), "rest")
MAX_WORKERS = 256  # -n: more worker processes than this is a typo, not a machine
MAX_REPEAT = 1000  # --repeat: each repetition is a whole run


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line, and takes every option by its whole name only:
    an abbreviation (``--report-d``) would slip past the checks that look for an option by name (the CI
    action's refusal of ``--report-dir`` in ``args``), and would change meaning when a new option shares it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _whole_number(minimum: int, maximum: int | None = None, words: tuple[str, ...] = ()) -> Any:
    """An argparse type: a whole number in [minimum, maximum] (or one of ``words``), checked before any
    conversion that could raise on its own (an int of 5000 digits)."""
    def convert(value: str) -> int | str:
        if value in words:
            return value
        try:
            return user_input.whole_number(value, "", minimum, maximum)
        except UsageError as exc:
            if words:  # -n: the numbers' range and the words, in one message
                raise argparse.ArgumentTypeError(
                    f"must be a whole number from {minimum} to {maximum}, {' or '.join(map(repr, words))}, "
                    f"not {user_input.shown(value)}") from None
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def split_pytest_arguments(argv: list[str]) -> tuple[list[str], list[str]]:
    """The CLI's own arguments and those after the first ``--``, which `run` hands to pytest unread
    (argparse would take them for stray positionals)."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Conformance suite for sandbox providers.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="run the suite against a provider")
    _provider_options(run.add_argument_group("provider (default: the bundled reference plugin)"), for_run=True)
    select = run.add_argument_group("selection")
    select.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest keyword expression over test names")
    select.add_argument("--tags", metavar="EXPR", help="tag expression, e.g. 'must and not cap:exec.stdin'")
    select.add_argument("--scenario", action="append", default=[], metavar="ID",
                        help="run only this scenario id (repeatable)")
    select.add_argument("--feature", action="append", default=[], metavar="FILE",
                        help="run only the scenarios of this feature file, e.g. exec.feature (repeatable)")
    select.add_argument("--shard", metavar="I/N",
                        help="run only part I of N of the selection (for parallel CI jobs; see `report merge`)")
    output = run.add_argument_group("output")
    output.add_argument("--report-dir", metavar="DIR", help="where results go (default: ./reports)")
    output.add_argument("-v", "--verbose", action="store_true", help="one line per scenario")
    # checked here: xdist answers a bad -n with pytest's usage text, and takes a negative one silently
    run.add_argument("-n", dest="workers", type=_whole_number(0, MAX_WORKERS, ("auto", "logical")), metavar="N",
                     help=f"parallel workers (pytest-xdist): 0 to {MAX_WORKERS}, 'auto' or 'logical'")
    verdict = run.add_argument_group("verdict")
    verdict.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                         help="SHOULD failures fail the run (default: warnings; --no-strict overrides the file)")
    verdict.add_argument("--expected-failures", metavar="FILE",
                         help="baseline of known failures (YAML): listed failures are xfail, listed passes fail")
    verdict.add_argument("--update-baseline", metavar="FILE", help="write this run's failures to FILE as a baseline")
    verdict.add_argument("--repeat", type=_whole_number(1, MAX_REPEAT), default=1, metavar="N",
                         help="run the selection N times with the same seed; changed outcomes are flaky")
    stop = run.add_mutually_exclusive_group()
    stop.add_argument("-x", "--exitfirst", action="store_true",
                      help="stop after the first failed scenario (results and cleanup still happen)")
    stop.add_argument("--maxfail", type=_whole_number(1), metavar="N", help="stop after N failed scenarios")
    run.add_argument("--seed", type=_whole_number(0), help="seed of generated data; replays a run")
    run.add_argument("--run-id", help="label value that marks this run's sandboxes (default: random)")

    sweep = commands.add_parser("sweep", help="delete the sandboxes a past run left behind (by its run label, or by "
                                              "the ids its results.json records)")
    which = sweep.add_mutually_exclusive_group()
    which.add_argument("--run-id", help="the run whose sandboxes to delete (its label value)")
    which.add_argument("--from-results", metavar="PATH",
                       help="delete the sandboxes a past run's results.json says it left, by id (for a provider that "
                            "cannot list by label, such as forkd), through the provider that run used; one already "
                            "gone counts as done")
    sweep.add_argument("--all-recorded", action="store_true",
                       help="with --from-results: every sandbox the run created, not only those it left (for a "
                            "provider whose deletes may not have taken effect)")
    sweep.add_argument("--provider-moved", action="store_true",
                       help="with --from-results: the run's provider is reached at another URL or command now")
    _provider_options(sweep.add_argument_group("provider (default: the bundled reference plugin)"), for_run=False)

    init = commands.add_parser("init", help="write a configuration file, a GitHub Actions workflow and an empty "
                                            "baseline for a provider")
    target = init.add_mutually_exclusive_group(required=True)
    target.add_argument("--plugin", metavar="COMMAND", help="plugin command line")
    target.add_argument("--rest", metavar="URL", help="base URL of a REST provider")
    target.add_argument("--image", metavar="IMAGE[:TAG]", help="a REST provider packaged as a container image")
    target.add_argument("--template", metavar="|".join(INIT_TEMPLATES),
                        help="start a provider: copy the example examples/NAME/ (a plugin, or a REST server and its "
                             "profile, with a README) here, and point the file at it")
    init.add_argument("--profile", metavar="NAME|PATH", help="REST profile (with --rest or --image)")
    init.add_argument("--name", help="the provider's name in the file (default: from the command, URL or image)")
    init.add_argument("--dir", default=".", metavar="DIR", help="where to write (default: the current directory)")
    init.add_argument("--pin", action="store_true",
                      help="pin the plugin file's sha256: `run` then refuses a changed file until `pin` renews it")
    init.add_argument("--force", action="store_true",
                      help="update an existing configuration file's provider, keeping every other line (a "
                           "baseline or workflow that exists is always kept)")

    pin = commands.add_parser("pin", help="pin the configured plugin file's sha256 (after a rebuild: renew it), "
                                          "rewriting that one line of the configuration file")
    pin.add_argument("--config", metavar="FILE", help="configuration file (default: found from the current "
                                                      "directory up, as `run` finds it)")
    pin.add_argument("--provider", metavar="NAME", help="the provider to pin (default: the file's `provider`, "
                                                        "else its only one)")

    doctor = commands.add_parser("doctor", help="check that a provider can be reached, one line per check")
    _provider_options(doctor.add_argument_group("provider (default: the configuration file's, else the bundled "
                                                "reference plugin)"), for_run=True)
    doctor.add_argument("--report-dir", metavar="DIR", help="the report directory to check (default: ./reports)")

    listing = commands.add_parser("list", help="list the scenarios the suite defines")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.add_argument("--requirements", action="store_true",
                         help="list the protocol's requirements and the scenarios covering each instead")
    only = listing.add_argument_group("filters (scenarios must pass every filter given; a repeated one is any of)")
    only.add_argument("--level", action="append", default=[], choices=("must", "should", "may", "gap"),
                      help="only scenarios of this level (repeatable)")
    only.add_argument("--feature", action="append", default=[], metavar="FILE",
                      help="only the scenarios of this feature file, as `run --feature` takes it (repeatable)")
    only.add_argument("--tags", metavar="EXPR", help="only scenarios matching this tag expression, as `run --tags`")
    only.add_argument("--requirement", action="append", default=[], metavar="ID",
                      help="only scenarios verifying this requirement, e.g. SDP1-059 (repeatable)")
    only.add_argument("--dialect", action="append", default=[], choices=LISTED_DIALECTS,
                      help="only scenarios that apply to a provider of this dialect: written for it (or for any) "
                           "and citing one of its rules (repeatable)")

    explain = commands.add_parser("explain", help="what a requirement or a scenario asks, and what checks it")
    explain.add_argument("id", metavar="ID", help="a requirement id (SDP1-023, REST-004, ...) or a scenario id")
    explain.add_argument("--json", action="store_true", help="machine-readable output")
    explain.add_argument("--mutants", action="store_true",
                         help="also name the mutants (the suite's own test doubles) each scenario is proven to fail; "
                              "needs the suite's source checkout")

    reports = commands.add_parser("report", help="work with finished runs' reports")
    report_commands = reports.add_subparsers(dest="report_command", required=True, parser_class=_Parser)
    merge = report_commands.add_parser(
        "merge", help="join the results.json of a run's shards (run --shard) into one; of several providers' "
                      "runs, into a providers x scenarios matrix (matrix.html, matrix.md, matrix.json)")
    merge.add_argument("results", nargs="+", metavar="RESULTS_JSON",
                       help="one results.json per shard (or per run), of one provider or several")
    merge.add_argument("--out", required=True, metavar="DIR", help="where the merged reports go")
    merge.add_argument("--label", action="append", default=[], metavar="NAME",
                       help="a matrix column's title, once per provider in the order their first results.json "
                            "appears (default: kind, version and dialect)")

    commands.add_parser("lint", help="check the features' tags and the requirement registry agree")

    serve = commands.add_parser("serve", help="run a reference REST provider in the foreground")
    serve.add_argument("server", choices=("forkd",), help="which API to serve (forkd's)")
    serve.add_argument("--port", type=_whole_number(0, 65535), default=8889,
                       help="port to listen on; 0 picks a free one (default 8889)")
    serve.add_argument("--host", default=None, help="interface (default 127.0.0.1; 0.0.0.0 inside a container)")
    serve.add_argument("--token-env", default="FORKD_TOKEN", metavar="NAME",
                       help="environment variable holding the bearer token (default FORKD_TOKEN)")
    serve.add_argument("--compat", choices=("patched", "forkd-0.5.2"), default="patched",
                       help="whose behaviour to reproduce: the proposed controller patch (default: a timeout is 408 "
                            "'exec deadline exceeded', SandboxInfo has a state) or forkd 0.5.2, which fabro runs "
                            "(a timeout is 500 EAGAIN about timeout_secs + 5 s later, a signal is a negative exit "
                            "code, no state, memory_limit_mib enforced)")
    return parser


def _provider_options(target: argparse._ArgumentGroup, for_run: bool) -> None:
    """The options naming a provider; ``sweep`` takes them too, less what only a run can use."""
    files = target.add_mutually_exclusive_group()
    files.add_argument("--config", metavar="FILE", help="configuration file (default: sandbox-conformance.toml or "
                       "pyproject.toml's [tool.sandbox-conformance], found from the current directory up)")
    files.add_argument("--no-config", action="store_true", help="read no configuration file")
    target.add_argument("--provider", metavar="NAME", help="a provider named in the configuration file")
    which = target.add_mutually_exclusive_group()
    which.add_argument("--plugin", metavar="COMMAND", help="plugin command line, e.g. \"./my-plugin --flag\"")
    which.add_argument("--rest", metavar="URL", help="base URL of a REST provider, e.g. http://127.0.0.1:8889")
    if for_run:
        which.add_argument("--image", metavar="IMAGE[:TAG]",
                           help="start a REST provider packaged as a container image, run against it, remove it")
    target.add_argument("--profile", metavar="NAME|PATH",
                        help="REST profile: a built-in name or a YAML file (default with --rest or --image: forkd)")
    target.add_argument("--dialect", choices=DIALECTS, help="wire dialect (default: auto)")
    target.add_argument("--create-spec", metavar="JSON|@FILE",
                        help="creation spec for the sandboxes scenarios create (default: the dialect's default)")
    target.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set a variable in the plugin's environment (values are redacted in reports)")
    target.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                        help="forward a variable from this environment to the plugin (its value is redacted)")
    target.add_argument("--call-timeout", type=float, default=None, metavar="SECONDS",
                        help=f"deadline of a single provider call (default: {DEFAULT_CALL_TIMEOUT_S:.0f}; given, it "
                             "is a REST request's deadline too, over the profile's request_timeout_s)")
    target.add_argument("--startup-timeout", type=float, default=None, metavar="SECONDS",
                        help="deadline of a plugin's handshake, its process start included (default: the call "
                             "timeout, but at least 30)")
    if for_run:
        target.add_argument("--max-message-bytes", metavar="BYTES",
                            help="longest line read from a stdio plugin, e.g. 1048576 or 1MiB; a longer one is "
                                 "a wire violation that ends the connection (default: the protocol's limit, "
                                 "1 MiB in v2; 256 MiB where the protocol sets none)")
        target.add_argument("--open-ack", choices=("on", "off"),
                            help="sandbox-driver-v2 plugins: announce open_ack, so each data channel waits for "
                                 "the suite's acknowledgment before its data (default: on)")
        target.add_argument("--sandboxes-per-process", choices=SANDBOXES_PER_PROCESS,
                            help="fabro-sketch plugins: does one plugin process own one sandbox or many "
                                 "(default: auto, detected with a probe)")


# -- run -----------------------------------------------------------------------------------------


def command_run(args: argparse.Namespace) -> int:
    from conformance import interrupts
    from conformance.config import RunConfig

    config = RunConfig.from_arguments(args)
    with interrupts.trapped():
        return _run_on_provider(config)


def _run_on_provider(config: RunConfig) -> int:
    from conformance import runner

    if config.provider.image is None:
        return report(runner.run(config, runner.preflight(config)))
    from conformance import containers

    containers.require_image_extra()  # before the profile is read: the one thing to fix is the installation
    profile = config.provider.rest_profile()
    with containers.running(config.provider.image, profile, config.run_id) as provider:
        config = config.with_provider(rest_url=provider.url)
        config.provider.validate()
        return report(runner.run(config, runner.preflight(config)))


def command_report_merge(args: argparse.Namespace) -> int:
    """One provider: the merged run's summary, and its verdict as the exit code (as `run` would have given
    it). Several: each provider's verdict in one line and where the matrix is; exit 0 only if every provider
    passes."""
    from conformance.reporting import matrix, shards, terminal

    groups = shards.by_provider(shards.read_documents(args.results))
    if len(groups) == 1:
        if args.label:
            raise UsageError("--label names matrix columns, but every results.json given is one provider's")
        document = shards.write_run(Path(args.out), shards.merge(groups[0]))
        print(terminal.render_summary(document), end="")
        return EXIT_OK if document["verdict"]["passed"] else EXIT_FAILED
    table = matrix.merge_providers(groups, Path(args.out), args.label)
    for provider in table["providers"]:
        must = provider["must"]
        verdict = "PASS" if provider["verdict"]["passed"] else "FAIL"
        print(inert(f"{verdict} {provider['label']}: MUST {must['passed']} passed, {must['failed']} failed, "
                    f"{must['error']} errors (run in {Path(args.out) / provider['slug']})"))
    print(f"{len(table['scenarios'])} scenarios, {table['disagreements']} where providers disagree: "
          f"{Path(args.out) / 'matrix.html'} (also matrix.md, matrix.json)")
    return EXIT_OK if all(provider["verdict"]["passed"] for provider in table["providers"]) else EXIT_FAILED


def report(outcome) -> int:
    """The exit code; why the run failed, one line each on stderr, for logs that only keep stderr (the
    suite's own in-process runs print the same lines through it); in a GitHub Actions step, the Markdown
    summary of the whole run (once, also under --repeat) on the job's page."""
    if outcome.document is not None:
        from conformance.reporting.markdown import append_step_summary

        append_step_summary(outcome.document.data)
    if outcome.note:
        print(f"{PROG}: {inert_line(outcome.note)}", file=sys.stderr)
    elif outcome.exit_code == EXIT_FAILED and outcome.document is not None:
        for reason in outcome.document.reasons:
            print(f"{PROG}: FAIL: {inert_line(reason)}", file=sys.stderr)
    return outcome.exit_code


# -- list ----------------------------------------------------------------------------------------


def command_list(args: argparse.Namespace) -> int:
    if args.requirements:
        given = [flag for flag, value in (("--level", args.level), ("--feature", args.feature),
                                          ("--tags", args.tags), ("--requirement", args.requirement),
                                          ("--dialect", args.dialect)) if value]
        if given:
            raise UsageError(f"list --requirements takes no scenario filter ({', '.join(given)})")
        return _list_requirements(args)
    entries = _filtered_scenarios(args)
    if args.json:
        print(json.dumps([{"id": e.id, "name": e.name, "feature": e.feature, "level": e.tags.level,
                           "requirements": list(e.tags.requirements), "capabilities": list(e.tags.capabilities),
                           "dialects": list(e.tags.dialects)} for e in entries], indent=2))
        return EXIT_OK
    console = _console()
    if not console.is_terminal:  # a pipe or a file: one whole line per scenario, for grep, cut and awk
        for entry in entries:
            print(inert("\t".join((entry.id, entry.tags.level or "", " ".join(entry.tags.requirements),
                                    entry.name))))
        return EXIT_OK
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(entries)} scenario{'' if len(entries) == 1 else 's'}")
    table.add_column("id", no_wrap=True)  # ids are what a reader copies into --scenario: never broken
    table.add_column("title", ratio=1)  # the one column that gives way on a narrow terminal
    for column in ("level", "requirements", "gates"):
        table.add_column(column)
    table.add_column("feature", no_wrap=True)
    for entry in entries:
        gates = [f"cap:{c}" for c in entry.tags.capabilities] + [f"dialect:{d}" for d in entry.tags.dialects]
        # ids of outline rows and titles may carry brackets, which rich would read as markup
        table.add_row(escape(entry.id), escape(entry.name), entry.tags.level or "",
                      " ".join(entry.tags.requirements), " ".join(gates), entry.feature)
    console.print(table)
    return EXIT_OK


def _filtered_scenarios(args: argparse.Namespace) -> list:
    """The catalogue's scenarios passing every filter of ``list``; an unknown feature or requirement is a
    UsageError naming the closest known ones. Feature and tag filters match as they do for ``run``."""
    from conformance import requirements as registry
    from conformance.config import Selection, closest_hint
    from conformance.reporting.catalogue import all_scenarios

    entries = all_scenarios()
    selection = Selection(features=tuple(args.feature), tags=args.tags)
    selection.check_known(entries)
    verifying: set[str] | None = None
    if args.requirement:
        requirements = registry.load()
        for rid in args.requirement:
            if rid not in requirements:
                raise UsageError(f"--requirement {rid!r} is not a requirement id{closest_hint(rid, requirements)}")
        # the same coverage `list --requirements` shows: a v2 rule is verified by the scenarios citing what it carries
        covering = registry.coverage(requirements, entries)
        verifying = {sid for rid in args.requirement for sid in covering[rid]}
    return [entry for entry in entries
            if selection.wants(entry.id, entry.feature, entry.tags.tag_set())
            and (not args.level or entry.tags.level in args.level)
            and (verifying is None or entry.id in verifying)
            and (not args.dialect or any(_applies(entry, dialect) for dialect in args.dialect))]


def _applies(entry, dialect: str) -> bool:
    """Whether a run against a provider of ``dialect`` would run the scenario (capabilities permitting), as the
    plugin gates it (conformance/plugin/fixtures.py): written for that dialect or for any, citing one of its rules."""
    from conformance import requirements as registry

    tags = entry.tags
    return (not tags.dialects or dialect in tags.dialects) and bool(registry.cited_under(tags.requirements, dialect))


def _console():
    """A terminal's own width; piped (grep, a file), wide enough to keep most rows on one line, unless
    COLUMNS says otherwise."""
    from rich.console import Console

    class ReaderConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich's own handling exits with 1; a reader that stopped early is handled in _read_out (exit 0)
            raise BrokenPipeError

    console = ReaderConsole()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = ReaderConsole(width=200)
    return console


def _list_requirements(args: argparse.Namespace) -> int:
    """Each requirement with the scenarios that verify it, or why none can; then the counts."""
    from collections import Counter

    from conformance import requirements as registry
    from conformance.reporting.catalogue import all_scenarios

    requirements = registry.load()
    # Each requirement's set (r.registry) is a dialect's own rules (judging only its providers) or the gaps.
    # Coverage counts a scenario citing a v1 rule for the v2 rule that carries it.
    covering = registry.coverage(requirements, all_scenarios())
    states = {rid: registry.status(requirements[rid], sids) for rid, sids in covering.items()}
    counts = Counter(states.values())
    summary = {state: counts[state] for state in ("covered", "excluded", "uncovered")}
    levels = {name: dict(Counter(r.level for r in requirements.values() if r.registry == name))
              for name in registry.registries()}
    if args.json:
        print(json.dumps({
            "requirements": [{"id": r.id, "set": r.registry, "level": r.level, "section": r.section,
                              "testability": r.testability, "carries": list(r.carries),
                              "text": r.text, "status": states[r.id], "scenarios": covering[r.id],
                              "excluded": r.excluded, "note": r.note} for r in requirements.values()],
            "summary": summary,
            "levels": levels,
        }, indent=2))
        return EXIT_OK
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(requirements)} requirements")
    for column in ("id", "set", "level", "testability", "carries", "covered by"):
        table.add_column(column)
    for r in requirements.values():
        if r.excluded:
            cell = escape(f"excluded: {r.excluded}")
        else:  # scenario ids of outline rows carry brackets, which rich would read as markup
            cell = escape(" ".join(covering[r.id])) if covering[r.id] else "[red]uncovered[/red]"
        table.add_row(r.id, r.registry, r.level, r.testability, " ".join(r.carries), cell)
    console = _console()
    console.print(table)
    sets = Table(title="levels per requirement set (a provider is held to its dialect's set and the gaps)")
    sets.add_column("set")
    for level in registry.LEVELS:
        sets.add_column(level, justify="right")
    for name, counted in levels.items():
        sets.add_row(name, *(str(counted.get(level, 0)) for level in registry.LEVELS))
    console.print(sets)
    console.print(f"BB/BB+F covered: {summary['covered']} · excluded: {summary['excluded']} · "
                  f"uncovered: {summary['uncovered']}", highlight=False)
    return EXIT_OK


# -- lint ----------------------------------------------------------------------------------------


def command_lint(args: argparse.Namespace) -> int:
    """Every problem in the features' tags and the requirement registry, one per line; exit 1 if any."""
    from collections import Counter

    from conformance import requirements as registry
    from conformance.reporting.catalogue import all_scenarios

    entries = all_scenarios()
    requirements = registry.load()
    found: list[str] = []
    seen: set[tuple[str, int]] = set()
    for entry in entries:
        if (entry.feature, entry.line) not in seen:  # outline rows share their template's tags
            seen.add((entry.feature, entry.line))
            found += [f"{entry.feature}:{entry.line} {entry.name!r}: {p}" for p in entry.tags.problems()]
    found += [f"duplicate scenario id {sid} ({count} scenarios)"
              for sid, count in Counter(e.id for e in entries).items() if count > 1]
    found += registry.problems(requirements, entries)
    for line in found:
        print(line)
    if found:
        return EXIT_FAILED
    covered = sum(1 for sids in registry.coverage(requirements, entries).values() if sids)
    print(f"lint OK: {len(entries)} scenarios, {len(requirements)} requirements ({covered} covered by scenarios)")
    return EXIT_OK


# -- sweep ---------------------------------------------------------------------------------------


def command_sweep(args: argparse.Namespace) -> int:
    """Delete the sandboxes labelled with a past run's id: 0 nothing left, 1 some left (named)."""
    from conformance import config_file, sweep
    from conformance.config import call_timeout, load_create_spec, startup_timeout
    from conformance.providers import ProviderConfig, parse_env_pairs, profile_reference

    args = config_file.apply(args)
    config = ProviderConfig(
        plugin=args.plugin, dialect=args.dialect, env=parse_env_pairs(args.env),
        pass_env=user_input.env_names(args.pass_env, "--pass-env"), create_spec=load_create_spec(args.create_spec),
        run_id=user_input.run_id(args.run_id) if args.run_id is not None else "",
        call_timeout_s=call_timeout(args), call_timeout_given=args.call_timeout is not None,
        startup_timeout_s=startup_timeout(args), rest_url=args.rest, profile=profile_reference(args.profile, args.rest is not None), sha256=args.sha256,
        pin_hint=getattr(args, "pin_hint", None),
    )
    config.validate()
    if args.from_results is None and (args.all_recorded or args.provider_moved):
        raise UsageError(f"{'--all-recorded' if args.all_recorded else '--provider-moved'} applies to --from-results "
                         "only")
    if args.from_results is not None:
        result = sweep.sweep_recorded(config, Path(args.from_results), args.all_recorded, args.provider_moved)
    elif args.run_id is None:
        raise UsageError("give --run-id (sweep by the run's label) or --from-results PATH (by the ids a results.json "
                         "records)")
    else:
        result = sweep.sweep(config)
    sweep.print_result(result)
    return result.exit_code


# -- init, doctor --------------------------------------------------------------------------------


def command_init(args: argparse.Namespace) -> int:
    from conformance import scaffold

    for said in (scaffold.write_template(args) if args.template else scaffold.write(args)):
        print(inert(said))
    return EXIT_OK


def command_pin(args: argparse.Namespace) -> int:
    from conformance import pinning

    print(inert(pinning.pin(args)))
    return EXIT_OK


def command_doctor(args: argparse.Namespace) -> int:
    from conformance import doctor

    return doctor.run(args)


# -- serve ---------------------------------------------------------------------------------------


def command_serve(args: argparse.Namespace) -> int:
    from conformance.reference import rest_server

    return rest_server.serve(args.host, args.port, args.token_env, rest_server.compat_app(args.compat))


def command_explain(args: argparse.Namespace) -> int:
    from conformance import explain

    explain.print_explanation(args.id, as_json=args.json, with_mutants=args.mutants)
    return EXIT_OK


# Commands that only print what the suite knows: a reader that stops early (`list | head`) is no error.
READERS = {"list": command_list, "explain": command_explain, "lint": command_lint}


def _read_out(command, args: argparse.Namespace) -> int:
    try:
        code = command(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at the interpreter's exit
        return code
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_OK


def _stdout_to_devnull() -> None:
    """The usual convention for a closed pipe: what is still buffered goes nowhere, so the interpreter's
    final flush raises nothing either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no file descriptor (captured in a test): nothing to silence
        pass


def main(argv: list[str] | None = None) -> int:
    try:
        own, passed_on = split_pytest_arguments(list(sys.argv[1:] if argv is None else argv))
        args = build_parser().parse_args(own)
        if passed_on and args.command != "run":
            raise UsageError(f"arguments after -- go to pytest, which only `run` starts, not `{args.command}`")
        args.pytest_args = passed_on
        if args.command in READERS:
            return _read_out(READERS[args.command], args)
        if args.command == "run":
            return command_run(args)
        if args.command == "serve":
            return command_serve(args)
        if args.command == "report":
            return command_report_merge(args)
        if args.command == "init":
            return command_init(args)
        if args.command == "doctor":
            return command_doctor(args)
        if args.command == "pin":
            return command_pin(args)
        return command_sweep(args)
    except ConformanceError as exc:
        print(f"{PROG}: error: {inert_line(REDACTOR.text(str(exc)))}", file=sys.stderr)  # it may quote what a provider sent
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
