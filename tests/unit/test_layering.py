"""The packages depend on each other one way only, and the functional core does no I/O
(DESIGN.md section 2, README "How the code is laid out").

The order, lowest first:

    params, common < core < api (and devchain) < store < node < net < services < rpc < app

A module may import from its own package and from any lower layer, never from a higher one.
`wallet` and `tools` sit on top and use only the base, the core and the RPC contract (`api`):
they talk to a daemon through the one client, never through its internals. Nothing under `src/`
or `tests/` imports the benchmarks (`bench`), but for a benchmark's own unit test of its pure
logic (BENCH_UNDER_TEST).

Inside a package the imports form no circle: a module never imports, directly or through others
of its package, a module that imports it. A circle is one concern split over two files, or a
helper that reaches back into its owner; the fix is a third module both use, or the helper
taking what it needs as arguments. `if TYPE_CHECKING:` imports count: they tie the two modules
as much for a reader and for mypy.

Every file is read with `ast`, so imports inside functions, `if` blocks and `try` blocks count
as much as those at the top; `__import__` and `importlib` are refused in the core, where they
would hide an import from this test.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "snode"
CORE = SRC / "core"

LAYERS: dict[str, int] = {
    "snode.params": 0, "snode.common": 0,
    "snode.core": 1,
    "snode.devchain": 2, "snode.api": 2,
    "snode.store": 3,
    "snode.node": 4,
    "snode.net": 5,
    "snode.services": 6,
    "snode.rpc": 7,
    "snode.sim": 8,
    "snode.app": 8,
    "snode.wallet": 9, "snode.tools": 9,
    "snode.bundle": 10,
}
"""The rank of each package (or top-level module); `snode` itself (its `__version__`) is 0."""

CLIENT_ONLY = frozenset({"snode.wallet", "snode.tools"})
"""Packages that may use only the base, the core and the RPC contract, besides themselves."""
CLIENT_ALLOWED = frozenset({"snode.params", "snode.common", "snode.core", "snode.devchain", "snode.api"})

FORBIDDEN_STDLIB = frozenset({
    "asyncio", "socket", "sqlite3", "os", "time", "random", "logging", "subprocess", "threading",
    "datetime", "pathlib", "io", "selectors", "ssl", "http", "urllib", "shutil", "tempfile",
    "secrets", "multiprocessing", "concurrent", "signal", "importlib",
})
"""What the core may not import: I/O, clock and randomness (plus `importlib`, which would hide
an import from this test)."""


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import anywhere in `source`, nested ones too.

    `module` is the dotted name of the file, to resolve relative imports. `from pkg import name`
    yields both `pkg` and `pkg.name`, since name may be a submodule.
    """
    found: list[tuple[int, str]] = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            found.append((node.lineno, "__import__"))
    return found


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The absolute module name `from ... import` reads from, in a module of `package`."""
    if not node.level:
        return node.module or ""
    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{parent}.{node.module}" if node.module else parent


def package_of(name: str) -> str | None:
    """The entry of LAYERS that `name` belongs to, None for `snode` itself and non-snode names."""
    for package in LAYERS:
        if name == package or name.startswith(package + "."):
            return package
    return None


def layer_violations(source: str, module: str) -> list[str]:
    """Imports of `module` (a dotted name under snode) against the layer order, or of bench."""
    own = package_of(module)
    bad: list[str] = []
    lines: set[int] = set()
    for line, name in imported_modules(source, module):
        if line in lines:
            continue  # one report per import statement (`from a import b` also yields a.b)
        if name == "bench" or name.startswith("bench."):
            bad.append(f"{module}:{line} imports {name} (the benchmarks are not a library)")
            lines.add(line)
            continue
        target = package_of(name)
        if own is None or target is None or target == own:
            continue
        if own in CLIENT_ONLY:
            if target not in CLIENT_ALLOWED:
                bad.append(f"{module}:{line} imports {name}: {own} may use only the base, the "
                           "core and snode.api (a client), not the daemon's internals")
                lines.add(line)
        elif LAYERS[target] >= LAYERS[own]:
            bad.append(f"{module}:{line} imports {name}: {own} (layer {LAYERS[own]}) may not "
                       f"depend on {target} (layer {LAYERS[target]})")
            lines.add(line)
    return bad


def core_violations(source: str, module: str) -> list[str]:
    """What a core module imports that does I/O, reads the clock or draws randomness."""
    bad = []
    for line, name in imported_modules(source, module):
        if name.split(".")[0] in FORBIDDEN_STDLIB or name == "__import__":
            bad.append(f"{module}:{line} imports {name}")
    return bad


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_package_has_a_layer():
    packages = {_module_name(p).split(".")[1] for p in _sources() if _module_name(p) != "snode"}
    unplaced = sorted(p for p in packages if f"snode.{p}" not in LAYERS)
    assert unplaced == [], f"give these a layer in LAYERS (and the README): {unplaced}"


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(SRC)))
def test_module_imports_only_lower_layers(path: Path):
    assert layer_violations(path.read_text(), _module_name(path)) == []


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_module_imports_no_io_clock_or_randomness(path: Path):
    assert core_violations(path.read_text(), _module_name(path)) == []


BENCH_UNDER_TEST: Mapping[str, str] = {
    "tests.unit.test_perf_split": "bench.perf_split",
    "tests.functional.test_bench_smoke": "bench.daemons",
}
"""A test module and the one benchmark module it tests (it uses no other as a library)."""


def test_no_test_imports_the_benchmarks():
    tests = sorted(p for p in (ROOT / "tests").rglob("*.py") if "__pycache__" not in p.parts)
    bad = []
    for path in tests:
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        tested = BENCH_UNDER_TEST.get(name)
        bad += [v for v in layer_violations(path.read_text(), name)
                if "benchmarks" in v and not (tested and f" imports {tested} (" in v)]
    assert bad == []


# --- the checker itself catches what it must: synthetic modules -------------------------------

@pytest.mark.parametrize(
    ("module", "source", "culprit"),
    [
        ("snode.node.node", "from snode.net.protocol import Hello\n", "snode.net.protocol"),
        ("snode.node.node", "def f():\n    from snode.rpc import methods\n", "snode.rpc"),
        ("snode.net.peers", "class P:\n    def m(self):\n        import snode.services.sync\n", "snode.services.sync"),
        ("snode.store.chain_store", "from snode.node.node import Node\n", "snode.node.node"),
        ("snode.core.state", "from snode.store import ChainStore\n", "snode.store"),
        ("snode.core.state", "from ..store import ChainStore\n", "snode.store"),
        ("snode.rpc.methods", "from snode.app.config import Config\n", "snode.app.config"),
        ("snode.wallet.service", "from snode.node.node import Node\n", "snode.node.node"),
        ("snode.wallet.service", "from snode.rpc.methods import MethodTable\n", "snode.rpc.methods"),
        ("snode.tools.cli", "if True:\n    from snode.app.daemon import main\n", "snode.app.daemon"),
        ("snode.tools.cli", "from snode.wallet.service import WalletService\n", "snode.wallet.service"),
        ("snode.api.client", "try:\n    import snode.store\nexcept ImportError:\n    pass\n", "snode.store"),
        ("snode.common.entry", "from snode.core.units import format_coins\n", "snode.core.units"),
        ("snode.rpc.methods", "from bench.daemons import Daemon\n", "bench.daemons"),
    ],
)
def test_checker_catches_imports_against_the_order(module: str, source: str, culprit: str):
    found = layer_violations(source, module)
    assert any(f" imports {culprit}" in v for v in found), found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("snode.net.peers", "from snode.node.node import Node\n"),
        ("snode.services.sync", "from snode.net import protocol\nfrom snode.store import ChainStore\n"),
        ("snode.app.daemon", "from snode.rpc.methods import MethodTable\n"),
        ("snode.wallet.service", "from snode.api.client import RpcClient\nfrom snode.core.units import parse_coins\n"),
        ("snode.tools.cli",
         "from snode.common.entry import run_command\nfrom snode.tools.tables import make_console\n"),
        ("snode.node.node", "from . import verifier\nfrom snode import __version__\n"),
    ],
)
def test_checker_allows_imports_down_the_order(module: str, source: str):
    assert layer_violations(source, module) == []


@pytest.mark.parametrize(
    ("source", "culprit"),
    [
        ("import os\n", "os"),
        ("import os.path as p\n", "os.path"),
        ("from time import monotonic\n", "time"),
        ("def f():\n    import random\n    return random.random()\n", "random"),
        ("class C:\n    def m(self):\n        from asyncio import sleep\n", "asyncio"),
        ("if True:\n    import http.client\n", "http.client"),
        ("try:\n    import sqlite3\nexcept ImportError:\n    pass\n", "sqlite3"),
        ("x = __import__('socket')\n", "__import__"),
    ],
)
def test_checker_catches_io_in_the_core(source: str, culprit: str):
    found = core_violations(source, "snode.core.example")
    assert any(f" imports {culprit}" in v for v in found), found


def test_a_wrong_import_in_a_real_tree_fails(tmp_path: Path):
    """The whole walk, not only the checker: a synthetic package tree with one import against the
    order is reported, and only that one."""
    pkg = tmp_path / "snode"
    for sub, text in {
        "node/node.py": "from snode.core.state import ChainState\n",
        "net/peers.py": "from snode.node.node import Node\n",
        "store/chain_store.py": "def later():\n    from snode.node.node import Node\n",
    }.items():
        (pkg / sub).parent.mkdir(parents=True, exist_ok=True)
        (pkg / sub).write_text(text)
    found = []
    for path in sorted(pkg.rglob("*.py")):
        name = ".".join(path.relative_to(tmp_path).with_suffix("").parts)
        found += layer_violations(path.read_text(), name)
    assert len(found) == 1 and found[0].startswith("snode.store.chain_store:2 imports snode.node"), found


# --- no circle of imports inside a package ----------------------------------------------------

def import_targets(source: str, module: str, modules: Collection[str], *, is_package: bool = False) -> set[str]:
    """The names in `modules` that `module` imports anywhere in `source` (nested imports and
    `if TYPE_CHECKING:` ones too). `from pkg import name` is `pkg.name` when that is one of
    `modules`, else `pkg` (a name its `__init__` defines). `is_package`: `module` is an
    `__init__`, against which relative imports resolve."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    return found & set(modules)


