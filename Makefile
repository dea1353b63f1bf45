# Every target creates .venv itself, so a fresh clone needs nothing but python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STORE ?= demo.db

DEMO_LOGS ?= demo_logs
REPORT ?= demo-report.html
DEMO_QUERY = SELECT run_path, context, tag, step, value FROM v_last_scalars WHERE run_path LIKE 'demo/%' ORDER BY run_path, context, tag

.PHONY: demo test test-fast test-long lint bench bench-big mutate clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	git config core.hooksPath .githooks 2>/dev/null || true

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

# Everything a user gets: plots, Parquet, datasette, pandas, PostgreSQL.
$(VENV)/.installed-all: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $@

demo: $(VENV)/.installed-all
	rm -f $(STORE) $(STORE)-wal $(STORE)-shm
	$(BIN)/python sample_logdirs/make_demo.py $(DEMO_LOGS)
	$(BIN)/tbconvert tf --logdir $(DEMO_LOGS) --store $(STORE)
	$(BIN)/tbconvert tf --logdir sample_logdirs --store $(STORE) -q
	$(BIN)/tbconvert report --store $(STORE) --run 'demo/*' -o $(REPORT)
	@echo
	@echo 'A query, as any SQL client or `tbconvert query` runs it:'
	@echo "  $(BIN)/tbconvert query \"$(DEMO_QUERY)\" --store $(STORE)"
	@$(BIN)/tbconvert query "$(DEMO_QUERY)" --store $(STORE)
	@echo
	@echo "Report: $(CURDIR)/$(REPORT) (open it in a browser; it works offline)"
	@echo "Run the installed tbconvert as $(BIN)/tbconvert, or first: source $(BIN)/activate"
	@echo "  $(BIN)/tbconvert runs --store $(STORE)"
	@echo "  $(BIN)/tbconvert hparams --store $(STORE) --metric accuracy --sort=-accuracy"
	@echo "  $(BIN)/tbconvert plot --store $(STORE) --run 'demo/*' --tag loss -o loss.png"
	@echo
	@echo "The viewer: $(BIN)/tbconvert serve --store $(STORE)"
	@echo "  then open http://127.0.0.1:8001/ (datasette: http://127.0.0.1:8001/datasette/)"

# The slowest tests are listed at the end, so that each run shows where the time goes.
test: $(VENV)/.installed
	$(BIN)/python -m pytest -q --durations=30

# Everything but the tests marked slow (crash, signal, oracle and invariant suites): a quick
# check while working.  CI runs `make test`.
test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m "not slow"

# The property tests with random seeds and many more examples (not in CI: a failure found here
# is added to its test as an @example, so that CI runs it every time).
test-long: $(VENV)/.installed
	$(BIN)/python -m pytest -q -p no:cacheprovider --hypothesis-profile=long --hypothesis-seed=$${SEED:-$$RANDOM} \
		$$(grep -rl "from hypothesis import" tests --include='test_*.py')

# The gates CI runs before the tests: lint, formatting, strict types on the package.
lint: $(VENV)/.installed
	$(BIN)/ruff check tbconvert tests tools benchmarks migrations hatch_build.py
	$(BIN)/ruff format --check tbconvert tests tools benchmarks migrations hatch_build.py
	$(BIN)/mypy

$(VENV)/.installed-mutate: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,mutate]'
	touch $@

# Mutation testing of the reading side, the planner, the job and the writer (docs/mutation.md):
# each module against the tests aimed at it.  Not in CI: it takes over an hour.  One module:
# make mutate MUTANTS='tbconvert.reading.records.*'
MUTANTS ?=
mutate: $(VENV)/.installed-mutate
	nice -n 10 $(BIN)/python tools/mutation_run.py $(MUTANTS)

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/query.py
	$(BIN)/python benchmarks/remote.py
	$(BIN)/python benchmarks/memory.py
	$(BIN)/python benchmarks/push_mlflow.py
	$(BIN)/python benchmarks/push_wandb.py

# The scale benchmark (docs/scale.md): 1M, 10M and 100M points into a throwaway PostgreSQL
# server by --shard processes, and their dataset export; about 40 minutes and 25 GB of disk.
# SPARK_PYTHON: a Python with pyspark, to read the datasets back through Spark too.
SCALE_ARGS ?=
bench-big: $(VENV)/.installed
	$(BIN)/python benchmarks/scale.py $(if $(SPARK_PYTHON),--spark-python $(SPARK_PYTHON)) $(SCALE_ARGS)

# README_OUTPUTS: what the README's example commands write when run here (also git-ignored).
README_OUTPUTS := loss.csv sweep.parquet images curves.png report.html

clean:
	rm -rf $(VENV) mutants build dist *.egg-info demo.db demo.db-wal demo.db-shm $(DEMO_LOGS) $(REPORT) \
		$(README_OUTPUTS)
