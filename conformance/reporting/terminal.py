"""The end-of-run summary on the terminal: counts, then each failure with what a provider author
needs to fix it."""

from __future__ import annotations

import io
import sys
from typing import IO, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from conformance.inert import inert_tree
from conformance.reporting import counts
from conformance.reporting.causes import cause_lines
from conformance.reporting.markdown import one_line, skips_by_reason
from conformance.reporting.model import HELD_BY_ENDED, seed_words

_STYLE = {"passed": "green", "failed": "bold red", "error": "bold magenta", "skipped": "yellow", "disabled": "dim",
          "xfail": "cyan", "xpass": "bold red"}
TRANSCRIPT_LINES = 40
# How many causes the summary lists before pointing at summary.md, and up to how many failures each gets its
# whole detail (requirement texts, messages, transcript): past that, one line each, the detail in the reports.
CAUSES_SHOWN = 12
FULL_DETAIL_UP_TO = 10
SKIPPED_IDS_SHOWN = 3


def is_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (stdout by default) is a terminal a person watches, as rich judges it (it
    honours FORCE_COLOR and the like); a CI log is not, and gets plain lines."""
    return Console(file=stream if stream is not None else sys.stdout).is_terminal


def wants_live_display(stream: IO[str] | None = None, verbose: bool = False) -> bool:
    """Whether a run shows the live progress line: on a terminal (``is_terminal``) that can move its cursor
    (not TERM=dumb or unknown), and not with -v, whose one line per scenario would fight it."""
    if verbose or not is_terminal(stream):
        return False
    return not Console(file=stream if stream is not None else sys.stdout).is_dumb_terminal


def failure_label(outcome: str, level: str | None, expected: bool = False) -> str:
    """How a failing scenario is announced: a violated gap proposal is a finding, never a verdict reason;
    a failure the baseline expects is an xfail."""
    if outcome == "failed" and level == "gap":
        return "GAP FINDING"
    if outcome == "failed" and expected:
        return "XFAIL"
    return outcome.upper()


def render_summary(document: dict[str, Any], width: int = 110, color: bool = False, plain: bool = False) -> str:
    """The summary as text; ``plain`` gives the counts as one self-describing line per level instead of a
    table, whose headers a narrow or unknown width (COLUMNS unset in CI) truncates to ``disab…``. Every text of
    the document is made inert first: one read back from disk may come from an older suite or another hand."""
    document = inert_tree(document)
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, no_color=not color, highlight=False)
    provider = document["provider"]
    mode = provider.get("sandboxes_per_process")
    # a Text: the provider's kind and version are no rich markup
    console.rule(Text(f"sandbox-conformance {document['suite']['version']} · {provider.get('kind')} "
                      f"{provider.get('version')} · {provider.get('dialect')} over {provider.get('transport')}"))
    negotiation = provider.get("negotiation")
    console.print(f"run {document['run']['id']}"
                  + (f" · {mode} sandbox{'es' if mode == 'many' else ''} per process" if mode else "")
                  + (f" · protocol {negotiation}" if negotiation else ""),
                  markup=False, highlight=False, soft_wrap=True)
    causes = document.get("causes") or []
    _print_causes(console, causes)
    failing = _failing_in_order(document)
    brief = len(failing) > FULL_DETAIL_UP_TO
    if brief and failing:
        console.print(f"failures, one line each ({len(failing)}; the full detail is in summary.md, report.html and "
                      "results.json):", markup=False, highlight=False, soft_wrap=True)
    for scenario in failing:
        if scenario["outcome"] == "xpass":
            console.print(Text(f"XPASS {scenario['id']}", style=_STYLE["xpass"]),
                          Text(f"  {scenario.get('message') or ''}"), soft_wrap=True)
            continue
        if brief:
            _print_failure_line(console, scenario)
            continue
        label = failure_label(scenario["outcome"], scenario.get("level"))
        console.print(Text(f"{label} {scenario['id']}", style=_STYLE[scenario["outcome"]]),
                      Text(f"  {scenario['feature']}: {scenario['name']}"))
        texts = scenario.get("requirement_texts") or {}
        for requirement in scenario["requirements"]:
            text = texts.get(requirement, "")
            console.print(f"  {requirement} ({(scenario['level'] or '').upper()}): {text}", markup=False, soft_wrap=True)
        if scenario.get("step"):
            console.print(f"  step: {scenario['step']}", markup=False)
        for line in (scenario.get("message") or "").splitlines():
            console.print(f"  | {line}", markup=False, soft_wrap=True)
        transcript = scenario.get("transcript") or []
        if transcript:
            shown = transcript[-TRANSCRIPT_LINES:]
            console.print(f"  messages ({len(shown)} of {len(transcript)} shown, newest last):")
            for line in shown:
                console.print(f"    {line[:300]}", markup=False, soft_wrap=True)
        stderr = (scenario.get("stderr") or "").strip()
        if stderr:
            console.print("  provider stderr (tail):")
            for line in stderr.splitlines()[-10:]:
                console.print(f"    {line}", markup=False, soft_wrap=True)
        if scenario.get("reproduce"):
            console.print(f"  reproduce: {scenario['reproduce']}", markup=False, soft_wrap=True)
        console.print()
    if plain:
        _print_plain_counts(console, document["summary"])
    else:
        _print_count_table(console, document["summary"])
    _print_skips(console, document["scenarios"])
    for gap_id, gap in (document.get("gaps") or {}).items():
        style = {"violated": "bold red", "supported": "green", "refused": "cyan",
                 "declared but not expressible": "yellow"}.get(gap["status"], "dim")
        console.print(Text(f"{gap_id} {gap['title']}: ", style="bold"), Text(gap["summary"], style=style), soft_wrap=True)
    sandboxes = document["sandboxes"]
    died_holding = sandboxes.get("died_holding") or []
    unknown = sandboxes.get("unknown_at_delete") or []
    console.print(f"sandboxes: {sandboxes['created']} created, {sandboxes['deleted']} deleted, "
                  f"{len(sandboxes['leaked'])} leaked"
                  + (f", {len(died_holding)} {HELD_BY_ENDED}, deleted only through a restarted provider (not "
                     f"confirmed gone): {', '.join(died_holding[:5])}" if died_holding else "")
                  + (f", {len(unknown)} unknown to the provider at their delete (answered not_found): "
                     f"{', '.join(unknown[:5])}" if unknown else "")
                  + (f", {len(sandboxes['unknown_fate'])} of unknown fate (cleanup abandoned)"
                     if sandboxes.get("unknown_fate") else ""),
                  markup=False, soft_wrap=True)
    for violation in document.get("wire_violations_outside_scenarios") or []:
        console.print(f"wire violation outside any scenario: {violation}", markup=False)
    for flaky in document.get("flaky") or []:
        console.print(f"flaky: {flaky['id']} ({' → '.join(flaky['outcomes'])})", markup=False)
    run = document["run"]
    replay = ("replay a shard with its --shard and --seed" if run.get("shard_seeds")
              else f"replay with --seed {run['seed']}")
    console.print(f"{seed_words(run)} ({replay})", markup=False)
    verdict = document.get("verdict")
    if verdict is not None:
        for warning in verdict["warnings"]:
            console.print(Text("warning: ", style="yellow"), Text(warning), soft_wrap=True)
        if verdict["passed"]:
            console.print(Text("verdict: PASS", style="bold green"))
        else:
            console.print(Text("verdict: FAIL", style="bold red"))
            for reason in verdict["reasons"]:
                console.print(f"  - {reason}", markup=False, soft_wrap=True)
    return buffer.getvalue()


def _failing_in_order(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The failed, errored and xpass scenarios in the document's ``failures`` order (the basics first)."""
    by_id = {scenario["id"]: scenario for scenario in document["scenarios"]}
    order = document.get("failures") or [s["id"] for s in document["scenarios"]]
    return [by_id[sid] for sid in order if sid in by_id and by_id[sid]["outcome"] in ("failed", "error", "xpass")]


