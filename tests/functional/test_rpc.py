"""Admin JSON-RPC against a real regtest daemon: every specification method and field, the
registration-command rules with the specification's error texts, the JSON-RPC 2.0 envelope and
the HTTP rules (405, 413, 415, 403), and a full registration paid through send_raw_transaction.

Each test starts its own regtest daemons (`sn` is one with --service-node), calls them as an
operator's tool would, and compares answers field by field with the specification.
"""

from __future__ import annotations

import json

import pytest

from snode.api import errors as E
from snode.core.registration import parse_command
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from tests.functional.framework import (
    address_of,
    assert_equal,
    assert_raises_rpc_error,
    fund,
    narrator,
    scaled,
    send_spend,
)
from tests.functional.sn_helpers import POOL_MIN, SOLO

REG_FAIL = "Failed to make registration command"
OPERATOR = key_from_label("operator")
"""The operator key most tests register with."""

log = narrator(__name__)


def test_get_info_and_status_lines(nodes, sn):
    log.info("Read get_info on a fresh plain node and on a fresh service node")
    plain = nodes.add()
    info = plain.get_info()
    assert_equal(info["height"], 0)
    assert_equal(info["target_height"], 0)
    assert_equal(info["status_line"], "v0.2.0; Height: 0, SN: no, proof: never")
    assert_equal(sn.get_info()["status_line"], "v0.2.0; Height: 0, SN: not registered, proof: never")
    log.info("Mine 2 blocks: the status line shows the new height")
    plain.generate_blocks(blocks=2)
    assert_equal(plain.get_info()["status_line"], "v0.2.0; Height: 2, SN: no, proof: never")


def test_service_node_key_and_non_sn_errors(nodes, sn):
    log.info("The service node has a 32-byte key")
    key = sn.get_service_node_key()["service_node_pubkey"]
    assert len(key) == 64 and bytes.fromhex(key)
    log.info("A plain node refuses every service-node method, naming --service-node")
    plain = nodes.add()
    assert_raises_rpc_error(E.NOT_SERVICE_NODE, "--service-node", plain.get_service_node_key)
    assert_raises_rpc_error(E.NOT_SERVICE_NODE, "--service-node", plain.get_service_node_registration_cmd,
                            contributor_addresses=[address_of(plain, OPERATOR)],
                            contributor_amounts=[SOLO])
    assert_raises_rpc_error(E.NOT_SERVICE_NODE, "--service-node", plain.send_uptime_proof)
    log.info("An unregistered service node cannot send an uptime proof")
    assert_raises_rpc_error(E.PROOF_FAILED, "not registered", sn.send_uptime_proof)


NO_OP = "No operator contribution given: "


@pytest.mark.parametrize("params, reason", [
    # Every cause the specification lists answers with both of its texts, then the reason.
    ({"contributor_addresses": ["A"]}, NO_OP + "contributor_amounts is missing"),
    ({"contributor_addresses": ["A"], "contributor_amounts": []}, NO_OP + "contributor_amounts must be a list"),
    ({"contributor_addresses": ["A"], "contributor_amounts": ["200000000000000"]},
     NO_OP + "the operator amount '200000000000000' is text"),
    ({"contributor_addresses": ["A"], "contributor_amounts": ["1,000"]}, NO_OP + "the operator amount '1,000' is text"),
    ({"contributor_addresses": ["A"], "contributor_amounts": [1.5]}, NO_OP + "the operator amount 1.5 is not a whole"),
    ({"contributor_addresses": ["A"], "contributor_amounts": [0]}, NO_OP + "the operator amount 0 must be above 0"),
    ({"contributor_addresses": ["A"], "contributor_amounts": [200_000]},
     NO_OP + "the operator amount 200000 looks like coins; amounts are atomic units (200000 coins = 200000000000000)"),
    ({"contributor_addresses": ["A", "B"], "contributor_amounts": [SOLO]},
     "has 2 entries but contributor_amounts has 1"),
    ({"contributor_addresses": ["A x"], "contributor_amounts": [SOLO]},
     NO_OP + "operator address: address contains whitespace"),
    ({"contributor_addresses": ["snt1qqqq"], "contributor_amounts": [SOLO]},
     NO_OP + "operator address: address 'snt1qqqq...' has the wrong network prefix"),
    ({"operator_cut": "11", "contributor_addresses": ["A"], "contributor_amounts": [SOLO]}, "above the maximum of 10"),
    ({"operator_cut": "ten", "contributor_addresses": ["A"], "contributor_amounts": [SOLO]}, "not a decimal number"),
    ({"operator_cut": "-1", "contributor_addresses": ["A"], "contributor_amounts": [SOLO]}, "negative"),
    ({"contributor_addresses": ["A"], "contributor_amounts": [POOL_MIN - 1]},
     "operator contribution 99999999999999 atomic units (99999.999999999 coins) is below the pool minimum of "
     "100000000000000 atomic units (100000 coins)"),  # in the units given, not coins (issue #38)
    ({"contributor_addresses": ["A"], "contributor_amounts": [SOLO + 1]}, "above the staking requirement"),
    ({"contributor_addresses": ["A"], "contributor_amounts": [SOLO], "staking_requirement": 1},
     "not this network's staking requirement"),
    ({"contributor_addresses": ["A"] * 12, "contributor_amounts": [POOL_MIN] + [1] * 11},
     "at most the operator and 10 others"),
])
def test_registration_cmd_errors(sn, params, reason):
    log.info("Ask for a registration command with bad parameters: refused with %r", reason)
    valid = address_of(sn, OPERATOR)
    params = dict(params)
    params["contributor_addresses"] = [
        valid if a == "A" else address_of(sn, key_from_label(f"c{i}")) if a == "B" else a
        for i, a in enumerate(params["contributor_addresses"])
    ]
    err = assert_raises_rpc_error(E.REGISTRATION_CMD_FAILED, reason, sn.get_service_node_registration_cmd, params)
    assert err.message.startswith(f"{REG_FAIL}: "), err.message


