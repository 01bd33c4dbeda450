"""`python .ci/lock_diff.py LOCK`: the installed packages whose versions differ from LOCK's pins
(`make test-latest` prints them before it runs the suite), one line each, `name: locked -> installed`."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)")
SEEDED = frozenset({"pip", "setuptools", "snode"})
"""What a new venv brings itself (and our own package): the lock pins pip and setuptools for the
dev venv, but a fresh venv's own copies say nothing of what the ranges admit."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(lock: str) -> int:
    locked = {canonical(m[1]): m[2] for line in Path(lock).read_text().splitlines() if (m := PIN.match(line))}
    installed = {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}
    changed = [f"  {name}: {locked[name]} -> {installed[name]}" for name in sorted(set(locked) - SEEDED)
               if name in installed and installed[name] != locked[name]]
    new = [f"  {name}: (not locked) -> {installed[name]}" for name in sorted(set(installed) - set(locked) - SEEDED)]
    print(f"test-latest: {len(changed)} of {len(locked)} locked packages differ from {lock}" + (":" if changed else ""))
    print("\n".join(changed + new) if changed or new else "  (none)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
