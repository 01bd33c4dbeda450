"""Quorumnet's sockets in one process, on real CurveZMQ connections over loopback: the ZAP handler
answered on the event loop, the ROUTER drained however its FD signals, reachability probes that
end by handshake, timeout or stop. Two in-memory nodes of one chain, both registered service
nodes, each with its own QuorumNet; the daemon's event loop (uvloop) runs them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import zmq

from snode.core.crypto import x25519_public
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.net.events import QuorumMessageReceived
from snode.net.quorumnet import ADMISSIONS_BURST, MESSAGES_A_TURN, QuorumNet  # noqa: E402  (needs pyzmq)
from snode.node.node import Node
from tests.functional.framework import scaled
from tests.unit.conftest import free_port, wait_async
from tests.unit.quorumnet_pair import MEMBERS, run  # noqa: E402


def test_a_burst_larger_than_a_turn_arrives_whole_and_in_order():
    """Many messages queued at once: the ROUTER's FD signals once for all of them, so the
    receiver must take them all (over several turns of the loop), not wait for another signal."""
    count = 5 * MESSAGES_A_TURN + 7

    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (node_a, net_a), (_, net_b) = pair
        received: list[Any] = []
        node_a.hub.subscribe(QuorumMessageReceived, lambda e: received.append(e.message))
        votes = [P.QuorumVote(net_b.key.public, 2, 2, height, net_b.key.public, bytes(64))
                 for height in range(count)]
        for vote in votes:  # all queued before the loop runs again
            assert net_b.send(net_a.key.public, vote)
        await wait_async(lambda: len(received) >= count, what=f"{count} votes at a", timeout=scaled(30))
        assert received == votes

    run(test)


def test_undecodable_messages_are_logged_and_the_next_one_still_arrives(caplog):
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (node_a, net_a), (_, net_b) = pair
        received: list[Any] = []
        node_a.hub.subscribe(QuorumMessageReceived, lambda e: received.append(e.message))
        assert net_b.send(net_a.key.public, b"not a quorum message")
        vote = P.QuorumVote(net_b.key.public, 2, 2, 9, net_b.key.public, bytes(64))
        assert net_b.send(net_a.key.public, vote)
        await wait_async(lambda: received == [vote], what="the vote after the junk")

    with caplog.at_level(logging.INFO, logger="snode.net.quorumnet"):
        run(test)
    assert "quorumnet: ignored an undecodable message" in caplog.text


def test_a_probe_passes_for_a_member_and_a_key_that_is_no_service_nodes_makes_no_test(caplog):
    """A client that is no registered service node is refused by every member's ZAP, so its
    probe says nothing of the member: no test (a failed one deregistered running nodes)."""
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (_, net_a), (node_b, net_b) = pair
        assert await net_b.probe(net_a.key.public, scaled(10)) is True
        assert net_a.refused == 0
        stranger = QuorumNet(node_b, key_from_label("no service node"), bind_ip=net_b.bind_ip,
                             port=free_port(net_b.bind_ip))
        stranger.start()
        try:
            assert await stranger.probe(net_a.key.public, 1.0) is None
            assert stranger.probes == 0, "no handshake tried"
            vote = P.QuorumVote(net_a.key.public, 2, 2, 9, stranger.key.public, bytes(64))
            assert stranger.send(net_a.key.public, vote)
            await wait_async(lambda: net_a.refused >= 1, what="the stranger's handshake refused")
        finally:
            await stranger.stop()

    with caplog.at_level(logging.WARNING, logger="snode.net.quorumnet"):
        run(test)
    stranger_key = x25519_public(key_from_label("no service node").public).hex()[:16]
    assert f"refused a client whose key {stranger_key} is not a registered service node's" in caplog.text


def test_a_probe_of_a_silent_port_fails_at_its_timeout_and_one_under_way_ends_at_stop():
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (_, net_a), (node_b, net_b) = pair
        node_b.proofs.record(net_a.key.public, int(time.time()) + 1, (net_a.bind_ip, free_port(net_a.bind_ip)))
        started = time.monotonic()
        assert await net_b.probe(net_a.key.public, 0.5) is False
        assert 0.45 <= time.monotonic() - started < scaled(5)  # the loop's timers have 1 ms steps
        long = asyncio.create_task(net_b.probe(net_a.key.public, 600))
        await wait_async(lambda: len(net_b._probes) == 1, what="the probe under way")
        await net_b.stop()  # closes the probe's socket: otherwise the context would never end
        assert await long is None
        assert net_b._probes == {}

    run(test)


def test_zap_requests_of_another_shape_or_mechanism_are_answered_400():
    """ZeroMQ's own requests are well formed; a REP socket must still answer whatever it reads."""
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (_, net_a), (_, net_b) = pair
        good = [b"1.0", b"7", b"", b"127.0.0.1", b"", b"CURVE", x25519_public(net_b.key.public)]
        assert net_a.zap_reply(good)[1:4] == [b"7", b"200", b"OK"]
        assert net_a.zap_reply([*good[:5], b"NULL"])[1:3] == [b"7", b"400"]
        # Seven frames and a registered key, but another mechanism: refused by the mechanism alone.
        plain = net_a.zap_reply([*good[:5], b"PLAIN", good[6]])
        assert plain[1:4] == [b"7", b"400", b"a CURVE request of ZAP 1.0 expected"]
        assert net_a.zap_reply([b"2.0", *good[1:]])[1:3] == [b"7", b"400"]
        assert net_a.zap_reply([*good, b"extra"])[1:3] == [b"7", b"400"]
        assert net_a.zap_reply([b"1.0"])[2] == b"400"
        assert net_a.zap_reply([*good[:6], bytes(32)])[1:3] == [b"7", b"400"]
        assert net_a.refused == 1

    run(test)


