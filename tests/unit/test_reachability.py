"""Reachability by the connections a member already holds (issue #37, item 1): the schedule rule
(`check_due`), its bound against the decommission age on every network, and `ReachabilityTests`
run over simulated time against a quorumnet stand-in whose held connection and handshakes the
test sets (the sockets themselves: tests/unit/test_quorumnet_held.py)."""

from __future__ import annotations

import asyncio

import pytest

from snode.core.crypto import SigningKey
from snode.core.obligations import judge
from snode.core.service_nodes import Reason
from snode.params import DEVNET, MAINNET, NETWORKS, REGTEST, NetworkParams
from snode.services.reachability import Check, ReachabilityTests, check_due, refresh_s
from tests.unit.conftest import sn_record

INTERVAL, REFRESH = DEVNET.reachability_interval, refresh_s(DEVNET)
KEY = b"\x01" * 32



async def _turns(n: int) -> None:
    """Let the probes `schedule` started run `n` loop turns: an ordering step on a fake clock,
    never a wait for time to pass (each turn is one `asyncio.sleep(0)`)."""
    for _ in range(n):
        await asyncio.sleep(0)  # one loop turn, an ordering step not a wait

def due(now: int, tested: int | None, fresh: int | None, held: bool) -> Check | None:
    return check_due(now, tested=tested, fresh=fresh, held=lambda: held, interval=INTERVAL, refresh=REFRESH)


def test_the_refresh_is_the_most_whole_intervals_within_the_decommission_age_on_every_network():
    assert (refresh_s(MAINNET), refresh_s(DEVNET), refresh_s(REGTEST)) == (1_800, 30, 30)
    for params in NETWORKS.values():
        refresh = refresh_s(params)
        assert refresh % params.reachability_interval == 0
        assert params.reachability_interval <= refresh <= params.decommission_proof_age, params.name


def test_a_held_connection_passes_each_interval_and_a_fresh_handshake_comes_once_per_refresh():
    assert due(0, None, None, held=True) is Check.HANDSHAKE  # the first check is always fresh
    assert due(5, 0, 0, held=True) is None  # not an interval yet
    assert due(10, 0, 0, held=True) is Check.HELD
    assert due(20, 10, 0, held=True) is Check.HELD
    assert due(29, 20, 0, held=True) is None
    assert due(30, 20, 0, held=True) is Check.HANDSHAKE  # the refresh is up: at once, mid-interval
    assert due(30, 30, None, held=True) is None  # under way or failed: its interval runs


def test_without_a_held_connection_or_after_a_failed_handshake_each_interval_is_a_fresh_handshake():
    assert due(10, 0, 0, held=False) is Check.HANDSHAKE
    assert due(9, 0, 0, held=False) is None
    assert due(10, 0, None, held=True) is Check.HANDSHAKE  # a failed one: the held connection says nothing
    assert due(19, 10, None, held=True) is None


def test_held_is_asked_only_when_a_check_is_due():
    asked: list[int] = []

    def held() -> bool:
        asked.append(1)
        return True
    assert check_due(5, tested=0, fresh=0, held=held, interval=INTERVAL, refresh=REFRESH) is None
    assert asked == []
    assert check_due(10, tested=0, fresh=0, held=held, interval=INTERVAL, refresh=REFRESH) is Check.HELD
    assert asked == [1]


class _Proofs:
    def __init__(self, node: _Node) -> None:
        self.endpoints: dict[bytes, tuple[str, int]] = {KEY: ("127.0.0.9", 38092)}
        self.node = node
        self.silent_since: int | None = None
        """When the node stopped sending proofs (None: it proves every moment)."""

    def endpoint(self, pubkey: bytes) -> tuple[str, int] | None:
        return self.endpoints.get(pubkey)

    def last_accepted(self, pubkey: bytes) -> int:
        return self.node.clock if self.silent_since is None else self.silent_since


class _Node:
    def __init__(self, params: NetworkParams) -> None:
        self.params, self.proofs, self.clock = params, _Proofs(self), 0

    def now(self) -> int:
        return self.clock


class _QuorumNet:
    """What the tests ask of quorumnet: whether a connection is held, and a fresh handshake."""

    def __init__(self) -> None:
        self.holding = True
        self.listening = True
        self.handshakes = 0
        self.key = SigningKey(b"\x02" * 32)

    def held(self, member: bytes) -> bool:
        return self.holding

    async def probe(self, member: bytes, timeout: float) -> bool | None:
        self.handshakes += 1
        return self.listening


