# Two commands on a fresh machine: `make demo` and `make test`. Both build the venv themselves,
# with the exact, hashed versions of requirements-dev.lock (runtime, test, lint and release
# tools), so that a fresh clone tests what was tested; `make test-latest` tries the newest
# versions pyproject's ranges admit, `make lock` moves the locks to them (README, "Dependencies").
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEV_LOCK := requirements-dev.lock
LOCKS    := requirements.lock $(DEV_LOCK) requirements-binary.lock
# Bytecode for our sources, as an installed snoded has it: with PYTHONDONTWRITEBYTECODE set (CI
# machines) every daemon a test or the demo starts would compile each module again (0.1 s).
COMPILE := $(PY) -m compileall -q src

.PHONY: demo walkthrough test lint bench reliability clean unit functional browser-test binary binary-test docs \
	lock test-latest wheel wheel-test container-test test-py313 compiled pure test-compiled

$(VENV):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(DEV_LOCK) | $(VENV)
	$(PY) -m pip install -q --require-hashes --no-deps -r $(DEV_LOCK)
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m pip check
	touch $(STAMP)

demo: $(STAMP)
	$(COMPILE)
	$(PY) -m snode.tools.devnet demo

walkthrough: $(STAMP)
	$(COMPILE)
	$(PY) -m snode.tools.walkthrough

PYTEST_ALL := -n 2 --dist load --maxschedchunk 1 -q --durations=25 -m "not browser and not binary and not wheel and not container and not upgrade and not scenario"
test: $(STAMP)
	$(COMPILE)
	$(PY) -m pytest $(PYTEST_ALL) tests

# The whole suite of `make test` in a fresh venv with the newest versions pyproject's ranges admit,
# after a list of the packages that differ from requirements-dev.lock. Not a gate of .ci/run (an
# upstream release must not stop a submission from landing): run it before `make lock`, before a
# release and routinely while developing, and fix what it finds like any bug.
LATEST_VENV := build/latest-venv
test-latest:
	rm -rf $(LATEST_VENV)
	$(PYTHON) -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/pip install -q --upgrade pip
	$(LATEST_VENV)/bin/pip install -q --upgrade -e '.[test,lint,release]'
	$(LATEST_VENV)/bin/python .ci/lock_diff.py $(DEV_LOCK)
	$(LATEST_VENV)/bin/python -m compileall -q src
	$(LATEST_VENV)/bin/python -m mypy
	$(LATEST_VENV)/bin/python -m ruff check src tests bench
	$(LATEST_VENV)/bin/python -m pytest $(PYTEST_ALL) tests

# The rolling upgrade of a 12-SN devnet across fork v2 (issue #34 item 8, docs/UPGRADES.md "A
# rolling upgrade, proven"): a few minutes of 16 daemons, so a target of its own, which .ci/run runs.
.PHONY: upgrade-test
upgrade-test: $(STAMP)
	$(COMPILE)
	$(PY) -m pytest -q -p no:xdist -m upgrade tests/functional

# The longest stories (the whole demo, a restart against the decommission age, a skewed clock,
# rounds skipping stopped nodes, a listener closed behind held connections, a partition, a log
# flood, the hostile phase):
# minutes each, apart from `make test` so that it stays under 15 minutes on CI's 2 cores;
# .ci/run runs them too.
.PHONY: scenario-test
scenario-test: $(STAMP)
	$(COMPILE)
	$(PY) -m pytest -n 2 --dist load -q -m scenario tests/functional

# Issue #37 item 4: the hot modules of snode.common.compiled (COMPILABLE) compiled with mypyc, in
# place beside their sources (git ignores the .so files); optional: without a C compiler it says
# so in one line and snode stays pure Python. `make pure` removes them; SNODE_PURE_PYTHON=1 runs
# the sources even where they are built. `make test-compiled`: the unit suite on the compiled
# modules (it checks that they are the ones imported), then back to pure, the reference.
compiled: $(STAMP)
	$(PY) -m snode.tools.mypyc_build

pure: $(STAMP)
	$(PY) -m snode.tools.mypyc_build --pure

test-compiled: $(STAMP)
	@$(PY) -m snode.tools.mypyc_build --require; rc=$$?; \
	if [ $$rc = 3 ]; then echo "test-compiled: skipped (nothing can be compiled here)"; exit 0; fi; \
	[ $$rc = 0 ] || exit $$rc; \
	$(COMPILE); SNODE_EXPECT_COMPILED=1 $(PY) -m pytest -n 2 -q tests/unit; rc=$$?; \
	$(PY) -m snode.tools.mypyc_build --pure; exit $$rc

# The web view in headless Chromium (Debian's package, installed when missing; we run as root on
# CI machines, otherwise this asks for sudo).
browser-test: $(STAMP)
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium >/dev/null || \
		{ echo "browser-test: cannot install chromium (apt-get install -y chromium, as root)"; exit 1; }; }
	$(COMPILE)
	$(PY) -m pytest -q -m browser tests

# mypy reads its files from pyproject.toml: src/ strictly, tests/ and bench/ with every body checked.
lint: $(STAMP)
	$(PY) -m mypy
	$(PY) -m ruff check src tests bench

unit: $(STAMP)
	$(COMPILE)
	$(PY) -m pytest -n 2 -q tests/unit

functional: $(STAMP)
	$(COMPILE)
	$(PY) -m pytest -n 2 -q tests/functional

