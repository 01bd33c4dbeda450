"""The operator tools' messages as an operator reads them: counts read right for one and for
many, and the admin RPC's registration command names the rule a bad amount breaks, writing the
value as the caller wrote it in JSON (`true`, `null`), not as Python spells it.

The daemons are real `snoded` processes of the framework; `snode-cli` runs as a child process
(`framework.snode_cli`) and the test reads its output.
"""

from __future__ import annotations

from typing import Any

from snode.api import errors as E
from snode.devchain import key_from_label
from tests.functional.framework import (
    address_of,
    assert_equal,
    assert_raises_rpc_error,
    connect_nodes,
    narrator,
    snode_cli,
)
from tests.functional.sn_helpers import POOL_MIN, SOLO

log = narrator(__name__)

REG_FAIL = "Failed to make registration command: "
NO_OP = REG_FAIL + "No operator contribution given: "
HUGE = 10**32 - 1
"""Far over the staking requirement, and over the largest amount there is (2**63 - 1)."""
OVER = f"is above the staking requirement of {SOLO} atomic units (200000 coins)"
BOOLEAN = "is a boolean, not a number; give a whole number of atomic units"
NOT_WHOLE = "is not a whole number of atomic units (digits only: no commas, decimals or exponent)"
TEXT = "is text; give a number of atomic units without quotes, commas or decimals"


def test_counts_read_right_for_one_and_for_many(nodes):
    sn = nodes.add(extra_args=["--service-node"])
    other = nodes.add()
    log.info("snode-cli status with no peer, then with one: '0 peers', then '1 peer'")
    out = snode_cli(sn, "status")
    assert_equal(out.returncode, 0, out.stderr)
    assert out.stdout.rstrip().endswith(", 0 peers"), out.stdout
    connect_nodes(sn, other)
    out = snode_cli(sn, "status")
    assert out.stdout.rstrip().endswith(", 1 peer"), out.stdout
    log.info("register-cmd with one --address and two --amount: '(1 address, 2 amounts)'")
    operator = address_of(sn, key_from_label("operator"))
    out = snode_cli(sn, "register-cmd", "--address", operator, "--amount", "100000", "--amount", "1")
    assert_equal((out.returncode, out.stderr.strip()),
                 (1, "snode-cli: give one --amount per --address (1 address, 2 amounts)"))
    out = snode_cli(sn, "register-cmd", "--address", operator, "--address", operator, "--amount", "100000")
    assert_equal(out.stderr.strip(), "snode-cli: give one --amount per --address (2 addresses, 1 amount)")
    log.info("The RPC with one address and two amounts: 'has 1 entry but contributor_amounts has 2'")
    err = assert_raises_rpc_error(E.REGISTRATION_CMD_FAILED, None, sn.get_service_node_registration_cmd,
                                  {"contributor_addresses": [operator], "contributor_amounts": [POOL_MIN, 1]})
    assert_equal(err.message, REG_FAIL + "contributor_addresses has 1 entry but contributor_amounts has 2; "
                 "give one amount per address")


AMOUNT_CASES: list[tuple[list[Any], str]] = [
    ([HUGE], f"{REG_FAIL}the operator amount {HUGE} {OVER}"),
    ([SOLO + 1], f"{REG_FAIL}the operator amount {SOLO + 1} {OVER}"),
    ([True], f"{NO_OP}the operator amount true {BOOLEAN}"),
    ([False], f"{NO_OP}the operator amount false {BOOLEAN}"),
    ([None], f"{NO_OP}the operator amount null {NOT_WHOLE}"),
    ([-5], f"{NO_OP}the operator amount -5 must be above 0 atomic units"),
    ([1.5], f"{NO_OP}the operator amount 1.5 {NOT_WHOLE}"),
    ([2e14], f"{NO_OP}the operator amount 200000000000000.0 {NOT_WHOLE}"),
    (["100"], f"{NO_OP}the operator amount '100' {TEXT}"),
    ([POOL_MIN, True], f"{REG_FAIL}contributor_amounts[1] (true) {BOOLEAN}"),
    ([POOL_MIN, "5"], f"{REG_FAIL}contributor_amounts[1] ('5') {TEXT}"),
    ([POOL_MIN, 0.5], f"{REG_FAIL}contributor_amounts[1] (0.5) {NOT_WHOLE}"),
    ([POOL_MIN, -1], f"{REG_FAIL}contributor_amounts[1] (-1) must be above 0 atomic units"),
    ([POOL_MIN, HUGE], f"{REG_FAIL}contributor_amounts[1] ({HUGE}) {OVER}"),
]


def test_registration_cmd_names_the_rule_a_bad_amount_breaks(nodes):
    sn = nodes.add(extra_args=["--service-node"])
    addresses = [address_of(sn, key_from_label("operator")), address_of(sn, key_from_label("contributor"))]
    for amounts, message in AMOUNT_CASES:
        log.info("contributor_amounts %s: %r", amounts, message)
        params = {"contributor_addresses": addresses[:len(amounts)], "contributor_amounts": amounts}
        err = assert_raises_rpc_error(E.REGISTRATION_CMD_FAILED, None, sn.get_service_node_registration_cmd,
                                      params)
        assert_equal(err.message, message)
