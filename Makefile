# floodsim developer commands. `make run` and `make test` create .venv on first use.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint format bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

run: $(STAMP)  ## Run the default simulation end to end
	$(BIN)/floodsim run configs/default.yaml

test: $(STAMP)  ## Lint, format check and the whole test suite
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)  ## Throughput benchmarks (not part of the test suite)
	$(BIN)/python benchmarks/bench_memory.py
	$(BIN)/python benchmarks/bench_batch.py
	$(BIN)/python benchmarks/bench_llm.py
	$(BIN)/python benchmarks/bench_scaling.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
