"""The blind red teams' mutants (tests/redteam/), kept in the catalogue like every other mutant.

They were written from the protocol text alone, by someone who never read features/ or steps/, to
measure the suite (tests/redteam/measure.py). Once measured they join the catalogue
(catalogue/redteam-*.yaml), so every one of them stays caught.
"""

from __future__ import annotations

from tests.mutants import mutant
from tests.redteam import load

for _name, _entry in load().items():
    mutant(_name)(_entry.cls)
