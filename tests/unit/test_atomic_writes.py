"""A file written atomically (`common.data_dir.write_atomically`: a new file beside it, synced,
renamed over it) is whole or not there: a write to a nearly full disk may take only part of the
bytes and say so by its count alone, and the short file was once synced and renamed over the good
one (peers.dat, upgrade.json, snapshots, pending blocks, key files). A child process with a small
RLIMIT_FSIZE stands in for the full disk: its writes past the limit are short, then EFBIG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import errno, resource, signal, sys
from pathlib import Path
from snode.common.data_dir import write_atomically
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
target = Path(sys.argv[1])
try:
    write_atomically(target, b"n" * 10_000)
except OSError as err:
    print("refused", errno.errorcode.get(err.errno, err.errno))
else:
    print("written")
"""


def test_a_short_write_leaves_the_old_file_whole_and_no_new_one(tmp_path: Path) -> None:
    target = tmp_path / "peers.dat"
    target.write_bytes(b"o" * 1_000)
    done = subprocess.run([sys.executable, "-c", CHILD, str(target)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused", "EFBIG"], done.stdout
    assert target.read_bytes() == b"o" * 1_000, "the old file was replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["peers.dat"], "a temporary file was left"


def test_a_write_within_the_limit_replaces_the_file(tmp_path: Path) -> None:
    target = tmp_path / "peers.dat"
    target.write_bytes(b"o" * 1_000)
    child = CHILD.replace("10_000", "3_000")
    done = subprocess.run([sys.executable, "-c", child, str(target)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["written"], (done.stdout, done.stderr)
    assert target.read_bytes() == b"n" * 3_000
