"""`PYTHONPATH=src:. python -m bench.reader_compare [--old COMMIT] [--asyncio]`: the CPU a P2P
message costs the reader, before and after it framed in `data_received` (PERFORMANCE.md 2g).

In one process, over real loopback connections: the old reader (asyncio's StreamReader, read by
the connection's task and framed by the FrameDecoder of COMMIT, loaded from git) and the new one
(`peer.PeerProtocol` framing into `Peer.inbox`), each running `PeerManager._next_message`'s steps
(wait, frame, stamp, parse, flood bucket) with no handler, alternately, five times each. The sender
is another process, so its CPU is not counted; the reader's is `time.process_time` from the go it
sends to the last message parsed. A paced sender writes each frame alone, as a daemon's peers
mostly do; the floor is a protocol that only counts the bytes: the event loop's and the kernel's
share of a read.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import ModuleType
from typing import Any

from snode.net import protocol as P
from snode.net.peer import Peer, PeerProtocol, TokenBucket

OLD_COMMIT = "b40c11d"
"""Main before the reader framed in `data_received`."""
ROUNDS = 5

SENDER = r'''
import socket, sys, time
port, pace, path = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
raw = open(path, "rb").read()
units, i = [], 0
while i < len(raw):  # the writes, each length-prefixed in the file
    n = int.from_bytes(raw[i:i + 4], "big"); units.append(raw[i + 4:i + 4 + n]); i += 4 + n
s = socket.create_connection(("127.0.0.1", port))
s.recv(1)
for unit in units:
    s.sendall(unit)
    deadline = time.perf_counter() + pace
    while time.perf_counter() < deadline:  # a pause shorter than a sleep can make
        pass
s.shutdown(socket.SHUT_WR)
s.recv(1)
s.close()
'''

Reader = Callable[[list[int], int, asyncio.Event], Coroutine[Any, Any, tuple[float, int]]]


def old_protocol(commit: str, folder: Path) -> ModuleType:
    """`snode.net.protocol` as it was at `commit`."""
    path = folder / "old_protocol.py"
    path.write_bytes(subprocess.run(["git", "show", f"{commit}:src/snode/net/protocol.py"],
                                    check=True, capture_output=True).stdout)
    spec = importlib.util.spec_from_file_location("old_protocol", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_protocol"] = module  # msgspec resolves the Structs' annotations through it
    spec.loader.exec_module(module)
    return module


def unlimited() -> TokenBucket:
    return TokenBucket(1e12, 1e12, 1e12, time.monotonic())


async def serve_until(server: asyncio.Server, ports: list[int], started: asyncio.Event,
                      done: asyncio.Future[tuple[float, int]]) -> tuple[float, int]:
    """Tell the sender where `server` listens, then wait for the reader's figures; the server
    is closed whatever happens."""
    ports.append(server.sockets[0].getsockname()[1])
    started.set()
    try:
        return await done
    finally:
        server.close()


def old_reader(old: ModuleType) -> Reader:
    async def run(ports: list[int], count: int, started: asyncio.Event) -> tuple[float, int]:
        done: asyncio.Future[tuple[float, int]] = asyncio.get_running_loop().create_future()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            decoder, inbox = old.FrameDecoder(max_frame=old.MAX_FRAME), deque[bytes]()
            bucket, got, wakes = unlimited(), 0, 0
            writer.write(b"g")
            start = time.process_time()
            while got < count:
                while not inbox:
                    data = await reader.read(min(max(decoder.needed(), 4096), 2**20))
                    if not data:
                        raise ConnectionError("closed")
                    wakes += 1
                    inbox.extend(decoder.feed(data))
                old.parse(inbox.popleft())
                bucket.take(time.monotonic())
                got += 1
            done.set_result((time.process_time() - start, wakes))
            writer.write(b"x")
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, limit=2**16)
        return await serve_until(server, ports, started, done)

    return run


async def new_reader(ports: list[int], count: int, started: asyncio.Event) -> tuple[float, int]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[tuple[float, int]] = loop.create_future()

    async def serve(peer: Peer) -> None:
        peer.open_up(P.MAX_FRAME)
        bucket, got, wakes = unlimited(), 0, 0
        peer.writer.write(b"g")
        start = time.process_time()
        while got < count:
            while not peer.inbox:
                await peer.readable()
                wakes += 1
            P.parse(peer.take())
            bucket.take(peer.last_heard)
            got += 1
        done.set_result((time.process_time() - start, wakes))
        peer.writer.write(b"x")
        peer.close()

    tasks: list[asyncio.Task[None]] = []
    server = await loop.create_server(
        lambda: PeerProtocol(outbound=False, connected=lambda p: tasks.append(loop.create_task(serve(p)))),
        "127.0.0.1", 0)
    return await serve_until(server, ports, started, done)


def floor_reader(total_bytes: int) -> Reader:
    async def run(ports: list[int], count: int, started: asyncio.Event) -> tuple[float, int]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[float, int]] = loop.create_future()

        class Count(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport, self.got, self.reads = transport, 0, 0
                transport.write(b"g")  # type: ignore[attr-defined]  # a stream's
                self.start = time.process_time()

            def data_received(self, data: bytes) -> None:
                self.got, self.reads = self.got + len(data), self.reads + 1
                if self.got >= total_bytes and not done.done():
                    done.set_result((time.process_time() - self.start, self.reads))
                    self.transport.write(b"x")  # type: ignore[attr-defined]
                    self.transport.close()

        server = await loop.create_server(Count, "127.0.0.1", 0)
        return await serve_until(server, ports, started, done)

    return run


def one(reader: Reader, path: Path, count: int, pace: float, uvloop: bool) -> tuple[float, int]:
    async def main() -> tuple[float, int]:
        ports: list[int] = []
        started = asyncio.Event()
        task = asyncio.create_task(reader(ports, count, started))
        await started.wait()
        sender = await asyncio.create_subprocess_exec(sys.executable, "-c", SENDER, str(ports[0]), str(pace), str(path))
        try:
            return await task
        finally:
            await sender.wait()

    if uvloop:
        import uvloop as uv
        return uv.run(main())
    return asyncio.run(main())


def case(name: str, frames: list[bytes], per_write: int, pace: float, readers: dict[str, Reader],
         folder: Path, uvloop: bool) -> None:
    """Each reader ROUNDS times, alternately; the median CPU a message and the task's wakes."""
    units = [b"".join(frames[i:i + per_write]) for i in range(0, len(frames), per_write)]
    path = folder / "frames.bin"
    path.write_bytes(b"".join(len(u).to_bytes(4, "big") + u for u in units))
    cpu: dict[str, list[float]] = {kind: [] for kind in readers}
    wakes: dict[str, list[int]] = {kind: [] for kind in readers}
    for _ in range(ROUNDS):
        for kind, reader in readers.items():
            seconds, woken = one(reader, path, len(frames), pace, uvloop)
            cpu[kind].append(seconds / len(frames) * 1e6)
            wakes[kind].append(woken)
    figures = "  ".join(f"{kind} {statistics.median(cpu[kind]):6.2f} us "
                        f"({statistics.median(wakes[kind]) / len(frames):.2f} wakes)" for kind in readers)
    ratio = statistics.median(cpu["new"]) / statistics.median(cpu["old"]) if "old" in cpu else 0.0
    print(f"{name:44s} {figures}" + (f"  new/old {ratio:.2f}" if ratio else ""), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--old", default=OLD_COMMIT, help=f"the commit of the old reader (default {OLD_COMMIT})")
    parser.add_argument("--asyncio", action="store_true", help="asyncio's own loop, not uvloop (the daemon's)")
    args = parser.parse_args()
    inv = P.ProofInv([(os.urandom(32), 1_800_000_000 + i) for i in range(3)])
    small = [P.frame(P.Ping(i) if i % 2 else inv) for i in range(50_000)]
    big = [P.frame(P.NewBlock(os.urandom(100_000))) for _ in range(200)]
    uvloop = not args.asyncio
    print(f"CPU a message, median of {ROUNDS} (the reader's process; {'asyncio' if args.asyncio else 'uvloop'}), "
          "and the connection task's wakes a message")
    with tempfile.TemporaryDirectory() as folder:
        readers = {"old": old_reader(old_protocol(args.old, Path(folder))), "new": new_reader}
        case("50,000 small (Ping, ProofInv), one write", small, len(small), 0, readers, Path(folder), uvloop)
        case("50,000 small, a write each, paced", small, 1, 0.0001, readers, Path(folder), uvloop)
        case("200 x 100 KB NewBlock, one write", big, len(big), 0, readers, Path(folder), uvloop)
        case("200 x 100 KB NewBlock, a write each, paced", big, 1, 0.0005, readers, Path(folder), uvloop)
        floor = {"floor": floor_reader(sum(map(len, small)))}
        case("floor: 50,000 small, a write each, paced", small, 1, 0.0001, floor, Path(folder), uvloop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
