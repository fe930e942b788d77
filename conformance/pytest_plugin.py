"""The entry point pytest loads in every process: inert, except in an xdist worker of a conformance
run, where it rebuilds the run's plugin from the configuration the controller serialized.

The controller's plugin is the object ``conformance.runner.run`` hands to ``pytest.main``; workers are
separate processes that get only ``workerinput``, so they start theirs here.
"""

from __future__ import annotations

import pytest

from conformance.plugin.keys import PLUGIN_NAME, WORKER_CONFIG


def pytest_configure(config: pytest.Config) -> None:
    worker_input = getattr(config, "workerinput", None)
    if not worker_input or WORKER_CONFIG not in worker_input or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    from conformance.config import RunConfig
    from conformance.plugin import ConformancePlugin

    run_config = RunConfig.from_json(worker_input[WORKER_CONFIG])
    config.pluginmanager.register(ConformancePlugin(run_config, is_worker=True), PLUGIN_NAME)
