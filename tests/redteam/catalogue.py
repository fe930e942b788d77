"""Write a measured red-team set into the mutant catalogue: every mutant the suite caught, with what it failed.

    .venv/bin/python -m tests.redteam.catalogue --set blind_3 --measured tests/redteam/measured-blind_3-first-pass.json \
        --out tests/mutants/catalogue/redteam-blind-3.yaml [--dialect sandbox-driver-v2]

Only killed mutants are written (survivors stay in tests/redteam/ until a scenario catches them); a
mutant caught only as a real process gets ``process: true``. Entries already in ``--out`` keep their
hand-written keys (``may_fail``, ``passes``, comments are not kept: re-run, then review the diff).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import yaml

HEADER = """# The blind red team's set {set} (tests/redteam/{set}.py): written from the protocol text alone,
# never from features/ or steps/; measured with `python -m tests.redteam.measure --set {set}`.
# `fails` is what the whole suite failed against each (--strict). `process: true`: the fault shows only
# in a real plugin process. `passes`: a control (the behaviour is legal; the suite must accept it).
# Measured, and checked, with a 10 s call deadline.

"""


def requirement_ids(text: str, dialect: str) -> list[str]:
    """The registry ids a red-team note names: SDP1/SDP2 ids as written, and for v2 the digest's numbered
    items (``§7-129``), which the v2 registry keeps as SDP2-129."""
    prefix = "SDP2" if dialect == V2 else "SDP1"
    ids = set(re.findall(rf"{prefix}-(?:\d{{3}}|S\d{{2}})", text))
    if dialect == V2:
        ids |= {f"SDP2-{number}" for number in re.findall(r"§7-(\d{3})", text)}
    return sorted(ids)


V2 = "sandbox-driver-v2"
# A v2-only scenario that waits out the plugin's 10 s open timeout: never the sampled one.
SLOW_V2 = {"v2-fault-ack-withheld"}


def first_sample(fails: list[str], dialect: str) -> list[str] | None:
    """For a v2 set: one failed v2-only scenario (targeted and quick) to run in the catalogue test instead
    of the first few of every failure; the catalogue test proves it still fails."""
    if dialect != V2:
        return None
    own = [sid for sid in sorted(fails) if sid.startswith("v2-") and sid not in SLOW_V2]
    return own[:1] or None


def entry_for(result: dict, kept: dict | None, dialect: str = "sandbox-driver-v1") -> dict:
    entry = {
        "name": result["name"],
        "dialect": dialect,
        "breaks": result["bug"],
        "requirements": requirement_ids(result.get("requirement") or "", dialect),
        "call_timeout": 10,
    }
    if result.get("how") == "as a process":
        entry["process"] = True
    entry["fails"] = sorted(result.get("failed", []))
    sample = (kept or {}).get("sample") or first_sample(entry["fails"], dialect)
    if sample:
        entry["sample"] = sample
    for key in ("may_fail", "passes"):
        if kept and key in kept:
            entry[key] = kept[key]
    return entry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", required=True)
    parser.add_argument("--measured", required=True, help="a measurement written by tests.redteam.measure")
    parser.add_argument("--out", required=True)
    parser.add_argument("--dialect", default="sandbox-driver-v1", help="the dialect the set's mutants speak")
    args = parser.parse_args()
    measured = json.loads(Path(args.measured).read_text(encoding="utf-8"))
    out = Path(args.out)
    existing = {e["name"]: e for e in (yaml.safe_load(out.read_text(encoding="utf-8")) or {}).get("mutants", [])} \
        if out.exists() else {}
    entries = [entry_for(r, existing.get(r["name"]), args.dialect) for r in measured["results"]
               if r["status"] == "killed"]
    # controls (legal behaviour the suite must accept) stay as they were written
    entries += [e for name, e in existing.items() if e.get("passes") and not e.get("fails")
                and name not in {x["name"] for x in entries}]
    body = yaml.safe_dump({"mutants": entries}, sort_keys=False, width=110, allow_unicode=True)
    out.write_text(HEADER.format(set=args.set) + body, encoding="utf-8")
    print(f"{out}: {len(entries)} entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
