"""Expected findings of a third-party provider, and a run's results judged against them.

An expected-findings file (``expected/<target>.yaml``) lists, per MUST scenario the provider fails, the
requirement it breaks, that requirement's sentence (quoted as the requirement registry words it, with its
section), the cause in a line, and whether the finding may come from the reconstruction of upstream's code
rather than upstream itself. SHOULD and gap findings go under ``advisories``. A file may serve several
targets (``targets:``), and an entry may be limited to some of them (its own ``targets:``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

EXPECTED = Path(__file__).resolve().parent / "expected"
FAILED = ("failed", "error")


@dataclass(frozen=True)
class Finding:
    scenario: str
    requirement: str
    section: str
    sentence: str
    cause: str
    reconstruction: bool
    level: str = "must"
    # A finding seen in some runs only (a race in the provider): its passing is reported, not a failure.
    intermittent: bool = False


@dataclass(frozen=True)
class Expected:
    path: Path
    targets: tuple[str, ...]
    provider: str
    findings: dict[str, Finding]
    advisories: dict[str, Finding]
    unaccounted_sandboxes: int


def _entries(raw: dict[str, Any], target: str, level: str | None) -> dict[str, Finding]:
    entries = {}
    for scenario, entry in (raw or {}).items():
        if target not in entry.get("targets", [target]):
            continue
        entries[scenario] = Finding(scenario, entry["requirement"], entry.get("section", ""),
                                    entry.get("sentence", ""), entry["cause"], bool(entry.get("reconstruction")),
                                    level or entry["level"], bool(entry.get("intermittent")))
    return entries


@cache
def files() -> tuple[Path, ...]:
    return tuple(sorted(EXPECTED.glob("*.yaml")))


def raw(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def expected(target: str) -> Expected:
    """The expected findings of ``target``, from the one file that names it."""
    for path in files():
        document = raw(path)
        targets = tuple(document["targets"])
        if target in targets:
            return Expected(path, targets, document["provider"], _entries(document.get("findings"), target, "must"),
                            _entries(document.get("advisories"), target, None),
                            int(document.get("unaccounted_sandboxes", 0)))
    raise KeyError(f"no expected-findings file names the target {target!r}")


@dataclass
class Judgement:
    """A run's results against the expected findings: what fails the tier, and what is only reported."""

    target: str
    unexpected: list[str] = field(default_factory=list)  # MUST failures no file lists: false until proven true
    stopped: list[str] = field(default_factory=list)  # listed findings that did not fail this time
    true: list[Finding] = field(default_factory=list)
    advisories: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # the run itself went wrong
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.unexpected or self.stopped or self.problems)

    def table(self) -> str:
        lines = [f"## {self.target}",
                 (f"MUST failed {self.counts.get('must_failed', 0)} | true (listed) {len(self.true)} | "
                 f"false (unlisted) {len(self.unexpected)} | listed but passing {len(self.stopped)} | "
                 f"advisories {len(self.advisories)} | passed {self.counts.get('passed', 0)} | "
                 f"skipped {self.counts.get('skipped', 0)}")]
        lines += [f"- TRUE {f.scenario}: {f.requirement} {f.section} \"{f.sentence}\" — {f.cause}"
                  + (" (may come from the reconstruction)" if f.reconstruction else "")
                  + (" (intermittent)" if f.intermittent else "") for f in self.true]
        lines += [f"- UNEXPECTED MUST failure {line}" for line in self.unexpected]
        lines += [f"- STOPPED FAILING (listed as a finding) {line}" for line in self.stopped]
        lines += [f"- advisory {line}" for line in self.advisories]
        lines += [f"- PROBLEM {line}" for line in self.problems]
        return "\n".join(lines)


def judge(target: str, results: dict[str, Any], exit_code: int) -> Judgement:
    """Compare one run's ``results.json`` document with the target's expected findings."""
    wanted = expected(target)
    judgement = Judgement(target)
    scenarios = {scenario["id"]: scenario for scenario in results["scenarios"]}
    must_failed = 0
    for sid, scenario in scenarios.items():
        outcome, level = scenario["outcome"], scenario["level"]
        if outcome not in FAILED:
            continue
        if level == "must":
            must_failed += 1
            if sid in wanted.findings:
                judgement.true.append(wanted.findings[sid])
            else:
                judgement.unexpected.append(f"{sid}: {_first_line(scenario.get('message'))}")
        else:
            listed = " (listed)" if sid in wanted.advisories else " (NEW: not listed)"
            judgement.advisories.append(f"{level.upper()} {sid}{listed}: {_first_line(scenario.get('message'))}")
    for sid, finding in wanted.findings.items():
        scenario = scenarios.get(sid)
        if scenario is None:
            judgement.stopped.append(f"{sid}: not in the run (renamed or deselected?)")
        elif scenario["outcome"] not in FAILED and finding.intermittent:
            judgement.advisories.append(f"{sid}: an intermittent finding, {scenario['outcome']} this time")
        elif scenario["outcome"] not in FAILED:
            judgement.stopped.append(f"{sid}: {scenario['outcome']} — {finding.cause}")
    for sid in wanted.advisories:
        if sid in scenarios and scenarios[sid]["outcome"] not in FAILED:
            judgement.advisories.append(f"{sid}: listed, now {scenarios[sid]['outcome']}")
    if exit_code not in (0, 1):
        judgement.problems.append(f"the run exited {exit_code} (0 or 1 expected: a harness or usage error)")
    sandboxes = results.get("sandboxes", {})
    unaccounted = len(sandboxes.get("leaked") or []) if isinstance(sandboxes.get("leaked"), list) \
        else int(sandboxes.get("leaked") or 0)
    if unaccounted != wanted.unaccounted_sandboxes:
        judgement.problems.append(f"{unaccounted} sandbox(es) could not be deleted "
                                  f"({wanted.unaccounted_sandboxes} expected)")
    summary = results.get("summary", {})
    judgement.counts = {"must_failed": must_failed, "passed": int(summary.get("passed", 0)),
                        "skipped": int(summary.get("skipped", 0))}
    return judgement


def judge_battery(target: str, checks: dict[str, tuple[str, str]], exit_code: int) -> Judgement:
    """Upstream's battery against our reference: every check it runs passes, or is listed (with why)."""
    wanted = expected(target)
    judgement = Judgement(target)
    if not checks:
        judgement.problems.append(f"the battery printed no check (exit {exit_code})")
    for name, (status, reason) in sorted(checks.items()):
        if status == "FAIL" and name not in wanted.findings:
            judgement.unexpected.append(f"{name}: {reason}")
        elif status == "FAIL":
            judgement.true.append(wanted.findings[name])
        elif status == "SKIP":
            judgement.advisories.append(f"SKIP {name}: {reason}")
    for name in wanted.findings:
        if checks.get(name, ("",))[0] != "FAIL":
            judgement.stopped.append(f"{name}: {checks.get(name, ('absent',))[0]}")
    judgement.counts = {"must_failed": sum(status == "FAIL" for status, _ in checks.values()),
                        "passed": sum(status == "PASS" for status, _ in checks.values()),
                        "skipped": sum(status == "SKIP" for status, _ in checks.values())}
    return judgement


def load_results(report_dir: Path) -> dict[str, Any]:
    return json.loads((report_dir / "results.json").read_text())


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0][:240] if (text or "").strip() else "(no message)"