def test_registration_cmd_missing_amounts_uses_spec_text(sn):
    log.info("Ask for a registration command without contributions: the specification's text")
    assert_raises_rpc_error(
        E.REGISTRATION_CMD_FAILED, f"{REG_FAIL}: No operator contribution given",
        sn.get_service_node_registration_cmd, {"operator_cut": "0"},
    )


def test_registration_cmd_shape(sn):
    log.info("Ask for a pool registration command of two contributors")
    op = OPERATOR
    contributor = key_from_label("contributor")
    cmd = sn.get_service_node_registration_cmd(
        operator_cut="2.5", contributor_addresses=[address_of(sn, op), address_of(sn, contributor)],
        contributor_amounts=[POOL_MIN, 50_000 * COIN], staking_requirement=SOLO,
    )["registration_cmd"]
    log.info("Check it is one line of single-spaced words in the specification's order")
    assert "\n" not in cmd and "  " not in cmd and cmd == cmd.strip()
    words = cmd.split(" ")
    assert_equal(words[0], "register_service_node")
    assert_equal(words[1], "2.5")
    assert_equal(words[2:6], [address_of(sn, op), str(POOL_MIN), address_of(sn, contributor), str(50_000 * COIN)])
    log.info("Parse it back: signed by the daemon's key, valid for 14 days")
    reg = parse_command(cmd, REGTEST)  # checks the signature too
    assert_equal(reg.sn_pubkey.hex(), sn.get_service_node_key()["service_node_pubkey"])
    info_time = int(words[6])
    import time
    # 14 days ahead, less a 10-minute margin for block producers whose clocks are behind ours.
    assert abs(info_time - (time.time() + REGTEST.registration_validity - 600)) < 60


