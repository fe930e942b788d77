"""``report merge`` of several providers' runs: one matrix of providers × scenarios, like Bowtie's and
wpt.fyi's views (``matrix.json``, validated against ``schemas/report/matrix.json``; ``matrix.md``;
``matrix.html``). Built from the merged results documents alone, which are already redacted.

A column is one provider as its documents record it (``shards.identity_fields``: kind, version, dialect,
transport, and the command, or the image of an ``--image`` run); a row is a scenario at least one provider ran or skipped for its own reason. A cell
is the scenario's outcome for that provider, or "not applicable" (a scenario of another dialect, or one
citing no rule of the provider's dialect: the dialect does not have it) or "not run" (left out by that
run's selection); both show as "—", never as a skip. A row disagrees when one provider passes what
another fails; those rows come first.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from conformance import __version__, schemas
from conformance.errors import HarnessError, UsageError
from conformance.reporting.counts import is_not_for_this_dialect
from conformance.reporting.markdown import one_line, table_code, text
from conformance.reporting.shards import PROVIDER_FIELDS, merge, write_run

MATRIX_SCHEMA = schemas.SCHEMA_BASE + "report/matrix.json"

NOT_APPLICABLE = "not applicable"
NOT_RUN = "not run"
# A cell's status: the scenario's outcome, or why the provider has no outcome for it.
STATUSES = ("passed", "failed", "error", "skipped", "xfail", "xpass", NOT_APPLICABLE, NOT_RUN)
SYMBOLS = {"passed": "✅", "failed": "❌", "error": "💥", "skipped": "⏭️", "xfail": "🟡", "xpass": "❗",
           NOT_APPLICABLE: "—", NOT_RUN: "—"}
LEGEND = {"passed": "passed", "failed": "failed", "error": "error (the suite or environment broke)",
          "skipped": "skipped (capability not declared, or not expressible)",
          "xfail": "failed as the baseline expects", "xpass": "passed although baselined (stale baseline)",
          NOT_APPLICABLE: "not this provider's dialect, or not run"}
# Which statuses count as the provider meeting the scenario, and which as failing it, for disagreement.
_MEETS = frozenset({"passed", "xpass"})
_FAILS = frozenset({"failed", "error", "xfail"})
_LEVEL_ORDER = ("must", "should", "may", "gap")


def cell_status(scenario: dict[str, Any]) -> str:
    outcome = scenario["outcome"]
    if outcome == "disabled":
        return NOT_RUN
    if is_not_for_this_dialect(scenario):
        return NOT_APPLICABLE
    return outcome


def provider_label(provider: dict[str, Any]) -> str:
    return f"{provider.get('kind', '?')} {provider.get('version', '')} ({provider.get('dialect', '?')})"


def slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "provider"


def build(runs: list[dict[str, Any]], labels: list[str] | None = None) -> dict[str, Any]:
    """The matrix document of merged runs, one per provider, in the order given (the command line's);
    ``labels`` are the columns' titles the user chose (else kind, version and dialect)."""
    if labels and len(labels) != len(runs):
        raise UsageError(f"--label given {len(labels)} time(s) for {len(runs)} providers: give one per provider, "
                         "in the order their first results.json appears")
    if labels and len(set(labels)) != len(labels):
        raise UsageError("--label values must differ: each names one column")
    providers: list[dict[str, Any]] = []
    used: set[str] = set()
    for index, document in enumerate(runs):
        label = base = labels[index] if labels else provider_label(document["provider"])
        number = 2
        while label in used or slug(label) in used:  # same kind, version and dialect, other command
            label, number = f"{base} #{number}", number + 1
        used |= {label, slug(label)}
        # "skipped" is this provider's skips only: a scenario shown as "—" is counted as not for this dialect
        must = dict((document["summary"].get("levels") or {}).get("must") or {})
        providers.append({
            "slug": slug(label), "label": label,
            **{key: str(document["provider"].get(key, "")) for key in PROVIDER_FIELDS},
            # An --image run's recorded command is one container's URL (each shard had its own): the image names it.
            **({"command": f"image {document['provider']['image']}"} if document["provider"].get("image") else {}),
            "run_id": document["run"]["id"],
            "shards": document["run"].get("shards", 1),
            "results": f"{slug(label)}/results.json",
            "verdict": document["verdict"],
            "must": {outcome: must.get(outcome, 0) for outcome in ("passed", "failed", "error", "skipped")},
        })
    rows: dict[str, dict[str, Any]] = {}
    for provider, document in zip(providers, runs, strict=True):
        for scenario in document["scenarios"]:
            row = rows.setdefault(scenario["id"], {
                "id": scenario["id"], "title": scenario["name"], "feature": scenario["feature"],
                "level": None, "requirements": [], "cells": {}})
            status = cell_status(scenario)
            cell = {"status": status, "outcome": scenario["outcome"]}
            if status not in (NOT_RUN, "passed") and scenario.get("message"):
                cell["message"] = one_line(scenario["message"])
            row["cells"][provider["slug"]] = cell
            if status not in (NOT_RUN, NOT_APPLICABLE):
                # judged by each dialect's own rules: the row lists every requirement a provider was judged by
                row["requirements"] = sorted({*row["requirements"], *scenario["requirements"]})
                row["level"] = _stronger(row["level"], scenario["level"])
    shown = []
    for row in rows.values():
        for provider in providers:  # a scenario one provider's document lacks (another suite version)
            row["cells"].setdefault(provider["slug"], {"status": NOT_RUN, "outcome": None})
        statuses = {cell["status"] for cell in row["cells"].values()}
        if statuses <= {NOT_RUN, NOT_APPLICABLE}:
            continue
        row["disagree"] = bool(statuses & _MEETS) and bool(statuses & _FAILS)
        shown.append(row)
    shown.sort(key=lambda row: (not row["disagree"], row["feature"], row["id"]))
    return {
        "schema_version": 1,
        "suite": {"name": "sandbox-conformance", "version": __version__},
        "providers": providers,
        "scenarios": shown,
        "left_out": len(rows) - len(shown),
        "disagreements": sum(1 for row in shown if row["disagree"]),
    }


def merge_providers(groups: list[list[tuple[str, dict[str, Any]]]], out_dir: Path,
                    labels: list[str] | None = None) -> dict[str, Any]:
    """Each provider's documents merged into its run (``shards.merge``: its shard checks, its verdict),
    written to ``out_dir/<slug>/``; then the matrix of those runs as matrix.json, matrix.md and matrix.html.
    A problem with one provider's documents is a ``UsageError`` naming that provider."""
    runs = []
    for group in groups:
        try:
            runs.append(merge(group))
        except UsageError as exc:
            raise UsageError(f"{provider_label(group[0][1]['provider'])} ({group[0][0]} ...): {exc}") from None
    matrix = build(runs, labels)
    problems = schemas.problems(MATRIX_SCHEMA, matrix)
    if problems:
        raise HarnessError(f"matrix.json would violate its own schema {problems[0]}")
    for provider, run in zip(matrix["providers"], runs, strict=True):
        write_run(out_dir / provider["slug"], run)
    try:
        (out_dir / "matrix.json").write_text(json.dumps(matrix, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (out_dir / "matrix.md").write_text(render_markdown(matrix), encoding="utf-8")
        (out_dir / "matrix.html").write_text(render_html(matrix), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--out {out_dir} is not writable: {exc.strerror}") from None
    return matrix


def _stronger(level: str | None, other: str | None) -> str | None:
    ranked = [candidate for candidate in (level, other) if candidate in _LEVEL_ORDER]
    return min(ranked, key=_LEVEL_ORDER.index) if ranked else None


def _verdict_word(provider: dict[str, Any]) -> str:
    return "PASS" if provider["verdict"]["passed"] else "FAIL"


def render_markdown(matrix: dict[str, Any]) -> str:
    providers = matrix["providers"]
    lines = ["## sandbox-conformance: providers × scenarios", "",
             "| provider | verdict | MUST passed | MUST failed | MUST errors | MUST skipped | command |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for provider in providers:
        must = provider["must"]
        lines.append(f"| {text(provider['label'])} | {'✅' if provider['verdict']['passed'] else '❌'} "
                     f"{_verdict_word(provider)} | {must['passed']} | {must['failed']} | {must['error']} | "
                     f"{must['skipped']} | {table_code(provider['command'])} |")
    lines += ["", (f"{matrix['disagreements']} scenario(s) where one provider passes what another fails "
                   "(listed first, marked ⚠️)."), ""]
    lines += ["| scenario | level | requirements | " + " | ".join(text(p["label"]) for p in providers) + " |",
              "| --- | --- | --- |" + " :---: |" * len(providers)]
    for row in matrix["scenarios"]:
        mark = "⚠️ " if row["disagree"] else ""
        cells = [SYMBOLS[row["cells"][provider["slug"]]["status"]] for provider in providers]
        lines.append(f"| {mark}{table_code(row['id'])} | {(row['level'] or '').upper()} | "
                     f"{', '.join(row['requirements'])} | " + " | ".join(cells) + " |")
    lines += ["", "Legend: " + " · ".join(f"{SYMBOLS[status]} {words}" for status, words in LEGEND.items())]
    if matrix["left_out"]:
        lines += ["", f"{matrix['left_out']} scenario(s) of the suite no provider ran are left out."]
    return "\n".join(lines) + "\n"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 1rem; color: #1b1f24; }
table { border-collapse: collapse; margin-bottom: 1.5rem; }
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.5rem; vertical-align: top; }
table.matrix thead th { position: sticky; top: 0; background: #f6f8fa; z-index: 1; }
td.cell { text-align: center; white-space: nowrap; }
td.passed, td.xpass { background: #dafbe1; }
td.failed { background: #ffd7d5; }
td.error { background: #ffb8b0; }
td.skipped { background: #fff8c5; }
td.xfail { background: #fbefd5; }
td.not-applicable, td.not-run { background: #f6f8fa; color: #8c959f; }
tr.disagree th, tr.disagree td.about { background: #fff1e5; font-weight: bold; }
.title { font-weight: normal; color: #57606a; }
code { font-size: 0.9em; }
"""


def render_html(matrix: dict[str, Any]) -> str:
    """A self-contained page: inline CSS, no script, nothing fetched; every value HTML-escaped."""
    e = html.escape
    providers = matrix["providers"]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>sandbox-conformance: providers × scenarios</title>", f"<style>{_CSS}</style></head><body>",
           "<h1>sandbox-conformance: providers × scenarios</h1>",
           (f"<p>suite {e(matrix['suite']['version'])} · {len(providers)} providers · "
            f"{len(matrix['scenarios'])} scenarios · {matrix['disagreements']} where one provider passes what "
            "another fails (first, highlighted)</p>"),
           ('<table class="providers"><thead><tr><th>provider</th><th>verdict</th><th>MUST passed</th>'
            "<th>MUST failed</th><th>MUST errors</th><th>MUST skipped</th><th>command</th><th>results</th>"
            "</tr></thead><tbody>")]
    for provider in providers:
        must = provider["must"]
        verdict_class = "passed" if provider["verdict"]["passed"] else "failed"
        reasons = "; ".join(provider["verdict"]["reasons"])
        out.append(f"<tr><th>{e(provider['label'])}</th>"
                   f'<td class="cell {verdict_class}" title="{e(reasons)}">{_verdict_word(provider)}</td>'
                   f"<td>{must['passed']}</td><td>{must['failed']}</td><td>{must['error']}</td>"
                   f"<td>{must['skipped']}</td><td><code>{e(provider['command'])}</code></td>"
                   f"<td>{e(provider['results'])}</td></tr>")
    out += ["</tbody></table>", '<table class="matrix"><thead><tr><th>scenario</th><th>level</th>'
            "<th>requirements</th>" + "".join(f"<th>{e(p['label'])}</th>" for p in providers) + "</tr></thead><tbody>"]
    for row in matrix["scenarios"]:
        row_class = ' class="disagree"' if row["disagree"] else ""
        cells = []
        for provider in providers:
            cell = row["cells"][provider["slug"]]
            status = cell["status"]
            tip = LEGEND.get(status, status) + (f": {cell['message']}" if cell.get("message") else "")
            cells.append(f'<td class="cell {status.replace(" ", "-")}" title="{e(tip)}">{SYMBOLS[status]}</td>')
        out.append(f"<tr{row_class}><th><code>{e(row['id'])}</code><br>"
                   f'<span class="title">{e(row["title"])}</span></th>'
                   f'<td class="about">{e((row["level"] or "").upper())}</td>'
                   f'<td class="about">{e(", ".join(row["requirements"]))}</td>' + "".join(cells) + "</tr>")
    out += ["</tbody></table>",
            "<p>" + " · ".join(f"{SYMBOLS[status]} {e(words)}" for status, words in LEGEND.items()) + "</p>"]
    if matrix["left_out"]:
        out.append(f"<p>{matrix['left_out']} scenario(s) of the suite no provider ran are left out.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