def test_a_zap_request_whose_answer_fails_is_answered_500_and_the_next_handshake_still_passes(caplog):
    """A REP socket that read a request and sent nothing answers nothing again: every later
    handshake would wait for ZAP, and quorumnet would refuse everyone until restart."""
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (_, net_a), (_, net_b) = pair
        admits, calls = net_a.admits, []

        def broken_once(key: bytes, address: str = "?") -> bool:
            calls.append(key)
            if len(calls) == 1:
                raise TypeError("a malformed registry key")
            return admits(key, address)

        net_a.admits = broken_once  # type: ignore[method-assign,assignment]
        await net_b.probe(net_a.key.public, 1.0)  # ZeroMQ may retry the failed handshake in time
        assert calls
        assert await net_b.probe(net_a.key.public, scaled(10)) is True

    with caplog.at_level(logging.ERROR, logger="snode.net.quorumnet"):
        run(test)
    assert "quorumnet: answering a ZAP request failed" in caplog.text


def test_a_message_whose_handling_raises_is_logged_and_those_queued_behind_it_still_arrive(caplog):
    """Messages queued behind the one that raised: the FD's signal for them was already taken,
    so unless the receiver comes back for them they wait for a signal that never comes."""
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (node_a, net_a), (_, net_b) = pair
        received: list[Any] = []
        node_a.hub.subscribe(QuorumMessageReceived, lambda e: received.append(e.message))
        hub, calls = node_a.hub, []

        class BrokenOnce:  # (a compiled hub's publish cannot be replaced on it: `make test-compiled`)
            def __getattr__(self, name: str) -> Any:
                return getattr(hub, name)

            def publish(self, event: object) -> None:
                calls.append(event)
                if len(calls) == 1:
                    raise RuntimeError("a bug in delivery")
                hub.publish(event)

        node_a.hub = BrokenOnce()  # type: ignore[assignment]
        votes = [P.QuorumVote(net_b.key.public, 2, 2, height, net_b.key.public, bytes(64)) for height in range(6)]
        for vote in votes[:5]:  # all queued before the loop runs again
            assert net_b.send(net_a.key.public, vote)
        await wait_async(lambda: received == votes[1:5], what="the votes behind the one that raised")
        assert net_b.send(net_a.key.public, votes[5])
        await wait_async(lambda: received == votes[1:], what="a vote sent after")

    with caplog.at_level(logging.ERROR, logger="snode.net.quorumnet"):
        run(test)
    assert "quorumnet: handling a message failed" in caplog.text


