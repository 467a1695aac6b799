# Run inside a virtual environment (see the README's set-up), or pass PYTHON=path/to/python.
PYTHON ?= python3
PIP := $(PYTHON) -m pip install -q

.PHONY: install install-dev run test check bench reproduce

# What the quickstart needs: the pinned torch (CPU wheel where one is found) and fedgame itself.
install:
	$(PIP) torch==2.13.0
	$(PIP) -e .

# The above plus the pinned lint, type-check and test tools, Ray and the dashboard (the suite
# tests the Ray executor and drives the dashboard in a browser).
install-dev:
	$(PIP) torch==2.13.0
	$(PIP) -e ".[dev,distributed,viz]"

run: install
	$(PYTHON) -m fedgame run scenarios/quickstart.yaml

test: install-dev check

# ruff + mypy + pytest, without installing anything first.
check:
	$(PYTHON) -m ruff check fedgame tests bench analysis
	$(PYTHON) -m mypy
	$(PYTHON) -m pytest

bench:
	$(PYTHON) bench/round_speed.py

# Rerun every paper's analysis and ablation (2 h 18 min on 2 idle cores) and regenerate the tables
# and figures in docs/ (not part of `make test`; `python analysis/reproduce.py --quick` is the
# minutes-long preview, written under results/analysis/). Resumable: each run is kept under
# results/analysis/<script>/runs/ when it ends, so an interrupted `make reproduce` rerun on the
# same code (fedgame/ and analysis/) continues where it stopped (a code change reuses nothing);
# `python analysis/reproduce.py --docs docs --fresh` reruns everything.
reproduce:
	$(PYTHON) analysis/reproduce.py --docs docs
