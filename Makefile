# Two commands on a fresh machine: `make demo` and `make test`. Both build the venv themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Bytecode for our sources, as an installed snoded has it: with PYTHONDONTWRITEBYTECODE set (CI
# machines) every daemon a test or the demo starts would compile each module again (0.1 s).
COMPILE := $(PY) -m compileall -q src

.PHONY: demo walkthrough test lint bench clean unit functional browser-test

$(VENV):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(VENV)
	$(PY) -m pip install -q -e '.[test,lint]'
	touch $(STAMP)

demo: $(STAMP)
	$(COMPILE)
	$(PY) -m snode.tools.devnet demo

walkthrough: $(STAMP)
	$(COMPILE)
	$(PY) -m snode.tools.walkthrough

test: $(STAMP)
	$(COMPILE)
	$(PY) -m pytest -n 2 --dist worksteal -q -m "not browser" tests

# The web view in headless Chromium (Debian's package, installed when missing; we run as root on
# CI machines, otherwise this asks for sudo).
browser-test: $(STAMP)
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium >/dev/null || \
		{ echo "browser-test: cannot install chromium (apt-get install -y chromium, as root)"; exit 1; }; }
	$(COMPILE)
	$(PY) -m pytest -q -m browser tests

lint: $(STAMP)
	$(PY) -m mypy
	$(PY) -m ruff check src tests bench

unit: $(STAMP)
	$(COMPILE)
	$(PY) -m pytest -n 2 -q tests/unit

functional: $(STAMP)
	$(COMPILE)
	$(PY) -m pytest -n 2 -q tests/functional

bench: $(STAMP)
	$(COMPILE)
	$(PY) -m bench

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
	find src bench tests -name __pycache__ -prune -exec rm -rf {} +
