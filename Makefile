# `make run` and `make test` are the whole set-up on a fresh Debian/Ubuntu machine.
VENV ?= .venv
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SYSTEM_PACKAGES := libev-dev python3-venv python3-dev gcc
TEST_PACKAGES := nginx chromium chromium-driver postgresql redis-server pebble certbot openssl
# PostgreSQL refuses to run as root: workers/bench/servers.py runs the test servers as this user when root.
TEST_USER := lanner-test

.PHONY: run test lint docs deps test-deps apt venv bjoern bench clean

run: venv
	$(VENV)/bin/lanner run

# Every test that touches the database runs on SQLite and on a throwaway PostgreSQL
# (LANNER_TEST_BACKENDS, tests/conftest.py), in six pytest-xdist processes on two cores: the run
# waits on servers and subprocesses more than it computes (four processes left a third of the CPU
# idle). loadgroup hands tests out one at a time as processes come free, the long ones first
# (marked `long`), and keeps a module that builds one fixture for all its tests in one process.
test: venv test-deps lint
	LANNER_TEST_BACKENDS=sqlite,postgresql $(VENV)/bin/pytest -q -n 6 --dist loadgroup

# docs/reference/ (the CLI, settings and admin API references) regenerated from the code
# (scripts/reference.py); tests/test_docs.py fails while a committed reference is stale.
docs: venv
	$(VENV)/bin/python scripts/reference.py

# The lint and type gates, first in `make test` (fast fail): ruff's rules, its formatting and mypy,
# all configured in pyproject.toml and pinned in its `test` extra.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Every scenario of docs/PERFORMANCE.md (about 50 minutes; 3.2 M clicks prefilled once into
# var/bench), one JSON per scenario in var/bench/results.
bench: venv
	$(VENV)/bin/lanner bench all

# System packages, installed only when missing: what bjoern (workers/runtime/bjoern-3.2.2) needs to build, and for the tests
# a real nginx (tests/test_nginx.py runs it in front of Lanner), a headless chromium with its
# driver (tests/test_panel_browser.py drives the web panel in it), PostgreSQL and Redis, whose
# binaries the tests start as throwaway servers on unix sockets (workers/bench/servers.py; the packages'
# own services are neither needed nor used), and pebble (a local ACME server), certbot and openssl
# for tests/test_https.py's certificates (certbot's own timer is not used either).
deps:
	@$(MAKE) --no-print-directory apt PACKAGES="$(SYSTEM_PACKAGES)"

test-deps:
	@$(MAKE) --no-print-directory apt PACKAGES="$(TEST_PACKAGES)"
	@if [ "$$(id -u)" = 0 ] && ! id -u $(TEST_USER) >/dev/null 2>&1; then \
		useradd --system --no-create-home --shell /usr/sbin/nologin $(TEST_USER); \
	fi

apt:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

venv: $(VENV)/.installed

# `pip install -e .` also builds Lanner's bjoern (pyproject.toml's ext-modules, from
# workers/runtime/bjoern-3.2.2) in place: installed again when its sources change. setuptools 74.1
# reads ext-modules there; `make bjoern` builds it alone (a second work tree on this venv:
# `make bjoern VENV=/path/to/.venv`).
BJOERN_SOURCES := $(wildcard workers/runtime/bjoern-3.2.2/*/*.[ch])
$(VENV)/.installed: pyproject.toml $(BJOERN_SOURCES) | deps
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip 'setuptools>=74.1'
	$(VENV)/bin/pip install -q -e '.[test,bench,cluster]'
	touch $@

bjoern:
	$(VENV)/bin/python -c "from setuptools import setup; setup()" -q build_ext --inplace

clean:
	rm -rf $(VENV) var
