"""The public OMQ port's pure parts: a client IP's token bucket and request parsing."""

from __future__ import annotations

import asyncio
import collections
import types
from typing import Any

import pytest

from snode.rpc.omq_public import (
    BURST,
    RATE,
    TX_BYTES_PER_TOKEN,
    RequestError,
    TokenBuckets,
    parse_request,
    transaction_cost,
)


def test_a_bucket_allows_a_burst_then_its_rate():
    buckets = TokenBuckets()
    assert sum(buckets.take("1.2.3.4", 100.0) for _ in range(100)) == BURST
    assert not buckets.take("1.2.3.4", 100.0)
    assert buckets.take("5.6.7.8", 100.0), "another client has its own bucket"
    assert sum(buckets.take("1.2.3.4", 101.0) for _ in range(100)) == RATE  # one second later


def test_a_transaction_costs_its_size_in_kib_and_leaves_the_bucket_in_debt():
    assert transaction_cost(b"get_height", b"") == 1.0
    assert transaction_cost(b"send_raw_transaction", b'{"tx_hex": "00"}') == 1.0
    assert transaction_cost(b"send_raw_transaction", b"0" * (2 * TX_BYTES_PER_TOKEN * 10)) == 10.0
    assert transaction_cost(b"send_raw_transaction", b"0" * (1 << 20)) == BURST, "never more than a full bucket"
    buckets = TokenBuckets()
    assert buckets.take("1.2.3.4", 100.0, 3 * BURST), "a full bucket takes any one request"
    assert not buckets.take("1.2.3.4", 100.0 + 2 * BURST / RATE), "two bursts in debt: paid back at RATE a second"
    assert buckets.take("1.2.3.4", 100.0 + 2 * BURST / RATE + 0.1)


def test_an_answer_charged_after_the_fact_makes_the_next_request_wait():
    buckets = TokenBuckets()
    assert buckets.take("1.2.3.4", 100.0)
    buckets.charge("1.2.3.4", BURST + RATE)  # a big answer: the burst and a second more
    assert not buckets.take("1.2.3.4", 101.0)
    assert buckets.take("1.2.3.4", 101.2)
    buckets.charge("9.9.9.9", 5.0)  # a client never seen: nothing to charge
    assert sum(buckets.take("9.9.9.9", 101.2) for _ in range(100)) == BURST


@pytest.mark.parametrize(("frames", "status", "text"), [
    ([], b"400", "got 0 frames"),
    ([b"get_height", b"", b""], b"400", "got 3 frames"),
    ([b"\xff"], b"400", "not UTF-8"),
    ([b"stop_daemon"], b"404", "is not served on the public port"),
    ([b"get_block", b"{"], b"400", "not JSON"),
    ([b"get_block", b"7"], b"400", "must be a JSON object"),
])
def test_bad_requests_say_why(frames, status, text):
    with pytest.raises(RequestError) as caught:
        parse_request(frames)
    assert caught.value.status == status and text in caught.value.message


def test_good_requests():
    assert parse_request([b"get_height"]) == ("get_height", {})
    assert parse_request([b"get_block", b' {"height": 3} ']) == ("get_block", {"height": 3})


def test_a_flood_from_one_client_lets_the_event_loop_run_between_requests():
    """Requests already queued are answered without a suspension of their own (the 429 path and a
    method that does not wait): the server must still give the loop a turn every
    REQUESTS_A_TURN requests, or one client's flood stops block production and votes."""
    import uvloop
    import zmq

    from snode.devchain import key_from_label
    from snode.rpc.omq_public import REQUESTS_A_TURN, PublicOmq
    from tests.functional.framework import next_loopback_ip, scaled
    from tests.unit.conftest import free_port, wait_async

    count = 3_000
    turns = 0
    seen_at: list[int] = []  # the ticker's count when each request was taken

    async def height(method: str, params: dict[str, object]) -> int:
        return 7

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)  # one loop turn counted: an ordering step, not a wait

    async def main() -> None:
        ip = next_loopback_ip()
        server = PublicOmq(types.SimpleNamespace(call=height), key_from_label("public omq"),  # type: ignore[arg-type]
                           host=ip, port=free_port(ip))
        take = server.buckets.take

        def counted(client: str, now: float, cost: float = 1.0) -> bool:
            seen_at.append(turns)
            return take(client, now, cost)

        server.buckets.take = counted  # type: ignore[method-assign]
        server.start()
        ctx = zmq.Context()
        client = ctx.socket(zmq.DEALER)
        client.curve_publickey, client.curve_secretkey = zmq.curve_keypair()
        client.curve_serverkey = server.server_key
        client.setsockopt(zmq.SNDHWM, 0)
        client.setsockopt(zmq.LINGER, 0)
        client.connect(f"tcp://{ip}:{server.port}")
        ticking = asyncio.create_task(ticker())
        try:
            for _ in range(count):
                client.send_multipart([b"get_height", b""], zmq.NOBLOCK)
            await wait_async(lambda: len(seen_at) >= count, what=f"{count} requests taken", timeout=scaled(60))
        finally:
            ticking.cancel()
            client.close(linger=0)
            await server.stop()
            ctx.term()

    uvloop.run(main())
    in_one_turn = collections.Counter(seen_at).most_common(1)[0][1]
    assert in_one_turn <= REQUESTS_A_TURN, f"{in_one_turn} requests answered in one turn of the loop"
    assert seen_at[-1] - seen_at[0] >= count // REQUESTS_A_TURN - 1


