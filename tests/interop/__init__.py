"""The interop tier: the whole suite against providers nobody on this project wrote, and upstream's own v1
battery against our reference plugin.

The providers are built from ``../shared/third-party/`` by its ``build.sh`` (cached by the tarballs'
digest): upstream sandbox-driver's v1 and v2 host plugins, upstream's v1 battery, and fabro's forkd plugin
(driven against ``sandbox-conformance serve forkd``'s app in both compat modes). Each target has an
expected-findings file in ``expected/``: every MUST scenario it fails, with the protocol sentence it breaks
(quoted, with its section). Any other MUST failure, any listed finding that stops failing, a suite error or
an unaccounted sandbox fails the tier; SHOULD and gap findings are advisories.

    .venv/bin/python -m tests.interop [TARGET ...]      # run it by hand, print each target's table

``tests/test_interop.py`` runs it under ``make test``; ``SANDBOX_CONFORMANCE_REQUIRE_INTEROP=1`` (set by
``.ci/run``) turns a missing build into a failure instead of a skip.
"""
