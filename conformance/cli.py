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
from typing import NoReturn

from conformance import __version__
from conformance.config import DEFAULT_CALL_TIMEOUT_S, PROG, RunConfig, load_create_spec, valid_timeout
from conformance.errors import ConformanceError, UsageError
from conformance.providers import (
    DIALECTS,
    SANDBOXES_PER_PROCESS,
    ProviderConfig,
    parse_env_pairs,
    profile_reference,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


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
    output = run.add_argument_group("output")
    output.add_argument("--report-dir", default="reports", metavar="DIR", help="where results go (default: ./reports)")
    output.add_argument("-v", "--verbose", action="store_true", help="one line per scenario")
    run.add_argument("-n", dest="workers", metavar="N", help="parallel workers (pytest-xdist), or 'auto'")
    verdict = run.add_argument_group("verdict")
    verdict.add_argument("--strict", action="store_true", help="SHOULD failures fail the run (default: warnings)")
    verdict.add_argument("--expected-failures", metavar="FILE",
                         help="baseline of known failures (YAML): listed failures are xfail, listed passes fail")
    verdict.add_argument("--update-baseline", metavar="FILE", help="write this run's failures to FILE as a baseline")
    verdict.add_argument("--repeat", type=int, default=1, metavar="N",
                         help="run the selection N times with the same seed; changed outcomes are flaky")
    run.add_argument("--seed", type=int, help="seed of generated data; replays a run")
    run.add_argument("--run-id", help="label value that marks this run's sandboxes (default: random)")

    sweep = commands.add_parser("sweep", help="delete the sandboxes a past run left behind (by its run label)")
    sweep.add_argument("--run-id", required=True, help="the run whose sandboxes to delete (its label value)")
    _provider_options(sweep.add_argument_group("provider (default: the bundled reference plugin)"), for_run=False)

    listing = commands.add_parser("list", help="list the scenarios the suite defines")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.add_argument("--requirements", action="store_true",
                         help="list the protocol's requirements and the scenarios covering each instead")

    commands.add_parser("lint", help="check the features' tags and the requirement registry agree")

    serve = commands.add_parser("serve", help="run a reference REST provider in the foreground")
    serve.add_argument("server", choices=("forkd",), help="which API to serve (forkd's)")
    serve.add_argument("--port", type=int, default=8889, help="port to listen on; 0 picks a free one (default 8889)")
    serve.add_argument("--host", default=None, help="interface (default 127.0.0.1; 0.0.0.0 inside a container)")
    serve.add_argument("--token-env", default="FORKD_TOKEN", metavar="NAME",
                       help="environment variable holding the bearer token (default FORKD_TOKEN)")
    return parser


def _provider_options(target: argparse._ArgumentGroup, for_run: bool) -> None:
    """The options naming a provider; ``sweep`` takes them too, less what only a run can use."""
    which = target.add_mutually_exclusive_group()
    which.add_argument("--plugin", metavar="COMMAND", help="plugin command line, e.g. \"./my-plugin --flag\"")
    which.add_argument("--rest", metavar="URL", help="base URL of a REST provider, e.g. http://127.0.0.1:8889")
    if for_run:
        which.add_argument("--image", metavar="IMAGE[:TAG]",
                           help="start a REST provider packaged as a container image, run against it, remove it")
    target.add_argument("--profile", metavar="NAME|PATH",
                        help="REST profile: a built-in name or a YAML file (default with --rest or --image: forkd)")
    target.add_argument("--dialect", default="auto", choices=DIALECTS, help="wire dialect (default: auto)")
    target.add_argument("--create-spec", metavar="JSON|@FILE",
                        help="creation spec for the sandboxes scenarios create (default: the dialect's default)")
    target.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set a variable in the plugin's environment (values are redacted in reports)")
    target.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                        help="forward a variable from this environment to the plugin (its value is redacted)")
    target.add_argument("--call-timeout", type=float, default=DEFAULT_CALL_TIMEOUT_S, metavar="SECONDS",
                        help="deadline of a single provider call (default: 30)")
    if for_run:
        target.add_argument("--sandboxes-per-process", choices=SANDBOXES_PER_PROCESS, default="auto",
                            help="fabro-sketch plugins: does one plugin process own one sandbox or many "
                                 "(default: auto, detected with a probe)")


# -- run -----------------------------------------------------------------------------------------


def command_run(args: argparse.Namespace) -> int:
    from conformance import interrupts

    config = RunConfig.from_arguments(args)
    with interrupts.trapped():
        return _run_on_provider(config)


