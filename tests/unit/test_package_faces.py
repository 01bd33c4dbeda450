"""Each package says what it offers the others: its `__init__` has a docstring and an `__all__`
of its modules (or names) that other packages may import, and no module outside the package
imports one of its modules that `__all__` leaves out (h11's face; issue #35 item 6). Tests and
benchmarks may reach inside: they are not held to it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "snode"
PACKAGES = sorted(p.parent.name for p in SRC.glob("*/__init__.py"))


def offered(package: str) -> tuple[str | None, list[str]]:
    """The docstring and the `__all__` of `package`'s `__init__`."""
    tree = ast.parse((SRC / package / "__init__.py").read_text())
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
    return ast.get_docstring(tree), names


def imports_across(source: str, own: str | None) -> list[tuple[str, str, int]]:
    """(package, its module or name, line) of every import in `source`, a module of package
    `own`, of another package's part."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] == "snode" and len(parts) == 2:
                found += [(parts[1], alias.name, node.lineno) for alias in node.names]
            elif parts[0] == "snode" and len(parts) > 2:
                found.append((parts[1], parts[2], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name.split(".")[1], a.name.split(".")[2], node.lineno)
                      for a in node.names if a.name.startswith("snode.") and a.name.count(".") >= 2]
    return [(pkg, name, line) for pkg, name, line in found if pkg in PACKAGES and pkg != own]


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_says_what_it_offers(package: str):
    doc, names = offered(package)
    assert doc, f"snode/{package}/__init__.py has no docstring saying what the package offers"
    assert names, f"snode/{package}/__init__.py has no __all__"
    tree = ast.parse((SRC / package / "__init__.py").read_text())
    bound = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
    bound |= {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
              if isinstance(t, ast.Name)}
    missing = [n for n in names if not (SRC / package / f"{n}.py").exists() and not (SRC / package / n).is_dir()
               and n not in bound]
    assert not missing, f"snode/{package}/__init__.py offers what it does not have: {missing}"


def test_no_package_imports_what_another_keeps_to_itself():
    faces = {package: set(offered(package)[1]) for package in PACKAGES}
    reached = [f"{path.relative_to(SRC)}:{line} imports snode.{pkg}.{name}, which snode/{pkg}/__init__.py "
               f"does not offer: add it to that __all__ if it is meant for other packages"
               for path in sorted(SRC.rglob("*.py"))
               for pkg, name, line in imports_across(path.read_text(), _package(path)) if name not in faces[pkg]]
    assert not reached, "\n".join(reached)


def test_the_checker_sees_every_form_of_import_and_skips_the_package_itself():
    source = ("from snode.net.dialer import Dialer\nfrom snode.core import state\nimport snode.node.owners\n"
              "from snode.rpc.answers import Answers\nfrom snode.params import REGTEST\n")
    assert imports_across(source, "rpc") == [("net", "dialer", 1), ("core", "state", 2), ("node", "owners", 3)]


def _package(path: Path) -> str | None:
    parts = path.relative_to(SRC).parts
    return parts[0] if len(parts) > 1 else None
