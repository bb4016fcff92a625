# floodsim developer commands. `make run` and `make test` create .venv on first use.
# The interpreter .venv is built with: Debian's /usr/bin/python3.11 when it can make a virtual
# environment, else the first python3.11 on PATH. On this project's machines a pyenv build without
# profile-guided optimisation (no --enable-optimizations) comes first on PATH and runs floodsim's
# years about 10-20 % slower than Debian's optimised build (docs/performance.md).
SYSTEM_PYTHON = $(shell /usr/bin/python3.11 -c "import ensurepip, venv" >/dev/null 2>&1 && echo /usr/bin/python3.11)
PYTHON ?= $(or $(SYSTEM_PYTHON),python3.11)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint format bench bench-instructions clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

run: $(STAMP)  ## Run the default simulation end to end
	$(BIN)/floodsim run configs/default.yaml

# The suite runs on every physical core (pytest-xdist): on the project's 2-core VM it took 8:51
# that way on 2026-11-30, against 25:13 on one core in a CI run an hour before, and 6:17 on
# 2026-12-02 once dropped models were freed (simulation/model.py, _CountersByModel); 4:12 for
# 2,458 tests later that day (4:39 with .venv built, from a clean clone). worksteal
# hands a worker that runs out of tests some of the other's, so slow tests left at the end do
# not keep a core idle. `make test TEST_WORKERS=0` runs the suite in one process, in order (for a
# debugger or a test that fails only beside another); `TEST_WORKERS=4` runs four workers.
TEST_WORKERS ?= auto

test: $(STAMP)  ## Lint, format check and the whole test suite
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

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

bench-instructions: $(STAMP)  ## Instructions per household-year under callgrind (needs valgrind)
	$(BIN)/python benchmarks/bench_instructions.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
