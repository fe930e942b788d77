"""``report.html``: the run as one self-contained page — inline CSS and script, no fetch of any kind (its
Content-Security-Policy forbids them), readable offline and from a CI artefact.

Outcomes, diagnostics, transcripts and stderr come from the results document alone, which is already
redacted, so nothing shown here can carry a secret the document does not. What the document only names —
a requirement's text, level and section, a scenario's Gherkin steps — is read from the spec the suite
ships (the requirement registries and the feature files), as ``explain`` reads it.

Sections: the verdict and its reasons, counts per level, the run's facts, the failures, every scenario
(outcome, failed step, diagnostics, transcript, stderr tail, a reproduce command with a copy button), the
requirements of the provider's dialect one by one with the scenarios verifying them (the spec as a
document), and the gap section. Scenarios a narrow run left out are counted, not embedded (``_left_out``). Filters by outcome, level, feature and text apply to both views.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from conformance import requirements as registry
from conformance.reporting import counts
from conformance.reporting.catalogue import CatalogueEntry, all_scenarios, gherkin_steps
from conformance.reporting.model import seed_words

REPORT_NAME = "report.html"

# A scenario's category (``counts.category``: its outcome, or "not for this dialect") → the label shown; in the
# order the filter offers them. The words are the counts' (conformance/reporting/counts.py).
_OUTCOME_LABELS = {"failed": "FAILED", "error": "ERROR", "xpass": "XPASS", "xfail": "XFAIL", "passed": "PASSED",
                   "skipped": "SKIPPED", "other_dialect": "NOT FOR THIS DIALECT", "disabled": "NOT SELECTED"}
# Outcomes whose scenario card starts open: what a reader came to see.
_OPEN_OUTCOMES = ("failed", "error", "xpass", "xfail")
_STEP_LINE = re.compile(r"\s*\(line \d+\)$")
_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")

# Only what is inline may run or style the page; no image, font, frame or connection may be fetched.
CONTENT_SECURITY_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
                           "img-src data:; base-uri 'none'; form-action 'none'")


def write_html(report_dir: Path, document: dict[str, Any]) -> Path:
    path = report_dir / REPORT_NAME
    path.write_text(render_html(document), encoding="utf-8")
    return path


def _e(value: Any) -> str:
    """Any document text as HTML text or an attribute value: markup in a provider's message stays inert."""
    return html.escape("" if value is None else str(value), quote=True)


def _anchor(kind: str, identifier: str) -> str:
    """An element id for a scenario or requirement id (outline rows carry brackets, values may carry spaces)."""
    return f"{kind}-" + _ANCHOR_UNSAFE.sub(lambda m: f"_{ord(m.group()):x}_", identifier)


def _badge(outcome: str) -> str:
    return f'<span class="badge o-{_e(outcome)}">{_e(_OUTCOME_LABELS.get(outcome, outcome.upper()))}</span>'


def _level(level: str | None) -> str:
    return f'<span class="level">{_e((level or "none").upper())}</span>'


class _Spec:
    """The spec the document names: requirements by id, each scenario's steps, and which rules judge it."""

    def __init__(self, dialect: str | None) -> None:
        self.requirements = registry.load()
        self.registry_names = registry.registries()
        self.dialect = dialect if dialect in self.registry_names else None

    def cited(self, scenario: dict[str, Any]) -> tuple[str, ...]:
        """The requirements the scenario is judged by on this provider's dialect (as the run cites them; a
        scenario left out of the run still carries every registry's ids)."""
        ids = tuple(scenario.get("requirements") or ())
        return ids if self.dialect is None else _cited_under(ids, self.dialect)

    def requirement_text(self, scenario: dict[str, Any], rid: str) -> str | None:
        texts = scenario.get("requirement_texts") or {}
        if texts.get(rid):
            return texts[rid]
        known = self.requirements.get(rid)
        return known.text if known else None

    @staticmethod
    def steps(scenario_id: str) -> tuple[str, ...] | None:
        return _catalogue_steps(scenario_id)

    def registries_shown(self, cited_ids: Iterable[str]) -> list[str]:
        """The provider's dialect's registry and the gap proposals; without a known dialect, every registry
        a scenario cites."""
        if self.dialect is not None:
            return [self.dialect, registry.GAPS]
        cited = set(cited_ids)
        return [name for name in self.registry_names if any(rid in cited for rid in registry.load(name))]


