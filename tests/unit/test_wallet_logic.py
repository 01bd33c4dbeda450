"""The wallet's pure rules on a real in-process chain: balances, spendable outputs, stake amounts
(percent, cap, minimum), the registration checks made before anything is sent, and the
transfer history read from real blocks."""

from __future__ import annotations

import re

import pytest

from snode.api.records import service_node_state
from snode.core.errors import InvalidAmount, InvalidRegistration, InvalidStake
from snode.core.registration import format_command
from snode.core.transactions import Reservation
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST, TESTNET
from snode.wallet.commands import COMMANDS, help_lines
from snode.wallet.daemon import NodeRecord, node_of
from snode.wallet.errors import WalletError
from snode.wallet.logic import (
    Output,
    PendingStake,
    balance_lines,
    balance_of,
    coins,
    is_unclear,
    is_yes,
    mempool_spends,
    not_enough,
    parse_outputs,
    pool_effects,
    scan_block,
    spendable,
    split_command,
    transfer_lines,
)
from snode.wallet.rpc_server import check_bind
from snode.wallet.staking import (
    check_registration_line,
    choose_stake,
    parse_stake_percent,
    stake_line,
    stakes_lines,
)

PREFIX = REGTEST.address_prefix
OPERATOR = key_from_label("operator")
ALICE = key_from_label("alice")
BOB = key_from_label("bob")
SN = key_from_label("sn-1")
NEWCOMER = key_from_label("wallet newcomer")  # no genesis funds
REQUIREMENT = REGTEST.staking_requirement


def wallet_view(chain, sn_pubkey: bytes) -> NodeRecord:
    """The node as the wallet sees it: the daemon's get_service_nodes record of it, read back
    by the wallet (`wallet.daemon.node_of`)."""
    record = service_node_state(chain.node(sn_pubkey), chain.state.height, chain.params, last_uptime_proof=0)
    return node_of(record, PREFIX)


def pool_node(chain, operator_amount=100_000 * COIN, reserved=()) -> NodeRecord:
    chain.register(OPERATOR, SN, operator_amount, fee_ppm=50_000, reserved=reserved)
    chain.mine()
    return wallet_view(chain, SN.public)


def pool_node_needing(chain, needed: int) -> NodeRecord:
    """The record of pool_node's node after BOB staked all but `needed` (it is open already)."""
    chain.stake(BOB, SN.public, chain.node(SN.public).staking_requirement
                - chain.node(SN.public).total_contributed - needed)
    chain.mine()
    return wallet_view(chain, SN.public)


# --- confirmation and command lines -------------------------------------------------------

@pytest.mark.parametrize("answer", ["Yes", "yes", "YES", "y", "Y", " yes \n"])
def test_yes_answers(answer):
    assert is_yes(answer)


@pytest.mark.parametrize("answer", ["", "No", "n", "yess", "ye", "sure", None, "y es"])
def test_everything_else_is_no(answer):
    assert not is_yes(answer)


@pytest.mark.parametrize(("answer", "unclear"), [
    ("maybe", True), ("", True), ("yess", True), ("No", False), ("n", False), (" NO ", False),
    ("Yes", False), ("y", False), (None, False),
])
def test_unclear_answers_are_neither_yes_nor_no(answer, unclear):
    assert is_unclear(answer) is unclear


def test_help_stake_explains_the_minimum_and_100_percent():
    text = " ".join(help_lines("stake"))
    assert "open remainder divided by its free contributor slots" in text
    assert "unless the stake fills the whole remainder" in text
    assert "100% fills it" in text and "still needs on the chain" in text
    assert "Stakes still in the mempool are not counted" in text


