"""Run the interop tier by hand: ``.venv/bin/python -m tests.interop [TARGET ...] [--out DIR]``.

Prints each target's table (true findings with their sentences, false failures, advisories) and exits 1
when any target's run disagrees with its expected findings.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.interop import findings, third_party


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.interop")
    parser.add_argument("targets", nargs="*", metavar="TARGET", default=[],
                        help=f"targets to run (default: all of {', '.join(third_party.BY_NAME)})")
    parser.add_argument("--out", type=Path, default=None, help="where each target's reports go")
    arguments = parser.parse_args(argv)
    unknown = sorted(set(arguments.targets) - set(third_party.BY_NAME))
    if unknown:
        parser.error(f"unknown target {unknown[0]!r} (one of: {', '.join(third_party.BY_NAME)})")
    try:
        folder = third_party.built()
    except third_party.Unavailable as why:
        print(f"interop: {why}", file=sys.stderr)
        return 2
    out = arguments.out or Path(tempfile.mkdtemp(prefix="interop-"))
    ok = True
    for name in arguments.targets or list(third_party.BY_NAME):
        target = third_party.BY_NAME[name]
        started = time.monotonic()
        judgement = judge(target, folder, out / name)
        print(judgement.table())
        print(f"({time.monotonic() - started:.0f} s; reports in {out / name})\n")
        ok = ok and judgement.ok
    return 0 if ok else 1


def judge(target: third_party.Target, folder: Path, report_dir: Path) -> findings.Judgement:
    """Run ``target`` and judge its outcome against its expected findings."""
    outcome = third_party.run(target, folder, report_dir)
    if target.is_battery:
        return findings.judge_battery(target.name, third_party.battery_checks(outcome.stdout), outcome.exit_code)
    if not (report_dir / "results.json").is_file():
        judgement = findings.Judgement(target.name)
        tail = " | ".join((outcome.stderr or outcome.stdout).strip().splitlines()[-3:])
        judgement.problems.append(f"no results.json (exit {outcome.exit_code}): {tail}")
        return judgement
    return findings.judge(target.name, findings.load_results(report_dir), outcome.exit_code)


if __name__ == "__main__":
    sys.exit(main())