def test_registration_through_raw_transaction(nodes, sn):
    """Fund an operator from the faucet, register the daemon's key, check every record field."""
    log.info("Fund the operator from the faucet and mine until the payment unlocks")
    op = OPERATOR
    fund(sn, {op.public: SOLO + COIN})
    sn.generate_blocks(blocks=1)
    sn.generate_blocks(blocks=REGTEST.unlock_confirmations)
    cmd = sn.get_service_node_registration_cmd(
        operator_cut="5", contributor_addresses=[address_of(sn, op)], contributor_amounts=[SOLO],
    )["registration_cmd"]
    log.info("Pay the daemon's registration command through send_raw_transaction and mine it")
    send_spend(sn, op, [], parse_command(cmd, REGTEST))
    assert_equal(len(sn.get_mempool()["transactions"]), 1)
    reg_height = sn.generate_blocks(blocks=1)["height"]
    log.info("Check every field of the new record against the specification")
    records = sn.get_service_nodes({})["service_node_states"]
    assert_equal(len(records), 1)
    rec = records[0]
    spec_fields = {
        "service_node_pubkey": str, "active": bool, "funded": bool, "payable": bool,
        "registration_height": int, "total_contributed": int, "staking_requirement": int,
        "operator_fee": int, "contributors": list, "last_uptime_proof": int, "decommission_count": int,
    }
    for field, kind in spec_fields.items():
        assert isinstance(rec[field], kind), f"{field} is {type(rec[field]).__name__}"
    assert_equal(rec["service_node_pubkey"], sn.get_service_node_key()["service_node_pubkey"])
    assert_equal((rec["funded"], rec["active"], rec["payable"]), (True, False, False))
    assert_equal(rec["registration_height"], reg_height)
    assert_equal(rec["total_contributed"], SOLO)
    assert_equal(rec["staking_requirement"], SOLO)
    assert_equal(rec["operator_fee"], 50_000)  # ppm: tools show 50000 / 10000 = 5 %
    assert_equal(len(rec["contributors"]), 1)
    assert_equal(rec["decommission_count"], 0)
    # Funded, not activated yet: Decomm by the flags (the node table's word), qualified.
    line = sn.get_info()["status_line"]
    assert line.startswith(f"v0.2.0; Height: {reg_height}, SN: Decomm (not activated yet), proof: "), line
    log.info("Filter by pubkey: the same record; an unknown key: none")
    same = sn.get_service_nodes(service_node_pubkeys=[rec["service_node_pubkey"]])["service_node_states"]
    assert_equal(same, [rec])
    assert_equal(sn.get_service_nodes(service_node_pubkeys=["00" * 32])["service_node_states"], [])
    log.info("Ask to register the same key again: refused with the reason")
    assert_raises_rpc_error(None, "already registered", sn.get_service_node_registration_cmd,
                            contributor_addresses=[address_of(sn, op)], contributor_amounts=[SOLO])
    log.info("Send an uptime proof, now that the key is registered. This lone daemon holds the "
             "regtest authority key, the quorum while the network is small: with no peer, its own "
             "word is all the network there is")
    sent = sn.send_uptime_proof()
    assert_equal((sent["status"], sent["accepted"], sent["accepted_by"]),
                 ("OK", True, "this node, the quorum (no peers)"))
    again = sn.send_uptime_proof()  # the recovery step works every time: always a newer proof
    assert again["timestamp"] > sent["timestamp"] and again["accepted"], (sent, again)
    rec = sn.get_service_nodes({})["service_node_states"][0]
    assert rec["last_uptime_proof"] >= again["timestamp"]
    log.info("Compare the cached full list with fresh records, after a proof and after a block")
    for _ in range(2):
        full = sn.get_service_nodes({})["service_node_states"]
        fresh = sn.get_service_nodes(service_node_pubkeys=[r["service_node_pubkey"] for r in full])
        assert_equal(full, fresh["service_node_states"])
        sn.generate_blocks(blocks=1)
    assert "proof: never" not in sn.get_info()["status_line"]


def test_pool_registration_awaits_contributions(sn):
    log.info("Fund a pool operator and mine until the payment unlocks")
    op = key_from_label("pool operator")
    fund(sn, {op.public: POOL_MIN + COIN})
    sn.generate_blocks(blocks=1 + REGTEST.unlock_confirmations)
    cmd = sn.get_service_node_registration_cmd(
        operator_cut="5", contributor_addresses=[address_of(sn, op)], contributor_amounts=[POOL_MIN],
    )["registration_cmd"]
    log.info("Register with the pool minimum and mine it: the node awaits contributions")
    send_spend(sn, op, [], parse_command(cmd, REGTEST))
    height = sn.generate_blocks(blocks=1)["height"]
    rec = sn.get_service_nodes({})["service_node_states"][0]
    assert_equal((rec["funded"], rec["active"], rec["total_contributed"]), (False, False, POOL_MIN))
    assert_equal(sn.get_info()["status_line"], f"v0.2.0; Height: {height}, SN: Await, proof: never")


def test_raw_transaction_rejections(sn):
    log.info("Send a transaction that is not hex, then bytes that are not a transaction")
    assert_raises_rpc_error(E.INVALID_PARAMS, "tx_hex", sn.send_raw_transaction, tx_hex="zz")
    assert_raises_rpc_error(E.TX_REJECTED, "transaction rejected: not a valid Transaction",
                            sn.send_raw_transaction, tx_hex="00")
    assert_equal(sn.get_mempool()["transactions"], [])


