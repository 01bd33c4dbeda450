"""No test changes a module constant of snode (issue #35 item 3): a bound or a timeout a test
needs small is passed to the real constructor as a limits record or an argument (as h11's
`Connection` takes `max_incomplete_event_size`), never patched into the module, where it would
change every other user of the module in the process and hide whether the code takes it at all.

Found by reading the tests' syntax (no test is run): `monkeypatch.setattr(module, "NAME", ...)`,
`setattr(module, "NAME", ...)`, `patch.object(module, "NAME")`, the dotted-string forms
(`monkeypatch.setattr("snode.x.NAME", ...)`, `mock.patch("snode.x.NAME")`) and plain assignment
(`module.NAME = ...`), for an UPPER_CASE NAME on a module of snode. Patching a library's or the
OS's functions to inject a fault (os.link, sodium.crypto_sign_open, a store's write) is not this.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")

ALLOWED: set[tuple[str, str]] = set()
"""(test file, module.NAME) patches still to be turned into arguments, each with its reason."""


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _snode_modules(tree: ast.Module) -> dict[str, str]:
    """Local name -> the snode module it names, from the file's imports."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "snode":
                    names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else "snode"
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "snode":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _is_module(full):
                    names[alias.asname or alias.name] = full
    return names


def _module_of(target: ast.expr, modules: dict[str, str]) -> str | None:
    """The snode module an expression names (`S`, `snode.core.crypto`), or None."""
    if isinstance(target, ast.Name):
        return modules.get(target.id)
    if isinstance(target, ast.Attribute):
        outer = _module_of(target.value, modules)
        if outer is not None and _is_module(f"{outer}.{target.attr}"):
            return f"{outer}.{target.attr}"
    return None


def _dotted(text: str) -> str | None:
    """'snode.x.NAME' when `text` names an UPPER_CASE attribute of an snode module."""
    module, _, name = text.rpartition(".")
    if module.split(".")[0] == "snode" and CONSTANT.fullmatch(name) and _is_module(module):
        return text
    return None


def _patched(call: ast.Call, modules: dict[str, str]) -> str | None:
    """'module.NAME' when a call sets an snode module's UPPER_CASE attribute."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in {"setattr", "object", "patch"} or not call.args:
        return None
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return _dotted(first.value)
    if len(call.args) < 2 or not isinstance(call.args[1], ast.Constant) or not isinstance(call.args[1].value, str):
        return None
    module, attribute = _module_of(first, modules), call.args[1].value
    return f"{module}.{attribute}" if module is not None and CONSTANT.fullmatch(attribute) else None


def _assigned(node: ast.AST, modules: dict[str, str]) -> list[str]:
    """'module.NAME' of each snode module constant an assignment statement rebinds."""
    if isinstance(node, ast.Assign):
        targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    else:
        return []
    found = []
    for target in targets:
        if isinstance(target, ast.Attribute) and CONSTANT.fullmatch(target.attr):
            module = _module_of(target.value, modules)
            if module is not None:
                found.append(f"{module}.{target.attr}")
    return found


def constant_patches(source: str) -> list[tuple[int, str]]:
    """(line, 'module.NAME') of each place `source` changes an snode module's constant."""
    tree = ast.parse(source)
    modules = _snode_modules(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            patched = _patched(node, modules)
            if patched is not None:
                found.append((node.lineno, patched))
        if isinstance(node, ast.stmt):
            found.extend((node.lineno, name) for name in _assigned(node, modules))
    return sorted(found)


def test_no_test_patches_a_module_constant_of_snode() -> None:
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for line, name in constant_patches(path.read_text()):
            if (relative, name) not in ALLOWED:
                found.append(f"{relative}:{line}: {name} (pass it to the constructor instead)")
    assert found == [], "\n".join(found)


def test_the_finder_sees_each_form_of_patch() -> None:
    source = '''
import snode.core.crypto
from snode.core import utxo_set
from snode.services import sync_machine as S
from snode.net.limits import SyncLimits

def test(monkeypatch):
    monkeypatch.setattr(S, "MAX_BRANCH_BLOCKS", 15)
    monkeypatch.setattr("snode.services.notify.TIMEOUT", 0.3)
    setattr(snode.core.crypto, "GOOD_CACHE_SIZE", 8)
    utxo_set.COMPACT_AT, other = 1, 2
    utxo_set.COMPACT_AT += 1
    monkeypatch.setattr(snode.core.crypto.sodium, "crypto_sign_open", None)  # a library's function
    monkeypatch.setattr(S, "_private", None)  # not a constant
    limits = SyncLimits(max_branch_blocks=15)
    limits.MAX = 1  # not a module
'''
    assert [name for _, name in constant_patches(source)] == [
        "snode.services.sync_machine.MAX_BRANCH_BLOCKS", "snode.services.notify.TIMEOUT",
        "snode.core.crypto.GOOD_CACHE_SIZE", "snode.core.utxo_set.COMPACT_AT", "snode.core.utxo_set.COMPACT_AT",
    ]