@cache
def _cited_under(ids: tuple[str, ...], dialect: str) -> tuple[str, ...]:
    """``requirements.cited_under``, once per set of ids: scenarios share few sets, and reports are many."""
    return registry.cited_under(ids, dialect)


@cache
def _catalogue_entries() -> dict[str, CatalogueEntry]:
    return {entry.id: entry for entry in all_scenarios()}


@cache
def _catalogue_steps(scenario_id: str) -> tuple[str, ...] | None:
    """A scenario's Gherkin steps, rendered once per process: every run's report shows every scenario."""
    entry = _catalogue_entries().get(scenario_id)
    if entry is None:  # a document of another suite version: its scenario is not in these features
        return None
    return tuple(gherkin_steps(entry, entry.id if entry.id != entry.base_id else None))


def _left_out(scenario: dict[str, Any]) -> bool:
    """A scenario the run did not select (or left to another shard), with nothing of its own to show: the
    page counts it but does not embed it — a one-scenario run's page showed all the others, 1.6 MB."""
    return (scenario.get("outcome") == "disabled" and not any(scenario.get(key) for key in _DIAGNOSTIC_KEYS)
            and not (scenario.get("message") or "").startswith("not reached"))


def _left_out_note(count: int) -> str:
    return (f'<p id="left-out" class="muted">{count} scenario{"" if count == 1 else "s"} of the suite not selected '
            "for this run, not shown (<code>sandbox-conformance list</code> names them).</p>")


def render_html(document: dict[str, Any]) -> str:
    spec = _Spec((document.get("provider") or {}).get("dialect"))
    every = document.get("scenarios") or []
    scenarios = [scenario for scenario in every if not _left_out(scenario)]
    left_out = len(every) - len(scenarios)
    verdict = document.get("verdict") or {}
    passed = bool(verdict.get("passed"))
    provider = document.get("provider") or {}
    title = f"sandbox-conformance: {'PASS' if passed else 'FAIL'} · {provider.get('kind', '?')}"
    body = [
        _header(document, passed),
        _counts(document.get("summary") or {}),
        _run_facts(document),
        _failures(scenarios, document.get("causes") or []),
        _filters(scenarios),
        '<section id="scenarios"><h2>Scenarios</h2>',
        '<p id="no-match" class="muted" hidden>No scenario matches the filters.</p>',
        *([_left_out_note(left_out)] if left_out else []),
        *(_render_card(scenario, spec, number) for number, scenario in enumerate(scenarios)),
        "</section>",
        _requirements_view(scenarios, spec, narrow=left_out > 0),
        _gaps(document.get("gaps") or {}),
    ]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CONTENT_SECURITY_POLICY)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style></head>",
        "<body>", *body, f"<script>{_SCRIPT}</script>", "</body></html>", ""])


# -- the top of the page -------------------------------------------------------------------------


def _header(document: dict[str, Any], passed: bool) -> str:
    verdict = document.get("verdict") or {}
    provider = document.get("provider") or {}
    run = document.get("run") or {}
    identity = (f"Provider {_e(provider.get('kind', '?'))} {_e(provider.get('version', ''))} · "
                f"{_e(provider.get('dialect', '?'))} over {_e(provider.get('transport', '?'))} · "
                f"run <code>{_e(run.get('id', ''))}</code> · {_e(seed_words(run))} · "
                f"suite {_e((document.get('suite') or {}).get('version', ''))}")
    lines = ["<header>",
             (f'<h1>sandbox-conformance: <span id="verdict" class="verdict {"pass" if passed else "fail"}">'
             f'{"PASS" if passed else "FAIL"}</span></h1>'),
             f'<p class="identity">{identity}</p>']
    reasons, warnings = verdict.get("reasons") or [], verdict.get("warnings") or []
    if reasons or warnings:
        lines.append('<ul class="verdict-lines">')
        lines += [f'<li class="reason"><strong>fails:</strong> {_e(reason)}</li>' for reason in reasons]
        lines += [f'<li class="warning">warning: {_e(warning)}</li>' for warning in warnings]
        lines.append("</ul>")
    lines.append("</header>")
    return "\n".join(lines)