def test_blocks_and_transactions_lookup(sn):
    log.info("Pay from the faucet: the transaction is found in the pool")
    txid = fund(sn, {OPERATOR.public: COIN})
    assert_equal(sn.get_transaction(txid=txid)["in_pool"], True)
    log.info("Mine it: block 1 holds it, by height and by hash")
    result = sn.generate_blocks(blocks=1)
    block = sn.get_block(height=1)
    assert_equal(block["hash"], result["blocks"][0])
    assert txid in block["tx_ids"]
    assert_equal(sn.get_block(hash=block["hash"])["height"], 1)
    tx = sn.get_transaction(txid=txid)
    assert_equal((tx["in_pool"], tx["height"], tx["kind"]), (False, 1, "transfer"))
    log.info("Look up what does not exist, and a block by neither height nor hash")
    assert_raises_rpc_error(E.NOT_FOUND, "no such block", sn.get_block, height=99)
    assert_raises_rpc_error(E.INVALID_PARAMS, "exactly one", sn.get_block, {})
    assert_raises_rpc_error(E.NOT_FOUND, "neither in the chain", sn.get_transaction, txid="00" * 32)
    assert_equal(sn.get_height(), {"height": 1, "hash": block["hash"]})
    assert_equal(sn.get_staking_requirement()["staking_requirement"], SOLO)


def test_generate_blocks_params(sn):
    log.info("generate_blocks refuses a string, zero and a misspelt field, then mines 5")
    assert_raises_rpc_error(E.INVALID_PARAMS, "blocks: must be an integer, not a string",
                            sn.generate_blocks, blocks="2")
    assert_raises_rpc_error(E.INVALID_PARAMS, "blocks: must be at least 1", sn.generate_blocks, blocks=0)
    assert_raises_rpc_error(E.INVALID_PARAMS, "unknown parameter 'block' (this method takes: blocks)",
                            sn.generate_blocks, block=1)
    assert_equal(sn.generate_blocks(blocks=5)["height"], 5)
    assert_equal(sn.get_info()["height"], 5)


# --- the JSON-RPC 2.0 envelope -------------------------------------------------------------------

def post(node, body, headers=None):
    """POST body (JSON-encoded unless bytes or str) to node's RPC; (status, headers, data)."""
    status, hdrs, data = node.rpc.raw(body if isinstance(body, (bytes, str)) else json.dumps(body), headers=headers)
    return status, hdrs, data


def test_envelope(sn):
    log.info("A well-formed request echoes its id")
    status, _, data = post(sn, {"jsonrpc": "2.0", "id": "abc", "method": "get_info"})
    reply = json.loads(data)
    assert_equal((status, reply["id"], reply["jsonrpc"]), (200, "abc", "2.0"))
    log.info("Each malformed envelope gets HTTP 200 and its JSON-RPC error code")
    for body, code in [
        ("{not json", E.PARSE_ERROR),
        ({"jsonrpc": "1.0", "id": 1, "method": "get_info"}, E.INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, E.INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 1, "method": "no_such_method"}, E.METHOD_NOT_FOUND),
        ({"jsonrpc": "2.0", "id": 1, "method": "get_info", "params": [1]}, E.INVALID_PARAMS),
        ({"jsonrpc": "2.0", "id": 1, "method": "get_block", "params": {"height": "x"}}, E.INVALID_PARAMS),
        ([], E.INVALID_REQUEST),
        ("42", E.INVALID_REQUEST),
        ("[" * 100_000 + "]" * 100_000, E.PARSE_ERROR),
    ]:
        status, _, data = post(sn, body)
        assert_equal(status, 200, f"HTTP status for {body!r}")
        assert_equal(json.loads(data)["error"]["code"], code, f"code for {body!r}")
    status, _, data = post(sn, {"jsonrpc": "2.0", "id": 1, "method": "get_block", "params": {"height": "x"}})
    assert "height" in json.loads(data)["error"]["message"]
    log.info("Bytes that are not UTF-8 are a parse error in our words, whichever msgspec decoded them")
    status, _, data = post(sn, b'{"jsonrpc": "2.0", "id": 1, "method": "get_info", "x": "\xff\xfe"}')
    assert_equal((status, json.loads(data)["error"]), (200, {"code": E.PARSE_ERROR,
                                                             "message": "Parse error: a text field is not UTF-8"}))


