"""The three locks agree (issue #32): requirements.lock (the runtime set an operator installs),
requirements-dev.lock (what `make test` and CI install) and requirements-binary.lock (the
single-file executables) pin one version of each package they share, every pin is hashed, and
each lock admits itself under pyproject.toml's ranges, so that what CI tested is what ships."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ("requirements.lock", "requirements-dev.lock", "requirements-binary.lock")
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lock: str) -> dict[str, str]:
    return {_canonical(m[1]): m[2] for line in (ROOT / lock).read_text().splitlines() if (m := PIN.match(line))}


def test_the_locks_pin_one_version_of_each_shared_package():
    runtime, dev, binary = (pins(lock) for lock in LOCKS)
    assert set(runtime) <= set(dev) and set(runtime) <= set(binary)
    for other in (dev, binary):
        assert {n: other[n] for n in set(runtime) & set(other) if other[n] != runtime[n]} == {}
    assert {n: (dev[n], binary[n]) for n in set(dev) & set(binary) if dev[n] != binary[n]} == {}


@pytest.mark.parametrize("lock", LOCKS)
def test_every_pin_has_its_hashes(lock):
    text = (ROOT / lock).read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text.split("\n", 1)[1])
    for block in blocks:
        if PIN.match(block):
            assert "--hash=sha256:" in block, block.splitlines()[0]


def test_the_ranges_admit_every_locked_direct_dependency():
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *(r for extra in ("test", "lint", "release")
                                          for r in project["optional-dependencies"][extra])]
    dev = pins("requirements-dev.lock")
    for text in wanted:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate():
            assert dev[_canonical(req.name)] in req.specifier, f"{text} does not admit {dev[_canonical(req.name)]}"
