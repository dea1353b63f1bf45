# Every target creates .venv itself, so a fresh clone needs nothing but python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STORE ?= demo.db

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	rm -f $(STORE) $(STORE)-wal $(STORE)-shm
	$(BIN)/tbconvert tf --logdir sample_logdirs --store $(STORE)
	@echo
	@echo "Example query: the last value of every scalar series"
	@echo "  sqlite3 $(STORE) \"SELECT run_path, context, tag, step, value FROM v_last_scalars ORDER BY run_path, context, tag\""
	@$(BIN)/python -m converter.cli.demo $(STORE)

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

# The gates CI runs before the tests: lint, formatting, strict types on the package.
lint: $(VENV)/.installed
	$(BIN)/ruff check converter tests benchmarks migrations
	$(BIN)/ruff format --check converter tests benchmarks migrations
	$(BIN)/mypy

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info demo.db demo.db-wal demo.db-shm
