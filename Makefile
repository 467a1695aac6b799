PYTHON ?= python3

.PHONY: install run test lint bench

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
