"""How pytest is driven: the module that binds every feature's scenarios, and its ini file."""

from pathlib import Path

SCENARIOS_MODULE = Path(__file__).with_name("scenarios.py")
INI_FILE = Path(__file__).with_name("pytest.ini")