def _counts(summary: dict[str, Any]) -> str:
    """The counts as every sink shows them (``counts.rows``): one column per category, adding up to the total."""
    head = "".join(f'<th title="{_e(c.meaning)}">{_e(c.word)}</th>' for c in counts.CATEGORIES)
    rows = []
    for level, numbers, total in counts.rows(summary):
        cells = "".join(f'<td class="{"nonzero o-" + c.key if n else "zero"}">{n}</td>'
                        for c, n in zip(counts.CATEGORIES, numbers))
        rows.append(f"<tr><th>{_e(level)}</th>{cells}<td>{total}</td></tr>")
    return (f'<section id="counts"><h2>Counts per level</h2><table class="counts"><tr><th>level</th>{head}'
            f'<th>total</th></tr>{"".join(rows)}</table></section>')


def _run_facts(document: dict[str, Any]) -> str:
    run = document.get("run") or {}
    provider = document.get("provider") or {}
    sandboxes = document.get("sandboxes") or {}
    facts: list[tuple[str, str]] = [
        ("started", _e(run.get("started_at"))), ("duration", f"{_e(run.get('duration_s'))} s"),
        ("provider command", f"<code>{_e(provider.get('command', ''))}</code>"),
    ]
    if provider.get("negotiation"):
        facts.append(("protocol version", _e(provider["negotiation"])))
    if provider.get("negotiation_detail"):
        facts.append(("how it was settled", _e(provider["negotiation_detail"])))
    for problem in provider.get("handshake_problems") or []:
        facts.append(("handshake problem", _e(problem)))
    if run.get("shard"):
        facts.append(("shard", f"{_e(run['shard'].get('index'))} of {_e(run['shard'].get('count'))}"))
    if (run.get("repeat") or 1) > 1:
        facts.append(("repeated", f"{_e(run['repeat'])} times"))
    options = [name for name in ("strict", "interrupted") if run.get(name)]
    if options:
        facts.append(("run was", _e(", ".join(options))))
    facts.append(("sandboxes", f"created {_e(sandboxes.get('created', 0))}, deleted {_e(sandboxes.get('deleted', 0))}"))
    for key, label in (("leaked", "leaked"), ("swept", "swept at the end"), ("died_holding", "held by a provider process that ended"),
                       ("unknown_at_delete", "unknown to the provider at their delete")):
        if sandboxes.get(key):
            facts.append((f"sandboxes {label}", _e(", ".join(map(str, sandboxes[key])))))
    for violation in document.get("wire_violations_outside_scenarios") or []:
        facts.append(("wire violation outside scenarios", _e(violation)))
    for flaky in document.get("flaky") or []:
        facts.append(("flaky", f"<code>{_e(flaky.get('id'))}</code> ({_e(' → '.join(flaky.get('outcomes') or []))})"))
    baseline = document.get("baseline")
    if baseline:
        facts.append(("baseline", f"<code>{_e(baseline.get('source'))}</code>"))
        for entry in baseline.get("entries") or []:
            facts.append((f"baseline entry {_e(entry.get('id'))}",
                          f"{_e(entry.get('status'))}: {_e(entry.get('reason'))}"))
    rows = "".join(f"<tr><th>{label}</th><td>{value}</td></tr>" for label, value in facts)
    return f'<section id="run"><h2>Run</h2><table class="facts">{rows}</table></section>'


