"""The daemon's process plumbing: listening sockets, the console check, logging, the event loop."""

from __future__ import annotations

import asyncio
import atexit
import logging
import logging.handlers
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Any

from snode.common.endpoints import ConfigError, Endpoint
from snode.common.logs import LIMITED, EscapingFormatter, RepeatLimiter

LOG_LEVELS = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG, 4: logging.DEBUG}


def bind_socket(option: str, endpoint: Endpoint) -> socket.socket:
    """A listening TCP socket, or ConfigError naming the option (port in use, no such address)."""
    family = socket.AF_INET6 if ":" in endpoint.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((endpoint.host, endpoint.port))
        sock.listen(128)
    except OSError as err:
        sock.close()
        if err.errno == 98:  # EADDRINUSE
            raise ConfigError(f"{option}: {endpoint} is already in use by another program") from None
        raise ConfigError(f"{option}: cannot listen on {endpoint}: {err.strerror}") from None
    sock.setblocking(False)
    return sock


def stdin_is_console() -> bool:
    """True when stdin can carry console commands: a pipe, or a terminal whose foreground job
    is us. Reading a terminal from a background job stops it (SIGTTIN), and a regular file or
    /dev/null is no console (the event loop cannot even watch one)."""
    try:
        fd = sys.stdin.fileno()
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            return True
        return os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


class _QuietClientErrors(logging.Filter):
    """aiohttp logs a malformed request from a client as an ERROR with a traceback; for an
    operator that is one line about the client, not an alert about the daemon: an INFO line,
    counted by the repeat limiter (any client can send one again and again)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            err = record.exc_info[1]
            record.msg = "bad request from a client: %s"
            record.args = (f"{type(err).__name__}: {err}",)
            record.exc_info = None
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.__dict__.update(LIMITED)
        return True


class LogFile(logging.handlers.WatchedFileHandler):
    """The data dir's log file. A write that fails (a full disk) is said once on stderr, and again
    once it works, not with logging's traceback for every line."""

    failing = False
    _failed = False

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        try:
            super().emit(record)  # `handleError` on a failed write...
        except OSError:  # ...but a failed reopen (the file renamed, its folder gone) raises
            self.handleError(record)
        if self.failing and not self._failed:
            self.failing = False
            sys.stderr.write(f"snoded: the log file {self.baseFilename} is written again\n")

    def handleError(self, record: logging.LogRecord) -> None:
        self._failed = True
        if not self.failing:
            self.failing = True
            err = sys.exc_info()[1]
            why = err.strerror if isinstance(err, OSError) and err.strerror else err
            sys.stderr.write(f"snoded: cannot write the log file {self.baseFilename} ({why}); its lines go to "
                             "stderr only until it can be written again\n")


def setup_logging(level: int, log_file: Path) -> None:
    """Log to stderr and to the data dir's log file: every message escaped, repeated warnings
    counted (`common.logs`). The file is reopened when it is renamed or removed (logrotate's
    default `create` mode: no signal needed, nothing lost; see docs/OPERATOR.md)."""
    fmt = EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    limiter = RepeatLimiter()
    atexit.register(limiter.close)  # before logging's own exit hook (last in, first out)
    root = logging.getLogger()
    root.setLevel(LOG_LEVELS[level])
    try:
        file_handler = LogFile(log_file)
    except OSError as err:
        raise ConfigError(f"--data-dir: cannot write the log file {log_file}: {err.strerror or err}") from None
    for handler in (logging.StreamHandler(sys.stderr), file_handler):
        handler.setFormatter(fmt)
        handler.addFilter(limiter)
        root.addHandler(handler)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.server").addFilter(_QuietClientErrors())


def run_loop(main: Any) -> int:
    """Run the daemon's main coroutine on uvloop where it is installed (about 1.5x the HTTP
    throughput of the stdlib loop), else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
