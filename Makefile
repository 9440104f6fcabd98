# agdb: `make test` and `make demo` build .venv from nothing and then run.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

SEED ?= 1
N ?= 1000
JOBS ?= 2
# pytest-xdist workers for `make test`: one per core and one more, which runs while the others wait on the tests'
# subprocesses (a hung DDP launch waits out its --timeout idle); TEST_JOBS=0 runs the suite in this one process.
TEST_JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))

.PHONY: test demo bench clean graphviz chromium fuzz

# Graphviz's `dot` renders exports to SVG/PNG/PDF (DOT text needs nothing). It comes from the system's
# packages; without root or apt, exports other than .dot explain how to install it.
graphviz:
	@command -v dot >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		(apt-get install -y -q graphviz >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q graphviz >/dev/null)); } || \
		echo "Graphviz's dot was not installed: rendering tests will be skipped (apt-get install graphviz)"

# Chromium, headless, shows `agdb serve`'s page to tests/app/test_serve_browser.py (through Playwright, which then
# downloads no browser). From the system's packages, as Graphviz; without it that test is skipped.
chromium:
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		(apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)); } || \
		echo "Chromium was not installed: the browser test of agdb serve will be skipped (apt-get install chromium)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# setuptools >= 70.1 builds wheels itself: tests/test_packaging.py builds one without build isolation, and the
	# setuptools a venv starts with (65.5 for Python 3.11.7) cannot.
	$(PY) -m pip install -q --no-compile --upgrade pip 'setuptools>=70.1'
	# --no-compile, then one compileall over every core at the end: pip compiles each package's modules on one core
	# (torch's, sympy's: 13 s of the set-up's 41 on a 2-core machine). The bytecode must be there: where
	# PYTHONDONTWRITEBYTECODE is set, every process the tests start would otherwise compile torch again.
	$(PY) -m pip install -q --no-compile -e '.[dev]'
	# torch 2.13.0 only from the local CPU wheel (--no-index): never download the multi-GB CUDA build.
	# Its small dependencies then come from the index. Without the wheel, torch-parity tests skip.
	# torchviz (bench/export.py compares with its make_dot) with --no-deps, so it cannot pull a torch.
	@if $(PY) -m pip install -q --no-compile --no-index --no-deps torch==2.13.0 2>/dev/null; then \
		$(PY) -m pip install -q --no-compile torch==2.13.0; \
		$(PY) -m pip install -q --no-compile --no-deps torchviz==0.0.3 || echo "torchviz not installed: bench/export.py skips make_dot"; \
	else \
		echo "torch 2.13.0 CPU wheel not found locally: the torch-parity tests will be skipped"; \
	fi
	# Its status is ignored as pip ignores it: a few files in packages are templates or data, not Python 3. A second,
	# serial pass (0.3 s: what is compiled is skipped) covers a machine where the parallel one could not start.
	@SITE="$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
		$(PY) -m compileall -q -j 0 "$$SITE" >/dev/null 2>&1 || $(PY) -m compileall -q "$$SITE" >/dev/null 2>&1 || true
	touch $(STAMP)

test: $(STAMP) graphviz chromium
	$(VENV)/bin/ruff check engine app bench tracer widgets
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) --dist worksteal

demo: $(STAMP) graphviz
	$(VENV)/bin/agdb demo

bench: $(STAMP)
	$(PY) bench/engine.py

# Differential fuzzing against torch 2.13 (tests/fuzz): N random programs from SEED; minimal repros of any
# difference go to fuzz-out/. `make fuzz SEED=7 N=10000`.
fuzz: $(STAMP)
	$(PY) -m tests.fuzz --seed $(SEED) -n $(N) --jobs $(JOBS)

clean:
	rm -rf $(VENV) build *.egg-info
