"""Signature checks in worker processes, so they run beside the node's own work.

Threads cannot do this: libsodium releases the GIL inside a check, but a verify thread needs the
GIL back between two checks, and while the node's thread applies blocks it waits up to the
interpreter's switch interval for it (measured: verification fell to a few hundred checks per
second). Worker processes have no such wait, so a sync batch's signatures are checked while the
node applies its blocks and writes them to the store (DESIGN.md section 10's sync target).

Small batches (a block relayed at the tip, a mempool transaction) are checked inline: a hand-off
costs more than it saves.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import msgspec

import snode
from snode.core.transition import SigCheck, verify_serially
from snode.node.verify_worker import ANSWER, HEADER, _read_exactly

log = logging.getLogger(__name__)

INLINE_BELOW: Final = 64
"""Batches smaller than this are verified on the calling thread: a hand-off costs more."""
MAX_WORKERS: Final = 4
PIPE_BYTES: Final = 1 << 20
"""Request pipe size asked for (Linux): a whole sync batch's checks fit, so handing them over
never waits for a worker that is still busy with the batch before."""
STOP_WAIT_S: Final = 2.0
RETRY_START_S: Final = 60.0
"""After workers failed to start (out of processes or memory), checks run inline this long
before starting them is tried again."""


@dataclass(frozen=True, slots=True)
class VerifierLimits:
    """A worker pool's bounds (`VerifierPool`); tests pass small ones."""

    inline_below: int = INLINE_BELOW
    max_workers: int = MAX_WORKERS
    pipe_bytes: int = PIPE_BYTES
    stop_wait_s: float = STOP_WAIT_S
    retry_start_s: float = RETRY_START_S


DEFAULT_LIMITS: Final = VerifierLimits()


def default_workers(limits: VerifierLimits = DEFAULT_LIMITS) -> int:
    """One worker per core, at most `limits.max_workers` (MAX_WORKERS)."""
    return max(1, min(os.cpu_count() or 1, limits.max_workers))


class Pending:
    """The answer to one submitted batch: `result()` is the index of its first bad signature,
    or -1 when all are good."""

    __slots__ = ("checks", "_worker", "_value")

    def __init__(self, checks: Sequence[SigCheck], worker: _Worker | None, value: int | None) -> None:
        self.checks = checks
        self._worker = worker
        self._value = value

    @property
    def done(self) -> bool:
        """Whether the answer is here (`result()` will not wait)."""
        return self._value is not None

    def result(self) -> int:
        """Wait for the answer (verifying inline if the worker is gone)."""
        while self._value is None:
            worker = self._worker
            if worker is None:
                continue  # fail() answered it this moment (it sets the value before dropping the worker)
            with worker.reading:
                if self._value is None and not worker.read_answer() and self._value is None:
                    self._value = verify_serially(self.checks)
        return self._value

    def _answer(self, value: int) -> None:
        self._value = value