def _failures(scenarios: list[dict[str, Any]], causes: list[dict[str, Any]]) -> str:
    """The failures under their causes (``causes.group_causes``: the basics first), each linking to its card;
    a document without causes (an older suite's) lists them as they come."""
    failing = {s["id"]: s for s in scenarios if s.get("outcome") in ("error", "failed", "xpass")}
    if not failing:
        return '<section id="failures"><h2>Failures</h2><p class="muted">No scenario failed.</p></section>'

    def items(ids: Iterable[str]) -> str:
        return "".join(
            f'<li>{_badge(s["outcome"])} {_level(s.get("level"))} <a href="#{_anchor("scenario", s["id"])}">'
            f'<code>{_e(s["id"])}</code></a> {_e(_first_line(s.get("message")))}</li>'
            for s in (failing[sid] for sid in ids if sid in failing))

    grouped = [f'<div class="cause" id="{_anchor("cause", str(c["rank"]))}"><h3>{c["count"]} · {_e(c["title"])}'
               + (f' <span class="muted">({c["setup"]} needed it in a Given step)</span>' if c["setup"] else "")
               + f'</h3><ul class="failures">{items(c["scenarios"])}</ul></div>' for c in causes]
    explained = {sid for c in causes for sid in c["scenarios"]}
    rest = [sid for sid in failing if sid not in explained]  # xpass: a stale baseline, no cause of the provider's
    if rest:
        grouped.append(f'<div class="cause"><h3>{len(rest)} · other</h3><ul class="failures">{items(rest)}</ul></div>')
    heading = f"Failures by cause ({len(failing)} scenarios, {len(causes)} causes)" if causes else \
        f"Failures ({len(failing)})"
    return f'<section id="failures"><h2>{heading}</h2>{"".join(grouped)}</section>'


def _first_line(message: str | None) -> str:
    return next((line.strip() for line in (message or "").splitlines() if line.strip()), "")


def _filters(scenarios: list[dict[str, Any]]) -> str:
    outcomes = Counter(counts.category(s) for s in scenarios)
    selected = sum(n for outcome, n in outcomes.items() if outcome != "disabled")
    outcome_options = [("selected", f"selected ({selected})"), ("all", f"all ({len(scenarios)})")]
    outcome_options += [(o, f"{_OUTCOME_LABELS[o].lower()} ({outcomes[o]})") for o in _OUTCOME_LABELS if outcomes[o]]
    levels = sorted({s.get("level") or "none" for s in scenarios}, key=_level_order)
    features = sorted({s.get("feature", "") for s in scenarios})

    def select(name: str, label: str, options: list[tuple[str, str]]) -> str:
        rendered = "".join(f'<option value="{_e(value)}">{_e(text)}</option>' for value, text in options)
        return f'<label>{label} <select id="filter-{name}">{rendered}</select></label>'

    return "\n".join([
        '<nav id="filters" aria-label="filters">',
        select("outcome", "outcome", outcome_options),
        select("level", "level", [("all", "all"), *((level, level.upper()) for level in levels)]),
        select("feature", "feature", [("all", "all"), *((feature, feature) for feature in features)]),
        '<label>text <input id="filter-text" type="search" placeholder="id, name, requirement, message"></label>',
        '<span id="shown-count" class="muted"></span>',
        '<a href="#scenarios">scenarios</a> <a href="#requirements">requirements</a> <a href="#gaps">gaps</a>',
        "</nav>"])


def _level_order(level: str) -> tuple[int, str]:
    order = ("must", "should", "may", "gap")
    return (order.index(level) if level in order else len(order), level)


# -- scenarios -----------------------------------------------------------------------------------


def _filter_attributes(scenario: dict[str, Any]) -> str:
    """What the outcome, level and feature filters read; the text filter reads what the card shows."""
    return (f'data-outcome="{_e(counts.category(scenario))}" data-level="{_e(scenario.get("level") or "none")}" '
            f'data-feature="{_e(scenario.get("feature"))}"')


# What a scenario left out of the run may carry beyond its identity; with none of it, it is not shown.
_DIAGNOSTIC_KEYS = ("transcript", "stderr", "reproduce", "step", "findings", "outcomes", "requirement_texts")


