"""Files on the operator's machine: where a network's data dir is by default, and whether a
private file (a key, a wallet, a cookie) is kept from the other users of the machine."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final

PRIVATE_MODE = 0o600

SMALL_FILE_BYTES: Final = 4_096
"""A key, a login, a cookie, a password or seed-words file is far smaller than this."""
LARGE_FILE_BYTES: Final = 16 << 20
"""A genesis document, a wallet file, a partition list: far smaller than this."""


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of `path`, read only up to `limit` + 1 (DESIGN.md section 11: bound before
    you decode, files included): OSError (EFBIG, its strerror the one line to show) for a
    larger file, as for one that cannot be read."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"it is larger than {limit:,} bytes")
    return data


def default_data_dir(network: str) -> Path:
    """~/.snode for mainnet, ~/.snode/<network> for the others (`SNODE_HOME` moves ~/.snode)."""
    base = Path(os.environ.get("SNODE_HOME", Path.home() / ".snode"))
    return base if network == "mainnet" else base / network


def too_open(path: Path, what: str) -> str | None:
    """None when only the owner may read or write `path` (or it does not exist); else the one
    line that refuses it, naming the `chmod` that fixes it.

    As OpenSSH refuses a private key whose mode lets the group or others in (any of the 077
    bits): a key that others can read is no longer this user's alone, and one they can write
    can be swapped for theirs.
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    if mode & 0o077 == 0:
        return None
    return (f"{what} {path} is open to other users of this machine (mode {mode:04o}): "
            f"run chmod 600 {path}")