def _print_causes(console: Console, causes: list[dict[str, Any]]) -> None:
    """The causes first: what to fix, before which scenarios show it."""
    if not causes:
        return
    total = sum(cause["count"] for cause in causes)
    console.print(Text(f"failures by cause ({total} scenarios, {len(causes)} cause{'s' if len(causes) != 1 else ''}"
                       "; the basics first):", style="bold"), soft_wrap=True)
    for line in cause_lines(causes, CAUSES_SHOWN):
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    if len(causes) > CAUSES_SHOWN:
        console.print(f"  … and {len(causes) - CAUSES_SHOWN} more causes in summary.md", markup=False, highlight=False)
    console.print()


def _print_failure_line(console: Console, scenario: dict[str, Any]) -> None:
    label = failure_label(scenario["outcome"], scenario.get("level"))
    requirements = ", ".join(scenario.get("requirements") or [])
    console.print(Text(f"{label} {scenario['id']}", style=_STYLE[scenario["outcome"]]),
                  Text(f"[{requirements}] {one_line(scenario.get('message'), scenario['outcome'])}"), soft_wrap=True)


def _print_count_table(console: Console, summary: dict[str, Any]) -> None:
    table = Table(show_header=True, header_style="bold")
    table.add_column("level")
    for category in counts.CATEGORIES:
        table.add_column(category.word, justify="right")
    table.add_column("total", justify="right")
    rows = counts.rows(summary)
    for number, (level, numbers, total) in enumerate(rows):
        table.add_row(level, *map(str, numbers), str(total), style="bold" if number == len(rows) - 1 else None)
    console.print(table)


