"""`python -m bench.compiled_bench [--rounds N]`: the compiled modules (`make compiled`,
`snode.common.compiled.COMPILABLE`) against their sources, operation by operation, in the same
minutes (issue #37 item 4).

Each round runs one child process on the sources (SNODE_PURE_PYTHON=1) and one on the compiled
build, alternately; each child times, in process, what the profile of PERFORMANCE.md 2i names in
these modules: a read of one small frame through `PeerProtocol.data_received` and `Peer.take`
(the P2P reading), three frames queued with `Peer.send_frame` and written by one `_flush`, an
event published to three subscribers (`EventHub.publish`), an uptime proof decoded strictly
and encoded (`core.encoding`), and a flood bucket's `take`. Printed: the median ns an operation
of each, pure and compiled, and their ratio. Without a build it says so and times the sources.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from snode.common import compiled

ROUNDS = 5
OPS = ("read a frame", "write 3 frames", "publish an event", "decode+encode a proof", "bucket take")


class _Transport:
    """What a Peer reads of its transport."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.9", 9230) if name == "peername" else default

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def is_closing(self) -> bool: return False
    def write(self, data: bytes) -> None: ...
    def get_write_buffer_size(self) -> int: return 0


@dataclass(frozen=True, slots=True)
class _Event:
    height: int


def _timed(op: Callable[[], object], count: int) -> float:
    """ns per call of `op`, the best of three runs of `count` calls."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter_ns()
        for _ in range(count):
            op()
        best = min(best, (time.perf_counter_ns() - start) / count)
    return best


async def _child(count: int) -> dict[str, float]:
    """Each operation's ns in this process (whichever build it imported)."""
    from snode.common.events import EventHub
    from snode.core.encoding import decode, encode
    from snode.core.proofs import UptimeProof
    from snode.net import protocol as P
    from snode.net.peer import PeerProtocol, TokenBucket

    proof = UptimeProof(bytes(32), 1_700_000_000, "203.0.113.7", 9230, 9231, "0.2.0 snoded@1", bytes(64))
    frame = P.frame(P.Proof(proof, relayed=True))
    reader = PeerProtocol(outbound=True)
    reader.connection_made(_Transport())  # type: ignore[arg-type]
    peer = reader.peer
    assert peer is not None
    peer.open_up(P.MAX_FRAME)

    def read() -> None:
        reader.data_received(frame)
        peer.take()

    def write() -> None:
        peer.send_frame(frame)
        peer.send_frame(frame)
        peer.send_frame(frame)
        peer._flush()

    hub, event = EventHub(), _Event(1)
    for _ in range(3):
        hub.subscribe(_Event, lambda e: None)
    encoded = encode(proof)
    bucket = TokenBucket(1e9, 1e9, 1e9, 0.0)
    ops: dict[str, Callable[[], object]] = {
        "read a frame": read, "write 3 frames": write, "publish an event": lambda: hub.publish(event),
        "decode+encode a proof": lambda: encode(decode(encoded, UptimeProof)),
        "bucket take": lambda: bucket.take(1.0),
    }
    out = {}
    for name, op in ops.items():
        out[name] = _timed(op, count)
        await asyncio.sleep(0)  # the write's scheduled flushes run (empty)
    return out


def _run_child(pure: bool, count: int) -> dict[str, float]:
    env = {**os.environ}
    env.pop(compiled.PURE_ENV, None)
    if pure:
        env[compiled.PURE_ENV] = "1"
    done = subprocess.run([sys.executable, "-m", "bench.compiled_bench", "--child", str(count)], env=env,
                          capture_output=True, text=True, check=True, timeout=600)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compiled_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"pure/compiled pairs [{ROUNDS}]")
    parser.add_argument("--count", type=int, default=20_000, help="calls of each operation a timing")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(asyncio.run(_child(args.child))))
        return 0
    built = compiled.compiled_modules()
    print(compiled.describe() if built else "compiled: none built (`make compiled`); timing the sources only")
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for _ in range(args.rounds):
        for pure in (True, False) if built else (True,):
            runs[pure].append(_run_child(pure, args.count))
    print(f"{'operation':24} {'pure ns':>9} {'compiled ns':>12} {'pure / compiled':>16}")
    for op in OPS:
        pure_ns = statistics.median(r[op] for r in runs[True])
        if built:
            compiled_ns = statistics.median(r[op] for r in runs[False])
            print(f"{op:24} {pure_ns:9.0f} {compiled_ns:12.0f} {pure_ns / compiled_ns:15.2f}x")
        else:
            print(f"{op:24} {pure_ns:9.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
