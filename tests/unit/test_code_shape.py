"""The shape of the code: short functions (STYLE.md; issue #11's gates).

No function is longer than 60 lines unless a comment right above its `def` (or its decorators)
starts with `# long:` and says why: a long function has to earn its length in writing. A module's
length is a prompt to look, never a failure (STYLE.md: "module size follows the noun"):
`python -m tests.unit.test_code_shape` reports the modules over MODULE_REPORT_LINES.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "snode"
MODULE_REPORT_LINES = 450
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
def test_functions_are_short(path: Path) -> None:
    assert long_functions(path.read_text()) == []


def test_the_checker_finds_a_long_function_and_accepts_a_reason() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    plain = f"def f():\n{body}\n"
    assert long_functions(plain) == [("f", 1, MAX_FUNCTION_LINES + 1)]
    explained = f"# long: one table, read top to bottom\n@staticmethod\ndef f():\n{body}\n"
    assert long_functions(explained) == []
    short = "def g():\n    return 1\n"
    assert long_functions(short) == []


def long_modules() -> list[tuple[str, int]]:
    """(path, lines) of each module over MODULE_REPORT_LINES, longest first: a report to read."""
    sizes = [(str(p.relative_to(SRC)), p.read_text().count("\n")) for p in _modules()]
    return sorted(((name, n) for name, n in sizes if n > MODULE_REPORT_LINES), key=lambda x: -x[1])


if __name__ == "__main__":
    for name, n in long_modules() or [("(none)", 0)]:
        print(f"{n:6d}  {name}")
