"""UtxoSet, the packed persistent map of unspent outputs, behaves as a dict would.

Random operations run against a UtxoSet (folding its overlay into a new base every few keys)
and a plain dict side by side; every version made along the way must still read as it did
when it was made (states share bases and overlays). Keys and owners of odd lengths, which cannot
be packed, are mixed in, as are keys that appear inside other records' bytes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snode.core import utxo_set
from snode.core.tx_rules import apply_transaction
from snode.core.utxo_base import BUCKET_BITS, RECORD, RECORD_BYTES, UtxoEntry, find_record
from snode.core.utxo_set import UtxoLimits, UtxoSet
from snode.devchain import key_from_label
from snode.params import COIN

FOLD_EVERY_KEY = UtxoLimits(compact_at=1)
"""A set that packs what it is made of, and whose blocks' finish folds every change."""


def folding_chain(chain):
    """`chain`, its state's outputs now a set that folds at every block (`FOLD_EVERY_KEY`)."""
    chain.state = replace(chain.state, utxos=UtxoSet(chain.state.utxos.items(), FOLD_EVERY_KEY))
    return chain


KEYS = [bytes([i]) * 32 + i.to_bytes(2, "big") for i in range(12)] + [b"short", b"k" * 40]
OWNERS = [b"\x01" * 32, b"\x02" * 32, b"odd owner"]
ENTRY = st.builds(
    UtxoEntry, st.one_of(st.sampled_from(OWNERS), st.binary(min_size=32, max_size=32)),
    st.one_of(st.integers(1, 2**63 - 1), st.just(2**64 + 5)),
    st.one_of(st.integers(0, 10**9), st.just(2**32)),
)
OPERATION = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(KEYS), ENTRY),
    st.tuples(st.just("pop"), st.sampled_from(KEYS)),
    st.tuples(st.just("finish"), st.booleans()),
)


def assert_reads_as(utxos: UtxoSet, model: dict[bytes, UtxoEntry]) -> None:
    assert len(utxos) == len(model)
    assert dict(utxos.items()) == model
    assert sorted(utxos.keys()) == sorted(model)
    assert sorted(utxos.values(), key=repr) == sorted(model.values(), key=repr)
    for key in KEYS:
        assert utxos.get(key) == model.get(key)
        assert (key in utxos) == (key in model)
    assert utxos == UtxoSet(model)


@given(
    start=st.dictionaries(st.sampled_from(KEYS), ENTRY, max_size=6),
    operations=st.lists(OPERATION, max_size=40),
    fold_at=st.integers(1, 6),
    renumber_slack=st.integers(-30, 2),  # below 0: the owners are numbered afresh at most folds
)
def test_a_utxo_set_reads_as_a_dict_through_changes_and_folds(start, operations, fold_at, renumber_slack):
    limits = UtxoLimits(compact_at=fold_at, renumber_slack=renumber_slack)
    versions = [(UtxoSet(start, limits), dict(start))]
    mutation, model = versions[0][0].mutate(), dict(start)
    for op in operations:
        if op[0] == "set":
            mutation[op[1]] = op[2]
            model[op[1]] = op[2]
        elif op[0] == "pop":
            assert mutation.pop(op[1], None) == model.pop(op[1], None)
        else:
            versions.append((mutation.finish(fold=op[1]), dict(model)))
            mutation = versions[-1][0].mutate()
        assert all(mutation.get(key) == model.get(key) for key in KEYS)
    versions.append((mutation.finish(fold=True), model))
    for utxos, expected in versions:
        assert_reads_as(utxos, expected)


TRACKED_OPERATION = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(KEYS), ENTRY),
    st.tuples(st.just("delete"), st.sampled_from(KEYS)),
    st.tuples(st.just("spend"), st.sampled_from(KEYS)),
)


