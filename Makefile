# The two commands a newcomer needs: `make run` and `make test`.
# Each creates its own virtual environment in .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

.PHONY: install run test lint simulate bench clean
install: $(BIN)/.installed

# The main job: the deterministic mass-update simulation, printing one table per scenario.
run: install
	$(BIN)/python -m tests.simulation

simulate: run

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy src tests

test: lint
	$(BIN)/pytest

bench: install
	$(BIN)/python -m benchmarks.core_bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
