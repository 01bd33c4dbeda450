"""`python -m bench.figures FILE`: the figures `make reliability` collected (one JSON object a
line, written by the long tests through `SNODE_FIGURES`), printed one block per run."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bench.figures FILE", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        print(f"bench.figures: cannot read {path}: {err.strerror}", file=sys.stderr)
        return 1
    for line in lines:
        figures = json.loads(line)
        print(figures.pop("test"))
        for key, value in figures.items():
            print(f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