def _render_card(scenario: dict[str, Any], spec: _Spec, number: int) -> str:
    outcome = counts.category(scenario) if "outcome" in scenario else ""
    sid = scenario["id"]
    cited = spec.cited(scenario) if outcome == "disabled" else tuple(scenario.get("requirements") or [])
    texts = [spec.requirement_text(scenario, rid) or "" for rid in cited]
    parts = [(f'<details class="entry scenario o-{_e(outcome)}" id="{_anchor("scenario", sid)}" '
             f'{_filter_attributes(scenario)}{" open" if outcome in _OPEN_OUTCOMES else ""}>'),
             (f'<summary>{_badge(outcome)} {_level(scenario.get("level"))} <code>{_e(sid)}</code> '
             f'{_e(scenario.get("name"))} <span class="feature">{_e(scenario.get("feature"))}</span></summary>'),
             '<div class="body">']
    if cited:
        parts.append('<ul class="requirements">')
        for rid, text in zip(cited, texts):
            known = spec.requirements.get(rid)
            level = f" {_level(known.level)}" if known else ""
            parts.append(f'<li><a href="#{_anchor("req", rid)}"><code>{_e(rid)}</code></a>{level} '
                         f'<span class="req-text">{_e(text or "not in any requirement registry")}</span></li>')
        parts.append("</ul>")
    message = scenario.get("message")
    if message:
        label = {"skipped": "skipped because", "other_dialect": "not for this dialect", "disabled": "not run",
                 "passed": "note"}.get(outcome, "cause")
        parts.append(f'<h4>{label}</h4><pre class="message">{_e(message)}</pre>')
    if scenario.get("step"):
        parts.append(f'<p class="failed-step-line">failed at step: <code>{_e(scenario["step"])}</code></p>')
    parts.append(_steps_block(spec.steps(sid), scenario.get("step")))
    if scenario.get("transcript"):
        omitted = scenario.get("transcript_omitted") or 0
        note = f' <span class="muted">({omitted} messages in the middle left out, where marked)</span>' if omitted else ""
        parts.append(f'<h4>transcript{note}</h4><pre class="transcript">{_e(chr(10).join(scenario["transcript"]))}</pre>')
    if scenario.get("stderr"):
        parts.append(f'<h4>provider stderr (tail)</h4><pre class="stderr">{_e(scenario["stderr"])}</pre>')
    if scenario.get("reproduce"):
        parts.append(f'<h4>reproduce</h4><div class="reproduce"><code id="reproduce-{number}">'
                     f'{_e(scenario["reproduce"])}</code> <button type="button" class="copy" '
                     f'data-target="reproduce-{number}">copy</button></div>')
    extras = []
    if scenario.get("findings"):
        extras.append("findings: " + ", ".join(f"{_e(k)} = {_e(v)}" for k, v in scenario["findings"].items()))
    if scenario.get("outcomes"):
        extras.append("outcomes per repetition: " + _e(" → ".join(scenario["outcomes"])))
    if scenario.get("capabilities"):
        extras.append("capabilities: " + _e(", ".join(scenario["capabilities"])))
    if outcome != "disabled":
        extras.append(f"duration {_e(scenario.get('duration_s'))} s")
    parts.append(f'<p class="muted">{" · ".join(extras)}</p>')
    parts += ["</div>", "</details>"]
    return "\n".join(parts)


def _steps_block(steps: tuple[str, ...] | None, failed_step: str | None) -> str:
    if steps is None:
        return '<p class="muted">(this scenario is not in the feature files of this suite version)</p>'
    failed = _STEP_LINE.sub("", failed_step) if failed_step else None
    lines = []
    for step in steps:
        if failed is not None and step == failed:
            lines.append(f'<span class="step-failed">{_e(step)}   ✗ failed here</span>')
            failed = None  # the first matching line; a later repeat of the same words did not run
        else:
            lines.append(_e(step))
    return f'<pre class="gherkin">{chr(10).join(lines)}</pre>'


# -- requirements --------------------------------------------------------------------------------