@given(
    base=st.dictionaries(st.sampled_from(KEYS), ENTRY, max_size=6),
    overlay=st.dictionaries(st.sampled_from(KEYS), ENTRY, max_size=4),
    operations=st.lists(TRACKED_OPERATION, max_size=30),
)
def test_a_block_s_tracked_changes_read_as_a_dict_and_remember_each_first_old_value(base, overlay, operations):
    """What a block does to the outputs (`TrackedUtxos`): `spend` is `get` then `delete` in one
    lookup, None and no change for a key it does not hold; the undo record's old values are
    those before the block, whichever keys are packed in the base or changed in the overlay."""
    utxos = UtxoSet(base, FOLD_EVERY_KEY).mutate().finish(fold=True).update(overlay)
    before = {**base, **overlay}
    tracked, model = utxo_set.TrackedUtxos(utxos), dict(before)
    for op in operations:
        key = op[1]
        if op[0] == "set":
            tracked.set(key, op[2])
            model[key] = op[2]
        elif op[0] == "delete":
            if key in model:
                tracked.delete(key)
                del model[key]
            else:
                with pytest.raises(KeyError):
                    tracked.delete(key)
        else:
            assert tracked.spend(key) == model.pop(key, None)
        assert all(tracked.get(k) == model.get(k) for k in KEYS)
    assert tracked.changes() == tuple(sorted((key, before.get(key)) for key in tracked.old))
    assert {k for k in KEYS if before.get(k) != model.get(k)} <= set(tracked.old)
    assert_reads_as(tracked.finish(fold=True), model)
    assert_reads_as(utxos, before)


def test_missing_keys_raise_key_error_and_pop_default():
    utxos = UtxoSet({KEYS[0]: UtxoEntry(OWNERS[0], 5, 1)})
    with pytest.raises(KeyError):
        utxos[KEYS[1]]
    mutation = utxos.mutate()
    with pytest.raises(KeyError):
        del mutation[KEYS[1]]
    with pytest.raises(KeyError):
        mutation.pop(KEYS[1])
    assert mutation.pop(KEYS[1], "none") == "none"
    del mutation[KEYS[0]]
    assert len(mutation.finish()) == 0 and len(utxos) == 1
    assert 5 not in utxos  # not a key at all


def folded(utxos: UtxoSet, changes: dict[bytes, UtxoEntry]) -> UtxoSet:
    """`utxos` with `changes` set, finished as a block's state is (folding if it is time)."""
    mutation = utxos.mutate()
    for key, entry in changes.items():
        mutation[key] = entry
    return mutation.finish(fold=True)


def test_a_fold_moves_the_overlay_into_the_base_and_leaves_the_old_set_alone():
    entries = {bytes([i]) * 34: UtxoEntry(OWNERS[i % 2], 10 + i, i) for i in range(1, 9)}
    first = folded(UtxoSet(limits=UtxoLimits(compact_at=4)), dict(list(entries.items())[:3]))
    assert len(first._overlay) == 3  # below the fold: all in the overlay
    unfolded = first.update(dict(list(entries.items())[3:]))
    assert len(unfolded._overlay) == 8  # only a block's finish folds
    second = folded(first, dict(list(entries.items())[3:]))
    assert len(second._overlay) == 0 and len(second) == 8  # folded
    assert second.limits == first.limits == UtxoLimits(compact_at=4)  # handed on
    mutation = second.mutate()
    del mutation[bytes([1]) * 34]
    third = mutation.finish(fold=True)
    assert len(third._overlay) == 1  # a tombstone over the base
    assert bytes([1]) * 34 not in third and bytes([1]) * 34 in second
    assert dict(first.items()) == dict(list(entries.items())[:3])
    assert dict(second.items()) == dict(unfolded.items()) == entries


def test_a_transaction_check_never_folds_however_full_the_overlay(chain):
    # Admission checks apply a transaction to the tip and throw the result away: a fold there
    # would let anyone make the node fold (and number owners) with transactions it refuses.
    folding_chain(chain).mine()  # a block's state: folded
    assert len(chain.state.utxos._overlay) == 0
    tx = chain.transfer_tx(key_from_label("alice"), key_from_label("bob").public, 5 * COIN)
    checked, _, _ = apply_transaction(chain.state, tx, chain.consensus, block_time=chain.now)
    assert len(checked.utxos._overlay) >= 3  # the spend and its outputs, not folded
    chain.submit(tx)
    chain.mine()
    assert len(chain.state.utxos._overlay) == 0