def _circles(graph: Mapping[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """Each strongly connected group of `graph` (module -> the modules it imports) of two
    modules or more, with its shortest circle through its first module: (circle as
    [a, b, ..., a], group)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(name: str) -> None:  # Tarjan's algorithm
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in sorted(graph[name]):
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            group = stack[stack.index(name):]
            del stack[stack.index(name):]
            if len(group) > 1:
                groups.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return [(_shortest_circle(graph, group), group) for group in sorted(groups)]


def _shortest_circle(graph: Mapping[str, set[str]], group: list[str]) -> list[str]:
    """The shortest way from group[0] back to itself inside `group` (breadth first)."""
    start, inside = group[0], set(group)
    paths = {start: [start]}
    queue = [start]
    for name in queue:
        for target in sorted(graph[name] & inside):
            if target == start:
                return [*paths[name], start]
            if target not in paths:
                paths[target] = [*paths[name], target]
                queue.append(target)
    raise AssertionError(f"{group} is not a circle")


def circle_violations(sources: Mapping[str, str]) -> list[str]:
    """Each circle of imports inside one package among `sources` (dotted module name -> text),
    named by its modules in import order: "snode.a.x -> snode.a.y -> snode.a.x", and the
    modules its circles join when they are more."""
    packages = {name.rsplit(".", 1)[0] for name in sources}
    graph = {
        name: {t for t in import_targets(text, name, sources, is_package=name in packages)
               if t != name and package_of(t) == package_of(name)}
        for name, text in sources.items()
    }
    return [" -> ".join(circle) + (f" (its circles join {', '.join(group)})" if len(group) >= len(circle) else "")
            for circle, group in _circles(graph)]


PACKAGES = sorted(p for p in LAYERS if (SRC / p.removeprefix("snode.")).is_dir())


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_inside_a_package(package: str):
    sources = {_module_name(p): p.read_text() for p in _sources() if package_of(_module_name(p)) == package}
    found = circle_violations(sources)
    assert not found, "untie each circle (move what both need to a third module): " + "; ".join(found)


@pytest.mark.parametrize(
    ("sources", "circle"),
    [
        ({"snode.core.a": "from snode.core.b import B\n", "snode.core.b": "from snode.core.a import A\n"},
         "snode.core.a -> snode.core.b -> snode.core.a"),
        ({"snode.core.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from snode.core.b import B\n",
          "snode.core.b": "from snode.core.a import A\n"},
         "snode.core.a -> snode.core.b -> snode.core.a"),
        ({"snode.sim.world": "from snode.sim import judges\n",
          "snode.sim.judges": "def f():\n    from .report import Tally\n",
          "snode.sim.report": "import snode.sim.world\n"},
         "snode.sim.judges -> snode.sim.report -> snode.sim.world -> snode.sim.judges"),
        ({"snode.store": "from snode.store.rows import Row\n", "snode.store.rows": "from snode.store import Encoded\n"},
         "snode.store -> snode.store.rows -> snode.store"),
        ({"snode.wallet.cli": "import snode.wallet.repl as repl\nfrom snode.wallet.keys import K\n",
          "snode.wallet.repl": "from snode.wallet.cli import Session\n", "snode.wallet.keys": ""},
         "snode.wallet.cli -> snode.wallet.repl -> snode.wallet.cli"),
        ({"snode.node.node": "from snode.node import own_proof, saved\n",
          "snode.node.own_proof": "from snode.node.node import Node\n",
          "snode.node.saved": "from snode.node.node import Node\n"},
         "snode.node.node -> snode.node.own_proof -> snode.node.node "
         "(its circles join snode.node.node, snode.node.own_proof, snode.node.saved)"),
    ],
)
def test_checker_names_a_circle_inside_a_package(sources: dict[str, str], circle: str):
    assert circle_violations(sources) == [circle]


@pytest.mark.parametrize(
    "sources",
    [
        {"snode.core.a": "from snode.core.b import B\n", "snode.core.b": "from snode.core.c import C\n",
         "snode.core.c": "from snode.params import MAINNET\n"},
        # `from snode.store import rows` reads the submodule, not what the __init__ defines
        {"snode.store": "from snode.store.chain_store import ChainStore\n",
         "snode.store.chain_store": "from snode.store import rows\n", "snode.store.rows": ""},
        # across packages the layer order rules (test_module_imports_only_lower_layers)
        {"snode.node.node": "from snode.net.peers import Peer\n",
         "snode.net.peers": "from snode.node.node import Node\n"},
    ],
)
def test_checker_allows_imports_without_a_circle(sources: dict[str, str]):
    assert circle_violations(sources) == []


# --- a test module never imports another test module's tests ------------------------------------

TESTS = ROOT / "tests"


def imports_of_tests(source: str, module: str) -> list[str]:
    """Imports of `module` (a dotted name under tests) that reach into a `test_*` module.

    Shared helpers belong in modules not named test_* (the functional framework, `sn_helpers`,
    `tests/unit/helpers.py`, a conftest); importing a test module would also collect its tests
    twice and tie one file's tests to another's internals. `tests.x.test_y`, `tests.x.test_y.name`
    and a bare `test_y` (pytest puts test folders on sys.path) all count.
    """
    bad: list[str] = []
    lines: set[int] = set()
    for line, name in imported_modules(source, module):
        parts = name.split(".")
        if line in lines or not (parts[0] == "tests" or parts[0].startswith("test_")):
            continue
        if any(part.startswith("test_") for part in parts):
            bad.append(f"{module}:{line} imports {name}: move what it shares out of the test module")
            lines.add(line)
    return bad


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def test_no_test_module_imports_another():
    bad = []
    for path in _test_modules():
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        bad += imports_of_tests(path.read_text(), name)
    assert bad == []


@pytest.mark.parametrize(
    ("module", "source", "culprit"),
    [
        ("tests.functional.test_p2p", "from tests.functional.test_rpc import operator_key\n",
         "tests.functional.test_rpc"),
        ("tests.functional.test_sn_network", "def t():\n    from tests.functional.test_snode_cli import snode_cli\n",
         "tests.functional.test_snode_cli"),
        ("tests.unit.test_fast_paths", "from .test_encoding import BLOCKS\n", "tests.unit.test_encoding"),
        ("tests.unit.test_fast_paths", "import tests.unit.test_encoding as enc\n", "tests.unit.test_encoding"),
        ("tests.unit.test_fast_paths", "from tests.unit import test_encoding\n", "tests.unit.test_encoding"),
        ("tests.unit.test_fast_paths", "import test_encoding\n", "test_encoding"),
    ],
)
def test_checker_catches_a_test_importing_a_test(module: str, source: str, culprit: str):
    found = imports_of_tests(source, module)
    assert len(found) == 1 and f" imports {culprit}" in found[0], found


@pytest.mark.parametrize(
    "source",
    [
        "from tests.functional.framework import wait_until\nfrom tests.functional.sn_helpers import SOLO\n",
        "from tests.unit.conftest import LabChain\nfrom tests.unit.helpers import BLOCKS\n",
        "from hypothesis import strategies as st\nimport pytest\nfrom snode.core import state\n",
    ],
)
def test_checker_allows_helpers_and_libraries(source: str):
    assert imports_of_tests(source, "tests.unit.test_example") == []