def _requirements_view(scenarios: list[dict[str, Any]], spec: _Spec, narrow: bool = False) -> str:
    """Every rule of the registries shown with the scenarios verifying it; of a ``narrow`` run (scenarios
    left out), only the rules its scenarios verify, and how many others there are."""
    covering: dict[str, list[dict[str, Any]]] = {}
    for scenario in scenarios:
        for rid in spec.cited(scenario):
            covering.setdefault(rid, []).append(scenario)
    names = spec.registries_shown(covering)
    parts = ['<section id="requirements"><h2>Requirements</h2>',
             '<p class="muted">The rules this provider is judged by'
             + (f" (the <code>{_e(spec.dialect)}</code> registry and the gap proposals)"
                if spec.dialect is not None else "")
             + ", in the order of their registry, each with the scenarios verifying it.</p>"]
    if narrow:
        others = sum(1 for name in names for rid in registry.load(name) if rid not in covering)
        parts.append(f'<p id="requirements-left-out" class="muted">Only the rules this run\'s scenarios verify: '
                     f"{others} other{'' if others == 1 else 's'} not shown (<code>sandbox-conformance explain "
                     "ID</code> shows one).</p>")
    for name in names:
        requirements = {rid: r for rid, r in registry.load(name).items() if not narrow or rid in covering}
        if not requirements:
            continue
        parts.append(f'<div class="registry"><h3>{_e(name)}</h3>')
        for section, members in _by_section(requirements.values()):
            parts.append(f'<div class="req-section"><h4 class="section-title">section {_e(section)}</h4>')
            parts += [_requirement_block(requirement, covering.get(requirement.id, [])) for requirement in members]
            parts.append("</div>")
        parts.append("</div>")
    parts.append("</section>")
    return "\n".join(parts)


def _by_section(requirements: Iterable[registry.Requirement]) -> list[tuple[str, list[registry.Requirement]]]:
    """Requirements grouped by section, sections in the order they first appear in the registry."""
    groups: dict[str, list[registry.Requirement]] = {}
    for requirement in requirements:
        groups.setdefault(requirement.section, []).append(requirement)
    return list(groups.items())


def _requirement_block(requirement: registry.Requirement, scenarios: list[dict[str, Any]]) -> str:
    tally = Counter(counts.category(s) for s in scenarios if s.get("outcome") != "disabled")
    verdict = ", ".join(f"{n} {_OUTCOME_LABELS.get(o, o).lower()}" for o, n in tally.most_common())
    parts = [f'<div class="requirement" id="{_anchor("req", requirement.id)}">',
             (f'<p class="req-head"><code>{_e(requirement.id)}</code> {_level(requirement.level)} '
             f'<span class="muted">section {_e(requirement.section)} · testability {_e(requirement.testability)}'
             f'{" · in this run: " + _e(verdict) if verdict else ""}</span></p>'),
             f'<p class="req-text">{_e(requirement.text)}</p>']
    if requirement.excluded:
        parts.append(f'<p class="muted">not checked by a black box: {_e(requirement.excluded)}</p>')
    if not scenarios:
        parts.append('<p class="muted">No scenario verifies it.</p>')
    parts += [_covering_entry(s["id"], s.get("name"), counts.category(s), s.get("level"), s.get("feature"),
                              s.get("step")) for s in scenarios]
    parts.append("</div>")
    return "\n".join(parts)


@lru_cache(maxsize=4096)
def _covering_entry(sid: str, name: str | None, outcome: str, level: str | None, feature: str | None,
                    step: str | None) -> str:
    """One scenario under a requirement it verifies: its outcome and steps, a link to its card. The same
    in every run where the scenario ends the same way, so rendered once per process."""
    scenario = {"outcome": outcome, "level": level, "feature": feature}
    return (f'<details class="entry covering" {_filter_attributes(scenario)}>'
            f'<summary>{_badge(outcome)} <code>{_e(sid)}</code> {_e(name)} '
            f'<a href="#{_anchor("scenario", sid)}">result</a></summary>'
            f'{_steps_block(_catalogue_steps(sid), step)}</details>')


# -- gaps ----------------------------------------------------------------------------------------