def _answering(call: Any) -> Any:
    """A PublicOmq whose method table is `call`, with no socket: only its answers are asked for."""
    from snode.devchain import key_from_label
    from snode.rpc.omq_public import PublicOmq

    server = PublicOmq(types.SimpleNamespace(call=call), key_from_label("public omq answers"),  # type: ignore[arg-type]
                       host="127.0.0.1", port=1)
    server._ctx.term()
    return server


def test_answers_for_all_clients_together_have_a_budget_so_clients_that_never_read_hold_bounded_memory(
        monkeypatch: pytest.MonkeyPatch):
    """Each address's bucket lets it have 1.3 MB of answers a second; 256 connections from as many
    addresses that never read would have ZeroMQ hold 10 s of that each (STALLED_CLIENT_MS) before
    the kernel cuts them. The node-wide budget bounds the sum: past its burst a request is
    answered 429 "busy", whoever asks."""
    import msgspec

    from snode.rpc import omq_public
    from snode.rpc.omq_public import ANSWER_BYTES_PER_TOKEN, ANSWER_TOKENS_BURST

    # The budget's clock stands still: on a loaded machine 20 answers of 4 MiB take long enough for
    # the budget to refill one more (a token every 8 ms), which made the count depend on the load.
    monkeypatch.setattr(omq_public, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))

    size = 4 * 2**20
    big = msgspec.Raw(b"7" * size)

    async def block(method: str, params: dict[str, object]) -> msgspec.Raw:
        return big

    server = _answering(block)
    statuses = [asyncio.run(server._answer([b"get_block", b'{"height": 1}'], f"10.0.0.{n}"))[0]
                for n in range(20)]
    burst = int(ANSWER_TOKENS_BURST * ANSWER_BYTES_PER_TOKEN // size)
    assert burst == 8 and statuses == [b"200"] * burst + [b"429"] * (20 - burst), statuses
    status, body = asyncio.run(server._answer([b"get_height"], "10.0.0.99"))
    assert status == b"429" and b"busy: this port makes at most 8 MiB of answers a second" in body


def test_transactions_of_all_clients_together_have_a_budget(monkeypatch: pytest.MonkeyPatch):
    """Each address's bucket lets it have 20 KiB of transactions checked a second; 32 addresses
    at their own rates had 160 copies of a 93 KB transaction whose last signature is bad checked in
    10 s. The port's budget for all clients bounds the sum, whoever sends."""
    import msgspec

    from snode.rpc import omq_public
    from snode.rpc.omq_public import TX_TOKENS_BURST

    monkeypatch.setattr(omq_public, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))
    checked = []

    async def send(method: str, params: dict[str, object]) -> msgspec.Raw:
        checked.append(method)
        return msgspec.Raw(b'{"status": "OK"}')

    server = _answering(send)
    tx = b'{"tx_hex": "' + b"ab" * (int(BURST) * TX_BYTES_PER_TOKEN - 20) + b'"}'  # 40 KiB, the most one request costs
    statuses = [asyncio.run(server._answer([b"send_raw_transaction", tx], f"10.0.1.{n}"))[0] for n in range(12)]
    fits = int(TX_TOKENS_BURST // BURST) + 1  # a bucket with a token left lets one more go into debt
    assert statuses == [b"200"] * fits + [b"429"] * (12 - fits), statuses
    assert len(checked) == fits
    status, body = asyncio.run(server._answer([b"send_raw_transaction", tx], "10.0.2.1"))
    assert status == b"429" and b"KiB of transactions a second for all its clients" in body
    assert asyncio.run(server._answer([b"get_height"], "10.0.3.1"))[0] == b"200", "other methods are not held"


def test_an_ipv6_client_is_its_slash_64(monkeypatch: pytest.MonkeyPatch):
    import msgspec

    from snode.rpc import omq_public

    monkeypatch.setattr(omq_public, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))

    async def height(method: str, params: dict[str, object]) -> msgspec.Raw:
        return msgspec.Raw(b"1")

    server = _answering(height)
    statuses = [asyncio.run(server._answer([b"get_height"], f"2001:db8::{n + 1:x}"))[0] for n in range(int(BURST) + 1)]
    assert statuses == [b"200"] * int(BURST) + [b"429"], "each address of one /64 had a budget of its own"
    assert asyncio.run(server._answer([b"get_height"], "2001:db8:0:1::1"))[0] == b"200"
