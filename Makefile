# Developer shortcuts; the README's two commands remain the source of truth.
PY ?= .venv/bin/python

.PHONY: help install test fuzz lint type format bench dev docs
help:  ## list targets
	@grep -E "^[a-z]+:.*##" $(MAKEFILE_LIST) | sed "s/:.*## /\t/"
install:  ## create .venv and install planexec with its dev tools
	python3 -m venv .venv && .venv/bin/pip install -e ".[dev]"
test:  ## run every test, offline (starts PostgreSQL and langgraph dev itself)
	$(PY) -m pytest -n 2
fuzz:  ## property tests with random examples, 20x as many as CI tries
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -p no:cacheprovider tests/unit/test_properties.py tests/integration/test_properties_graph.py
lint:  ## ruff (lint and format check)
	$(PY) -m ruff check src tests bench examples
	$(PY) -m ruff format --check src tests bench examples
type:  ## mypy --strict on the package, and the import layers (.importlinter)
	$(PY) -m mypy src
	.venv/bin/lint-imports
format:  ## ruff format
	$(PY) -m ruff format src tests bench examples
bench:  ## print every benchmark table
	PY=$(PY) bench/run_all.sh
docs:  ## build the docs site into site/, strict (mkdocs serve: live preview)
	.venv/bin/mkdocs build --strict
dev:  ## serve the graph for LangGraph Studio, offline
	LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_NO_VERSION_CHECK=1 .venv/bin/langgraph dev --no-browser