def test_a_dealer_drops_a_connection_whose_server_sends_it_a_message():
    """Our DEALERs only send: whoever holds a member's key at the address we connect to could
    otherwise fill their receive queues (1,000 messages of up to any size). A message to one drops
    the connection instead (a protocol error to ZeroMQ, which does not reconnect after one: an
    honest member's ROUTER never sends)."""
    from zmq.utils.monitor import recv_monitor_message

    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (_, net_a), (node_b, net_b) = pair
        ctx = zmq.Context()  # no ZAP handler: admits any client
        hostile = ctx.socket(zmq.ROUTER)
        hostile.curve_server = True
        hostile.curve_secretkey, hostile.curve_publickey = net_a.key.x25519_secret(), x25519_public(net_a.key.public)
        hostile.setsockopt(zmq.LINGER, 0)
        port = free_port(net_a.bind_ip)
        hostile.bind(f"tcp://{net_a.bind_ip}:{port}")
        monitor = hostile.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        disconnected: list[Any] = []
        got: list[list[bytes]] = []

        def read(condition: Callable[[], bool]) -> Callable[[], bool]:
            """`condition`, after taking what the hostile ROUTER and its monitor have."""
            def check() -> bool:
                while hostile.poll(0):
                    got.append(hostile.recv_multipart())
                while monitor.poll(0):
                    disconnected.append(recv_monitor_message(monitor))
                return condition()
            return check

        try:
            node_b.proofs.record(net_a.key.public, int(time.time()) + 1, (net_a.bind_ip, port))
            vote = P.QuorumVote(net_b.key.public, 2, 2, 1, net_b.key.public, bytes(64))
            assert net_b.send(net_a.key.public, vote)
            await wait_async(read(lambda: len(got) == 1), what="the vote at the hostile ROUTER")
            for _ in range(4):
                hostile.send_multipart([got[0][0], bytes(2 << 20)], zmq.NOBLOCK)
            await wait_async(read(lambda: bool(disconnected)), what="our DEALER dropping the connection")
        finally:
            monitor.close(linger=0)
            hostile.close(linger=0)
            ctx.term()

    run(test)


def test_each_message_names_the_member_whose_connection_brought_it():
    """ZAP's User-Id, not a key the message claims: a vote signed in another key's name is not
    delivered, and costs its sender a ban at once (`SCORE_IMPERSONATION`)."""
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (node_a, net_a), (_, net_b) = pair
        received: list[QuorumMessageReceived] = []
        node_a.hub.subscribe(QuorumMessageReceived, received.append)
        own = P.QuorumVote(net_b.key.public, 2, 2, 1, net_b.key.public, bytes(64))
        assert net_b.send(net_a.key.public, own)
        await wait_async(lambda: len(received) == 1, what="b's own vote at a")
        assert received[0].sender == net_b.key.public
        assert net_b.send(net_a.key.public, P.QuorumVote(net_b.key.public, 2, 2, 1, net_a.key.public, bytes(64)))
        await wait_async(lambda: net_a.members.banned(net_b.key.public, time.monotonic()), what="b banned")
        assert len(received) == 1

    run(test)


