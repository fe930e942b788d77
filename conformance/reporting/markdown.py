"""``summary.md``: the run in Markdown for people who read it on a CI page (GitHub's job summary, a pull
request comment). Built from the results document alone, which is already redacted, so nothing shown
here can carry a secret the document does not.

Sections: the verdict and its reasons, the failures by cause, counts per level, each failure (scenario id, requirement(s), a
one-line cause), the gap section, and the skips grouped by their reason.
"""

from __future__ import annotations

import os
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from conformance.reporting import counts
from conformance.reporting.model import seed_words

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"

# GitHub refuses a job summary over 1 MiB; a run with hundreds of failures must still leave one.
MAX_FAILURES_SHOWN = 50
MAX_SKIPPED_IDS_SHOWN = 20
MAX_CAUSE_IDS_SHOWN = 30
CAUSE_CHARS = 240

_FAILURE_LABEL = {"failed": "FAILED", "error": "ERROR", "xpass": "XPASS"}
# Characters that would start Markdown formatting, inline HTML, a link or a table cell border.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~])")


def text(value: Any) -> str:
    """A value shown as plain text on one line: Markdown and HTML in a provider's message stay inert."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(value).split()))


def code(value: str) -> str:
    """An identifier in code style; a backtick in it would end the span early, so it is dropped."""
    return f"`{value.replace('`', '')}`"


def table_code(value: str) -> str:
    """``code`` inside a table cell: a "|" there would end the cell even within backticks, so it is escaped as
    GitHub's tables ask ("\\|", shown as "|")."""
    return code(value).replace("|", "\\|")


def one_line(message: str | None, default: str = "") -> str:
    first = next((line.strip() for line in (message or "").splitlines() if line.strip()), default)
    return first if len(first) <= CAUSE_CHARS else first[:CAUSE_CHARS - 1] + "…"


def render_markdown(document: dict[str, Any]) -> str:
    lines: list[str] = []
    verdict = document.get("verdict") or {}
    provider = document.get("provider") or {}
    run = document.get("run") or {}
    passed = bool(verdict.get("passed"))
    lines += [f"## sandbox-conformance: {'✅ PASS' if passed else '❌ FAIL'}", ""]
    identity = (f"Provider {text(provider.get('kind', '?'))} {text(provider.get('version', ''))} · "
                f"{text(provider.get('dialect', '?'))} over {text(provider.get('transport', '?'))} · "
                f"run {code(str(run.get('id', '')))} · {seed_words(run)} · "
                f"suite {text(document['suite']['version'])}")
    lines += [identity, ""]
    for reason in verdict.get("reasons") or []:
        lines.append(f"- **fails:** {text(reason)}")
    for warning in verdict.get("warnings") or []:
        lines.append(f"- warning: {text(warning)}")
    if verdict.get("reasons") or verdict.get("warnings"):
        lines.append("")
    lines += causes_section(document.get("causes") or [])
    lines += _level_table(document["summary"])
    lines += _failures(in_failure_order(document))
    lines += _gaps(document.get("gaps") or {})
    lines += _skips(document["scenarios"])
    return "\n".join(lines).rstrip() + "\n"


def causes_section(causes: list[dict[str, Any]]) -> list[str]:
    """"Failures by cause": each cause (the basics first, then by count) with the scenarios it explains, so a
    reader fixes one call instead of reading a hundred failures."""
    if not causes:
        return []
    total = sum(cause["count"] for cause in causes)
    lines = [f"### Failures by cause ({total} scenarios, {len(causes)} causes)", "",
             "| # | scenarios | cause | of them needing it in a Given step |", "| ---: | ---: | --- | ---: |"]
    for cause in causes:
        lines.append(f"| {cause['rank']} | {cause['count']} | {text(cause['title'])} | {cause['setup'] or ''} |")
    lines.append("")
    for cause in causes:
        shown = ", ".join(code(sid) for sid in cause["scenarios"][:MAX_CAUSE_IDS_SHOWN])
        more = f" and {len(cause['scenarios']) - MAX_CAUSE_IDS_SHOWN} more" \
            if len(cause["scenarios"]) > MAX_CAUSE_IDS_SHOWN else ""
        lines.append(f"- **{text(cause['title'])}** ({cause['count']}): {shown}{more}")
    return [*lines, ""]


