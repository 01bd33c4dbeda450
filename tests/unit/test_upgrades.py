"""Network upgrades (issue #34, docs/UPGRADES.md): the fork tables, the one lookup by height, no
height compared by hand in core/, block and transaction versions by height, the branch id in
the signing hash, `--test-fork` and the mempool's re-check at activation."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import msgspec
import pytest

import snode.core
from snode.app.config import build_config
from snode.common.endpoints import ConfigError
from snode.core import mempool as mp
from snode.core.blocks import header_fields, make_header
from snode.core.errors import BadSignature, InvalidBlock, WrongFork
from snode.core.transactions import TxKind
from snode.core.transition import check_block_version
from snode.core.txbuilder import build_transfer
from snode.devchain import key_from_label
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.params import (
    COIN,
    FAR_AHEAD,
    KNOWN_FORKS,
    MAINNET,
    NETWORKS,
    REGTEST,
    TESTNET,
    V1,
    V2,
    Fork,
    ScheduleError,
    check_schedule,
)
from snode.store.memory import MemoryStore
from tests.unit.conftest import FUNDS, PEOPLE, LabChain

ALICE, BOB = key_from_label("alice"), key_from_label("bob")
H = 6
"""The height regtest's v2 is scheduled at in these tests."""


def forked_chain(height: int = H) -> LabChain:
    """A regtest chain whose schedule has v2 at `height`, the well-known people funded."""
    params = REGTEST.with_test_forks((Fork(V2, height),))
    return LabChain.create({key_from_label(p).public: FUNDS for p in PEOPLE}, params=params)


# --- the tables -----------------------------------------------------------------------------

@pytest.mark.parametrize("params", NETWORKS.values(), ids=NETWORKS.keys())
def test_each_network_schedule_is_in_order(params):
    check_schedule(params.forks)
    heights = [f.height for f in params.forks]
    versions = [f.rules.block_version for f in params.forks]
    assert heights == sorted(set(heights)) and versions == sorted(set(versions))
    assert all(a.rules.min_sn_version <= b.rules.min_sn_version for a, b in zip(params.forks, params.forks[1:]))


def test_v2_is_far_ahead_on_mainnet_and_testnet_and_by_flag_only_elsewhere():
    for params in (MAINNET, TESTNET):
        assert params.forks == (Fork(V1, 0), Fork(V2, FAR_AHEAD)) and not params.test_forks
    for name in ("devnet", "regtest"):
        assert NETWORKS[name].forks == (Fork(V1, 0),) and NETWORKS[name].test_forks


def test_every_known_fork_has_its_own_branch_id_and_block_version():
    rules = list(KNOWN_FORKS.values())
    assert rules[0] is V1 and V1.branch_id == 0 and V1.block_version == 1
    assert len({r.branch_id for r in rules}) == len(rules)
    assert len({r.block_version for r in rules}) == len(rules)
    assert V2.block_version == 2 and V2.branch_id != 0


@pytest.mark.parametrize("forks, fix", [
    ((Fork(V2, 0),), "must start with fork v1 at height 0"),
    ((Fork(V1, 0), Fork(V2, 5), Fork(V2, 9)), "fork v2 cannot follow fork v2"),
    ((Fork(V1, 0), Fork(V2, 0)), "fork v2 at height 0 must come after fork v1 at height 0"),
])
def test_a_schedule_out_of_order_names_what_to_fix(forks, fix):
    with pytest.raises(ScheduleError, match=fix):
        check_schedule(forks)


# --- the one lookup -------------------------------------------------------------------------

def test_rules_at_switches_exactly_at_the_fork_height():
    params = REGTEST.with_test_forks((Fork(V2, H),))
    assert [params.rules_at(h).name for h in (0, H - 1, H, H + 1, 10**9)] == ["v1", "v1", "v2", "v2", "v2"]
    assert params.next_fork(H - 1) == Fork(V2, H) and params.next_fork(H) is None
    assert MAINNET.rules_at(FAR_AHEAD - 1) is V1 and MAINNET.rules_at(FAR_AHEAD) is V2
    assert REGTEST.rules_at(10**9) is V1


def _height_literal_comparisons(tree: ast.AST) -> list[int]:
    """Line numbers of comparisons of a height with a number other than 0 (genesis) or with a
    fork's attribute: what only `rules_at` may decide."""
    def is_height(node: ast.expr) -> bool:
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return "height" in name

    def of_a_fork(node: ast.expr) -> bool:  # fork.height, params.forks[1].height (not a reorg's fork_height)
        return isinstance(node, ast.Attribute) and "fork" in ast.unparse(node.value).lower()

    def literal(node: ast.expr) -> bool:
        return (isinstance(node, ast.Constant) and isinstance(node.value, int)
                and not isinstance(node.value, bool) and node.value != 0)

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(of_a_fork(o) for o in operands) or (
                any(is_height(o) for o in operands) and any(literal(o) for o in operands)
            ):
                lines.append(node.lineno)
    return lines


