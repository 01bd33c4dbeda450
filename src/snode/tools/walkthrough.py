"""`make demo`: a narrated walk through the real core on an in-process regtest chain.

Until the local devnet exists this is the demo: genesis, funded wallets, a solo and a pool
registration, activation and the payable grace, a decommission and a recommission, and one
block's reward split. Blocks are real blocks applied by the real transition function; the
published regtest authority produces them and stands in for the quorum. Every claim the story
makes is checked, so the demo is also a smoke test: a failed check exits 1 and says which.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Final

import msgspec
from rich.console import Console

from snode.api.records import service_node_record
from snode.api.types import ServiceNodeRecord
from snode.core.address import decode_address, encode_address
from snode.core.blocks import block_hash
from snode.core.crypto import SigningKey
from snode.core.errors import SnodeError
from snode.core.genesis import genesis_state, regtest_genesis
from snode.core.registration import format_command, parse_command, sign_registration
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state import ServiceNode
from snode.core.transactions import Reservation
from snode.core.txbuilder import build_spend
from snode.core.units import format_coins, format_percent, parse_coins, parse_percent_ppm
from snode.devchain import DevChain, key_from_label
from snode.params import (
    COIN,
    MAX_OPERATOR_FEE_PPM,
    REGTEST,
    REGTEST_AUTHORITY_SEED,
    REGTEST_FAUCET_AMOUNT,
    REGTEST_FAUCET_SEED,
    REGTEST_GENESIS_TIMESTAMP,
)
from snode.tools.tables import make_console, service_node_table

PARAMS: Final = REGTEST
SOLO_STAKE: Final = 200_000 * COIN
POOL_OPERATOR_STAKE: Final = 100_000 * COIN
POOL_CUT: Final = "5"
CONTRIBUTOR_STAKES: Final = {"carol": "60000", "dave": "40000"}
FEE_MONEY: Final = 1 * COIN
"""What each wallet gets on top of its stake, for transaction fees."""


class StoryError(Exception):
    """A claim the walkthrough makes did not hold."""


class Story:
    """The chain, the cast and the console, with the checks made so far."""

    def __init__(self, console: Console, contributor_stakes: Mapping[str, str] = CONTRIBUTOR_STAKES) -> None:
        self.console = console
        self.contributor_stakes = contributor_stakes
        """What each contributor stakes in the pool node (coins as typed; a test passes too little)."""
        self.checks = 0
        self.faucet = SigningKey(REGTEST_FAUCET_SEED)
        self.wallets = {
            name: key_from_label(f"walkthrough {name}") for name in ("alice", "bob", "carol", "dave")
        }
        self.sn_keys = {name: key_from_label(f"walkthrough {name} node") for name in ("solo", "pool")}
        self.stakes = {
            "alice": SOLO_STAKE, "bob": POOL_OPERATOR_STAKE,
            **{name: parse_coins(amount) for name, amount in contributor_stakes.items()},
        }
        self.names = {k.public: name for name, k in self.wallets.items()}
        self.chain = DevChain.create(
            {self.faucet.public: REGTEST_FAUCET_AMOUNT}, params=PARAMS,
            authority=SigningKey(REGTEST_AUTHORITY_SEED), timestamp=REGTEST_GENESIS_TIMESTAMP,
        )

    # --- telling ----------------------------------------------------------------------

    def step(self, title: str) -> None:
        """Start a step of the story."""
        self.console.print()
        self.console.rule(f"[bold]{title}", align="left")

    def say(self, text: str) -> None:
        """One line of narration."""
        self.console.print(text)

    def command(self, line: str, prompt: str = "") -> None:
        """A command line as an operator types or sees it, never wrapped (it is copied whole)."""
        text = f"[dim]{prompt}[/] {line}" if prompt else line
        self.console.print(text, soft_wrap=True, markup=bool(prompt))

    def expect(self, condition: bool, claim: str) -> None:
        """Check a claim of the story; StoryError names it when it does not hold."""
        if not condition:
            raise StoryError(claim)
        self.checks += 1

    def show_nodes(self) -> None:
        """The service-node table at the tip, as snode-cli `nodes` shows it."""
        state = self.chain.state
        nodes = sorted(state.service_nodes.values(), key=lambda sn: (sn.registration_height, sn.pubkey))
        self.console.print(f"[bold]service nodes at height {state.height}[/] (amounts in coins)")
        self.console.print(service_node_table(
            msgspec.to_builtins([service_node_record(sn, state.height, PARAMS) for sn in nodes])
        ))

    # --- reading the chain --------------------------------------------------------------

    @property
    def height(self) -> int:
        """Height of the tip."""
        return self.chain.state.height

    def node(self, which: str) -> ServiceNode:
        """The registry entry of the `solo` or `pool` node."""
        sn = self.chain.state.service_nodes.get(self.sn_keys[which].public)
        if sn is None:
            raise StoryError(f"the {which} node is registered")
        return sn

    def record(self, which: str) -> ServiceNodeRecord:
        """The `get_service_nodes` record of the `solo` or `pool` node at the tip."""
        return service_node_record(self.node(which), self.height, PARAMS)

    def address(self, key: SigningKey) -> str:
        """The regtest address of a key."""
        return encode_address(PARAMS.address_prefix, key.public)

    def who(self, public: bytes) -> str:
        """The cast name of a public key."""
        return self.names.get(public, "authority" if public == self.chain.authority.public else "?")

    # --- the story ---------------------------------------------------------------------

    def genesis(self) -> None:
        """Step 1: the built-in regtest genesis."""
        self.step("1. Genesis: the built-in regtest chain")
        _, block0, _ = genesis_state(regtest_genesis(), PARAMS)
        self.expect(
            block_hash(block0.header) == self.chain.tip_hash(),
            "the chain starts from the built-in regtest genesis block",
        )
        self.say(
            f"network {PARAMS.name}, address prefix '{PARAMS.address_prefix}', height {self.height}"
        )
        self.say(f"genesis block {self.chain.tip_hash().hex()}")
        self.say(f"authority key {self.chain.authority.public.hex()}")
        self.say(
            f"  produces every block, and votes for the quorum while fewer than "
            f"{PARAMS.min_active_sns} service nodes are active"
        )
        self.say(f"the faucet wallet holds {format_coins(REGTEST_FAUCET_AMOUNT)} coins")
        self.say(
            "the authority and faucet keys are published regtest constants (snode.params): "
            "never use them with value"
        )

    def fund_wallets(self) -> None:
        """Step 2: the faucet pays the operators and contributors; outputs unlock after 10 blocks."""
        self.step("2. Wallets: the faucet pays two operators and two contributors")
        faucet_address = self.address(self.faucet)
        self.expect(
            faucet_address.startswith(PARAMS.address_prefix + "1"), "regtest addresses begin with 'snr1'"
        )
        self.expect(
            decode_address(PARAMS.address_prefix, faucet_address) == self.faucet.public,
            "an address decodes back to its public key",
        )
        self.say(f"faucet wallet address: {faucet_address}")
        self.chain.pay_many(
            self.faucet, {self.wallets[n].public: a + FEE_MONEY for n, a in self.stakes.items()}
        )
        self.chain.mine()
        paid_at = self.height
        self.expect(
            self.chain.balance(self.wallets["alice"].public)[1] == 0,
            "a fresh output is locked in the block after the one that made it",
        )
        self.chain.mine(PARAMS.unlock_confirmations - 1)
        for name, key in self.wallets.items():
            total, unlocked = self.chain.balance(key.public)
            self.expect(
                total == unlocked == self.stakes[name] + FEE_MONEY,
                f"{name}'s {format_coins(total)} coins are spendable "
                f"{PARAMS.unlock_confirmations} blocks after block {paid_at}",
            )
            self.say(f"  {name:<6} {self.address(key)}  {format_coins(unlocked):>7} coins unlocked")
        self.say(f"each got its stake plus 1 coin for fees, in block {paid_at}")
        self.say(
            f"outputs unlock {PARAMS.unlock_confirmations} blocks after the block that made them: "
            f"spendable from block {paid_at + PARAMS.unlock_confirmations} (tip is now {self.height})"
        )

    def register(self, which: str, operator: str, amount: int, cut: str) -> None:
        """The daemon prints a registration command; the operator's wallet parses and submits it."""
        sn_key, op_key = self.sn_keys[which], self.wallets[operator]
        fee_ppm = parse_percent_ppm(cut, maximum_ppm=MAX_OPERATOR_FEE_PPM)
        reg = sign_registration(
            sn_key, PARAMS, fee_ppm, (Reservation(op_key.public, amount),),
            self.chain.now + PARAMS.registration_validity,
        )
        line = format_command(reg, PARAMS)
        self.say(f"the {which} node's daemon answers get_service_node_registration_cmd with:")
        self.command(line)
        parsed = parse_command(line, PARAMS)
        self.expect(parsed == reg, "the wallet parses the daemon's line back to the same registration")
        expiry = datetime.fromtimestamp(parsed.expiry, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        self.say(
            f"{operator}'s wallet parses it: operator stake "
            f"{format_coins(parsed.reservations[0].amount)} coins, cut {format_percent(parsed.fee_ppm)} %, "
            f"valid until {expiry}; {operator} answers Yes"
        )
        spend = build_spend(self.chain.spendable(op_key.public), op_key, [], parsed, PARAMS)
        self.chain.submit(spend)
        self.chain.mine()
        self.expect(
            self.node(which).registration_height == self.height,
            f"the {which} node is registered in the next block",
        )

    def solo_registration(self) -> None:
        """Step 3: alice registers a solo node with the whole stake."""
        self.step("3. Solo registration: alice stakes the whole 200000 coins")
        self.register("solo", "alice", SOLO_STAKE, "0")
        r = self.record("solo")
        self.expect(r.funded and not r.active, "a solo node is funded at once and not yet active")
        self.say("funded at once, not active yet: a funded node that is not active shows as Decomm")
        self.say("  until the quorum accepts its first uptime proof (step 5)")
        self.show_nodes()

    def pool_registration(self) -> None:
        """Step 4: bob opens a pool node with a 5 % cut; carol and dave fill it."""
        self.step(f"4. Pool registration: bob stakes 100000 coins with a {POOL_CUT} % operator cut")
        self.register("pool", "bob", POOL_OPERATOR_STAKE, POOL_CUT)
        r = self.record("pool")
        self.expect(
            not r.funded and r.operator_fee == 50_000,
            "the pool node awaits contributions, with an operator fee of 50000 ppm",
        )
        self.say("open for 100000 coins more from up to 10 contributors: tools show Await")
        self.show_nodes()
        pool_pubkey = self.sn_keys["pool"].public
        for name, amount_text in self.contributor_stakes.items():
            self.command(f"stake {pool_pubkey.hex()} {amount_text}", prompt=f"{name}'s wallet>")
            self.chain.stake(self.wallets[name], pool_pubkey, parse_coins(amount_text))
            self.chain.mine()
            contributors = self.record("pool").contributors
            self.expect(
                any(c.address == self.address(self.wallets[name]) for c in contributors),
                f"{name}'s stake is in the node's contributors",
            )
        r = self.record("pool")
        self.expect(
            r.funded and r.total_contributed == r.staking_requirement
            and len(r.contributors) == 3,
            "the two stakes fill the pool node: 3 contributors, 200000 coins",
        )
        self.say("full: 100000 + 60000 + 40000 = 200000 coins from 3 contributors")
        self.show_nodes()

    def activation(self) -> None:
        """Step 5: the quorum activates both nodes; payable exactly 4 blocks later."""
        self.step("5. Activation, and the 4-block grace before rewards")
        for which in ("solo", "pool"):
            self.chain.state_change(
                self.sn_keys[which].public, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF
            )
        self.say(
            f"the quorum (the authority, while fewer than {PARAMS.min_active_sns} nodes are active) "
            f"votes to activate both nodes: reason {Reason.FIRST_UPTIME_PROOF.label}"
        )
        self.chain.mine()
        self.say(f"activated in block {self.height}")
        for which in ("solo", "pool"):
            r = self.record(which)
            self.expect(
                r.active and not r.payable,
                f"the {which} node is active and not yet payable at activation",
            )
        self.show_nodes()
        grace = PARAMS.payable_grace
        self.chain.mine(grace - 1)
        for which in ("solo", "pool"):
            self.expect(
                not self.record(which).payable,
                f"the {which} node is not payable {grace - 1} blocks after activation",
            )
        self.say(f"height {self.height} (activation + {grace - 1}): payable = no for both")
        self.chain.mine()
        for which in ("solo", "pool"):
            self.expect(
                self.record(which).payable,
                f"the {which} node is payable exactly {grace} blocks after activation",
            )
        self.say(f"height {self.height} (activation + {grace}): payable = yes for both; rewards begin")
        self.show_nodes()

    def decommission(self) -> None:
        """Step 6: the solo node misses its proofs, is decommissioned, then recommissioned."""
        self.step("6. Decommission and recommission of the solo node")
        solo = self.sn_keys["solo"].public
        self.chain.state_change(solo, StateChangeKind.DECOMMISSION, Reason.MISSED_UPTIME_PROOFS)
        self.chain.mine()
        r, sn = self.record("solo"), self.node("solo")
        self.expect(
            not r.active and not r.payable and r.decommission_count == 1
            and sn.last_decommission_reason == Reason.MISSED_UPTIME_PROOFS,
            "a decommissioned node is inactive, not payable, has decommission_count 1 and the "
            "reason missed_uptime_proofs",
        )
        self.say(
            f"decommissioned in block {self.height}: reason "
            f"{Reason(sn.last_decommission_reason).label}; it earns nothing while decommissioned"
        )
        self.show_nodes()
        self.chain.state_change(solo, StateChangeKind.RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED)
        self.chain.mine()
        r = self.record("solo")
        self.expect(
            r.active and not r.payable and r.decommission_count == 1,
            "a recommissioned node is active, waits out the grace again and keeps its "
            "decommission_count",
        )
        self.say(
            f"recommissioned in block {self.height}: reason {Reason.UPTIME_PROOFS_RESUMED.label}; "
            f"payable again after {PARAMS.payable_grace} blocks, at the back of the reward queue"
        )
        self.show_nodes()

    def reward_split(self) -> None:
        """Step 7: one block paying the pool node: operator fee first, then pro-rata shares."""
        self.step("7. Rewards: one block paying the pool node")
        pool = self.sn_keys["pool"].public
        for _ in range(2 * PARAMS.payable_grace + 2):
            self.chain.mine()
            if self.chain.state.service_nodes[pool].last_reward_height == self.height:
                break
        else:
            raise StoryError("the pool node is paid within a few blocks of being payable")
        outputs = self.chain.blocks[-1].transactions[0].outputs
        # The split by hand: the operator's cut first, then each stake's share of the rest.
        reward, requirement = PARAMS.block_reward, PARAMS.staking_requirement
        fee = reward * int(POOL_CUT) // 100
        rest = reward - fee
        members = ("bob", *self.contributor_stakes)
        expected = {name: rest * self.stakes[name] // requirement for name in members}
        expected["bob"] += fee
        got = {self.who(o.owner): o.amount for o in outputs}
        self.expect(
            got == expected,
            f"the coinbase pays bob his {POOL_CUT} % fee, then each contributor a share of the rest "
            "in proportion to the stake",
        )
        self.expect(
            sum(o.amount for o in outputs) == reward == 16_500_000_000,
            "the outputs sum exactly to the block reward of 16.5 coins",
        )
        self.say(
            f"block {self.height}'s coinbase (reward {format_coins(reward)} coins; no fees in this block):"
        )
        self.say(
            f"the operator's {POOL_CUT} % fee ({format_coins(fee)}) comes off first; the other "
            f"{format_coins(rest)} coins are shared in proportion to the stakes:"
        )
        for o in outputs:
            name = self.who(o.owner)
            share = f"{format_coins(self.stakes[name])}/{format_coins(requirement)} of {format_coins(rest)}"
            if name == "bob":
                share = f"fee {format_coins(fee)} + {share}"
            self.say(
                f"  {name:<6} {self.address(self.wallets[name])[:16]}...  "
                f"{format_coins(o.amount):>7} coins  {o.amount:>11} atomic  {share}"
            )
        self.say(f"  {'total':<6} {'':<19}  {format_coins(reward):>7} coins  {reward:>11} atomic")
        self.say(f"outputs unlock at height {self.height + PARAMS.unlock_confirmations}")
        state = self.chain.state
        self.expect(
            state.issued == state.total_unspent() + state.total_staked(),
            "every coin issued is either unspent or staked",
        )


def main(contributor_stakes: Mapping[str, str] = CONTRIBUTOR_STAKES) -> int:
    """Tell the story (the pool node's contributors staking `contributor_stakes`); 0 when every
    check held, 1 with the failed claim otherwise."""
    console = make_console()
    started = time.perf_counter()
    console.print("[bold]snode walkthrough[/]: the real functional core on an in-process regtest chain")
    story = Story(console, contributor_stakes)
    try:
        story.genesis()
        story.fund_wallets()
        story.solo_registration()
        story.pool_registration()
        story.activation()
        story.decommission()
        story.reward_split()
    except StoryError as err:
        make_console(sys.stderr).print(f"walkthrough FAILED: this did not hold: {err}")
        return 1
    except SnodeError as err:
        make_console(sys.stderr).print(f"walkthrough FAILED: the chain refused a step: {err}")
        return 1
    console.print()
    console.print(
        f"walkthrough complete: {story.checks} checks held, height {story.height}, "
        f"{time.perf_counter() - started:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
