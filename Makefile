# The project's commands. `make run` starts the service, `make test` runs the whole suite.
PYTHON ?= python3
UV := $(PYTHON) -m uv
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
# pytest-xdist's processes for each database suite (0: the suite in pytest's own process).
TEST_WORKERS ?= 2

.PHONY: run demo test test-sqlite test-postgres test-browser ui-screenshots lint bench soak setup

# Bytecode compiled once here: where PYTHONDONTWRITEBYTECODE is set, every process (each of
# serve's workers, each test's subprocess) would otherwise compile every module it imports.
setup:
	@./scripts/ensure-uv.sh
	@$(UV) sync --frozen --quiet --compile-bytecode
	@$(UV) run --frozen python -m compileall -q src >/dev/null

run: setup
	@mkdir -p var
	@# Silent, so that with LOG_FORMAT=json every line is JSON. Ctrl-C is the normal way to
	@# stop: the shell waits for the service to finish (trap) instead of dying of SIGINT itself.
	@trap true INT; $(UV) run controlcenter serve --host $(HOST) --port $(PORT) || [ $$? -eq 130 ]

# The product with a demo model and a demo CRM: no key, no network, a throwaway database.
demo: setup
	@$(UV) run python -m tests.fakes.demo --host $(HOST) --port $(PORT)

lint: setup
	$(UV) run ruff check src tests bench
	$(UV) run ruff format --check src tests bench
	$(UV) run mypy

# Each run has its own base directory: pytest prunes the numbered ones of other runs. The
# database suites spread their test files over TEST_WORKERS processes (pytest-xdist, a file's
# tests in one process so that its module fixtures start once); each process has its own
# server, fakes and database.
test-sqlite: setup
	@./scripts/ensure-node.sh
	@./scripts/ensure-conformance.sh
	@./scripts/ensure-mcp1.sh
	@./scripts/ensure-nginx.sh
	@mkdir -p .tmp
	$(UV) run pytest --basetemp=.tmp/pytest-sqlite --ignore=tests/browser \
		-n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-postgres: setup
	@./scripts/ensure-node.sh
	@./scripts/ensure-mcp1.sh
	@./scripts/ensure-nginx.sh
	@mkdir -p .tmp
	./scripts/with-postgres.sh $(UV) run pytest --basetemp=.tmp/pytest-postgres \
		--ignore=tests/browser -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The pages in Debian's Chromium (installed when missing) and `make demo` run as a process.
test-browser: setup
	@./scripts/ensure-chromium.sh
	@mkdir -p .tmp
	$(UV) run pytest --basetemp=.tmp/pytest-browser tests/browser $(PYTEST_ARGS)

# The three suites at once: most of a test's time is spent waiting (on a subprocess, a fake, a
# browser), so they share the cores instead of queueing. Chromium, Node.js, the MCP conformance
# suite and nginx are installed first: two apt-get runs at once would fight over dpkg's lock.
test: lint
	@./scripts/ensure-chromium.sh
	@./scripts/ensure-node.sh
	@./scripts/ensure-conformance.sh
	@./scripts/ensure-mcp1.sh
	@./scripts/ensure-nginx.sh
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-sqlite test-postgres test-browser

# Refreshes the pictures in docs/ui/ (docs/ui.md) from the browser tests.
ui-screenshots: setup
	@./scripts/ensure-chromium.sh
	@mkdir -p .tmp
	UI_SCREENSHOT_DIR=docs/ui $(UV) run pytest --basetemp=.tmp/pytest-ui tests/browser/test_layout.py tests/browser/test_checklist.py tests/browser/test_themes.py tests/browser/test_phone_layout.py tests/browser/test_activity.py

bench: setup
	$(UV) run python -m bench $(BENCH_ARGS)

# Memory and latency over a long run (bench/soak.py): two instances on a throwaway PostgreSQL,
# mixed load at half the chat capacity, 20 minutes unless SOAK_ARGS says otherwise
# (SOAK_ARGS="--seconds 180 --rate 12.5 --onboarding-rate 1"). Never part of `make test`.
soak: setup
	./scripts/with-postgres.sh $(UV) run python -m bench.soak $(SOAK_ARGS)
