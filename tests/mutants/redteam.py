"""The blind red teams' mutants (tests/redteam/), kept in the catalogue like every other mutant.

They were written from the protocol text alone, by someone who never read features/ or steps/, to
measure the suite (tests/redteam/measure.py). Once measured, every mutant the suite catches joins the
catalogue (catalogue/redteam-*.yaml) so it stays caught; only those are registered here. A survivor
stays in tests/redteam/ until a scenario catches it (the measurements name them).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.mutants import mutant
from tests.redteam import load

_CATALOGUED = {entry["name"] for path in sorted(Path(__file__).with_name("catalogue").glob("redteam-*.yaml"))
               for entry in yaml.safe_load(path.read_text(encoding="utf-8"))["mutants"]}

for _name, _entry in load().items():
    if _name in _CATALOGUED:
        mutant(_name)(_entry.cls)
