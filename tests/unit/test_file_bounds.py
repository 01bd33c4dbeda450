"""Files the daemon, the wallet and snode-cli read are read up to a bound (DESIGN.md section 11,
issue #33): a key, login, cookie, password or seed-words file over 4 KiB, a genesis document,
wallet file or partition list over 16 MiB is one line naming the file, never read whole."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

import pytest

from snode.api.credentials import read_cookie, read_login_file
from snode.app.partition import read_denied
from snode.common.endpoints import ConfigError
from snode.common.files import LARGE_FILE_BYTES, SMALL_FILE_BYTES, read_bounded


def test_a_file_at_the_bound_is_read_one_past_it_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * SMALL_FILE_BYTES)
    assert len(read_bounded(path, SMALL_FILE_BYTES)) == SMALL_FILE_BYTES
    path.write_bytes(b"x" * (SMALL_FILE_BYTES + 1))
    with pytest.raises(OSError) as refused:
        read_bounded(path, SMALL_FILE_BYTES)
    assert refused.value.errno == errno.EFBIG and refused.value.strerror == "it is larger than 4,096 bytes"


def test_a_huge_login_or_cookie_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "login"
    path.write_text("user:" + "p" * 10_000 + "\n")
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="--rpc-login-file: cannot read .*: it is larger than 4,096 bytes"):
        read_login_file(str(path), "--rpc-login-file")
    with pytest.raises(ConfigError, match="cannot read the RPC cookie .*: it is larger than 4,096 bytes"):
        read_cookie(path)


def test_a_huge_partition_list_leaves_the_partition_as_it_was(tmp_path: Path, caplog: Any) -> None:
    path = tmp_path / "deny"
    with open(path, "wb") as f:
        f.truncate(LARGE_FILE_BYTES + 1)  # sparse: no disk used
    caplog.set_level(logging.WARNING)
    assert read_denied(path) is None
    assert "larger than" in caplog.text