def test_split_command_and_help():
    assert split_command("  Stake  ab  50% ") == ("stake", ["ab", "50%"])
    assert split_command("   ") == ("", [])
    text = "\n".join(help_lines())
    for name in ("address", "balance", "refresh", "transfer", "register_service_node", "stake",
                 "stakes", "show_transfers", "help", "exit"):
        assert name in COMMANDS and name in text
    assert help_lines("stake")[0].startswith("Usage: stake <service_node_pubkey>")
    assert "Unknown command" in help_lines("nope")[0]


# --- outputs and balances -----------------------------------------------------------------

def _outputs():
    return [
        Output(bytes([1]) * 32, 0, 5 * COIN, 10),   # unlocked at tip 9 (spendable in block 10)
        Output(bytes([2]) * 32, 1, 7 * COIN, 11),   # locked
        Output(bytes([3]) * 32, 0, 11 * COIN, 0),   # unlocked but spent by the mempool
    ]


def test_balance_counts_locked_coins_but_not_in_unlocked():
    outputs = _outputs()
    spent = mempool_spends({"transactions": [
        {"txid": "ab" * 32, "spends": [f"{(bytes([3]) * 32).hex()}:0"]}
    ]})
    balance = balance_of(outputs, 9, spent, pending=2 * COIN, staked=100 * COIN)
    assert balance.total == (5 + 7 + 2) * COIN
    assert balance.unlocked == 5 * COIN
    lines = balance_lines(balance, 1, 10)
    # The spec's contract lines come first with bare coin amounts (scripts read them).
    assert lines[0] == "Balance: 14 coins" and lines[1] == "Unlocked balance: 5 coins"
    assert lines[2] == "Locked: 7 coins, unlocking at height 10 (in 1 block)"
    assert lines[3] == "Pending (unconfirmed): 2 coins, unlocking 10 confirmations after they are mined"
    assert "Staked: 100 coins on 1 service node" in lines


def test_several_unlock_heights_give_the_next_and_the_last():
    outputs = [Output(bytes([1]) * 32, 0, COIN, 20), Output(bytes([2]) * 32, 0, 3 * COIN, 25),
               Output(bytes([3]) * 32, 0, 2 * COIN, 20), Output(bytes([4]) * 32, 0, 4 * COIN, 5)]
    balance = balance_of(outputs, 10, {}, pending=0, staked=0)
    assert [(u.height, u.amount) for u in balance.unlocks] == [(19, 3 * COIN), (24, 3 * COIN)]
    assert balance.locked == 6 * COIN and balance.unlocked == 4 * COIN
    lines = balance_lines(balance, 0, 10)
    assert lines[2] == ("Locked: 6 coins; the next 3 coins unlock at height 19 (in 9 blocks), "
                        "all of it by height 24 (in 14 blocks)")
    assert lines[-1] == "Staked: 0 coins on 0 service nodes"
    assert not any(line.startswith("Pending") for line in lines)


def test_nothing_locked_prints_no_locked_line():
    balance = balance_of([Output(bytes([1]) * 32, 0, COIN, 3)], 9, {}, pending=0, staked=0)
    assert balance_lines(balance, 0, 10)[:3] == [
        "Balance: 1 coin", "Unlocked balance: 1 coin", "Staked: 0 coins on 0 service nodes"]


def test_locked_heights_match_when_the_chain_lets_them_be_spent(chain):
    """`unlocking at height H (in N blocks)`: at tip H the coins are unlocked and the real chain
    accepts a spend of them in the next block; one block earlier it does not."""
    chain.pay_many(OPERATOR, {NEWCOMER.public: 7 * COIN})
    chain.mine()

    def view():
        utxos = [(k, u) for k, u in chain.state.utxos.items() if u.owner == NEWCOMER.public]
        outputs = [Output(k[:32], int.from_bytes(k[32:], "big"), u.amount, u.unlock_height)
                   for k, u in utxos]
        return balance_of(outputs, chain.state.height, {}, pending=0, staked=0)

    mined_at = chain.state.height
    gift = next(u for u in view().unlocks if u.amount == 7 * COIN)
    confirmations = REGTEST.unlock_confirmations
    assert gift.height == mined_at + confirmations - 1
    assert f"unlocking at height {gift.height} (in {confirmations - 1} blocks)" in "\n".join(
        balance_lines(view(), 0, confirmations))
    chain.mine_to(gift.height - 1)
    assert view().unlocked == 0
    assert chain.spendable(NEWCOMER.public) == []
    chain.mine()
    assert chain.state.height == gift.height and view().unlocked == 7 * COIN
    chain.transfer(NEWCOMER, BOB.public, 6 * COIN)  # the real mempool and chain accept the spend
    chain.mine()
    assert chain.balance(BOB.public)[0] > 0


