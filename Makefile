# agdb: `make test` and `make demo` build .venv from nothing and then run.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	# torch 2.13.0 only from the local CPU wheel (--no-index): never download the multi-GB CUDA build.
	# Its small dependencies then come from the index. Without the wheel, torch-parity tests skip.
	@if $(PY) -m pip install -q --no-index --no-deps torch==2.13.0 2>/dev/null; then \
		$(PY) -m pip install -q torch==2.13.0; \
	else \
		echo "torch 2.13.0 CPU wheel not found locally: the torch-parity tests will be skipped"; \
	fi
	touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/ruff check engine app bench tracer widgets
	$(PY) -m pytest -q -p no:cacheprovider

demo: $(STAMP)
	$(VENV)/bin/agdb demo

bench: $(STAMP)
	$(PY) bench/engine.py

clean:
	rm -rf $(VENV) build *.egg-info
