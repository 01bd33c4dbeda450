"""The state checksum summed off the event loop before fork v2 (node/checksum_primer.py), and
`state_root.caught_up`, which brings a sum of an older state to the tip."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snode.core import state_root as R
from snode.core import transition
from snode.core.blocks import header_state_root
from snode.core.state_root import caught_up, current_checksum, state_checksum
from snode.node import checksum_primer as primer_module
from snode.node.checksum_primer import PRIME_BLOCKS, ChecksumPrimer
from snode.params import V2, Fork
from tests.unit import chain_ops as P
from tests.unit.conftest import node_on


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.lists(P.OPERATIONS, min_size=1, max_size=15), after=st.lists(P.OPERATIONS, min_size=1, max_size=30))
def test_a_sum_of_an_older_state_brought_up_by_the_undos_since_is_the_tips(fresh_chain, before, after):
    chain = fresh_chain()
    run = P.Run(chain)
    for op in before:
        run.apply(op)
    run.mine(1)
    old, checksum, first = chain.state, state_checksum(chain.state), len(chain.undos)
    for op in after:
        run.apply(op)
        run.mine(1)
    assert caught_up(checksum, old, chain.state, chain.undos[first:]) == state_checksum(chain.state)
    assert caught_up(checksum, old, chain.state, reversed(chain.undos[first:])) == state_checksum(chain.state)


def _forked(chain, ahead: int):
    """`chain` with fork v2 scheduled `ahead` blocks above its tip."""
    params = chain.params.with_test_forks((Fork(V2, chain.state.height + ahead),))
    chain.params, chain.consensus = params, dataclasses.replace(chain.consensus, params=params)
    return chain


def test_it_is_due_only_within_prime_blocks_of_the_fork_and_only_without_a_checksum(chain_factory):
    far = node_on(_forked(chain_factory(), PRIME_BLOCKS + 1))
    assert not ChecksumPrimer(far).due(far.state)
    near = _forked(chain_factory(), PRIME_BLOCKS)
    node = node_on(near)
    primer = ChecksumPrimer(node)
    assert primer.due(node.state)
    node.keep_checksum(state_checksum(node.state))
    assert not primer.due(node.state)
    assert not ChecksumPrimer(node_on(chain_factory())).due(node.state)  # no fork scheduled


async def test_the_sum_reaches_the_tip_and_the_fork_block_sums_nothing_from_scratch(chain_factory, monkeypatch):
    chain = _forked(chain_factory(), 6)
    node = node_on(chain)
    primer = ChecksumPrimer(node)
    summing = asyncio.get_running_loop().create_task(primer.prime(node.state))
    node.accept_blocks(chain.mine(2), chain.now)  # blocks adopted while the worker sums
    assert await summing
    assert current_checksum(node.state) == state_checksum(node.state)

    def no_full_sum(state):
        raise AssertionError("the fork block summed its parent from scratch")

    blocks = chain.mine(4)  # past the fork (the chain sums its own parent from scratch)
    monkeypatch.setattr(transition, "state_checksum", no_full_sum)
    node.accept_blocks(blocks, chain.now)  # the node does not: and every header's root is checked
    checksum = current_checksum(node.state)
    assert checksum is not None
    assert header_state_root(chain.blocks[-1].header) == R.header_root(chain.params.network_id, node.state, checksum)


async def test_a_sum_made_moot_by_a_block_that_summed_itself_is_dropped(chain_factory):
    chain = _forked(chain_factory(), 2)
    node = node_on(chain)
    summing = asyncio.get_running_loop().create_task(ChecksumPrimer(node).prime(node.state))
    node.accept_blocks(chain.mine(3), chain.now)  # across the fork before the worker's sum came
    assert not await summing
    assert current_checksum(node.state) == state_checksum(node.state)


def test_the_slices_sum_to_the_whole_and_a_stop_ends_the_sum(chain_factory):
    state = chain_factory().state
    assert primer_module._sum(state, threading.Event(), slice_=3) == state_checksum(state)  # several slices
    stopped = threading.Event()
    stopped.set()
    assert primer_module._sum(state, stopped) is None


def test_a_sum_that_comes_while_a_batch_is_staged_keeps_the_tip_and_reaches_the_adopted_state(chain_factory):
    """The tip stays the same object (a staged batch is stored and adopted on it, not refused as
    stale), and the state the batch makes gets the checksum brought up by the batch's undos."""
    chain = _forked(chain_factory(), PRIME_BLOCKS)
    node = node_on(chain)
    tip = node.state
    batch = node.stage_batch(chain.mine(3), chain.now)
    node.keep_checksum(state_checksum(tip))  # what the primer's worker hands over meanwhile
    assert node.state is tip
    assert node.finish_batch(batch, chain.now) == 3
    assert current_checksum(node.state) == state_checksum(node.state)
