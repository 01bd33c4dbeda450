"""The shape of the code: small modules and short functions (STYLE.md; issue #11's gates).

No module under src/ is longer than 450 lines. No function is longer than 60 lines unless a
comment right above its `def` (or its decorators) starts with `# long:` and says why: a long
function has to earn its length in writing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "snode"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
MARK = "# long:"


def long_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, length) of each function over MAX_FUNCTION_LINES lines without the
    `# long:` comment above it."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        end = node.end_lineno or node.lineno
        length = end - node.lineno + 1
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        above = lines[first - 2].strip() if first >= 2 else ""
        if length > MAX_FUNCTION_LINES and not above.startswith(MARK):
            found.append((node.name, node.lineno, length))
    return found


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_module_is_short_and_its_functions_are_short(path: Path) -> None:
    source = path.read_text()
    assert source.count("\n") <= MAX_MODULE_LINES, (
        f"{path.relative_to(SRC)} has {source.count(chr(10))} lines; split it (at most {MAX_MODULE_LINES})"
    )
    assert long_functions(source) == []


def test_the_checker_finds_a_long_function_and_accepts_a_reason() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    plain = f"def f():\n{body}\n"
    assert long_functions(plain) == [("f", 1, MAX_FUNCTION_LINES + 1)]
    explained = f"# long: one table, read top to bottom\n@staticmethod\ndef f():\n{body}\n"
    assert long_functions(explained) == []
    short = "def g():\n    return 1\n"
    assert long_functions(short) == []
