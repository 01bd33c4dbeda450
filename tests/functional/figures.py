"""Figures the long reliability runs write (`make reliability`): each test appends one JSON
object to the file `SNODE_FIGURES` names; `python -m bench.figures FILE` prints them."""

from __future__ import annotations

import json
import os
from typing import Any


def write_figures(name: str, figures: dict[str, Any]) -> None:
    """Append `figures` to the file `SNODE_FIGURES` names (`make reliability`), if any."""
    path = os.environ.get("SNODE_FIGURES")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"test": name, **figures}) + "\n")