def _print_plain_counts(console: Console, summary: dict[str, Any]) -> None:
    for level, numbers, total in counts.rows(summary):
        pairs = ", ".join(f"{category.word} {count}" for category, count in zip(counts.CATEGORIES, numbers))
        console.print(f"{level}: {pairs}, total {total}", markup=False, highlight=False, soft_wrap=True)


def _print_skips(console: Console, scenarios: list[dict[str, Any]]) -> None:
    """This provider's skips, one line per reason; the scenarios not for its dialect are only counted (in the
    table): they were never this provider's to run."""
    for reason, ids in skips_by_reason(scenarios).items():
        shown = ", ".join(ids[:SKIPPED_IDS_SHOWN]) + (", …" if len(ids) > SKIPPED_IDS_SHOWN else "")
        console.print(f"skipped {len(ids)}: {reason} ({shown})", markup=False, highlight=False, soft_wrap=True)


# The colour of each count on the closing line (pytest's markup names); the line's own follows the verdict.
_CLOSING_MARKUP = {"passed": "green", "failed": "red", "errors": "red", "xpass": "red", "xfail": "yellow",
                   "skipped": "yellow"}


def closing_line(document: dict[str, Any]) -> tuple[list[tuple[str, dict[str, bool]]], str]:
    """pytest's closing line ("=== 529 passed, 32 skipped, 150 not for this dialect in 88s ===") as pytest's
    ``build_summary_stats_line`` returns it: the run's counts in the counts' words (pytest's own tally calls every
    skip a skip and knows no dialect), coloured by the verdict."""
    parts = [(f"{count} {word}", {_CLOSING_MARKUP[word]: True} if word in _CLOSING_MARKUP else {})
             for word, count in counts.tally(document["summary"])]
    verdict = document.get("verdict") or {}
    return parts or [("no scenarios", {"yellow": True})], "green" if verdict.get("passed") else "red"


def print_summary(document: dict[str, Any], terminalreporter: Any) -> None:
    color = bool(getattr(terminalreporter, "hasmarkup", False))
    stream = getattr(terminalreporter._tw, "_file", None)
    terminalreporter.write(render_summary(document, width=terminalreporter._tw.fullwidth, color=color,
                                          plain=not is_terminal(stream)))
    # pytest prints its closing line after this hook, from its own stats: it is told the run's counts instead
    terminalreporter.build_summary_stats_line = lambda: closing_line(inert_tree(document))
