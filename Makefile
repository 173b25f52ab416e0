# The README's two commands: `make repro` (install + run the pipeline) and `make test`.
VENV ?= .venv
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
# dvc.yaml's stages run through scripts/stage, which takes this interpreter (else ./.venv, else python3)
export RUBRICLAB_PYTHON := $(abspath $(VENV))/bin/python

# two workers (this machine has 2 cores); a file stays on one worker, files handed out in collection order (the
# longest first: tests/conftest.py, FIRST). pyproject.toml adds --max-worker-restart=0. --durations=25: every run's
# log (CI's included) ends with where the suite's time went (issue 25's 8-minute goal).
PYTEST_ARGS ?= -n 2 --dist loadfile --no-loadscope-reorder --durations=25

.PHONY: install repro test test-fast lint lint-imports bench screenshots ui mutate docs lock

install:
	bash scripts/install.sh

# requirements.lock from what .venv holds (after a change to pyproject.toml's dependencies, or to take new releases:
# rm -rf .venv && RUBRICLAB_UNLOCKED=1 make install, then make lock, dvc repro, commit the lock and dvc.lock together)
lock:
	bash scripts/lock.sh

repro: install
	$(VENV)/bin/dvc repro
	$(VENV)/bin/rubriclab calls

test: install
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

# the inner loop (after `make install`): every test but the end-to-end pipeline runs marked slow; `make test` runs all
test-fast:
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS) -m "not slow"

# ruff, then the architecture's import rules (pyproject.toml [tool.importlinter]: layers, what methods and llm may
# import, each package reached only through its __init__); a broken rule prints the offending import and its line
lint: lint-imports
	$(VENV)/bin/ruff check src tests benchmarks

lint-imports:
	$(VENV)/bin/lint-imports --no-cache

bench: install
	$(VENV)/bin/python -m pip install -q -e ".[bench]"
	$(VENV)/bin/python benchmarks/gateway.py
	$(VENV)/bin/python benchmarks/repair_sweep.py
	$(VENV)/bin/python benchmarks/drift_gate.py
	$(VENV)/bin/python benchmarks/probe_bootstrap.py
	$(VENV)/bin/python benchmarks/reliability.py
	$(VENV)/bin/python benchmarks/embedded_judge.py
	$(VENV)/bin/python benchmarks/llama_server.py
	$(VENV)/bin/python benchmarks/store_scale.py

# PNGs of the report and the MLflow comparison view for the README (after `make repro`)
screenshots:
	$(VENV)/bin/python scripts/screenshots.py

# the documentation site (mkdocs.yml, docs/) into site/, offline; --strict: a broken link, anchor or nav entry fails.
# The reference pages are generated from the code at build time (scripts/docs_hooks.py). mkdocs comes with the
# project's install (the test extra); `pip install -e ".[docs]"` also brings optuna-dashboard for make screenshots.
docs:
	@test -x $(VENV)/bin/mkdocs || $(VENV)/bin/python -m pip install -q -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# the MLflow UI on the project's store, offline, opening on the runs table
ui:
	$(VENV)/bin/rubriclab ui

# mutation testing of the method cores (mutmut), one module at a time against its own tests, one child process
# under nice (docs/mutation.md): MODULES="drift/_gate.py stats" for a subset, MUTATE_ARGS="--budget 600" to stop
# each module after 10 minutes, MUTATE_ARGS="--all-functions" for every function (hours)
MODULES ?=
MUTATE_ARGS ?=
mutate:
	$(VENV)/bin/python -c "import mutmut" 2>/dev/null || $(VENV)/bin/python -m pip install -q -e ".[mutate]"
	nice -n 10 $(VENV)/bin/python scripts/mutate.py $(MUTATE_ARGS) $(MODULES)
