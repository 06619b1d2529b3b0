# toolweave: `make run` sets up and starts the gateway on the demo manifest; `make test` sets up and tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench train clean

# Setup writes to stderr only: `make run` speaks MCP on stdout, so nothing else may print there.
$(STAMP): pyproject.toml
	@echo "setting up $(VENV) (first run only)" >&2
	@$(PY) -m venv $(VENV) >&2
	@$(BIN)/pip install --quiet --upgrade pip >&2
	@$(BIN)/pip install --quiet -e '.[dev]' >&2
	@touch $(STAMP)

install: $(STAMP)

run: install
	@$(BIN)/toolweave serve --manifest manifests/demo.yaml

test: install
	$(BIN)/ruff check toolweave tests bench
	$(BIN)/mypy  # toolweave, tests and bench (pyproject.toml: [tool.mypy] files)
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check toolweave tests bench
	$(BIN)/ruff format --check toolweave tests bench
	$(BIN)/mypy  # toolweave, tests and bench (pyproject.toml: [tool.mypy] files)

# `make bench SCALE_SIZE=10000` runs bench/scale.py at that fleet size only (default: 10k, 50k, 100k)
bench: install
	$(BIN)/python bench/run_all.py $(if $(SCALE_SIZE),--scale-size $(SCALE_SIZE))

# The project's query encoder (toolweave/toolret-v2): seeded, resumable, every core at normal priority;
# on a GPU machine the same command uses the GPU. Needs the train extra (torch's CPU build, transformers).
train: install
	@$(BIN)/pip install --quiet -e '.[train]' >&2
	$(BIN)/python bench/train_model.py train --out bench/out/toolret-v2

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