def test_a_member_over_its_budget_is_dropped_unread_then_cut_off_and_refused(caplog):
    """Checkpoint votes past the burst are dropped before they are decoded, each a point; past
    the threshold the member's connection is cut, and its next handshake is refused (a probe,
    which is a handshake, fails)."""
    from snode.core.finality import CheckpointVote
    from snode.net.limits import BAN_THRESHOLD
    from snode.net.quorum_guard import CHECKPOINT_VOTE_BURST, SCORE_OVER_BUDGET

    burst = int(CHECKPOINT_VOTE_BURST)
    over = BAN_THRESHOLD // SCORE_OVER_BUDGET

    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (node_a, net_a), (_, net_b) = pair
        received: list[Any] = []
        node_a.hub.subscribe(QuorumMessageReceived, lambda e: received.append(e.message))
        vote = CheckpointVote(4, bytes(32), net_b.key.public, bytes(64))
        for _ in range(burst + over - 1):
            assert net_b.send(net_a.key.public, vote)
        await wait_async(lambda: len(received) + net_a.members.dropped == burst + over - 1,
                         what="every vote delivered or dropped")
        assert len(received) >= burst and net_a.members.dropped >= over - 2  # a token may refill meanwhile
        assert not net_a.members.banned(net_b.key.public, time.monotonic())
        assert await net_b.probe(net_a.key.public, scaled(10)) is True
        delivered = len(received)
        for _ in range(burst):  # more than the bucket refills meanwhile (1 a second)
            assert net_b.send(net_a.key.public, vote)
        await wait_async(lambda: net_a.members.banned(net_b.key.public, time.monotonic()), what="b banned")
        refused = net_a.refused
        assert await net_b.probe(net_a.key.public, 1.0) is False
        assert net_a.refused > refused
        assert len(received) < delivered + burst

    with caplog.at_level(logging.INFO, logger="snode.net.quorumnet"):
        run(test)
    assert "sent more CheckpointVote messages than their budget" in caplog.text
    assert f"refused banned member {key_from_label(MEMBERS[1]).public.hex()[:16]}" in caplog.text


def test_a_member_that_opens_connection_after_connection_is_admitted_a_burst_of_them():
    """An insider's key opening idle connection after connection once held them all, until the
    descriptors ran short and the listener cut every new connection, an honest tester's too
    (the node then judged unreachable). ZAP admits ADMISSIONS_BURST handshakes of one member at
    once, one more each quarter of the reachability interval; other members are admitted."""
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (_, net_a), (_, net_b) = pair
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        socks = []
        try:
            for _ in range(3 * ADMISSIONS_BURST):
                sock = ctx.socket(zmq.DEALER)
                sock.setsockopt(zmq.CURVE_SECRETKEY, net_b.key.x25519_secret())
                sock.setsockopt(zmq.CURVE_PUBLICKEY, x25519_public(net_b.key.public))
                sock.setsockopt(zmq.CURVE_SERVERKEY, x25519_public(net_a.key.public))
                sock.setsockopt(zmq.IMMEDIATE, 1)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(f"tcp://{net_a.bind_ip}:{net_a.port}")
                socks.append(sock)
                if len(socks) % 7 == 0:
                    await asyncio.sleep(0.05)  # under the 8 in handshake an address
            await wait_async(lambda: net_a.refused >= ADMISSIONS_BURST, what="the member's handshakes refused")
            held = sum(1 for sock in socks if sock.poll(0, zmq.POLLOUT))
            print(f"{len(socks)} connections of one member: {held} admitted, {net_a.refused} handshakes refused")
            assert ADMISSIONS_BURST <= held <= ADMISSIONS_BURST + 4, held
        finally:
            for sock in socks:
                sock.close(linger=0)
            ctx.term()
        other = [b"1.0", b"7", b"", b"127.0.0.1", b"", b"CURVE", x25519_public(net_a.key.public)]
        assert net_a.zap_reply(other)[1:4] == [b"7", b"200", b"OK"], "another member is admitted"
        again = [*other[:6], x25519_public(net_b.key.public)]
        answers = [net_a.zap_reply(again)[2] for _ in range(5)]
        assert answers.count(b"400") >= 4, answers  # a token may have come back meanwhile

    run(test)
