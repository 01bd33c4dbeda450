"""A leader that signs two blocks for one round is proven, gossiped and deregistered (issue #33
item 8), on a devnet of real daemons that reach fork v2 once their registrations are mined.

One service node runs with `SNODE_TEST_MISBEHAVE=equivocate` (devnet and regtest only; mainnet and
testnet refuse it in one line): whenever it leads a round it signs a second, different template
too, sends its first validator that one only (which signs it, and proves the equivocation when
the block the others made of the first comes) and its second validator both (which signs
neither, and proves it at once). The proof goes over quorumnet to every service node, which
checks it before it keeps it (the other validators saw one template only); the obligations
quorum votes
to deregister it with reason `equivocation`, the state change carrying the proof, which every
node checks as it validates the block. The operator sees the stake locked with that reason.
"""

from __future__ import annotations

from snode.core.address import encode_address
from snode.params import DEVNET
from tests.functional.framework import narrator, run_snoded, wait_until
from tests.functional.sn_helpers import SnNet, record

log = narrator(__name__)
FORK = 16
"""Fork v2's height: after the registrations (which the test's wallet helpers sign for v1)."""


def _logs(node) -> str:
    return node.stderr_text() + (node._stdout.read_text(errors="replace") if node._stdout.exists() else "")


def test_a_leader_that_sends_two_templates_is_proven_and_deregistered_for_equivocation(nodes, tmp_path):
    log.info("Start an authority and 6 service nodes on a devnet with fork v2 at block %d; node 0 equivocates",
             FORK)
    net = SnNet(nodes, tmp_path, 6, extra_args=(f"--test-fork=v2@{FORK}",),
                env_of={0: {"SNODE_TEST_MISBEHAVE": "equivocate"}})
    net.register_all()
    wait_until(lambda: net.active(net.authority) == len(net.sns), timeout=120, what="all nodes active")
    wait_until(lambda: net.authority.get_info()["block_production"] == "service_nodes",
               timeout=90, what="service-node block production")
    cheat = net.pubkeys[0]
    honest = net.sns[1:]

    wait_until(lambda: net.authority.get_info()["height"] >= FORK, timeout=120, what=f"fork v2 at {FORK}")
    log.info("When the cheat leads, two validators see its two templates and make the proof; every "
             "service node receives it and checks it")
    wait_until(lambda: any(f"equivocation: leader {cheat[:16]}" in _logs(sn) for sn in honest),
               timeout=120, what="a validator's proof of the cheat's equivocation")
    wait_until(lambda: sum("equivocation proven by" in _logs(sn) for sn in honest) >= 2,
               timeout=60, what="the proof received and checked by other nodes")

    log.info("The quorum deregisters it: gone from every node's registry")
    def registered(node) -> list[str]:
        return [r["service_node_pubkey"] for r in node.get_service_nodes()["service_node_states"]]
    wait_until(lambda: all(cheat not in registered(sn) for sn in [net.authority, *honest]), timeout=120,
               what="the cheat deregistered")

    log.info("Its operator's stake is locked with reason 'equivocation'")
    address = encode_address(DEVNET.address_prefix, net.operators[0].public)
    stakes = net.authority.get_locked_stakes(address=address)["stakes"]
    assert [(s["state"], s["reason"]) for s in stakes] == [("deregistered", "equivocation")], stakes

    log.info("Blocks keep coming from the honest nodes")
    height = net.authority.get_info()["height"]
    wait_until(lambda: net.authority.get_info()["height"] >= height + 3, timeout=60, what="3 more blocks")


def test_the_misbehaviour_switch_is_refused_on_mainnet_in_one_line(tmp_path, monkeypatch):
    log.info("SNODE_TEST_MISBEHAVE on mainnet: refused before start, one line")
    monkeypatch.setenv("SNODE_TEST_MISBEHAVE", "equivocate")
    done = run_snoded([f"--data-dir={tmp_path / 'main'}", "--non-interactive"])
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "SNODE_TEST_MISBEHAVE is for devnet and regtest tests" in lines[0], done.stderr


def test_a_leader_that_leaves_signatures_out_of_its_blocks_does_not_frame_their_validators(nodes, tmp_path):
    log.info("Start an authority and 5 service nodes on a devnet; node 0 leaves out of each block it "
             "leads every validator signature beyond those needed")
    net = SnNet(nodes, tmp_path, 5, env_of={0: {"SNODE_TEST_MISBEHAVE": "drop-signatures"}})
    net.register_all()
    wait_until(lambda: net.active(net.authority) == len(net.sns), timeout=120, what="all nodes active")
    wait_until(lambda: net.authority.get_info()["block_production"] == "service_nodes",
               timeout=90, what="service-node block production")
    cheat = net.pubkeys[0]

    log.info("Wait for a block of the cheat's that leaves a validator out")

    def framed_block() -> tuple[int, str] | None:
        top = net.authority.get_info()["height"]
        for height in range(max(1, top - 3), top + 1):
            block = net.authority.get_block(height=height)
            if block["producer_key"] == cheat and len(block["validators"]) < block["validator_count"]:
                left_out = set(net.pubkeys) - {cheat} - set(block["validators"])
                return height, sorted(left_out)[0]
        return None
    height, framed = wait_until(framed_block, timeout=120, what="a block that leaves a signer out")

    log.info("Block %d leaves out %s: the authority, which sees only the bitset, counts a miss; every "
             "service node, which received the signature before the block, does not", height, framed[:16])

    def misses() -> tuple[int, list[int]]:
        views = [record(sn, framed)["missed_duties"] for sn in net.sns[1:]]
        return record(net.authority, framed)["missed_duties"], views
    blind, views = wait_until(lambda: (m := misses())[0] >= 1 and m, timeout=20, what="the authority's miss")
    assert all(seen < blind for seen in views), (blind, views)
