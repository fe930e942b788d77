"""Step definitions. Loaded by the suite's pytest plugin as the package ``conformance_steps``.

Steps talk to providers only through ``conformance.adapter``; they never import a dialect or a
transport. Modules whose name starts with ``_`` are helpers, not step modules.
"""
