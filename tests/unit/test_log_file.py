"""The data dir's log file (`app.runtime.LogFile`): one that cannot be opened is one line at start,
one that cannot be written (a full disk) is said once on stderr, not with logging's traceback of
15 lines for every line logged."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import pytest

from snode.app.runtime import LogFile, setup_logging
from snode.common.endpoints import ConfigError


def test_a_log_file_that_cannot_be_written_is_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    handler = LogFile("/dev/full")  # every write: ENOSPC
    logger = logging.getLogger("test_log_file.full")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for n in range(5):
            logger.warning("line %d", n)
    finally:
        logger.removeHandler(handler)
        stream, handler.stream = handler.stream, None
        with contextlib.suppress(OSError):  # its buffered bytes cannot go anywhere either
            if stream is not None:
                stream.close()
    err = capsys.readouterr().err
    assert err.count("cannot write the log file /dev/full (No space left on device)") == 1, err
    assert "Logging error" not in err and "Traceback" not in err


def test_a_log_file_that_cannot_be_opened_is_one_line_at_start(tmp_path: Path) -> None:
    folder = tmp_path / "snoded.log"
    folder.mkdir()
    with pytest.raises(ConfigError, match="cannot write the log file .*snoded.log: Is a directory"):
        setup_logging(2, folder)
