# `make run` and `make test` are the whole set-up on a fresh Debian/Ubuntu machine.
VENV ?= .venv
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SYSTEM_PACKAGES := libev-dev python3-venv python3-dev gcc

.PHONY: run test deps venv bench clean

run: venv
	$(VENV)/bin/lanner run

test: venv
	$(VENV)/bin/pytest -q

# The click-path ladder of docs/PERFORMANCE.md: 3 M clicks prefilled once into var/bench.
bench: venv
	mkdir -p var/bench
	$(VENV)/bin/lanner bench clicks --prefill 3000000 --data-dir var/bench --json var/bench/last.json

# System packages bjoern needs to build; installed only when missing.
deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml | deps
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test,bench]'
	touch $@

clean:
	rm -rf $(VENV) var
