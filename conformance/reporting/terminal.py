"""The end-of-run summary on the terminal: counts, then each failure with what a provider author
needs to fix it."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

_STYLE = {"passed": "green", "failed": "bold red", "error": "bold magenta", "skipped": "yellow", "disabled": "dim",
          "xfail": "cyan", "xpass": "bold red"}
# Summary columns: (title, key in summary, outcome key in per-level counts)
_COLUMNS = (("passed", "passed", "passed"), ("failed", "failed", "failed"), ("errors", "errors", "error"),
            ("skipped", "skipped", "skipped"), ("disabled", "disabled", "disabled"), ("xfail", "xfailed", "xfail"),
            ("xpass", "xpassed", "xpass"))
TRANSCRIPT_LINES = 40


def render_summary(document: dict[str, Any], width: int = 110, color: bool = False) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, no_color=not color, highlight=False)
    provider = document["provider"]
    mode = provider.get("sandboxes_per_process")
    console.rule(f"sandbox-conformance {document['suite']['version']} · {provider.get('kind')} "
                 f"{provider.get('version')} · {provider.get('dialect')} over {provider.get('transport')}")
    console.print(f"run {document['run']['id']}"
                  + (f" · {mode} sandbox{'es' if mode == 'many' else ''} per process" if mode else ""),
                  markup=False, highlight=False, soft_wrap=True)
    for scenario in document["scenarios"]:
        if scenario["outcome"] == "xpass":
            console.print(Text(f"XPASS {scenario['id']}", style=_STYLE["xpass"]),
                          Text(f"  {scenario.get('message') or ''}"), soft_wrap=True)
            continue
        if scenario["outcome"] not in ("failed", "error"):
            continue
        label = scenario["outcome"].upper()
        if scenario["outcome"] == "failed" and scenario.get("level") == "gap":
            label = "GAP FINDING"  # a proposal violated: the gap section's finding, never a verdict reason
        console.print(Text(f"{label} {scenario['id']}", style=_STYLE[scenario["outcome"]]),
                      Text(f"  {scenario['feature']}: {scenario['name']}"))
        texts = scenario.get("requirement_texts") or {}
        for requirement in scenario["requirements"]:
            text = texts.get(requirement, "")
            console.print(f"  {requirement} ({(scenario['level'] or '').upper()}): {text}", markup=False, soft_wrap=True)
        if scenario.get("step"):
            console.print(f"  step: {scenario['step']}")
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
    table = Table(show_header=True, header_style="bold")
    table.add_column("level")
    for title, _, _ in _COLUMNS:
        table.add_column(title, justify="right")
    table.add_column("total", justify="right")
    summary = document["summary"]
    for level, counts in (summary.get("levels") or {}).items():
        if sum(counts.values()):
            table.add_row(level.upper(), *(str(counts.get(key, 0)) for _, _, key in _COLUMNS), str(sum(counts.values())))
    table.add_row("all", *(str(summary[key]) for _, key, _ in _COLUMNS), str(summary["total"]), style="bold")
    console.print(table)
    for gap_id, gap in (document.get("gaps") or {}).items():
        style = {"violated": "bold red", "supported": "green", "refused": "cyan"}.get(gap["status"], "dim")
        console.print(Text(f"{gap_id} {gap['title']}: ", style="bold"), Text(gap["summary"], style=style), soft_wrap=True)
    sandboxes = document["sandboxes"]
    console.print(f"sandboxes: {sandboxes['created']} created, {sandboxes['deleted']} deleted, "
                  f"{len(sandboxes['leaked'])} leaked")
    for violation in document.get("wire_violations_outside_scenarios") or []:
        console.print(f"wire violation outside any scenario: {violation}", markup=False)
    for flaky in document.get("flaky") or []:
        console.print(f"flaky: {flaky['id']} ({' → '.join(flaky['outcomes'])})", markup=False)
    run = document["run"]
    console.print(f"seed {run['seed']} (replay with --seed {run['seed']})", markup=False)
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


def print_summary(document: dict[str, Any], terminalreporter: Any) -> None:
    color = bool(getattr(terminalreporter, "hasmarkup", False))
    terminalreporter.write(render_summary(document, width=terminalreporter._tw.fullwidth, color=color))
