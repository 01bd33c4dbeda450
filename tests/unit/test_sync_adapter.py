"""The sync service's own bookkeeping around the machine (`services.sync.Syncer`), with stand-ins
for the peer manager, relay and writer: the target is the best proven height, never a claim; a
sync waiting on a peer that sent and proved nothing moves when another proves a height; a late
answer to a request the sync gave up on never passes for the answer to the next one.
"""

from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace
from typing import Any

from snode.net import protocol as P
from snode.services.sync import Syncer


def _peer(key: str, *, height: int = 0, proven: int = 0) -> Any:
    return SimpleNamespace(name=f"{key}:9230", key=key, height=height, proven=proven, hello=object(),
                           writer=SimpleNamespace(is_closing=lambda: False), blocks_owed=0, pending=None,
                           tip_header=None)


def _syncer(peers: list[Any], height: int = 0) -> tuple[Syncer, list[int]]:
    targets: list[int] = []
    node = SimpleNamespace(height=height, hub=SimpleNamespace(subscribe=lambda kind, handler: None),
                           note_sync_target=targets.append)
    manager = SimpleNamespace(on=lambda kind, handler: None, peers=peers)
    return Syncer(manager, SimpleNamespace(), SimpleNamespace(node=node)), targets  # type: ignore[arg-type]


def test_the_target_is_the_best_proven_height_never_a_claim() -> None:
    liar, honest = _peer("10.0.0.1", height=10**9), _peer("10.0.0.2", height=50, proven=50)
    syncer, targets = _syncer([liar, honest])
    syncer._update_target()
    assert targets == [50]
    syncer.backoffs.fail(honest.key)
    syncer._update_target()
    assert targets[-1] == 0, "a backed-off address's proof does not count either"


def test_a_sync_stuck_on_a_silent_hint_moves_when_a_peer_proves_a_height() -> None:
    liar, honest = _peer("10.0.0.1", height=10**9), _peer("10.0.0.2", height=50, proven=50)
    syncer, _ = _syncer([liar, honest])

    async def proved_while(delivered: int) -> bool:
        run = SimpleNamespace(peer=liar, machine=SimpleNamespace(delivered=delivered), preempt=asyncio.Event())
        syncer._run = run  # type: ignore[assignment]
        syncer._proved(honest)
        return run.preempt.is_set()

    assert asyncio.run(proved_while(0)), "the sync kept waiting on a peer that sent nothing"
    assert not asyncio.run(proved_while(500)), "a peer that delivers is not left for another"


def test_a_late_answer_to_a_request_given_up_on_is_dropped() -> None:
    peer = _peer("10.0.0.1")
    syncer, _ = _syncer([peer])
    late, answer = P.Blocks([], 1), P.Blocks([os.urandom(8)], 2)

    async def run() -> P.Blocks:
        peer.blocks_owed = 1
        peer.pending = asyncio.get_running_loop().create_future()
        await syncer._on_blocks(peer, late)
        assert not peer.pending.done() and peer.blocks_owed == 0
        await syncer._on_blocks(peer, answer)
        result: P.Blocks = await peer.pending
        return result

    assert asyncio.run(run()) is answer