def test_a_utxo_set_cannot_be_pickled():
    import pickle

    with pytest.raises(TypeError, match="bound to its process"):
        pickle.dumps(UtxoSet({KEYS[0]: UtxoEntry(OWNERS[0], 5, 1)}))


def test_a_key_found_inside_other_records_is_not_taken_for_it():
    # One record's fields and the next one's key that spell a third key, at an offset that is
    # not a record's start: the lookup must go past it.
    entries = {b"\x05" * 34: UtxoEntry(OWNERS[0], 2**40 + 7, 9), b"\x06" * 34: UtxoEntry(OWNERS[1], 3, 4)}
    base = UtxoSet(entries, FOLD_EVERY_KEY)._base
    packed = b"".join(
        RECORD.pack(k, base.owners.number(e.owner), e.amount, e.unlock_height) for k, e in entries.items()
    )
    ghost = packed[34:68]
    assert len(ghost) == 34 and packed.find(ghost) == 34
    assert find_record(packed, ghost) == -1
    assert find_record(packed + ghost + bytes(RECORD_BYTES - 34), ghost) == 2 * RECORD_BYTES
    assert len(base.buckets) == 1 << BUCKET_BITS and base.records == 2 and ghost not in UtxoSet(entries)


def test_an_entry_that_cannot_be_packed_outlives_folds():
    odd = UtxoEntry(b"not 32 bytes", 1, 1)
    huge = UtxoEntry(OWNERS[0], 2**64, 1)
    late = UtxoEntry(OWNERS[0], 1, 2**32)
    utxos = UtxoSet({KEYS[0]: UtxoEntry(OWNERS[0], 3, 3)}, FOLD_EVERY_KEY)
    utxos = folded(utxos, {KEYS[0]: odd, b"short": huge, KEYS[2]: late})
    assert utxos[KEYS[0]] == odd and utxos[b"short"] == huge and len(utxos) == 3
    utxos = folded(utxos, {KEYS[1]: UtxoEntry(OWNERS[1], 4, 4)})
    assert dict(utxos.items()) == {KEYS[0]: odd, b"short": huge, KEYS[2]: late, KEYS[1]: UtxoEntry(OWNERS[1], 4, 4)}
    assert set(utxos._overlay.keys()) == {KEYS[0], b"short", KEYS[2]}  # the rest folded


def test_owners_whose_outputs_are_spent_are_dropped_from_the_table_in_time():
    # Every output to a new owner, then most of them spent: past twice the records (plus the
    # slack) a fold numbers the live owners afresh; the older sets keep their own table.
    entries = {bytes([i]) * 34: UtxoEntry(bytes([i]) * 32, 100 + i, i) for i in range(1, 41)}
    full = folded(UtxoSet(limits=UtxoLimits(compact_at=1, renumber_slack=4)), entries)
    assert full._base.records == 40 and len(full._base.owners.numbers) == 40
    mutation = full.mutate()
    for key in list(entries)[:35]:
        del mutation[key]
    kept = dict(list(entries.items())[35:])
    spent = mutation.finish(fold=True)
    assert spent._base.records == 5 and len(spent._base.owners.numbers) == 5  # renumbered
    assert spent._base.owners is not full._base.owners
    assert dict(spent.items()) == kept and dict(full.items()) == entries
    again = folded(spent, {bytes([99]) * 34: UtxoEntry(bytes([1]) * 32, 7, 7)})
    assert again._base.owners is spent._base.owners  # shared along the lineage until renumbered
    assert dict(again.items()) == {**kept, bytes([99]) * 34: UtxoEntry(bytes([1]) * 32, 7, 7)}
