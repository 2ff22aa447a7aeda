# Quick start:   make tour   (set up, run the tour notebook headless, write build/tour.html)
#                make test   (set up, lint, build the docs, run the whole test suite:
#                             tests and notebooks, every marker)
#                make test-fast  (set up, lint, then the unit and magic tests: no docs,
#                             no notebooks, none marked slow, integration, browser,
#                             inductor or timing; under 2 minutes on two cores)
#                make test-timing  (the timing lane: our figures against torch's
#                             own clocks, decided on the median of rounds)
#                make test-stress  (the fast and the timing lane, 10 runs each,
#                             beside a hog that keeps both cores busy)
#                make screenshots  (the browser test, then its pictures into
#                             docs/images/)
#                make docs   (the documentation site, into build/docs; warnings are errors)
#                make test-matrix  (the truth-bearing tests on each torch x Python pair)
#                make perf-page  (rerun the benchmarks docs/performance.md draws on, into
#                             benchmarks/results/*.json, then re-render the page from them)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stance_magic-setup

.PHONY: setup tour test test-fast test-timing test-stress test-matrix lint docs browser screenshots clean \
	perf-page perf-page-all perf-page-render perf-page-check

setup: $(STAMP)

# torch is pinned to the tested CPU release (.ci/constraints.txt): a bare
# `torch` requirement would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml .ci/constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c .ci/constraints.txt torch
	$(BIN)/python -m pip install -q -c .ci/constraints.txt -e ".[test,docs]"
	touch $(STAMP)

tour: setup
	$(BIN)/python notebooks/build_tour.py

# mypy: the public API's modules (pyproject.toml's [tool.mypy]), in seconds.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Sphinx (docs/conf.py): warnings are errors, so a broken link or anchor, a page in no
# table of contents, a docstring that does not parse or a notebook stored with an
# error fails the build; -E re-reads every page, so no warning hides in a cached one.
docs: setup
	$(BIN)/python -m sphinx -W --keep-going -E -q -b html docs build/docs
	@echo "docs: build/docs/index.html"

# Debian's Chromium for the end-to-end panel test (skipped, with a reason, without it).
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && apt-get install -y -qq chromium >/dev/null; fi

test: setup lint docs browser
	$(BIN)/python -m pytest -q tests notebooks --nbval-lax \
		--nbval-sanitize-with notebooks/sanitize.cfg; rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

# The fast lane: what pyproject.toml's markers leave out (processes, kernels, real
# models, notebooks, the docs build, Inductor, the browser, the slow builds) runs in
# make test and the matrix.
FAST_MARK := not slow and not integration and not browser and not inductor and not timing

test-fast: setup lint
	$(BIN)/python -m pytest -q -m "$(FAST_MARK)" tests; rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

# The timing lane: what only a real clock shows (our figures against torch's profiler
# and an outside clock), in interleaved rounds decided on their median.
test-timing: setup
	$(BIN)/python -m pytest -q -m timing tests; rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

# Both lanes, STRESS_RUNS times each, beside a hog of torch matmul loops and plain
# Python loops (a load of about 6 on two cores); prints each lane's failures.
STRESS_RUNS ?= 10
test-stress: setup
	$(BIN)/python benchmarks/stress.py --runs $(STRESS_RUNS)

# The pictures the README and the docs show, retaken by the browser test (make test
# does not write them: a clone stays clean after its own tests).
screenshots: setup browser
	STANCE_MAGIC_DOCS_IMAGES=docs/images $(BIN)/python -m pytest -q tests/test_browser.py

# torch x Python pairs: the oldest supported torch on the oldest Python, releases in
# between, the newest torch on the newest Pythons. Each pair: a fresh venv outside
# the repository (MATRIX_DIR), torch from PyPI, the tests, the venv deleted.
MATRIX_PAIRS ?= 2.8.0@3.10 2.10.0@3.11 2.12.1@3.11 2.14.1@3.11 2.15.0@3.12 2.15.0@3.13

test-matrix:
	MATRIX_PAIRS="$(MATRIX_PAIRS)" .ci/matrix.sh

# docs/performance.md's figures: each benchmark writes its JSON into benchmarks/results/
# (a script writes its JSON only once it has run through), then benchmarks/perf_page.py renders
# the page's generated blocks from it (tests/test_performance_page.py checks they agree).
# perf-page reruns the quick ones (a few minutes); perf-page-all the warm start's kernels
# too (tens of minutes); perf-page-render only renders from the committed JSON.
PERF_BENCHES ?= hooks overhead guards memory panel ranks nested
PERF_SLOW := warm_start models

perf-page: setup
	@for b in $(PERF_BENCHES); do \
		echo "== benchmarks/bench_$$b.py"; \
		$(BIN)/python benchmarks/bench_$$b.py --json benchmarks/results/$$b.json || exit 1; \
	done
	$(BIN)/python benchmarks/perf_page.py --write

perf-page-all:
	$(MAKE) perf-page PERF_BENCHES="$(PERF_BENCHES) $(PERF_SLOW)"

perf-page-render: setup
	$(BIN)/python benchmarks/perf_page.py --write

perf-page-check: setup
	$(BIN)/python benchmarks/perf_page.py --check

clean:
	rm -rf $(VENV) build
