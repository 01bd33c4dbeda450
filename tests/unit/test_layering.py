"""The functional core imports nothing that does I/O, reads the clock or draws randomness, and
nothing from the shell (DESIGN.md section 2).

Reads every module of src/snode/core with `ast` (so imports inside functions count too) instead
of importing it, and checks each imported module name against the forbidden lists.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "src" / "snode" / "core"

FORBIDDEN_STDLIB = frozenset({
    "asyncio", "socket", "sqlite3", "os", "time", "random", "logging", "subprocess", "threading",
    "datetime", "pathlib", "io", "selectors", "ssl", "http", "urllib", "shutil", "tempfile",
    "secrets", "multiprocessing", "concurrent", "signal", "importlib",
})
"""I/O, clock and randomness (plus `importlib`, which would hide an import from this test)."""

FORBIDDEN_SHELL = frozenset({
    "snode.store", "snode.net", "snode.rpc", "snode.node", "snode.wallet", "snode.tools",
    "snode.devchain",
})


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
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            found.append((node.lineno, "__import__"))
    return found


def violations(source: str, module: str) -> list[str]:
    """What `source` imports that the core may not."""
    bad = []
    for line, name in imported_modules(source, module):
        top = name.split(".")[0]
        shell = any(name == s or name.startswith(s + ".") for s in FORBIDDEN_SHELL)
        if top in FORBIDDEN_STDLIB or shell or name == "__import__":
            bad.append(f"{module}:{line} imports {name}")
    return bad


def _core_modules() -> list[Path]:
    return sorted(CORE.glob("*.py"))


def test_core_has_modules_to_check():
    names = {p.stem for p in _core_modules()}
    assert {"transition", "state", "encoding", "service_nodes", "mempool"} <= names


@pytest.mark.parametrize("path", _core_modules(), ids=lambda p: p.name)
def test_core_module_imports_no_io_clock_randomness_or_shell(path: Path):
    module = f"snode.core.{path.stem}"
    assert violations(path.read_text(), module) == []


@pytest.mark.parametrize(
    ("source", "culprit"),
    [
        ("import os\n", "os"),
        ("import os.path as p\n", "os.path"),
        ("from time import monotonic\n", "time"),
        ("def f():\n    import random\n    return random.random()\n", "random"),
        ("class C:\n    def m(self):\n        from asyncio import sleep\n", "asyncio"),
        ("from snode.store import db\n", "snode.store"),
        ("from snode import devchain\n", "snode.devchain"),
        ("from snode.wallet.keystore import load\n", "snode.wallet.keystore"),
        ("from .. import node\n", "snode.node"),
        ("from ..rpc import server\n", "snode.rpc"),
        ("if True:\n    import http.client\n", "http.client"),
        ("try:\n    import sqlite3\nexcept ImportError:\n    pass\n", "sqlite3"),
        ("x = __import__('socket')\n", "__import__"),
    ],
)
def test_walker_catches_forbidden_imports(source: str, culprit: str):
    found = violations(source, "snode.core.example")
    assert any(f" imports {culprit}" in v for v in found), found


@pytest.mark.parametrize(
    "source",
    [
        "import hashlib\nimport re\n",
        "from snode.core.crypto import hash32\n",
        "from . import crypto\n",
        "from snode.params import COIN\n",
        "import msgspec\nimport immutables\nimport nacl.bindings\n",
        "def f():\n    from snode.core.crypto import hash32\n",
    ],
)
def test_walker_allows_pure_imports(source: str):
    assert violations(source, "snode.core.example") == []
