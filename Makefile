# The project's commands. `make run` starts the service, `make test` runs the whole suite.
PYTHON ?= python3
UV := $(PYTHON) -m uv
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: run test test-sqlite test-postgres lint bench setup

setup:
	@./scripts/ensure-uv.sh
	@$(UV) sync --frozen --quiet

run: setup
	@mkdir -p var
	@# Silent, so that with LOG_FORMAT=json every line is JSON. Ctrl-C is the normal way to
	@# stop: the shell waits for the service to finish (trap) instead of dying of SIGINT itself.
	@trap true INT; $(UV) run controlcenter serve --host $(HOST) --port $(PORT) || [ $$? -eq 130 ]

lint: setup
	$(UV) run ruff check src tests bench
	$(UV) run ruff format --check src tests bench
	$(UV) run mypy

# Each run has its own base directory: pytest prunes the numbered ones of other runs.
test-sqlite: setup
	@mkdir -p .tmp
	$(UV) run pytest --basetemp=.tmp/pytest-sqlite $(PYTEST_ARGS)

test-postgres: setup
	@mkdir -p .tmp
	./scripts/with-postgres.sh $(UV) run pytest --basetemp=.tmp/pytest-postgres $(PYTEST_ARGS)

test: lint test-sqlite test-postgres

bench: setup
	$(UV) run python -m bench $(BENCH_ARGS)