def in_failure_order(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The scenarios, the failing ones in the document's ``failures`` order (the basics first)."""
    place = {sid: index for index, sid in enumerate(document.get("failures") or [])}
    return sorted(document["scenarios"], key=lambda s: place.get(s["id"], len(place)))


def _level_table(summary: dict[str, Any]) -> list[str]:
    """The counts as every sink shows them (``counts.rows``): one column per category, adding up to the total."""
    lines = ["### Counts per level", "",
             "| level | " + " | ".join(category.word for category in counts.CATEGORIES) + " | total |",
             "| --- |" + " ---: |" * (len(counts.CATEGORIES) + 1)]
    for level, numbers, total in counts.rows(summary):
        label = "**all**" if level == "all" else level
        lines.append(f"| {label} | " + " | ".join(map(str, numbers)) + f" | {total} |")
    return [*lines, ""]


def _failures(scenarios: list[dict[str, Any]]) -> list[str]:
    failing = [s for s in scenarios if s["outcome"] in _FAILURE_LABEL]
    if not failing:
        return []
    lines = [f"### Failures ({len(failing)})", ""]
    for scenario in failing[:MAX_FAILURES_SHOWN]:
        level = (scenario.get("level") or "must").upper()
        label = _FAILURE_LABEL[scenario["outcome"]]
        if scenario["outcome"] == "failed" and level == "GAP":
            label = "GAP FINDING"  # a proposal violated: reported, never a reason of the verdict
        lines.append(f"- **{label}** {code(scenario['id'])} ({level}) {text(scenario['feature'])}: "
                     f"{text(scenario['name'])}")
        texts = scenario.get("requirement_texts") or {}
        for requirement in scenario.get("requirements") or []:
            explained = f": {text(texts[requirement])}" if texts.get(requirement) else ""
            lines.append(f"  - requirement {code(requirement)}{explained}")
        lines.append(f"  - cause: {text(one_line(scenario.get('message'), scenario['outcome']))}")
    if len(failing) > MAX_FAILURES_SHOWN:
        lines.append(f"- … and {len(failing) - MAX_FAILURES_SHOWN} more (see results.json)")
    return [*lines, ""]


def _gaps(gaps: dict[str, Any]) -> list[str]:
    if not gaps:
        return []
    lines = ["### Gaps", "", "| gap | topic | status | summary |", "| --- | --- | --- | --- |"]
    for gap_id, gap in gaps.items():
        lines.append(f"| {table_code(gap_id)} | {text(gap['title'])} | {text(gap['status'])} | {text(gap['summary'])} |")
    return [*lines, ""]


def skips_by_reason(scenarios: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Skipped scenario ids under their skip message, the most common reason first. Scenarios not for this
    dialect are left out: they are not this provider's skips (counted apart, ``counts.is_not_for_this_dialect``)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for scenario in scenarios:
        if counts.category(scenario) == "skipped":
            groups[one_line(scenario.get("message"), "no reason given")].append(scenario["id"])
    return dict(sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])))


def _skips(scenarios: list[dict[str, Any]]) -> list[str]:
    groups = skips_by_reason(scenarios)
    if not groups:
        return []
    lines = [f"### Skipped ({sum(len(ids) for ids in groups.values())}), by reason", ""]
    for reason, ids in groups.items():
        shown = ", ".join(code(i) for i in ids[:MAX_SKIPPED_IDS_SHOWN])
        more = f" and {len(ids) - MAX_SKIPPED_IDS_SHOWN} more" if len(ids) > MAX_SKIPPED_IDS_SHOWN else ""
        lines.append(f"- {text(reason)} ({len(ids)}): {shown}{more}")
    return [*lines, ""]


def write_markdown(report_dir: Path, document: dict[str, Any]) -> Path:
    path = report_dir / "summary.md"
    path.write_text(render_markdown(document), encoding="utf-8")
    return path


def append_step_summary(document: dict[str, Any], environ: Any = os.environ) -> None:
    """Append the summary to GitHub's job summary file when the run is in a GitHub Actions step.

    Appended, never overwritten: earlier steps of the job may have written theirs. A path that cannot be
    written costs the run nothing but a line on stderr: the summary is a convenience, the verdict is not."""
    target = environ.get(STEP_SUMMARY_ENV)
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(render_markdown(document) + "\n")
    except OSError as error:
        print(f"sandbox-conformance: could not append the summary to ${STEP_SUMMARY_ENV} ({target}): "
              f"{error.strerror or error}",
              file=sys.stderr)
