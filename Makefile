# Everything a fresh machine needs, from the repository root:
#   make run    set up, then run the conformance suite against the bundled reference plugin
#   make test   set up, then run the suite's own tests (what CI runs)
#   make images build the local Docker images (base rootfs by debootstrap, sandbox, reference REST server,
#               the suite itself)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Our tests mostly wait on providers (commands, deadlines, containers): at 4 workers .ci/run's tests kept
# 1.15 of the 2 cores busy (858 s on the tree with the interop tier); 6 took them to 782 s with no test
# slower than its bound. Work stealing keeps them busy to the end (tests last from milliseconds to minutes).
WORKERS ?= 6

.PHONY: setup runtime run run-sketch run-docker images test wheel bench clean durations cheatsheet

# Two installations, each with its stamp: what running the suite needs (`pip install -e .`: run, images,
# durations), and that with the dev extras (the image extra, playwright, ruff, build: setup, test, bench,
# wheel). Going from `make run` to `make test` adds the extras; a changed pyproject.toml reinstalls either.
# Before the venv exists, .ci/check-python names an old Python or a missing venv module in one line.
$(BIN)/python:
	@$(PYTHON) .ci/check-python
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(BIN)/.installed-runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(BIN)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

runtime: $(BIN)/.installed-runtime

setup: $(BIN)/.installed-dev

run: runtime
	$(BIN)/sandbox-conformance run

run-sketch: runtime
	$(BIN)/sandbox-conformance run --plugin "$(BIN)/sandbox-conformance-host-plugin --dialect fabro-sketch"

run-docker: images
	$(BIN)/sandbox-conformance run --plugin $(BIN)/sandbox-conformance-docker-plugin \
	    --create-spec '{"source": {"image": {"reference": "sandbox-conformance/sandbox:bookworm"}}}'

images: runtime
	$(BIN)/python -m conformance.reference.images all

test: setup
	$(BIN)/pytest -n $(WORKERS) --dist worksteal --durations=15

wheel: setup
	$(BIN)/python -m build --wheel --outdir dist

# Re-record conformance/data/durations.json (what `run --shard` balances by) from whole reference runs in
# each plugin dialect; a scenario's longest duration among the runs that ran it counts.
DURATION_RUNS := reports/durations
durations: runtime
	for dialect in sandbox-driver-v1 sandbox-driver-v2 fabro-sketch; do \
	    $(BIN)/sandbox-conformance run --plugin "$(BIN)/sandbox-conformance-host-plugin --dialect $$dialect" \
	        --report-dir $(DURATION_RUNS)/$$dialect || exit 1; \
	done
	$(BIN)/python -m conformance.reporting.durations $(DURATION_RUNS)/*/results.json

clean:
	rm -rf $(VENV) dist build reports/*.json reports/*.xml

bench: setup
	$(BIN)/python benchmarks/suite_wall_time.py
	$(BIN)/python benchmarks/rest_overhead.py
	$(BIN)/python benchmarks/inprocess_overhead.py
	$(BIN)/python benchmarks/v2_channel_throughput.py
	$(BIN)/python benchmarks/wire_costs.py
	$(BIN)/python benchmarks/stream_costs.py
	$(BIN)/python benchmarks/startup.py

# The protocol cheat-sheet is generated (tests/test_cheatsheet.py fails when the committed one differs).
cheatsheet: setup
	$(BIN)/python -m conformance.cheatsheet > docs/protocol-cheatsheet.md
