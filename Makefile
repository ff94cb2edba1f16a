# subgate: `make run` serves with a SQLite store here, on $SUBGATE_LISTEN (default 127.0.0.1:5672; every other
# SUBGATE_* variable applies too) with /metrics, /healthz and /readyz on $SUBGATE_HTTP (default 127.0.0.1:8672;
# SUBGATE_HTTP= turns it off); `make test` runs every test.
# Both create their own virtualenv (.venv) with the machine's python3 and install the project into it.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# make test also installs the pipeline extra (pyspark: ~1 min to build the first time, cached in $PIP_CACHE_DIR);
# make run stays lean: the broker needs neither pyspark nor Java.
TEST_STAMP := $(VENV)/.installed-test-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint typecheck bench bench-topics clean install

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-[0-9]*
	touch $@

$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,pipeline]'
	rm -f $(VENV)/.installed-test-*
	touch $@

install: $(STAMP)

run: $(STAMP)
	$(BIN)/subgate db upgrade
	SUBGATE_HTTP=$${SUBGATE_HTTP-127.0.0.1:8672} $(BIN)/subgate serve  # SUBGATE_LISTEN, else 127.0.0.1:5672

# The tests mostly wait on server processes: two pytest-xdist workers (each with its own PostgreSQL cluster) share
# them out; --dist loadfile keeps each test file, and its module-scoped servers, on one worker, and
# --no-loadscope-reorder hands the files out in collection order, where tests/conftest.py puts the slow ones
# (the fuzz run) first, rather than the files with the most tests first. --durations: the slowest, in the log.
# TEST_WORKERS=0 runs every test in one process.
TEST_WORKERS ?= 2

test: $(TEST_STAMP)
	bash scripts/install-test-deps
	$(BIN)/ruff check .
	$(BIN)/mypy subgate
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy subgate

bench: $(STAMP)
	$(PYTHON) bench/run.py

bench-topics: $(STAMP)
	$(BIN)/python bench/topics_bench.py $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache *.egg-info
