"""Which of snode's hot modules this process runs compiled (issue #37 item 4).

`make compiled` builds the modules of COMPILABLE with mypyc into extension modules beside their
sources (src/snode/...), which Python then imports instead of the .py files; `make pure` removes
them. The .py files stay the reference: `make test` runs whatever is there (its header says
which), `make test-compiled` runs the unit suite on the compiled build and then removes it.

SNODE_PURE_PYTHON=1 in the environment runs the sources even where the compiled modules are
built (`prefer_sources`, which `snode/__init__.py` calls): a benchmark then compares the two in
the same minutes, and the daemons it starts inherit the choice.

A compiled module whose source changed after the build would run the old code: `stale` names
those, and the test suite refuses to start on one (tests/conftest.py).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, TypeVar

C = TypeVar("C")

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr
else:
    def mypyc_attr(**_attrs: Any) -> Callable[[C], C]:
        """mypy_extensions' `mypyc_attr` (mypyc reads it; compiled, the call is not made), here
        without that package, which only the dev tools install."""
        return lambda cls: cls

COMPILABLE: Final = (
    "snode.net.proof_gossip",
    "snode.common.events",
)
"""What `make compiled` compiles: the proof gossip's bookkeeping and the event hub. A module
that defines a msgspec Struct with options (`frozen=True, array_like=True, tag=...`) cannot be
here: mypyc drops a class's keywords, and with them the canonical encoding (tests/unit/test_compiled.py
checks it), which rules out `net.protocol`'s framing, `core.proofs`' rules and `net.relay`.
`net.peer` cannot either: a compiled class takes no weak reference, and the service-node duties
key their open proof verdicts by peer in a WeakKeyDictionary (a compiled daemon logged "cannot
create weak reference to 'Peer' object" for every proof). `core.encoding` and `net.peers`
compile and pass the tests but measured no faster (docs/PERFORMANCE.md, "mypyc")."""

GROUP: Final = "snode.compiled"
"""mypyc's group name: the compiled modules share one runtime library, `snode/compiled__mypyc*.so`."""


PURE_ENV: Final = "SNODE_PURE_PYTHON"


class _Sources(importlib.abc.MetaPathFinder):
    """Finds the modules of COMPILABLE as their .py files, ahead of any extension module."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in COMPILABLE or not path:
            return None
        for folder in path:
            source = Path(folder) / (fullname.rpartition(".")[2] + ".py")
            if source.exists():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def prefer_sources() -> None:
    """Import the modules of COMPILABLE from their sources from now on (SNODE_PURE_PYTHON)."""
    if not _sources_first():
        sys.meta_path.insert(0, _Sources())


def _is_extension(path: str | None) -> bool:
    return path is not None and path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def compiled_modules() -> list[str]:
    """The modules of COMPILABLE that this process imported from an extension module."""
    return [name for name in COMPILABLE if _is_extension(importlib.import_module(name).__file__)]


def stale() -> list[str]:
    """The compiled modules whose source is newer than their build."""
    found = []
    for name in compiled_modules():
        built = Path(str(importlib.import_module(name).__file__))
        source = built.parent / (name.rpartition(".")[2] + ".py")
        if source.exists() and source.stat().st_mtime > built.stat().st_mtime:
            found.append(name)
    return found


def _sources_first() -> bool:
    return any(isinstance(finder, _Sources) for finder in sys.meta_path)


def describe() -> str:
    """One line: which modules run compiled ("compiled: none (pure Python)" when none do)."""
    names = compiled_modules()
    if not names:
        return "compiled: none (pure Python)" + (f"; {PURE_ENV} is set" if _sources_first() else "")
    line = "compiled: " + ", ".join(name.removeprefix("snode.") for name in names)
    old = stale()
    if old:
        line += f" (STALE: {', '.join(old)} changed since `make compiled`: run it again, or `make pure`)"
    return line