# --- refusals when the unlocked coins are short --------------------------------------------

def test_not_enough_says_when_more_unlocks():
    balance = balance_of([Output(bytes([1]) * 32, 0, 999_800_000_000, 124)], 116, {}, 0, 0)
    text = not_enough(0, COIN, 195_000, balance, 10)
    assert text == ("unlocked balance 0 is not enough: 1 coin plus a fee of 0.000195 coins are "
                    "needed; 999.8 more coins unlock at height 123, in 7 blocks")


def test_not_enough_with_several_heights_and_pending_change():
    outputs = [Output(bytes([1]) * 32, 0, COIN, 12), Output(bytes([2]) * 32, 0, 2 * COIN, 15)]
    balance = balance_of(outputs, 10, {}, pending=5 * COIN, staked=0)
    text = not_enough(0, 2 * COIN, 1000, balance, 10)
    assert text.startswith("unlocked balance 0 is not enough: 2 coins plus a fee of 0.000001 coins")
    assert "; 3 more coins unlock by height 14, in 4 blocks (the first 1 coin at height 11, in 1 block)" in text
    assert text.endswith("; 5 more coins in unconfirmed transactions unlock 10 confirmations after "
                         "they are mined")
    nothing = balance_of([], 10, {}, 0, 0)
    assert not_enough(0, 1, 1, nothing, 10) == (
        "unlocked balance 0 is not enough: 0.000000001 coins plus a fee of 0.000000001 coins are needed")


