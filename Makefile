# Quick start:   make tour   (set up, run the tour notebook headless, write build/tour.html)
#                make test   (set up, lint, run the whole test suite)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stance_magic-setup

.PHONY: setup tour test lint browser clean

setup: $(STAMP)

# torch is pinned to the tested CPU release (.ci/constraints.txt): a bare
# `torch` requirement would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml .ci/constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c .ci/constraints.txt torch
	$(BIN)/python -m pip install -q -c .ci/constraints.txt -e ".[test]"
	touch $(STAMP)

tour: setup
	$(BIN)/python notebooks/build_tour.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Debian's Chromium for the end-to-end panel test (skipped, with a reason, without it).
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && apt-get install -y -qq chromium >/dev/null; fi

test: setup lint browser
	$(BIN)/python -m pytest -q tests notebooks --nbval-lax \
		--nbval-sanitize-with notebooks/sanitize.cfg; rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

clean:
	rm -rf $(VENV) build
