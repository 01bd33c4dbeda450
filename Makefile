# Two commands on a fresh machine: `make demo` and `make test`. Both build the venv themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo walkthrough test bench clean unit functional

$(VENV):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(VENV)
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m snode.tools.devnet demo

walkthrough: $(STAMP)
	$(PY) -m snode.tools.walkthrough

test: $(STAMP)
	$(PY) -m pytest -n 2 -q tests

unit: $(STAMP)
	$(PY) -m pytest -n 2 -q tests/unit

functional: $(STAMP)
	$(PY) -m pytest -n 2 -q tests/functional

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
