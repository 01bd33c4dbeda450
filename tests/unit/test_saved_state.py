"""A node's soft state kept across restarts (node/saved.py): the proof book, so that a restarted
node keeps the network's word on proofs, and the mempool, so that a restart drops no transaction."""

from __future__ import annotations

import asyncio

from snode.common.clock import MockableClock
from snode.core.encoding import encode
from snode.core.mempool import Mempool
from snode.devchain import key_from_label
from snode.node.node import Node
from snode.node.proofs import STORE_KEY, ProofBook
from snode.node.saved import MEMPOOL_KEY, Restored, SavedState, restore
from snode.node.verifier import InlineVerifier
from snode.node.writer import ChainWriter
from snode.params import COIN, PROOF_CLOCK_TOLERANCE
from snode.services.saving import keep_saving
from snode.store.errors import StoreError
from snode.store.memory import MemoryStore
from tests.unit.conftest import LabChain, new_chain, service_node_daemon, wait_async

ALICE, BOB = key_from_label("alice"), key_from_label("bob")
A = key_from_label("proof book a").public
B = key_from_label("proof book b").public


def test_a_saved_book_comes_back_with_every_proof_time_and_endpoint() -> None:
    book = ProofBook()
    book.record(A, 1_000, ("203.0.113.5", 22025))
    book.record(A, 1_060, ("203.0.113.5", 22026))
    book.record(B, 1_030, ("198.51.100.7", 22025))
    again = ProofBook()
    assert again.restore(book.saved()) == 2
    assert again.history(A) == (1_060, 1_000)
    assert again.endpoint(A) == ("203.0.113.5", 22026)
    assert again.history(B) == (1_030, 0)
    assert again.endpoint(B) == ("198.51.100.7", 22025)
    assert again.version > 0  # answers that show proof times refresh


def test_what_this_node_sent_is_not_restored_so_the_doppelganger_check_still_runs() -> None:
    node = service_node_daemon("saved sn")
    sent = node.own_proof.send(node.now())
    node.own_proof.accepted(sent.timestamp, "127.0.0.9:9230")
    node.close()
    assert isinstance(node.store, MemoryStore)
    again = Node(params=node.params, consensus=node.consensus, store=node.store.reopen(), state=node.state,
                 identity=node.identity, producer_key=None, verifier=InlineVerifier())
    assert again.own_proof.sent == (0, 0)  # sn_duties' doppelganger check runs only before we send
    assert again.proofs.last_accepted(sent.pubkey) == sent.timestamp


def test_an_unreadable_save_is_logged_and_the_node_starts_without_it(caplog) -> None:
    book = ProofBook()
    assert book.restore(b"\x93not a book") == 0
    assert book.last_accepted(A) == 0
    assert "the saved uptime proofs are unreadable" in caplog.text


def test_a_book_is_saved_again_only_when_it_changed_or_its_save_was_not_written() -> None:
    book = ProofBook()
    saved = SavedState(Restored(book, Mempool(), pool_saved=True))
    assert saved.changed(book) == {}
    book.record(A, 1, ("203.0.113.5", 1))
    assert set(saved.changed(book)) == {STORE_KEY}
    assert saved.changed(book) == {}
    saved.not_written()
    assert set(saved.changed(book)) == {STORE_KEY}


def test_restore_returns_what_it_read_and_the_node_keeps_it() -> None:
    chain = new_chain()
    store = MemoryStore(chain.blocks[0], chain.state)
    registered = chain.new_node()
    book = ProofBook()
    book.record(registered, chain.now - 7, ("198.51.100.7", 1))
    tx = chain.transfer_tx(ALICE, BOB.public, COIN)
    store.set_meta(STORE_KEY, book.saved())
    store.set_meta(MEMPOOL_KEY, encode([tx]))
    read = restore(store, chain.state, chain.consensus, InlineVerifier(), chain.now)
    assert read.pool_saved and len(read.pool) == 1
    assert read.proofs.last_accepted(registered) == chain.now - 7
    node = _node_on(chain, store)
    assert node.proofs.last_accepted(registered) == chain.now - 7 and len(node.pool) == 1
    assert node.saved.changed(node.proofs, node.pool) == {}, "what was read back is saved as it is"


def test_an_empty_book_saves_and_restores_to_empty() -> None:
    again = ProofBook()
    assert again.restore(ProofBook().saved()) == 0


def _node_on(chain: LabChain, store: MemoryStore) -> Node:
    clock = MockableClock()
    clock.set_mock(chain.now)
    return Node(params=chain.params, consensus=chain.consensus, store=store, state=chain.state,
                identity=None, producer_key=None, verifier=InlineVerifier(), clock=clock)


