"""Properties of the state transition, over random chains built by hypothesis:

(a) undoing a block gives back exactly its parent state (every scalar and every map entry),
    also after the undo record went through its canonical encoding, as the store keeps it;
(b) no coin is made or lost: unspent + staked == issued == genesis + rewards at every height.

Operations (transfers with random amounts and recipients, registrations, stakes, state changes,
mining) are drawn as data and run on a real chain; an operation the rules refuse is skipped, one
that fails in any other way fails the test.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from snode.core.service_nodes import StateChangeKind
from snode.core.state import undo_block
from snode.core.utxo_set import UtxoLimits, UtxoSet
from snode.params import COIN
from tests.unit.chain_ops import OPERATIONS, POOL_MINIMUM, SN_KEYS, Run


def _run(chain, operations: list[tuple]) -> Run:
    run = Run(chain)
    first, made_before = chain.state, len(chain.undos)
    for op in operations:
        run.apply(op)
    run.mine(1)
    # Undoing every block made here, newest first, leads back to where the run began.
    state = chain.state
    for undo in reversed(chain.undos[made_before:]):
        state = undo_block(state, undo)
    assert state == first
    return run


# Drawing 10 to 40 composite operations can pass hypothesis's generation-time budget on a
# loaded 2-core CI machine; the run itself is a few milliseconds per example.
@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATIONS, min_size=10, max_size=40))
def test_undo_restores_the_parent_and_coins_are_conserved(fresh_chain, operations):
    run = _run(fresh_chain(), operations)
    for kind, count in run.accepted.items():
        event(f"accepted {kind}: {min(count, 3)}+")


def test_the_operations_reach_every_part_of_the_state(fresh_chain):
    # The property is only as good as its operations: this sequence must be accepted in full,
    # so the interpreter registers, stakes, activates, pays and decommissions for real.
    plan = [
        ("register", 1, 2, POOL_MINIMUM, 50_000, [(2, 30_000 * COIN)]),
        ("transfer", 3, -1, 5 * COIN),
        ("stake", 4, 0, "min"),
        ("mine", 1),
        ("stake", 2, 2, 30_000 * COIN),
        ("stake", 3, 2, "remainder"),
        ("stake", 3, 0, "remainder"),
        ("mine", 1),
        ("state_change", 2, StateChangeKind.ACTIVATE),
        ("mine", 3),
        ("state_change", 1, "next"),
        ("mine", 3),
        ("state_change", 1, "next"),
        ("mine", 3),
    ]
    run = _run(fresh_chain(), plan)
    assert run.accepted == {"register": 1, "transfer": 1, "stake": 4, "state_change": 3}
    nodes = run.chain.state.service_nodes
    assert nodes[SN_KEYS[1].public].decommission_count == 1
    assert nodes[SN_KEYS[1].public].active and nodes[SN_KEYS[2].public].active
    assert nodes[SN_KEYS[0].public].funded and nodes[SN_KEYS[2].public].funded
    assert any(n.last_reward_height > n.registration_height for n in nodes.values())


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATIONS, min_size=10, max_size=30), fold_at=st.integers(1, 4))
def test_the_properties_hold_when_the_outputs_fold_every_few_changes(fresh_chain, operations, fold_at):
    # A 100,000-block chain folds its outputs' overlay into packed buckets every 8,192 keys
    # (core.utxo_set); here every few keys, so that blocks, undos and state comparisons all
    # meet packed outputs, tombstones over them and the overlay together.
    chain = fresh_chain()
    limits = UtxoLimits(compact_at=fold_at, renumber_slack=0)  # owners renumbered often too
    chain.state = replace(chain.state, utxos=UtxoSet(chain.state.utxos.items(), limits))
    _run(chain, operations)
    assert chain.state.utxos.limits == limits  # every block's state made from the first