def test_no_consensus_module_compares_a_height_with_a_literal_or_a_fork():
    core = Path(snode.core.__file__).parent
    found = {p.name: lines for p in sorted(core.glob("*.py"))
             if (lines := _height_literal_comparisons(ast.parse(p.read_text())))}
    assert found == {}, f"ask params.rules_at(height) instead: {found}"


def test_the_check_finds_what_it_forbids():
    code = "if height >= 1200: pass\nif h.height < fork.height: pass\nif height > 0: pass\n"
    assert _height_literal_comparisons(ast.parse(code)) == [1, 2]


# --- block versions by height ---------------------------------------------------------------

def test_a_forked_chain_makes_and_takes_version_2_from_the_fork_height():
    chain = forked_chain()
    chain.mine(H - 1)
    assert [b.header.version for b in chain.blocks] == [1] * H
    chain.mine(2)
    assert [b.header.version for b in chain.blocks[H:]] == [2, 2]


def test_a_block_of_the_other_fork_version_is_refused_with_the_fork():
    chain = forked_chain()
    chain.mine(H - 2)
    early = chain.block_with([])
    bad = msgspec.structs.replace(early, header=make_header(2, **header_fields(early.header), state_root=bytes(32)))
    refusal = f"block {H - 1} has version 2; this chain is on fork v1 from height 0, whose blocks are version 1"
    with pytest.raises(InvalidBlock, match=refusal):
        check_block_version(bad.header, chain.consensus)
    chain.mine(1)
    late = chain.block_with([])
    assert late.header.version == 2
    old = make_header(1, **header_fields(late.header))
    with pytest.raises(InvalidBlock, match=f"block {H} has version 1; this chain is on fork v2 from height {H}, whose"):
        check_block_version(old, chain.consensus)
    with pytest.raises(InvalidBlock, match="has version 1"):
        chain.apply(msgspec.structs.replace(late, header=old))


# --- the branch id ----------------------------------------------------------------------------

def test_the_branch_id_changes_the_signing_hash_and_v1_keeps_its_own():
    chain = forked_chain()
    v1 = build_transfer(chain.spendable(ALICE.public), ALICE, BOB.public, COIN, chain.params, signed_for=V1)
    v2 = build_transfer(chain.spendable(ALICE.public), ALICE, BOB.public, COIN, chain.params, signed_for=V2)
    assert v1.signatures != v2.signatures and v1.version == v2.version
    # v1 is exactly what every transaction was signed as before forks (the default).
    assert build_transfer(chain.spendable(ALICE.public), ALICE, BOB.public, COIN, chain.params) == v1


def test_a_transaction_signed_for_v1_is_refused_on_v2_with_its_reason():
    chain = forked_chain()
    chain.mine(H - 2)
    v1 = chain.transfer_tx(ALICE, BOB.public, COIN)  # for block H-1: v1
    chain.mine(1)
    # On regtest the refusal names the daemon's schedule: a wallet without the same --test-fork signs for v1 again.
    with pytest.raises(WrongFork, match=f"is signed for fork v1; this chain is on v2 from height {H}: sign it again "
                       f"with the daemon's schedule \\(--test-fork v2@{H}\\)"):
        chain.submit(v1)
    chain.submit(chain.transfer_tx(ALICE, BOB.public, COIN))  # signed again, for v2
    with pytest.raises(InvalidBlock, match="bad signature"):  # in a block: refused all the same
        chain.mine_with([v1])


def test_a_transaction_signed_for_v2_is_refused_before_the_fork_with_its_reason():
    chain = forked_chain()
    early = build_transfer(chain.spendable(ALICE.public), ALICE, BOB.public, COIN, chain.params, signed_for=V2)
    with pytest.raises(WrongFork, match=f"is signed for fork v2, which starts at height {H}; this chain is on v1"):
        chain.submit(early)


def test_a_forged_signature_is_still_a_bad_signature():
    chain = forked_chain()
    tx = chain.transfer_tx(ALICE, BOB.public, COIN)
    forged = msgspec.structs.replace(tx, signatures=(bytes(64),))
    with pytest.raises(BadSignature) as refused:
        chain.submit(forged)
    assert not isinstance(refused.value, WrongFork)