# The long versions of the reliability runs (issue #15); `make test` runs the short ones. Their
# figures go to build/reliability.jsonl and are printed at the end (docs/RELIABILITY.md).
FIGURES := build/reliability.jsonl
reliability: $(STAMP)
	$(COMPILE)
	mkdir -p build && rm -f $(FIGURES)
	SNODE_FIGURES=$(FIGURES) SNODE_CRASH_KILLS=50 $(PY) -m pytest -q tests/functional/test_crash_loop.py
	SNODE_FIGURES=$(FIGURES) SNODE_FUZZ_EXAMPLES=10000 $(PY) -m pytest -q tests/functional/test_rpc_fuzz.py
	SNODE_FIGURES=$(FIGURES) SNODE_FUZZ_EXAMPLES=3000 $(PY) -m pytest -q -n 2 --dist loadfile \
		tests/functional/test_p2p_mutation.py tests/functional/test_quorumnet_mutation.py tests/functional/test_omq_fuzz.py
	SNODE_FIGURES=$(FIGURES) SNODE_FAULT_DOWN_S=120 SNODE_FAULT_NODES=12 SNODE_FAULT_BLOCKS=30 $(PY) -m pytest -q -n 2 tests/functional/test_network_faults.py \
		tests/functional/test_sn_blocks.py::test_service_nodes_take_over_and_keep_producing_without_the_authority \
		tests/functional/test_sn_blocks.py::test_rounds_skip_stopped_nodes_which_the_quorum_decommissions_and_takes_back
	$(PY) -m bench.figures $(FIGURES)

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'
	$(COMPILE)
	$(PY) -m bench

# docs/OPERATOR.md from its template, every command's output captured from real daemons, and
# docs/openrpc.json and docs/wallet-openrpc.json from the typed RPC records.
docs: $(STAMP)
	$(COMPILE)
	$(PY) -m snode.tools.operator_guide
	$(PY) -m snode.rpc.openrpc > docs/openrpc.json
	$(PY) -m snode.wallet.openrpc > docs/wallet-openrpc.json

# Single-file executables: one PyInstaller build of snode.bundle, copied under each program's
# name (it runs the program it is named after); they need no Python environment. They bundle the
# exact, hashed dependency versions of requirements.lock, installed into a venv of their own.
BINARY_VENV  := build/binary-venv
BINARY_STAMP := $(BINARY_VENV)/.installed
$(BINARY_STAMP): pyproject.toml requirements-binary.lock
	rm -rf $(BINARY_VENV)
	$(PYTHON) -m venv $(BINARY_VENV)
	$(BINARY_VENV)/bin/pip install -q --require-hashes --no-deps -r requirements-binary.lock
	$(BINARY_VENV)/bin/pip install -q --no-deps .
	touch $(BINARY_STAMP)

binary: $(BINARY_STAMP) | $(STAMP)
	$(BINARY_VENV)/bin/pyinstaller --onefile --noconfirm --log-level WARN --name snode \
		--workpath build/pyinstaller --specpath build --distpath dist src/snode/bundle.py
	for name in snoded snode-wallet snode-cli; do cp dist/snode dist/$$name; done
	rm dist/snode

binary-test: binary
	$(PY) -m pytest -q -m binary tests

# The locks (pip-tools), every dependency at one version with the hashes of its files, installed
# with `pip install --require-hashes`: requirements.lock the runtime set (the wheel's recommended
# install, the container image), requirements-dev.lock the runtime, test, lint and release tools
# (`make test` and every CI target), requirements-binary.lock the runtime and PyInstaller.
# `make lock` moves all three to the newest versions pyproject.toml's ranges admit, together;
# run `make test-latest` first, and commit the locks after `make test` passes with them
# (tests/unit/test_locks.py checks that the three agree on every package they share).
RELEASE_STAMP := $(STAMP)
COMPILE_LOCK = $(VENV)/bin/pip-compile -q --upgrade --generate-hashes --strip-extras --allow-unsafe \
	--no-emit-index-url --no-emit-find-links
lock: $(STAMP)
	$(COMPILE_LOCK) -o requirements.lock pyproject.toml
	$(COMPILE_LOCK) --extra test --extra lint --extra release -o $(DEV_LOCK) pyproject.toml
	$(COMPILE_LOCK) --extra binary -o requirements-binary.lock pyproject.toml

# The sdist and the wheel as a release publishes them (the wheel built from the sdist), checked
# by twine (`make wheel`), then installed into a fresh venv outside the repository
# (`make wheel-test`, tests/functional/test_wheel.py).
wheel: $(RELEASE_STAMP)
	rm -rf dist/snode-*
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/snode-*

wheel-test: wheel
	$(COMPILE)
	$(PY) -m pytest -q -m wheel tests/functional/test_wheel.py

# The Dockerfile linted, built with buildah on a local Debian base (.ci/rootfs) and run
# (tests/functional/test_container.py); buildah and debootstrap are installed when missing (as
# root, as CI runs).
container-test: $(RELEASE_STAMP)
	$(VENV)/bin/hadolint Dockerfile
	@command -v buildah >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq buildah >/dev/null || \
		{ echo "container-test: cannot install buildah (apt-get install -y buildah, as root)"; exit 1; }; }
	$(COMPILE)
	SNODE_BASE_ROOTFS="$$(.ci/rootfs bookworm python3 python3-venv)" \
		$(PY) -m pytest -q -m container tests/functional/test_container.py

# The unit tests and a functional smoke set on Python 3.13: Debian trixie's python3.13 in a root
# made by .ci/rootfs, our dependencies installed from the index inside it (.ci/in-root).
test-py313:
	.ci/in-root "$$(.ci/rootfs trixie python3 python3-venv)" python3.13

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
	find src -name '*.so' -delete
	find src bench tests -name __pycache__ -prune -exec rm -rf {} +
