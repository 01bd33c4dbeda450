"""Files on the operator's machine: where a network's data dir is by default, and whether a
private file (a key, a wallet, a cookie) is kept from the other users of the machine."""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_MODE = 0o600


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