# --- the mempool at activation ----------------------------------------------------------------

def test_the_pool_is_checked_again_at_activation():
    chain = forked_chain()
    chain.mine(H - 3)
    chain.submit(chain.transfer_tx(ALICE, BOB.public, COIN))  # both signed for v1
    chain.submit(chain.transfer_tx(BOB, ALICE.public, COIN))
    chain.mine_with([])  # block H-2: the pool stays, the next block is still v1
    pool, refused = mp.readmit(chain.pool, chain.state, chain.consensus, now=chain.now)
    assert len(pool) == 2 and refused == {}
    chain.mine_with([])  # block H-1: the next block is v2
    pool, refused = mp.readmit(chain.pool, chain.state, chain.consensus, now=chain.now)
    assert len(pool) == 0 and set(refused) == {TxKind.TRANSFER} and len(refused[TxKind.TRANSFER]) == 2
    assert all("signed for fork v1" in reason for reason in refused[TxKind.TRANSFER])


# --- --test-fork --------------------------------------------------------------------------------

def _config(network: str, *forks: str):
    return build_config(network=network, data_dir="/tmp/x", service_node=False, p2p_bind_ip=None,
                        p2p_bind_port=None, rpc_admin=None, public_ip=None, quorumnet_port=None,
                        priority_nodes=(), log_level="2", non_interactive=True, genesis=None,
                        test_forks=forks)


def test_test_fork_schedules_on_regtest_and_devnet():
    assert _config("regtest", "v2@20").params.forks == (Fork(V1, 0), Fork(V2, 20))
    assert _config("devnet", "v2@3").params.rules_at(3) is V2
    assert _config("regtest").params is REGTEST


@pytest.mark.parametrize("network, value, line", [
    ("mainnet", "v2@20", "--test-fork: mainnet's fork schedule is in the release; the flag is for devnet and regtest"),
    ("testnet", "v2@20", "--test-fork: testnet's fork schedule is in the release"),
    ("regtest", "v2", "--test-fork: 'v2' is not NAME@HEIGHT (example: v2@20)"),
    ("regtest", "v2@", "--test-fork: 'v2@' is not NAME@HEIGHT"),
    ("regtest", "v2@-3", "--test-fork: 'v2@-3' is not NAME@HEIGHT"),
    ("regtest", "v2@١٢", "is not NAME@HEIGHT"),
    ("regtest", "v9@20", "--test-fork: this snoded knows no fork 'v9' (it knows v2)"),
    ("regtest", "v2@0", "--test-fork: height 0 of v2 must be from 1"),
    ("regtest", "v1@5", "--test-fork: fork v1 cannot follow fork v1"),
])
def test_a_bad_test_fork_is_one_line_naming_what_to_fix(network, value, line):
    with pytest.raises(ConfigError) as refused:
        _config(network, value)
    assert line in str(refused.value) and "\n" not in str(refused.value)


def test_test_forks_out_of_order_are_refused():
    with pytest.raises(ConfigError, match="--test-fork: fork v2 cannot follow fork v2"):
        _config("regtest", "v2@20", "v2@30")


def test_a_node_empties_its_pool_of_what_the_new_fork_refuses_with_one_line_per_kind(caplog):
    chain = forked_chain()
    chain.mine(H - 2)
    genesis = chain.fork(at=0).state
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], genesis),
                state=genesis, identity=None, producer_key=None, verifier=InlineVerifier())
    node.accept_blocks(chain.blocks[1:], chain.now)
    for payee in (BOB, key_from_label("carol")):
        node.submit_transaction(chain.transfer_tx(ALICE if payee is BOB else BOB, payee.public, COIN), chain.now)
    assert len(node.pool) == 2
    with caplog.at_level(logging.WARNING, logger="snode.node.node"):
        node.accept_block(chain.mine_with([]), chain.now)  # block H-1: the next one is v2's
    assert len(node.pool) == 0
    lines = [r.getMessage() for r in caplog.records if "left the mempool" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"fork v2 from height {H}: 2 transfer transactions left the mempool")
    assert "is signed for fork v1" in lines[0]


def test_the_wrong_fork_hint_is_for_test_forks_only():
    from snode.core.tx_rules import _test_fork_hint
    from snode.params import MAINNET
    assert _test_fork_hint(MAINNET) == ""  # mainnet's schedule is the release's: no flag to name
    assert _test_fork_hint(REGTEST) == " with no --test-fork (the daemon has none)"
    assert _test_fork_hint(forked_chain().params) == f" with the daemon's schedule (--test-fork v2@{H})"
