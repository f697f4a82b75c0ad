# Trainworks: `make run` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
SERVE_STAMP := $(VENV)/.installed-serve
SDK_STAMP := $(VENV)/.installed-sdk
# The official Node.js client (tests/node, pinned by its lock file) for tests/system/test_node_client.py.
NODE_STAMP := tests/node/node_modules/.installed
PORT ?= 8080
# `make serve` serves gRPC here too (GRPC_PORT=0: REST only).
GRPC_PORT ?= 50051
# `make serve` runs replicas on the host, as `make run` does: the README's examples name images (python:3.11)
# that podman's local storage need not hold. RUNTIME=auto (or podman) runs them in their images.
RUNTIME ?= host
# Test modules run on this many workers (pytest-xdist); a module's tests stay together on one worker. Three on
# two cores: most tests wait on servers and replicas, and a third worker fills that time (14:26 -> 13:05 for the
# tests, 2026-12-05); a fourth does not help, the cores are busy then (503 s against 497 s, 2026-12-06). The
# slowest modules start first (tests/conftest.py SLOW_FIRST), so the run does not end waiting on one of them.
# Tests marked `alone` (they assert a duration) run afterwards, one at a time.
TEST_WORKERS ?= 3

.PHONY: run serve sdk test lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[examples]'
	touch $@

# gRPC serves the official message types of google-cloud-aiplatform (the `vertex` extra).
$(SERVE_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[examples,vertex]'
	touch $@

# `make sdk`: the official Python SDK and cloudml-hypertune (the `sdk` extra), for the README's SDK examples.
$(SDK_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[examples,sdk]'
	touch $@

$(TEST_STAMP): $(STAMP)
	bash scripts/install-test-deps.sh
	$(BIN)/pip install --quiet -e '.[examples,test]'
	touch $@

# npm ci installs exactly the lock file's versions; node and npm come from Debian (install-test-deps.sh).
$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json | $(TEST_STAMP)
	command -v npm >/dev/null || bash scripts/install-test-deps.sh
	cd tests/node && npm ci --no-audit --no-fund --ignore-scripts
	touch $@

run: $(STAMP)
	$(BIN)/python examples/run_example.py

serve: $(SERVE_STAMP)
	$(BIN)/trainworks serve --port $(PORT) --grpc-port $(GRPC_PORT) --container-runtime $(RUNTIME)

sdk: $(SDK_STAMP)

test: $(TEST_STAMP) $(NODE_STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m 'not alone' --durations=20
	$(BIN)/python -m pytest -q -p no:cacheprovider -m alone

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/mypy

format: $(TEST_STAMP)
	$(BIN)/ruff format src tests benchmarks examples
	$(BIN)/ruff check --fix src tests benchmarks examples

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/launch_latency.py
	$(BIN)/python benchmarks/api_throughput.py
	$(BIN)/python benchmarks/load.py
	$(BIN)/python benchmarks/control_plane.py
	$(BIN)/python benchmarks/scale.py
	$(BIN)/python benchmarks/persistent_warm_start.py
	$(BIN)/python benchmarks/scheduling_pass.py
	$(BIN)/python benchmarks/tuning_regret.py
	$(BIN)/python benchmarks/slurm_clusters.py
	$(BIN)/python benchmarks/submit_staging.py
	$(BIN)/python benchmarks/logs.py
	$(BIN)/python benchmarks/datasets_registry.py
	$(BIN)/python benchmarks/console_list.py
	$(BIN)/python benchmarks/cli_start.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache tests/node/node_modules
