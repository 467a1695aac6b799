# Run inside a virtual environment (see the README's set-up), or pass PYTHON=path/to/python.
PYTHON ?= python3
PIP := $(PYTHON) -m pip install -q

#: every package `make test` and `.ci/run` install, pinned (a `pip freeze` of a clean resolve;
#: `make lock` refreshes it)
LOCK := requirements-test.txt
#: the extras the test suite needs: lint/type/test tools, Ray, the dashboard
TEST_EXTRAS := dev,distributed,viz

.PHONY: install install-dev run test test-latest lock check docs-api docs-columns bench reproduce

# What the quickstart needs: the pinned torch (CPU wheel where one is found) and fedgame itself.
install:
	$(PIP) torch==2.13.0
	$(PIP) -e .

# Exactly the packages of the lock (torch, the lint/type/test tools, Ray, the dashboard and
# every transitive dependency, each at its pinned version), then fedgame itself without
# resolving anything; `pip check` fails loudly if the lock misses a dependency.
install-dev:
	$(PIP) --no-deps -r $(LOCK)
	$(PIP) --no-deps -e .
	$(PYTHON) -m pip check

# Refresh the lock: a clean venv, the newest versions the ranges in pyproject.toml allow (torch
# pinned to the CPU wheel on disk), frozen with setuptools and wheel (torch requires a recent
# setuptools at run time; pip itself is left out). torch's local label (+cpu) is dropped so that
# the pin also matches other builds of the same release.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install -q torch==2.13.0
	.lock-venv/bin/python -m pip install -q -e ".[$(TEST_EXTRAS)]"
	{ echo "# What make test and .ci/run install: pip freeze of a clean resolve (make lock)."; \
	  echo "# Python $$(.lock-venv/bin/python -c 'import platform; print(platform.python_version(), platform.machine())'), $$(date -u +%Y-%m-%d)."; \
	  .lock-venv/bin/python -m pip freeze --all --exclude-editable | grep -v '^pip==' \
	    | sed -E 's/^([A-Za-z0-9_.-]+==[^+]+)\+.*/\1/'; \
	} > $(LOCK)
	rm -rf .lock-venv

# The newest versions the ranges allow (torch included), in a venv of its own, then the suite:
# tells whether a new release of a dependency breaks fedgame before the lock moves to it.
test-latest:
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/python -m pip install -q --upgrade --upgrade-strategy eager \
		"torch>=2.3,<3" -e ".[$(TEST_EXTRAS)]"
	.venv-latest/bin/python -m pip freeze --exclude-editable > .venv-latest/versions.txt
	$(MAKE) check PYTHON=.venv-latest/bin/python

run: install
	$(PYTHON) -m fedgame run scenarios/quickstart.yaml

test: install-dev check

# ruff + mypy + the API reference (no pdoc warning) + pytest, without installing anything
# first. The suite runs on one pytest-xdist worker per core (one torch thread each); tests
# sharing an expensive module fixture stay on one worker (`xdist_group`).
check:
	$(PYTHON) -m ruff check fedgame tests bench analysis docs/examples
	$(PYTHON) -m mypy
	$(MAKE) --no-print-directory docs-api PYTHON=$(PYTHON)
	$(PYTHON) -m pytest -n auto --dist loadgroup

#: what the API reference documents: fedgame and each of its top-level modules and packages
#: (pdoc recurses into a package, and reaches fedgame.run through fedgame's __all__)
API_MODULES = $(shell $(PYTHON) -c "import pkgutil, fedgame; print(' '.join(['fedgame'] + \
	sorted('fedgame.' + m.name for m in pkgutil.iter_modules(fedgame.__path__) \
	if m.name not in ('run', '__main__'))))")

# The API reference, generated from the docstrings by pdoc (Google style) into build/api/
# (open build/api/index.html); any warning pdoc prints (a module that does not import, a
# docstring it cannot read, a module documented twice) fails the target.
docs-api:
	rm -rf build/api
	@mkdir -p build
	$(PYTHON) -m pdoc --docformat google --output-directory build/api $(API_MODULES) \
		2> build/api-warnings.txt || { cat build/api-warnings.txt; exit 1; }
	@if [ -s build/api-warnings.txt ]; then cat build/api-warnings.txt; \
		echo "docs-api: pdoc warned (above)"; exit 1; fi
	@echo "API reference: build/api/index.html"

bench:
	$(PYTHON) bench/round_speed.py

# docs/columns.md: the column dictionary of rounds/clients/sweep.parquet, generated from the
# client schema, the collector and the plug-ins' declarations (tests/test_columns.py checks it)
docs-columns:
	$(PYTHON) -m fedgame.columns > docs/columns.md

# Rerun every paper's analysis (with its hold-outs) and ablation (2 h 18 min on 2 idle cores before the
# hold-outs; the paper scripts with hold-outs: 3 h 10 min of script time, 2026-11-26) and regenerate the tables
# and figures in docs/ (not part of `make test`; `python analysis/reproduce.py --quick` is the
# minutes-long preview, written under results/analysis/). Resumable: each run is kept under
# results/analysis/<script>/runs/ when it ends, so an interrupted `make reproduce` rerun on the
# same code (fedgame/ and analysis/) continues where it stopped (a code change reuses nothing);
# `python analysis/reproduce.py --docs docs --fresh` reruns everything.
reproduce:
	$(PYTHON) analysis/reproduce.py --docs docs
