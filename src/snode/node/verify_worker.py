"""A signature-checking worker process of `VerifierPool` (`python -m snode.node.verify_worker`).

It reads requests from stdin and writes one answer per request to stdout, in order; it exits
when stdin reaches its end, which is also what happens when its daemon dies, however it dies.
A request is a 4-byte little-endian length and a msgpack array of [public, message, signature]
triples; an answer is the 4-byte little-endian signed index of the first bad signature, or -1.
Only its own daemon writes to it (a pipe), so requests are trusted.
"""

from __future__ import annotations

import os
import signal
import struct
import sys
from collections.abc import Iterator
from typing import IO, Final

import msgspec

from snode.core.crypto import verify_uncached

HEADER: Final = struct.Struct("<I")
ANSWER: Final = struct.Struct("<i")
NICENESS: Final = 10


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    """`size` bytes, or None at the end of the stream."""
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def read_frames(stream: IO[bytes]) -> Iterator[bytes]:
    """The bodies of the frames on `stream` (a 4-byte little-endian length, then the body) until it ends."""
    while True:
        header = _read_exactly(stream, HEADER.size)
        if header is None:
            return
        body = _read_exactly(stream, HEADER.unpack(header)[0])
        if body is None:
            return
        yield body


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """Answer requests until their stream ends."""
    decoder = msgspec.msgpack.Decoder(list[tuple[bytes, bytes, bytes]])
    for body in read_frames(requests):
        bad = -1
        for i, (public, message, signature) in enumerate(decoder.decode(body)):
            if not verify_uncached(public, message, signature):
                bad = i
                break
        answers.write(ANSWER.pack(bad))


def main() -> None:
    # Below the daemon's own priority: the daemon's thread (applying blocks, the store, RPC,
    # P2P) must never queue for a core behind its verifiers, which take every cycle it leaves.
    try:
        os.nice(NICENESS)
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with open(0, "rb", buffering=0) as requests, open(1, "wb", buffering=0) as answers:
        try:
            serve(requests, answers)
        except BrokenPipeError:
            pass  # the daemon is gone: nothing is waiting for answers
    sys.exit(0)


if __name__ == "__main__":
    main()