def test_a_node_saves_its_book_when_it_closes_and_reads_it_when_it_opens_again() -> None:
    chain = new_chain()
    store = MemoryStore(chain.blocks[0], chain.state)
    registered = chain.new_node()  # the node's state (chain.state) is past the store's: no matter here
    node = _node_on(chain, store)
    node.proofs.record(registered, chain.now - 7, ("198.51.100.7", 1))
    node.proofs.record(B, chain.now - 5, ("198.51.100.8", 1))  # not (or no longer) registered
    node.close()
    assert store.get_meta(STORE_KEY) is not None
    node.close()  # again: nothing new to save, no write to a closed store
    again = _node_on(chain, store.reopen())
    assert (again.proofs.last_accepted(registered), again.proofs.endpoint(registered)) == (
        chain.now - 7, ("198.51.100.7", 1))
    assert again.proofs.last_accepted(B) == 0


def test_proofs_from_the_clocks_future_are_left_out_when_the_book_is_read_back() -> None:
    book = ProofBook()
    book.record(A, 1_000 + PROOF_CLOCK_TOLERANCE, ("203.0.113.5", 1))
    book.record(B, 1_001 + PROOF_CLOCK_TOLERANCE, ("198.51.100.7", 1))  # saved under a clock ahead
    again = ProofBook()
    assert again.restore(book.saved(), now=1_000) == 1
    assert (again.last_accepted(A), again.last_accepted(B)) == (1_000 + PROOF_CLOCK_TOLERANCE, 0)


def test_the_mempool_comes_back_in_arrival_order_and_what_no_longer_applies_is_dropped() -> None:
    chain = new_chain()
    store = MemoryStore(chain.blocks[0], chain.state)
    node = _node_on(chain, store)
    first = chain.transfer_tx(ALICE, BOB.public, COIN)
    second = chain.transfer_tx(BOB, ALICE.public, 2 * COIN)
    ids = [node.submit_transaction(tx, chain.now) for tx in (first, second)]
    node.close()
    again = _node_on(chain, store.reopen())
    assert sorted(again.pool.entries.values(), key=lambda e: e.arrival)[0].txid == ids[0]
    assert set(again.pool.entries) == set(ids)
    assert again.saved.changed(again.proofs, again.pool) == {}  # nothing new to save
    again.close()
    damaged = store.reopen()
    damaged.set_meta(MEMPOOL_KEY, encode([first, first, second]))  # a copy no longer applies
    third = _node_on(chain, damaged)
    assert set(third.pool.entries) == set(ids)


def test_an_unreadable_saved_mempool_is_logged_and_the_node_starts_with_an_empty_one(caplog) -> None:
    chain = new_chain()
    store = MemoryStore(chain.blocks[0], chain.state)
    store.set_meta(MEMPOOL_KEY, b"\xc1")
    node = _node_on(chain, store)
    assert len(node.pool) == 0
    assert "the saved mempool is unreadable" in caplog.text


def test_a_running_node_saves_its_book_when_it_changed_and_tries_again_after_a_failure() -> None:
    chain = new_chain()
    store = MemoryStore(chain.blocks[0], chain.state)
    node = _node_on(chain, store)
    writes: list[str] = []
    fail = [True]

    class Writer(ChainWriter):  # without an executor (its calls run inline), failing once
        async def call(self, fn, *args, **kwargs):
            if fail[0]:
                fail[0] = False
                raise StoreError("disk full")
            writes.append("write")
            return await super().call(fn, *args, **kwargs)

    async def run() -> None:
        task = asyncio.create_task(keep_saving(node, Writer(node), interval=0.01))
        node.proofs.record(B, 7, ("198.51.100.7", 1))
        await wait_async(lambda: bool(writes), what="the turn after the failed one written", timeout=10)
        task.cancel()

    asyncio.run(run())
    assert writes == ["write"]  # the failed turn did not mark the book saved
    again = ProofBook()
    again.restore(store.get_meta(STORE_KEY) or b"")
    assert again.last_accepted(B) == 7


def test_a_node_closed_over_a_damaged_database_writes_nothing_more_into_it() -> None:
    chain = new_chain()
    store = MemoryStore(chain.blocks[0], chain.state)
    node = _node_on(chain, store)
    node.proofs.record(B, 7, ("198.51.100.7", 1))
    node.submit_transaction(chain.transfer_tx(ALICE, BOB.public, COIN), chain.now)
    node.close(write=False)  # the daemon's call once its writer found the database damaged
    assert store.get_meta(STORE_KEY) is None and store.get_meta(MEMPOOL_KEY) is None