class Spread:
    """The answer to a batch handed over in parts (`spread`): `result()` is the index of its
    first bad signature, or -1."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[tuple[int, Pending]]) -> None:
        self.parts = parts
        """(index of the part's first check, its answer), in order."""

    @property
    def done(self) -> bool:
        """Whether every part's answer is here (`result()` will not wait)."""
        return all(pending.done for _, pending in self.parts)

    def result(self) -> int:
        """Wait for the parts in order; the first bad signature's index in the whole batch."""
        for start, pending in self.parts:
            bad = pending.result()
            if bad >= 0:
                return start + bad
        return -1


def spread(verifier: Verifier, checks: Sequence[SigCheck], ways: int, *, inline_below: int = INLINE_BELOW) -> Spread:
    """Hand `checks` to `verifier` in at most `ways` parts (one per worker), each large enough to
    go to a worker rather than be checked inline (`inline_below` checks at least)."""
    ways = max(1, min(ways, len(checks) // inline_below))
    step = max(1, -(-len(checks) // ways))
    return Spread([(start, verifier.submit(checks[start:start + step])) for start in range(0, len(checks), step)])


class Verifier(Protocol):
    """What the node needs of a signature verifier: a BatchVerifier (`verifier(checks)` is the
    index of the first bad signature, or -1) that can also take a batch and answer later."""

    def __call__(self, checks: Sequence[SigCheck]) -> int:
        """Check now."""
        ...

    def submit(self, checks: Sequence[SigCheck]) -> Pending:
        """Start checking; `result()` of the answer waits for it."""
        ...

    def start(self) -> None:
        """Get ready for many checks (a sync begins)."""
        ...

    def close(self) -> None:
        """Release whatever it holds."""
        ...


class InlineVerifier:
    """Every check on the calling thread: for tests and for a simulation of many nodes in one
    process (no worker processes)."""

    def __call__(self, checks: Sequence[SigCheck]) -> int:
        """Check now, in order."""
        return verify_serially(checks)

    def submit(self, checks: Sequence[SigCheck]) -> Pending:
        """Checked at once; the answer is ready."""
        return Pending(checks, None, verify_serially(checks))

    def start(self) -> None:
        """Nothing to start."""

    def close(self) -> None:
        """Nothing to release."""



class _Worker:
    """One worker process and the batches it has not answered yet, in order."""

    def __init__(self, index: int, pipe_bytes: int = PIPE_BYTES) -> None:
        self.pipe_bytes = pipe_bytes
        self.reading = threading.RLock()
        """Held while an answer is read: one reader at a time. Requests are written under the
        pool's lock, so a thread waiting for this worker's answer holds up neither the other
        workers' readers nor a new request (the event loop hands proofs over while a thread
        waits for the batch before)."""
        env = dict(os.environ)
        # The worker imports snode from where this process did (an installed package or a
        # source tree on PYTHONPATH alike).
        root = str(Path(snode.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "snode.node.verify_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env,
            # Same session as the daemon: with the kernel's autogroup scheduling a session of
            # its own would get an equal share of the CPU with the daemon, whatever its nice
            # value says. (A Ctrl-C at the terminal reaches the workers too; they ignore it and
            # end when the daemon closes their pipe.)
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.requests = self.process.stdin
        self.answers = self.process.stdout
        self.waiting: collections.deque[Pending] = collections.deque()
        self.alive = True
        self.name = f"verify worker {index} (pid {self.process.pid})"
        self._set_pipe_size()

    def _set_pipe_size(self) -> None:
        try:
            import fcntl

            fcntl.fcntl(self.requests.fileno(), fcntl.F_SETPIPE_SZ, self.pipe_bytes)
        except (ImportError, AttributeError, OSError):
            pass  # not Linux, or above /proc/sys/fs/pipe-max-size: the default pipe works too

    def send(self, checks: Sequence[SigCheck], body: bytes) -> Pending:
        pending = Pending(checks, self, None)
        self.waiting.append(pending)  # before the request: a reader may see its answer at once
        try:
            view = memoryview(HEADER.pack(len(body)) + body)
            while view:
                written = self.requests.write(view)
                view = view[written or 0:]
        except (OSError, ValueError) as err:  # ValueError: the pipe was closed (the pool is closing)
            self.fail(f"cannot be written to ({err})")  # answers every waiting batch, this one too
        return pending

    def read_answer(self) -> bool:
        """Read the oldest unanswered batch's answer; False when the worker is gone (every
        unanswered batch is then verified inline by its waiter)."""
        if not self.alive:
            return False
        try:
            data = _read_exactly(self.answers, ANSWER.size)
        except (OSError, ValueError):  # ValueError: the pipe was closed (the pool is closing)
            data = None
        if data is None:
            self.fail("ended")
            return False
        self.waiting.popleft()._answer(ANSWER.unpack(data)[0])
        return True

    def fail(self, why: str) -> None:
        with self.reading:
            if self.alive:
                log.warning("%s %s; its signature checks are done inline until it is restarted", self.name, why)
            self.alive = False
            while self.waiting:
                pending = self.waiting.popleft()
                pending._value = verify_serially(pending.checks)
                pending._worker = None
            self.stop(0.0)

    def stop(self, wait_s: float) -> None:
        """Close its pipe (it exits at the end of its input); kill it by pid if it lingers."""
        self.alive = False
        for stream in (self.requests, self.answers):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.process.wait(wait_s)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()


class VerifierPool:
    """A BatchVerifier (and `submit` for batches checked while the caller goes on) over worker
    processes, started when the first large batch comes. Safe from several threads (the
    store thread checks blocks while the event loop checks proofs and mempool transactions):
    one lock orders the requests and the workers' starts, and each worker's answers are read
    under its own lock.

    `limits`: its bounds (`VerifierLimits`); `clock`: the monotonic seconds that time a retry to
    start workers (tests pass a fake one)."""

    def __init__(self, workers: int | None = None, *, limits: VerifierLimits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.RLock()
        self.size = workers if workers is not None else default_workers(limits)
        self._workers: list[_Worker] = []
        self._next = 0
        self._encoder = msgspec.msgpack.Encoder()
        self._closed = False
        self._no_start_until = 0.0

    def submit(self, checks: Sequence[SigCheck]) -> Pending:
        """Hand `checks` to the next worker; small batches are checked at once, inline (so
        are all while no worker can be started)."""
        if len(checks) < self.limits.inline_below or self._closed:
            return Pending(checks, None, verify_serially(checks))
        with self._lock:
            worker = self._worker()
            if worker is None:
                return Pending(checks, None, verify_serially(checks))
            body = self._encoder.encode([(c.public, c.message, c.signature) for c in checks])
            return worker.send(checks, body)

    def __call__(self, checks: Sequence[SigCheck]) -> int:
        """Index of the first bad signature in `checks`, or -1: large batches are split over
        the workers."""
        inline_below = self.limits.inline_below
        if len(checks) < inline_below:
            return verify_serially(checks)
        return spread(self, checks, self.size, inline_below=inline_below).result()

    def start(self) -> None:
        """Start the workers now instead of at the first large batch: a sync calls this as it
        begins, so that they come up (about 0.1 s) while its first download is on its way.
        If they cannot be started, checks run inline (logged) and starting is tried again
        after `limits.retry_start_s` (RETRY_START_S)."""
        with self._lock:
            self._start()

    def _start(self) -> None:
        if self._workers or self._closed or self._clock() < self._no_start_until:
            return
        started: list[_Worker] = []
        try:
            for index in range(self.size):
                started.append(_Worker(index, self.limits.pipe_bytes))
        except OSError as err:
            self._cannot_start(err)
            for worker in started:
                worker.stop(self.limits.stop_wait_s)
            return
        self._workers = started

    def _cannot_start(self, err: OSError) -> None:
        retry = self.limits.retry_start_s
        self._no_start_until = self._clock() + retry
        log.warning("cannot start a signature worker process (%s); checking signatures on the "
                    "daemon's own thread, trying again in %.0f s", err, retry)

    def _worker(self) -> _Worker | None:
        """The next worker (replacing it if it died), or None when none can be started."""
        self._start()
        if not self._workers:
            return None
        self._next = (self._next + 1) % len(self._workers)
        worker = self._workers[self._next]
        if not worker.alive:
            if self._clock() < self._no_start_until:
                return None
            try:
                worker = self._workers[self._next] = _Worker(self._next, self.limits.pipe_bytes)
            except OSError as err:
                self._cannot_start(err)
                return None
        return worker

    def worker_pids(self) -> list[int]:
        """Process ids of the running workers (for the tests and the benchmark)."""
        return [w.process.pid for w in self._workers if w.alive]

    def close(self) -> None:
        """Stop the workers (unanswered batches are dropped)."""
        with self._lock:
            self._closed = True
            for worker in self._workers:
                worker.stop(self.limits.stop_wait_s)
            self._workers = []
