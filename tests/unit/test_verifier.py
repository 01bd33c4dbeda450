"""The verifier pool: signature checks in worker processes, answers in order, inline fallback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from snode.core.crypto import SigningKey
from snode.core.transition import SigCheck
from snode.node import verifier as verifier_module
from snode.node.verifier import INLINE_BELOW, VerifierPool
from snode.node.verify_worker import ANSWER, HEADER
from tests.functional.framework import process_gone

KEY = SigningKey(bytes(range(32)))


def checks(count: int, bad: tuple[int, ...] = ()) -> list[SigCheck]:
    """`count` checks of distinct messages; those at the `bad` indexes carry a wrong signature."""
    out = []
    for i in range(count):
        message = i.to_bytes(32, "big")
        signature = KEY.sign(message if i not in bad else b"another message")
        out.append(SigCheck(KEY.public, message, signature, f"check {i}"))
    return out


@pytest.fixture
def pool() -> Iterator[VerifierPool]:
    verifier = VerifierPool(2)
    yield verifier
    verifier.close()


def test_small_batches_are_checked_inline_without_workers(pool: VerifierPool) -> None:
    assert pool(checks(INLINE_BELOW - 1)) == -1
    assert pool(checks(10, bad=(7,))) == 7
    assert pool.submit(checks(3, bad=(0,))).result() == 0
    assert pool.worker_pids() == []


def test_a_large_batch_is_split_over_the_workers(pool: VerifierPool) -> None:
    assert pool(checks(300)) == -1
    assert len(pool.worker_pids()) == 2
    # The first bad one counts, whichever worker has it.
    assert pool(checks(300, bad=(250, 290))) == 250
    assert pool(checks(300, bad=(20, 250))) == 20


def test_answers_come_back_in_order_whichever_is_waited_for_first(pool: VerifierPool) -> None:
    batches = [checks(100, bad=(i * 10,) if i % 2 else ()) for i in range(6)]
    pending = [pool.submit(batch) for batch in batches]
    # Waiting for the last first reads the others' answers on the way.
    assert pending[5].result() == 50
    assert [p.result() for p in pending] == [-1, 10, -1, 30, -1, 50]


def test_a_killed_worker_is_replaced_and_its_batches_checked_inline(
    pool: VerifierPool, caplog: pytest.LogCaptureFixture
) -> None:
    assert pool(checks(200)) == -1
    victim = pool.worker_pids()[0]
    # Whether the kill has landed when the next batch is handed over or only later, the pool
    # sees a broken pipe or the end of its answers: both paths end in the same results.
    os.kill(victim, signal.SIGKILL)
    pending = [pool.submit(checks(100, bad=(i,))) for i in range(4)]
    assert [p.result() for p in pending] == [0, 1, 2, 3]
    assert "verify worker" in caplog.text and "inline" in caplog.text
    assert victim not in pool.worker_pids()
    assert pool(checks(300, bad=(299,))) == 299
    assert len(pool.worker_pids()) == 2


def test_close_stops_the_workers(pool: VerifierPool) -> None:
    assert pool(checks(200)) == -1
    pids = pool.worker_pids()
    pool.close()
    assert all(process_gone(pid) for pid in pids)
    # After close, checks still get answers (inline).
    assert pool(checks(200, bad=(5,))) == 5


def test_a_worker_ends_when_its_daemon_closes_the_pipe() -> None:
    worker = subprocess.Popen(
        [sys.executable, "-m", "snode.node.verify_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        import msgspec

        body = msgspec.msgpack.encode([(c.public, c.message, c.signature) for c in checks(5, bad=(3,))])
        assert worker.stdin is not None and worker.stdout is not None
        worker.stdin.write(HEADER.pack(len(body)) + body)
        worker.stdin.flush()
        assert ANSWER.unpack(worker.stdout.read(ANSWER.size))[0] == 3
        worker.stdin.close()
        assert worker.wait(10) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        for stream in (worker.stdin, worker.stdout):
            if stream is not None:
                stream.close()


def test_start_brings_the_workers_up_before_the_first_batch(pool: VerifierPool) -> None:
    pool.start()
    pids = pool.worker_pids()
    assert len(pids) == 2
    pool.start()  # once only
    assert pool.worker_pids() == pids
    assert pool(checks(300, bad=(123,))) == 123
    assert pool.worker_pids() == pids
    pool.close()
    pool.start()  # a closed pool stays closed
    assert pool.worker_pids() == []


def test_workers_that_cannot_start_leave_the_checks_inline(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1_000.0]
    pool = VerifierPool(2, clock=lambda: now[0])  # a fake clock times the retry
    try:
        with monkeypatch.context() as patch:
            patch.setattr(sys, "executable", "/nonexistent/python")
            pool.start()
            assert pool.worker_pids() == []
            assert "cannot start a signature worker process" in caplog.text
            assert pool(checks(300, bad=(211,))) == 211  # inline
            assert pool.submit(checks(100)).result() == -1
        assert pool(checks(300, bad=(5,))) == 5
        assert pool.worker_pids() == [], "not tried again before RETRY_START_S"
        now[0] += verifier_module.RETRY_START_S
        assert pool(checks(300, bad=(7,))) == 7
        assert len(pool.worker_pids()) == 2
    finally:
        pool.close()
