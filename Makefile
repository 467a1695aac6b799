PYTHON ?= python3

.PHONY: install run test lint bench reproduce

install:
	$(PYTHON) -m pip install -q torch==2.13.0
	$(PYTHON) -m pip install -q -e ".[dev,distributed]"

run: install
	fedgame run scenarios/quickstart.yaml

test:
	$(PYTHON) -m ruff check fedgame tests bench analysis
	$(PYTHON) -m mypy
	$(PYTHON) -m pytest

bench:
	$(PYTHON) bench/round_speed.py

# Rerun every paper's analysis (5 seeds, 45 minutes on 2 shared cores) and regenerate the tables
# and figures in docs/ (not part of `make test`; `python analysis/reproduce.py --quick` is the
# minutes-long preview, written under results/analysis/).
reproduce:
	$(PYTHON) analysis/reproduce.py --docs docs
