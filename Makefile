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

.PHONY: install run test lint schema simulate bench bench-http bench-instructions bench-pg \
	bench-pg-million bench-pg-polls bench-pg-burst bench-gate clean
install: $(BIN)/.installed

EXAMPLE_DIR := examples/artifacts
HOST ?= 127.0.0.1
PORT ?= 8000
BANDWIDTH ?= 40MB

# The main job: the demo artifact server with the scheduler middleware (in memory),
# serving an example directory it creates on first use.
run: install
	$(BIN)/arkvory-demo example $(EXAMPLE_DIR)
	$(BIN)/arkvory-demo serve $(EXAMPLE_DIR) --host $(HOST) --port $(PORT) \
		--bandwidth $(BANDWIDTH) --token demo-token=ci-agent:service \
		--token person-token=alice:person \
		--operator-token operator-token=olga --viewer-token viewer-token=victor

# The deterministic mass-update simulation, printing one table per scenario.
simulate: install
	$(BIN)/python -m tests.simulation

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy src tests benchmarks

# The page tests drive Debian's Chromium, never a browser a test tool downloads itself.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
$(CHROMIUM):
	$(SUDO) apt-get install -y --no-install-recommends chromium || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends chromium)

# promtool checks and unit-tests the alerting rules in deploy/prometheus (docs/operations.md).
# Debian ships it in the server's package, whose install may start the server: it is
# stopped and kept from starting at boot, so no Prometheus runs and port 9090 stays free.
PROMTOOL := /usr/bin/promtool
$(PROMTOOL):
	$(SUDO) apt-get install -y --no-install-recommends prometheus || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends prometheus)
	$(SUDO) invoke-rc.d prometheus stop || true
	$(SUDO) update-rc.d prometheus disable || true

# The recipes' tests (tests/tools, docs/clients.md) run Debian's wget and aria2c.
WGET := /usr/bin/wget
ARIA2C := /usr/bin/aria2c
$(WGET):
	$(SUDO) apt-get install -y --no-install-recommends wget || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends wget)
$(ARIA2C):
	$(SUDO) apt-get install -y --no-install-recommends aria2 || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends aria2)

test: lint $(CHROMIUM) $(PROMTOOL) $(WGET) $(ARIA2C)
	$(BIN)/pytest


# docs/schema.sql, the PostgreSQL schema as every migration leaves it, regenerated from
# a fresh migration with pg_dump; needs PostgreSQL as bench-pg does (see below).
# tests/postgres/test_schema_snapshot.py fails until a new migration's snapshot is in.
schema: install
	$(BIN)/python -m tests.schema_snapshot

# One benchmark per figure; each rewrites its section of benchmarks/RESULTS.md
# (benchmarks/README.md says what each asserts). The core's scaling, about 9 minutes.
bench: install
	$(BIN)/python -m benchmarks.core_bench

# The middleware in process and one wrk run of each server; needs wrk (apt-get install wrk).
bench-http: install
	$(BIN)/python -m benchmarks.http_bench

# Instructions per response under valgrind (no timing noise); needs valgrind and curl.
bench-instructions: install
	$(BIN)/python -m benchmarks.http_instructions

# Needs PostgreSQL: $ARKVORY_TEST_DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/test.
# Both stores at 65,536 waiting (under a minute), and at 65,536 and 1,048,576 (about 3 minutes).
bench-pg: install
	$(BIN)/python -m benchmarks.pg_scale

bench-pg-million: install
	$(BIN)/python -m benchmarks.pg_scale --sizes 65536,1048576

# A poll at the back of the queue right after a burst, before any ANALYZE (under a minute).
bench-pg-burst: install
	$(BIN)/python -m benchmarks.pg_burst

# Issue #26 with three server processes on one primary (about 8 minutes, ~1 GB in a
# throwaway schema): the poll storm, and the capacity at about a million waiting.
bench-pg-polls: install
	$(BIN)/python -m benchmarks.pg_polls

# The mass update end to end (about 13 minutes): real SDK clients, one server in memory,
# three sharing PostgreSQL behind HAProxy (one killed mid-run), and HAProxy's per-request
# queue without the scheduler; needs PostgreSQL as bench-pg does. See benchmarks/gate.py.
HAPROXY := /usr/sbin/haproxy
$(HAPROXY):
	$(SUDO) apt-get install -y --no-install-recommends haproxy || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends haproxy)

bench-gate: install $(HAPROXY)
	$(BIN)/python -m benchmarks.gate

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