def test_batches_and_notifications(sn):
    log.info("A batch answers its requests in order and not its notification")
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "get_height"},
        {"jsonrpc": "2.0", "method": "get_height"},  # notification: no reply
        {"jsonrpc": "2.0", "id": 2, "method": "nope"},
    ]
    status, _, data = post(sn, batch)
    replies = json.loads(data)
    assert_equal(status, 200)
    assert_equal([r["id"] for r in replies], [1, 2])
    assert_equal(replies[1]["error"]["code"], E.METHOD_NOT_FOUND)
    log.info("A lone notification gets 204 and no body")
    status, _, data = post(sn, {"jsonrpc": "2.0", "method": "get_height"})
    assert_equal((status, data), (204, b""))


def test_http_rules(sn):
    log.info("GET is 405, a wrong Content-Type 415, a body over 1 MiB 413")
    status, hdrs, data = sn.rpc.raw("", method="GET")
    assert_equal(status, 405)
    assert b"POST" in data
    status, _, data = post(sn, {"jsonrpc": "2.0", "id": 1, "method": "get_info"}, {"Content-Type": "text/plain"})
    assert_equal(status, 415)
    assert b"Content-Type: application/json" in data
    for accepted in ("application/json; charset=utf-8", "Application/JSON"):
        status, _, data = post(sn, {"jsonrpc": "2.0", "id": 1, "method": "get_height"}, {"Content-Type": accepted})
        assert_equal(status, 200)
        assert b'"result"' in data
    status, _, _ = post(sn, b"[" + b" " * (1024 * 1024 + 10) + b"]")
    assert_equal(status, 413)
    log.info("A foreign Host or Origin is 403 (DNS rebinding); loopback hosts are let in")
    status, _, data = post(sn, {"jsonrpc": "2.0", "id": 1, "method": "get_info"}, {"Host": "evil.example:38091"})
    assert_equal(status, 403)
    assert b"Host 'evil.example:38091'" in data and b"--rpc-allow-host" in data
    status, _, data = post(sn, {"jsonrpc": "2.0", "id": 1, "method": "get_info"}, {"Origin": "http://evil.example"})
    assert_equal(status, 403)
    for host in ("localhost:38091", "127.0.0.1", f"{sn.ip}:{sn.rpc_port}"):
        status, _, _ = post(sn, {"jsonrpc": "2.0", "id": 1, "method": "get_info"}, {"Host": host})
        assert_equal(status, 200, f"Host {host}")
    log.info("A Host the server accepted before (and remembers) does not let an Origin through")
    status, _, data = post(sn, {"jsonrpc": "2.0", "id": 1, "method": "get_info"},
                           {"Host": "localhost:38091", "Origin": "http://evil.example"})
    assert_equal(status, 403)
    assert b"Origin" in data


def test_curl_as_the_spec_calls_it(sn):
    import shutil
    import subprocess

    if shutil.which("curl") is None:
        pytest.skip("curl is not installed on this machine")
    log.info("Call get_service_nodes with the specification's curl command line")
    out = subprocess.run(
        ["curl", "-s", "-X", "POST", f"http://{sn.ip}:{sn.rpc_port}/json_rpc",
         "-H", "Content-Type: application/json",
         "-d", '{"jsonrpc":"2.0","id":"0","method":"get_service_nodes","params":{}}'],
        capture_output=True, text=True, timeout=scaled(30), check=True,
    )
    assert_equal(json.loads(out.stdout)["result"]["service_node_states"], [])


def test_metrics(sn):
    log.info("GET /metrics shows the height in Prometheus text")
    status, hdrs, data = sn.rpc.raw("", method="GET", path="/metrics")
    assert_equal(status, 200)
    assert b"snode_height 0.0" in data
    log.info("Counters follow the node's events: two blocks adopted are two more")
    sn.generate_blocks(blocks=2)
    _, _, data = sn.rpc.raw("", method="GET", path="/metrics")
    assert b"snode_height 2.0" in data and b"snode_blocks_adopted_total 2.0" in data, data


def test_health_and_readiness_probes(sn):
    log.info("GET /healthz answers 200 while the daemon serves")
    status, _, data = sn.rpc.raw("", method="GET", path="/healthz")
    assert_equal((status, json.loads(data)), (200, {"status": "ok"}))
    log.info("GET /readyz on an unregistered service node: 503, naming what is missing")
    status, _, data = sn.rpc.raw("", method="GET", path="/readyz")
    body = json.loads(data)
    assert_equal((status, body["ready"]), (503, False))
    assert any("not registered on the chain" in reason for reason in body["unmet"]), body
    log.info("A foreign Host header is refused as on every admin path")
    status, _, _ = sn.rpc.raw("", method="GET", path="/readyz", headers={"Host": "evil.example:9231"})
    assert_equal(status, 403)