def _run_on_provider(config: RunConfig) -> int:
    from conformance import runner

    if config.provider.image is None:
        return report(runner.run(config, runner.preflight(config)))
    from conformance import containers

    profile = config.provider.rest_profile()
    with containers.running(config.provider.image, profile, config.run_id) as provider:
        config = config.with_provider(rest_url=provider.url)
        config.provider.validate()
        return report(runner.run(config, runner.preflight(config)))


def report(outcome) -> int:
    """The exit code; why the run failed, one line each on stderr, for logs that only keep stderr (the
    suite's own in-process runs print the same lines through it)."""
    if outcome.note:
        print(f"{PROG}: {outcome.note}", file=sys.stderr)
    elif outcome.exit_code == EXIT_FAILED and outcome.document is not None:
        for reason in outcome.document.reasons:
            print(f"{PROG}: FAIL: {reason}", file=sys.stderr)
    return outcome.exit_code


# -- list ----------------------------------------------------------------------------------------


def command_list(args: argparse.Namespace) -> int:
    from conformance.reporting.catalogue import all_scenarios

    if args.requirements:
        return _list_requirements(args)
    entries = all_scenarios()
    if args.json:
        print(json.dumps([{"id": e.id, "name": e.name, "feature": e.feature, "level": e.tags.level,
                           "requirements": list(e.tags.requirements), "capabilities": list(e.tags.capabilities),
                           "dialects": list(e.tags.dialects)} for e in entries], indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(entries)} scenarios")
    for column in ("id", "level", "requirements", "gates", "feature"):
        table.add_column(column)
    for entry in entries:
        gates = [f"cap:{c}" for c in entry.tags.capabilities] + [f"dialect:{d}" for d in entry.tags.dialects]
        table.add_row(escape(entry.id), entry.tags.level or "", " ".join(entry.tags.requirements), " ".join(gates), entry.feature)
    Console(width=max(120, os.get_terminal_size(0).columns if sys.stdout.isatty() else 160)).print(table)
    return EXIT_OK


def _list_requirements(args: argparse.Namespace) -> int:
    """Each requirement with the scenarios that verify it, or why none can; then the counts."""
    from collections import Counter

    from conformance import requirements as registry
    from conformance.reporting.catalogue import all_scenarios

    requirements = registry.load()
    # Which set each requirement belongs to: a dialect's own rules (judging only its providers), or the gaps.
    set_of = {rid: name for name in registry.registries() for rid in registry.load(name)}
    covering = registry.coverage(requirements, all_scenarios())
    states = {rid: registry.status(requirements[rid], sids) for rid, sids in covering.items()}
    counts = Counter(states.values())
    summary = {state: counts[state] for state in ("covered", "excluded", "uncovered")}
    levels = {name: dict(Counter(r.level for r in requirements.values() if set_of[r.id] == name))
              for name in registry.registries()}
    if args.json:
        print(json.dumps({
            "requirements": [{"id": r.id, "set": set_of[r.id], "level": r.level, "section": r.section,
                              "testability": r.testability,
                              "text": r.text, "status": states[r.id], "scenarios": covering[r.id],
                              "excluded": r.excluded, "note": r.note} for r in requirements.values()],
            "summary": summary,
            "levels": levels,
        }, indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(requirements)} requirements")
    for column in ("id", "set", "level", "testability", "covered by"):
        table.add_column(column)
    for r in requirements.values():
        if r.excluded:
            cell = escape(f"excluded: {r.excluded}")
        else:  # scenario ids of outline rows carry brackets, which rich would read as markup
            cell = escape(" ".join(covering[r.id])) if covering[r.id] else "[red]uncovered[/red]"
        table.add_row(r.id, set_of[r.id], r.level, r.testability, cell)
    console = Console(width=max(120, os.get_terminal_size(0).columns if sys.stdout.isatty() else 160))
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
    from conformance import sweep

    config = ProviderConfig(
        plugin=args.plugin, dialect=args.dialect, env=parse_env_pairs(args.env), pass_env=tuple(args.pass_env),
        create_spec=load_create_spec(args.create_spec), run_id=args.run_id,
        call_timeout_s=valid_timeout(args.call_timeout, "--call-timeout"),
        rest_url=args.rest, profile=profile_reference(args.profile, args.rest is not None),
    )
    config.validate()
    result = sweep.sweep(config)
    sweep.print_result(result)
    return result.exit_code


# -- serve ---------------------------------------------------------------------------------------


def command_serve(args: argparse.Namespace) -> int:
    from conformance.reference import rest_server

    return rest_server.serve(args.host, args.port, args.token_env)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "run":
            return command_run(args)
        if args.command == "lint":
            return command_lint(args)
        if args.command == "serve":
            return command_serve(args)
        if args.command == "sweep":
            return command_sweep(args)
        return command_list(args)
    except ConformanceError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
