# toolweave: `make run` sets up and starts the gateway on the demo manifest; `make test` sets up and tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/toolweave serve --manifest manifests/demo.yaml

test: install
	$(BIN)/ruff check toolweave tests bench
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check toolweave tests bench
	$(BIN)/ruff format --check toolweave tests bench

bench: install
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