def _simulate(params: NetworkParams, until: int, stop_at: int | None, block_s: int = 2
              ) -> tuple[_QuorumNet, ReachabilityTests, _Node, int | None]:
    """A member's checks of one node over `until` seconds, one schedule a block; the node's
    listener stops at `stop_at` while the member's connection to it lives on. The time its
    first failed check was noted (None: none failed)."""
    node, net = _Node(params), _QuorumNet()
    tests = ReachabilityTests(node, net)  # type: ignore[arg-type]

    async def run() -> None:
        for now in range(0, until, block_s):
            node.clock = now
            net.listening = stop_at is None or now < stop_at
            tests.schedule([KEY], now)
            await _turns(2)
    asyncio.run(run())
    return net, tests, node, tests.failing_since.get(KEY)


@pytest.mark.parametrize("params", [DEVNET, MAINNET], ids=lambda p: p.name)
def test_a_member_holding_a_connection_makes_one_fresh_handshake_a_refresh(params):
    span = 10 * refresh_s(params)
    net, tests, _, failing = _simulate(params, span, stop_at=None, block_s=params.target_block_time)
    assert failing is None
    assert net.handshakes == span // refresh_s(params)
    assert tests.counts[Check.HANDSHAKE] == net.handshakes
    # the other checks, once an interval (at block granularity), pass by the held connection
    assert tests.counts[Check.HELD] >= 2 * net.handshakes


@pytest.mark.parametrize("stop_at", [1, 11, 29, 31, 59])
def test_a_node_whose_listener_stops_is_found_failing_within_the_refresh_and_then_each_interval(stop_at):
    """The bound of docs/SECURITY.md: found failing at most `refresh` + a block after the stop
    (the held connection lives on throughout), and decommissioned once failing longer than the
    decommission age."""
    net, tests, node, failing = _simulate(DEVNET, 200, stop_at=stop_at)
    assert failing is not None
    assert stop_at <= failing <= stop_at + REFRESH + DEVNET.target_block_time
    assert tests.unreachable_for(KEY, failing + DEVNET.decommission_proof_age + 1) > DEVNET.decommission_proof_age
    # from the first failure on, a fresh handshake every interval, each failing: no held pass since
    assert tests.failed >= (200 - failing) // (INTERVAL + DEVNET.target_block_time)
    assert net.handshakes - tests.failed <= 1 + stop_at // REFRESH  # those before the stop passed


def test_a_decommission_for_unreachable_follows_within_refresh_plus_the_decommission_age():
    stop_at = 1
    _, tests, _, failing = _simulate(DEVNET, 120, stop_at=stop_at)
    assert failing is not None
    verdicts = {}
    for now in range(failing, 120, 2):
        verdict = judge(sn_record(), last_proof=now, now=now, params=DEVNET, may_decommission=True,
                        height=100, unreachable_for=tests.unreachable_for(KEY, now))
        if verdict is not None:
            verdicts[now] = verdict
    first = min(verdicts)
    assert verdicts[first].reason == Reason.UNREACHABLE
    assert first - stop_at <= REFRESH + DEVNET.decommission_proof_age + 2 * DEVNET.target_block_time


def test_a_member_never_checks_itself():
    node, net = _Node(DEVNET), _QuorumNet()
    node.proofs.endpoints[net.key.public] = ("127.0.0.8", 38092)
    tests = ReachabilityTests(node, net)  # type: ignore[arg-type]

    async def run() -> None:
        tests.schedule([net.key.public], 0)
        await _turns(1)
    asyncio.run(run())
    assert (net.handshakes, tests.counts[Check.HANDSHAKE]) == (0, 0)


def test_failures_while_the_node_is_silent_too_are_no_unreachable_streak():
    """A node down (no proofs, no handshakes) is missed proofs' case: back and proving, its
    reachability is judged from its first failure after that, not from before its outage (the
    devnet trial: deregistered `unreachable` at its recommission, 6 s after its restart)."""
    node, net = _Node(DEVNET), _QuorumNet()
    tests = ReachabilityTests(node, net)  # type: ignore[arg-type]

    async def run(start: int, end: int) -> None:
        for now in range(start, end, 2):
            node.clock = now
            tests.schedule([KEY], now)
            await _turns(2)
    net.listening = False  # proving but unreachable: a streak
    asyncio.run(run(1, 20))
    assert tests.failing_since.get(KEY) is not None
    node.proofs.silent_since = 20  # then down altogether
    asyncio.run(run(20, 120))
    assert KEY not in tests.failing_since and tests.unreachable_for(KEY, 120) == 0
    node.proofs.silent_since = None  # back and proving, still not reachable: a new streak
    asyncio.run(run(120, 140))
    assert tests.failing_since[KEY] >= 120