@pytest.mark.parametrize(("atomic", "text"), [
    (COIN, "1 coin"), (2 * COIN, "2 coins"), (3 * COIN // 2, "1.5 coins"), (0, "0 coins"),
    (COIN + 1, "1.000000001 coins"), (COIN // 2, "0.5 coins"),
])
def test_coin_amounts_are_singular_only_for_one(atomic, text):
    assert coins(atomic) == text


# --- pending registrations and stakes -----------------------------------------------------

def test_pool_effects_find_our_registration_and_stake_and_change(chain):
    reg_id = chain.register(OPERATOR, SN, 100_000 * COIN)
    reg = chain.pool.entries[reg_id].tx
    change, stakes = pool_effects([(reg_id.hex(), reg)], OPERATOR.public)
    assert change == sum(o.amount for o in reg.outputs if o.owner == OPERATOR.public) > 0
    assert stakes == (PendingStake(reg_id.hex(), SN.public, 100_000 * COIN, True),)
    chain.mine()
    stake_id = chain.stake(ALICE, SN.public, 60_000 * COIN)
    stake = chain.pool.entries[stake_id].tx
    _, stakes = pool_effects([(stake_id.hex(), stake)], ALICE.public)
    assert stakes == (PendingStake(stake_id.hex(), SN.public, 60_000 * COIN, False),)
    balance = balance_of([], chain.state.height, {}, pending=0, staked=0, pending_stakes=stakes)
    assert balance.pending_staked == 60_000 * COIN
    assert balance_lines(balance, 0, 10)[-1] == (
        f"Staked (pending): 60000 coins on service node {SN.public.hex()} "
        "(stake in the mempool, not yet mined)")


def test_stakes_lines_mark_what_is_pending(chain):
    sn = pool_node(chain)
    reg = PendingStake("aa" * 32, BOB.public, 100_000 * COIN, True)
    stake = PendingStake("bb" * 32, SN.public, 60_000 * COIN, False)
    lines = stakes_lines([sn], ALICE.public, [stake, reg])
    assert lines[0].startswith(SN.public.hex()) and "mine: 0 + 60000 (pending)  Await" in lines[0]
    assert lines[1] == (f"{BOB.public.hex()}  mine: 100000 (pending)  registration in the mempool, "
                        "not yet mined")
    assert lines[2] == "Total staked: 0 coins, plus 160000 coins (pending)"
    assert stakes_lines([sn], OPERATOR.public) == [stake_line(sn, OPERATOR.public),
                                                   "Total staked: 100000 coins"]
    assert stakes_lines([], OPERATOR.public) == ["No stakes."]


def test_spendable_excludes_locked_and_mempool_spent_outputs():
    outputs = _outputs()
    spent = {outputs[2].key: "x"}
    chosen = spendable(outputs, OPERATOR.public, 9, spent)
    assert [(op.txid, op.index) for op, _ in chosen] == [(bytes([1]) * 32, 0)]
    assert chosen[0][1].owner == OPERATOR.public
    assert len(spendable(outputs, OPERATOR.public, 10, {})) == 3


def test_parse_outputs_reads_the_daemon_shape():
    height, outputs = parse_outputs({"height": 4, "outputs": [
        {"txid": "cd" * 32, "index": 2, "amount": 9, "unlock_height": 14}]})
    assert height == 4 and outputs == [Output(bytes.fromhex("cd" * 32), 2, 9, 14)]


# --- stake amounts ------------------------------------------------------------------------

def test_record_view_keeps_what_the_staking_rules_need(chain):
    sn = pool_node(chain, reserved=((BOB.public, 20_000 * COIN),))
    real = chain.node(SN.public)
    assert sn.contributors == real.contributors
    assert (sn.total_contributed, sn.total_reserved_unfilled, sn.funded, sn.fee_ppm) == (
        real.total_contributed, real.total_reserved_unfilled, real.funded, real.fee_ppm)


def test_percent_is_a_share_of_what_the_node_still_needs(chain):
    sn = pool_node(chain)
    assert choose_stake(sn, SN.public, ALICE.public, "50%").amount == 50_000 * COIN
    assert choose_stake(sn, SN.public, ALICE.public, "100%").amount == 100_000 * COIN
    assert choose_stake(sn, SN.public, ALICE.public, "12.5%").amount == 12_500 * COIN


def test_amount_above_the_remainder_is_capped_with_a_note(chain):
    sn = pool_node(chain)
    choice = choose_stake(sn, SN.public, ALICE.public, "150000")
    assert choice.amount == 100_000 * COIN
    assert choice.note is not None and "needs only 100000 more coins" in choice.note
    sn_one = pool_node_needing(chain, COIN)
    assert choose_stake(sn_one, SN.public, ALICE.public, "2").note == (
        "The node needs only 1 more coin: staking 1 instead of 2.")
    assert choose_stake(sn, SN.public, ALICE.public, "60000").note is None


def test_stake_below_the_minimum_names_the_minimum(chain):
    sn = pool_node(chain)
    # 100,000 open over 10 free slots: 10,000 coins at least.
    with pytest.raises(InvalidStake, match="below the minimum contribution of 10000 coins"):
        choose_stake(sn, SN.public, ALICE.public, "9999.999999999")
    assert choose_stake(sn, SN.public, ALICE.public, "10000").amount == 10_000 * COIN
    with pytest.raises(InvalidStake, match="minimum contribution of 10000 coins"):
        choose_stake(sn, SN.public, ALICE.public, "5%")


@pytest.mark.parametrize("text", ["0%", "100.0001%", "101%", "-5%", "%", "abc%", "0"])
def test_percent_outside_0_100_and_zero_amounts_are_refused(chain, text):
    sn = pool_node(chain)
    with pytest.raises((InvalidAmount, InvalidStake)):
        choose_stake(sn, SN.public, ALICE.public, text)


@pytest.mark.parametrize(("text", "needle"), [
    ("abc%", "percent 'abc%' is not a number: give a percentage such as 50%"),
    ("%", "percent '%' is not a number"), ("5,5%", "is not a number"), ("1e2%", "is not a number"),
    ("0%", "must be above 0% and at most 100%"), ("-5%", "must be above 0% and at most 100%"),
    ("100.0001%", "must be above 0% and at most 100%"), ("1000000000000000000000%", "at most 100%"),
    ("12.34567%", "more than 4 decimal places"),
])
def test_percent_refusals_say_what_is_wrong(chain, text, needle):
    sn = pool_node(chain)
    with pytest.raises(InvalidAmount, match=re.escape(needle)):
        choose_stake(sn, SN.public, ALICE.public, text)
    with pytest.raises(InvalidAmount, match=re.escape(needle)):
        parse_stake_percent(text)


def test_percent_parses_to_ppm():
    assert parse_stake_percent("100%") == 1_000_000
    assert parse_stake_percent("12.5%") == 125_000
    assert parse_stake_percent("0.0001%") == 1


def test_unknown_and_full_nodes_are_refused(chain):
    with pytest.raises(InvalidStake, match="is not registered"):
        choose_stake(None, SN.public, ALICE.public, "100")
    chain.register(OPERATOR, SN, REQUIREMENT)
    chain.mine()
    full = wallet_view(chain, SN.public)
    with pytest.raises(InvalidStake, match="already full"):
        choose_stake(full, SN.public, ALICE.public, "100%")


def test_reserved_contributor_fills_the_reservation(chain):
    sn = pool_node(chain, reserved=((BOB.public, 20_000 * COIN),))
    assert choose_stake(sn, SN.public, BOB.public, "100%").amount == 20_000 * COIN
    assert choose_stake(sn, SN.public, BOB.public, "999999").amount == 20_000 * COIN
    with pytest.raises(InvalidStake, match="must contribute exactly"):
        choose_stake(sn, SN.public, BOB.public, "50%")
    # Anyone else shares the 80,000 left after the reservation.
    assert choose_stake(sn, SN.public, ALICE.public, "100%").amount == 80_000 * COIN


def test_stake_line_shows_status_and_totals(chain):
    sn = pool_node(chain)
    line = stake_line(sn, OPERATOR.public)
    assert line.startswith(SN.public.hex()) and "mine: 100000" in line
    assert "Await" in line and "100000 / 200000" in line


# --- registration -------------------------------------------------------------------------

NOW = 1_800_000_000


def reg_line(operator=OPERATOR.public, amount=REQUIREMENT, expiry=NOW + 3600, fee_ppm=0,
             params=REGTEST) -> str:
    from snode.core.registration import sign_registration

    reg = sign_registration(SN, params, fee_ppm, (Reservation(operator, amount),), expiry)
    return format_command(reg, params)


def check(line: str, operator=OPERATOR.public):
    return check_registration_line(line, REGTEST, now=NOW, operator=operator)


def test_a_good_line_passes():
    reg = check(reg_line(fee_ppm=25_000))
    assert reg.sn_pubkey == SN.public and reg.fee_ppm == 25_000


@pytest.mark.parametrize(("mangle", "needle"), [
    (lambda cmd: cmd.rsplit(" ", 1)[0], "malformed"),
    (lambda cmd: "register_service_node", "malformed"),
    (lambda cmd: cmd.replace(" snr1", " snt1", 1), "wrong network prefix"),
    (lambda cmd: cmd.replace("\n", "") .replace(cmd.split()[2], cmd.split()[2][:20] + " " + cmd.split()[2][20:]),
     "contains whitespace"),
    (lambda cmd: cmd.replace(" ", "\t", 3), "one line with single spaces"),
    (lambda cmd: cmd[:-3] + ("000" if not cmd.endswith("000") else "111"), "signature is not valid"),
    (lambda cmd: cmd.replace(" 200000000000000 ", " 2000000000000000 "), "signature is not valid"),
])
def test_bad_lines_name_what_to_fix(mangle, needle):
    with pytest.raises(InvalidRegistration, match=needle):
        check(mangle(reg_line()))


def test_wrong_network_line_is_refused():
    with pytest.raises(InvalidRegistration, match="wrong network prefix"):
        check(reg_line(params=TESTNET))


def test_expired_and_far_future_lines_ask_to_regenerate():
    with pytest.raises(InvalidRegistration, match="expired: re-generate the command"):
        check(reg_line(expiry=NOW - 1))
    with pytest.raises(InvalidRegistration, match="more than 14 days ahead: re-generate the command"):
        check(reg_line(expiry=NOW + REGTEST.registration_validity + 1))
    check(reg_line(expiry=NOW + REGTEST.registration_validity))


def test_operator_address_must_be_this_wallets():
    with pytest.raises(InvalidRegistration, match="not this wallet's address"):
        check(reg_line(), operator=ALICE.public)


# --- transfer history ---------------------------------------------------------------------

def test_scan_finds_incoming_transfers_registrations_and_stakes(chain):
    chain.pay_many(OPERATOR, {ALICE.public: 300_000 * COIN})
    chain.mine(11)
    chain.register(ALICE, SN, 100_000 * COIN, fee_ppm=0)
    chain.mine()
    chain.stake(ALICE, SN.public, 50_000 * COIN)
    chain.mine()
    mine: dict[bytes, int] = {}
    records = [r for block in chain.blocks for r in scan_block(block, ALICE.public, mine)]
    kinds = [r.kind for r in records]
    assert kinds[-3:] == ["in", "registration", "stake"]
    incoming = records[-3]
    assert incoming.amount == 300_000 * COIN and incoming.height == 1
    assert records[-2].amount > 100_000 * COIN and records[-2].fee > 0
    assert records[-2].amount == 100_000 * COIN + records[-2].fee
    assert sum(mine.values()) == chain.balance(ALICE.public)[0]
    text = transfer_lines(records)
    assert "+300000" in text[-3] and text[-2].split()[1] == "registration"
    assert transfer_lines([]) == ["No transfers yet."]


# --- wallet RPC bind ----------------------------------------------------------------------

@pytest.mark.parametrize("bind", ["127.0.0.1:9234", "127.5.6.7:1", "localhost:80", "[::1]:9234"])
def test_loopback_binds_are_accepted(bind):
    assert check_bind(bind).port == int(bind.rsplit(":", 1)[1])


@pytest.mark.parametrize(("bind", "needle"), [
    ("0.0.0.0:9234", "local only"), ("192.168.1.2:9234", "local only"), ("[::]:9234", "local only"),
    ("example.com:9234", "local only"), ("127.0.0.1", "form HOST:PORT$"),
    ("127.0.0.1:0", "not a port number"), ("127.0.0.1:99999", "not a port number"),
])
def test_other_binds_are_refused(bind, needle):
    with pytest.raises(WalletError, match=needle):
        check_bind(bind)


def test_genesis_funds_are_named_genesis_and_a_block_reward_is_a_reward(chain):
    chain.mine()
    mine: dict[bytes, int] = {}
    genesis = scan_block(chain.blocks[0], OPERATOR.public, mine)
    assert [(r.height, r.kind) for r in genesis] == [(0, "genesis")]
    assert transfer_lines(genesis)[1].split()[1:3] == ["genesis", f"+{genesis[0].amount // COIN}"]
    paid = chain.blocks[1].transactions[0].outputs[0].owner
    assert [r.kind for r in scan_block(chain.blocks[1], paid, {})] == ["reward"]
