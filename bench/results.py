"""A run's figures as JSON (`python -m bench --json FILE`) and the comparison of two such files
(`python -m bench compare A.json B.json`): every number both runs have, side by side, and B/A."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from snode.common import compiled

REPO_DIR = Path(__file__).resolve().parent.parent


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO_DIR), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_DIR), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out + ("+changes" if dirty else "")


def write(path: Path, figures: dict[str, Any], *, smoke: bool) -> None:
    """The figures of each benchmark run (what its `run` returned), with where and when."""
    document = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "load_average": os.getloadavg(),
                    "compiled": compiled.compiled_modules()},
        "smoke": smoke,
        "benchmarks": figures,
    }
    path.write_text(json.dumps(document, indent=1, default=_plain) + "\n", encoding="utf-8")


def _plain(value: Any) -> Any:
    """A figure JSON has no type for: a record's fields, or its text (a path, say)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def numbers(value: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every number in a figures tree, by its dotted path (list items by index)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield prefix, float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from numbers(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from numbers(item, f"{prefix}[{i}]")


def _load(path: str) -> dict[str, Any] | str:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        return f"cannot read {path}: {err.strerror}"
    except json.JSONDecodeError as err:
        return f"{path} is not JSON: {err.msg} at line {err.lineno}"
    if not isinstance(document, dict) or not isinstance(document.get("benchmarks"), dict):
        return f"{path} is not a `python -m bench --json` file (no \"benchmarks\" object)"
    return document


def compare_main(argv: list[str]) -> int:
    """Print each number both files have: A, B and B/A."""
    if len(argv) != 2:
        print("usage: python -m bench compare A.json B.json", file=sys.stderr)
        return 2
    docs = [_load(a) for a in argv]
    for doc in docs:
        if isinstance(doc, str):
            print(f"python -m bench compare: {doc}", file=sys.stderr)
            return 1
    a, b = (d for d in docs if isinstance(d, dict))
    for label, doc in (("A", a), ("B", b)):
        print(f"{label}: {doc.get('commit')} {doc.get('date')} on {doc.get('machine', {}).get('host')}")
    flat_a, flat_b = dict(numbers(a["benchmarks"])), dict(numbers(b["benchmarks"]))
    common = [k for k in flat_a if k in flat_b]
    width = max((len(k) for k in common), default=6)
    print(f"{'figure':{width}}  {'A':>14}  {'B':>14}  {'B/A':>7}")
    for key in common:
        x, y = flat_a[key], flat_b[key]
        ratio = f"{y / x:7.2f}" if x else "      -"
        print(f"{key:{width}}  {x:14.6g}  {y:14.6g}  {ratio}")
    only = sorted(set(flat_a) ^ set(flat_b))
    if only:
        print(f"{len(only)} figures in one file only (first: {only[0]})")
    return 0
