"""What the command line offers and defaults to, importable without the machinery behind it.

``sandbox-conformance --version`` and every ``--help`` build the whole argument parser; this module is all
that parser needs besides the standard library, so they start without pytest, pytest-bdd, rich, jsonschema
or httpx (a second and more on a loaded machine). The dialect names are the registry's own
(``conformance/dialects/registry.py``); ``tests/test_startup.py`` checks both lists agree.
"""

from __future__ import annotations

PROG = "sandbox-conformance"
DEFAULT_CALL_TIMEOUT_S = 30.0
# The plugin dialects, in the registry's detection order; a REST provider's dialect is "rest".
PLUGIN_DIALECT_NAMES = ("sandbox-driver-v2", "sandbox-driver-v1", "fabro-sketch")
DIALECTS = ("auto", *PLUGIN_DIALECT_NAMES)
SANDBOXES_PER_PROCESS = ("auto", "one", "many")
# How `--image` fails without the optional dependencies it needs (testcontainers and the docker client).
IMAGE_EXTRA_HINT = "--image needs the image extra: pip install 'sandbox-conformance[image]'"
# `init --template NAME`: the examples/<NAME>/ a provider author can start from (scaffold.TEMPLATES says
# which file of each the configuration points at; tests/test_init_template.py checks both name the same).
INIT_TEMPLATES = ("v2", "v1", "sketch", "rest")