def _gaps(gaps: dict[str, Any]) -> str:
    parts = ['<section id="gaps"><h2>Gaps</h2>',
             '<p class="muted">Proposals beyond the protocol (GAP-n): what this provider does about each.</p>']
    if not gaps:
        parts.append('<p class="muted">No gap section in this document.</p>')
    for gid, gap in gaps.items():
        parts.append(f'<div class="gap"><p class="req-head"><code>{_e(gid)}</code> {_e(gap.get("title"))}: '
                     f'<strong class="gap-status">{_e(gap.get("status"))}</strong> — {_e(gap.get("summary"))}</p>'
                     f'<p class="req-text">{_e(gap.get("requirement"))}</p>')
        if gap.get("scenarios"):
            parts.append('<ul class="gap-scenarios">')
            parts += [f'<li>{_badge(s.get("outcome", ""))} <a href="#{_anchor("scenario", s.get("id", ""))}">'
                      f'<code>{_e(s.get("id"))}</code></a> {_e(s.get("status"))}: {_e(s.get("detail"))}</li>'
                      for s in gap["scenarios"]]
            parts.append("</ul>")
        parts.append("</div>")
    parts.append("</section>")
    return "\n".join(parts)


_CSS = """
:root { --fail: #b42318; --pass: #067647; --warn: #b54708; --muted: #667085; --line: #d0d5dd; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 0 16px 48px; color: #101828; }
[hidden] { display: none !important; }
[id] { scroll-margin-top: 96px; }  /* an anchor's target lands below the sticky filter bar */
h1 { font-size: 22px; margin: 20px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 18px 0 6px; } h4 { font-size: 13px; margin: 10px 0 4px; color: #344054; }
code, pre { font: 12.5px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }
pre { background: #f6f7f9; border: 1px solid #eaecf0; border-radius: 4px; padding: 8px; margin: 4px 0;
      white-space: pre-wrap; overflow-wrap: anywhere; max-height: 420px; overflow: auto; }
.verdict.pass { color: var(--pass); } .verdict.fail { color: var(--fail); }
.identity, .muted { color: var(--muted); }
.verdict-lines .reason { color: var(--fail); } .verdict-lines .warning { color: var(--warn); }
table { border-collapse: collapse; } th, td { padding: 3px 10px; border-bottom: 1px solid #eaecf0; text-align: left; }
table.counts td { text-align: right; } td.zero { color: #98a2b3; } td.nonzero { font-weight: 600; }
table.facts th { font-weight: 500; color: #344054; white-space: nowrap; vertical-align: top; }
.badge { display: inline-block; min-width: 88px; text-align: center; border-radius: 3px; padding: 0 6px;
         font-size: 11px; font-weight: 700; color: #fff; background: #98a2b3; }
.badge.o-passed { background: var(--pass); } .badge.o-failed, .badge.o-error, .badge.o-xpass { background: var(--fail); }
.badge.o-xfail { background: var(--warn); } .badge.o-skipped { background: #667085; } .badge.o-other_dialect, .badge.o-disabled { background: #d0d5dd; color: #344054; }
td.o-failed, td.o-error, td.o-xpass { color: var(--fail); } td.o-passed { color: var(--pass); }
.level { font-size: 11px; font-weight: 600; color: #475467; border: 1px solid var(--line); border-radius: 3px; padding: 0 4px; }
.feature { color: var(--muted); font-size: 12px; }
#filters { position: sticky; top: 0; z-index: 1; background: #fff; border-bottom: 1px solid var(--line);
           padding: 8px 0; display: flex; flex-wrap: wrap; gap: 12px; align-items: center; }
#filters input { width: 240px; }
details.entry { border: 1px solid #eaecf0; border-radius: 4px; margin: 4px 0; }
details.scenario.o-failed, details.scenario.o-error, details.scenario.o-xpass { border-color: var(--fail); }
details.entry > summary { cursor: pointer; padding: 4px 8px; }
details.entry .body { padding: 0 12px 8px; }
details.covering { margin-left: 16px; } details.covering > pre { margin: 0 8px 8px; }
.step-failed { color: var(--fail); font-weight: 700; }
ul.requirements { padding-left: 18px; margin: 6px 0; }
.req-text { margin: 2px 0 6px; }
.requirement { border-left: 3px solid var(--line); padding: 2px 0 4px 10px; margin: 10px 0; }
.req-head { margin: 0; }
.reproduce { display: flex; gap: 8px; align-items: flex-start; }
.reproduce code { flex: 1; background: #f6f7f9; border: 1px solid #eaecf0; padding: 6px 8px; overflow-wrap: anywhere; }
button.copy { font-size: 12px; }
"""

