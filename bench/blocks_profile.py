"""Where one service-node daemon's CPU goes per block (`python -m bench --profile blocks`).

The daemon runs with SNODE_PROFILE (src/snode/app/profiling.py: cProfile on every thread, on
each thread's CPU clock, so the machine's load does not skew it) from its start to a clean stop
just after the measured blocks. Each part below is the CPU time inside its entry points
(inclusive: "signatures" is also inside "template check" and "apply"), divided by the blocks the
daemon applied; start-up is one part of its own.
"""

from __future__ import annotations

import pstats
from pathlib import Path
from typing import Final

from rich.console import Console

PARTS: Final = (
    # (part, entry points: (the end of the function's file path, its name); its time inclusive)
    ("template check", (("snode/node/node.py", "check_template"),)),
    ("block apply, store write and commit (store thread)", (("concurrent/futures/thread.py", "_worker"),)),
    ("  of which store write and commit", (("snode/node/node.py", "store_batch"),)),
    ("block adopted (event loop)", (("snode/node/node.py", "adopt_batch"),)),
    ("block relay from each peer (P2P handler)", (("snode/net/relay.py", "_on_new_block"),)),
    ("signatures verified (libsodium)", (("nacl/bindings/crypto_sign.py", "crypto_sign_open"),)),
    ("uptime proofs: gossip received", (("snode/net/relay.py", "_on_proof"),)),
    ("uptime proofs: intake (checks, accept)", (("snode/services/proof_intake.py", "_flush"),)),
    ("uptime proofs: own, sent", (("snode/services/sn_duties.py", "run_proofs"),)),
    ("rounds, template and votes (producer)", (("snode/services/producer.py", "_do"),
                                              ("snode/services/producer.py", "_on_message"))),
    ("checkpoints", (("snode/services/checkpoints.py", "_on_checkpoint"),
                     ("snode/services/checkpoints.py", "_on_blocks"),
                     ("snode/services/checkpoints.py", "_on_vote"))),
    ("reachability tests", (("snode/services/reachability.py", "_test"),)),
    ("quorumnet CurveZMQ handshakes (ZAP)", (("zmq/auth/asyncio.py", "__handle_zap"),  # code before PERFORMANCE.md 2c
                                            ("snode/net/quorumnet.py", "_answer_zap"))),
    ("logging", (("logging/__init__.py", "_log"),)),
    ("event hub (publish, with subscribers)", (("snode/common/events.py", "publish"),)),
    ("admin RPC", (("aiohttp/web_protocol.py", "_handle_request"),)),
    ("P2P: every message read and framed", (("snode/net/peers.py", "_next_message"),)),
)
COUNTS: Final = (
    ("P2P messages handled", ("snode/net/peers.py", "_handle")),
    ("signatures verified", ("nacl/bindings/crypto_sign.py", "crypto_sign_open")),
    ("blocks received from peers", ("snode/net/relay.py", "_on_new_block")),
    ("uptime proofs received from peers", ("snode/net/relay.py", "_on_proof")),
    ("  announcements received (ProofInv)", ("snode/net/relay.py", "_on_proof_inv")),
    ("  proofs asked of us (GetProofs)", ("snode/net/relay.py", "_on_get_proofs")),
    ("  answers received (Proofs)", ("snode/net/relay.py", "_on_proofs")),
    ("P2P frames sent", ("snode/net/peer.py", "send_frame")),
    ("P2P writes (a peer's frames of a turn)", ("snode/net/peer.py", "_flush")),
    ("quorumnet messages sent", ("snode/net/quorumnet.py", "send")),
    ("quorumnet messages received", ("snode/net/quorumnet.py", "_deliver")),
    ("event hub events", ("snode/common/events.py", "publish")),
)


def split(prof: Path, blocks: int) -> list[tuple[str, float]]:
    """(part, CPU ms per block) with the total first, then (count, per block) at the end."""
    table = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]  # the raw table; typeshed leaves it out

    def rows_of(path_end: str, name: str) -> list[tuple[int, int, float, float]]:
        return [row[:4] for (path, _, fn), row in table.items() if path.endswith(path_end) and fn == name]

    total = sum(row[2] for row in table.values())
    out = [("total CPU (all threads, profiled)", 1000 * total / blocks)]
    for part, entries in PARTS:
        seconds = sum(row[3] for entry in entries for row in rows_of(*entry))
        out.append((part, 1000 * seconds / blocks))
    for what, entry in COUNTS:
        out.append((f"#{what}", sum(row[1] for row in rows_of(*entry)) / blocks))
    return out


def report(rows: list[tuple[str, float]], console: Console) -> None:
    console.print("node2's CPU per block (cProfile on the CPU clock, start-up included; parts are "
                  "inclusive and overlap):")
    for part, value in rows:
        if part.startswith("#"):
            console.print(f"  {part[1:]:<50} {value:7.1f} a block")
        else:
            console.print(f"  {part:<50} {value:7.2f} ms")