# Filters show and hide the scenario cards and the covering entries under each requirement by the same
# test; a requirement stays visible while one of its entries does (all of them, uncovered ones too, with
# no filter set). The text filter searches what a scenario's card shows (id, name, requirement texts,
# message, steps, transcript); a covering entry searches its scenario's card and its requirement. The copy button uses the asynchronous clipboard where the page may, and otherwise
# selects the command so the reader copies it with their keyboard.
_SCRIPT = r"""
(function () {
  "use strict";
  var byId = function (id) { return document.getElementById(id); };
  var outcome = byId("filter-outcome"), level = byId("filter-level"), feature = byId("filter-feature"),
      text = byId("filter-text");
  var entries = Array.prototype.slice.call(document.querySelectorAll(".entry"));
  var requirements = Array.prototype.slice.call(document.querySelectorAll(".requirement"));
  var groups = Array.prototype.slice.call(document.querySelectorAll(".req-section, .registry"));
  var total = document.querySelectorAll(".entry.scenario").length;
  var searched = entries.map(function (el) {
    var requirement = el.closest(".requirement");
    if (!requirement) return el.textContent.toLowerCase();
    var link = el.querySelector("a[href^='#scenario-']");
    var card = link ? byId(link.getAttribute("href").slice(1)) : null;
    return ((card || el).textContent + " " + requirement.querySelector(".req-head").textContent + " " +
            requirement.querySelector(".req-text").textContent).toLowerCase();
  });

  function matches(el, index, f) {
    var o = el.getAttribute("data-outcome");
    if (f.outcome === "selected" ? o === "disabled" : (f.outcome !== "all" && o !== f.outcome)) return false;
    if (f.level !== "all" && el.getAttribute("data-level") !== f.level) return false;
    if (f.feature !== "all" && el.getAttribute("data-feature") !== f.feature) return false;
    return !f.text || searched[index].indexOf(f.text) !== -1;
  }

  function apply() {
    var f = {outcome: outcome.value, level: level.value, feature: feature.value,
             text: text.value.trim().toLowerCase()};
    var unfiltered = f.outcome === "all" && f.level === "all" && f.feature === "all" && !f.text;
    var shown = 0;
    entries.forEach(function (el, index) {
      var visible = matches(el, index, f);
      el.hidden = !visible;
      if (visible && el.classList.contains("scenario")) shown += 1;
    });
    requirements.forEach(function (r) { r.hidden = !unfiltered && !r.querySelector(".entry:not([hidden])"); });
    groups.forEach(function (g) { g.hidden = !g.querySelector(".requirement:not([hidden])"); });
    byId("shown-count").textContent = shown + " of " + total + " scenarios shown";
    byId("no-match").hidden = shown > 0;
  }

  [outcome, level, feature].forEach(function (s) { s.addEventListener("change", apply); });
  text.addEventListener("input", apply);
  apply();

  function selectText(node, button) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "selected: press Ctrl+C";
  }

  // A link to a scenario opens its card, so the reader lands on its details.
  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a[href^='#scenario-']") : null;
    var card = link ? byId(link.getAttribute("href").slice(1)) : null;
    if (card) card.open = true;
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.copy") : null;
    if (!button) return;
    var node = byId(button.getAttribute("data-target"));
    if (!node) return;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(node.textContent).then(
        function () { button.textContent = "copied"; },
        function () { selectText(node, button); });
    } else {
      selectText(node, button);
    }
  });
})();
"""
