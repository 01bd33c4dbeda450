"""The wallet's commands: one typed line in, the lines to print out.

Shared by the REPL, `--command` and the plain line loop for piped input. A spending command
returns a `Pending` to confirm; `confirm` submits it on Yes and cancels on anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Final

from snode.api.types import ServiceNodeRewardsResult
from snode.core.errors import SnodeError
from snode.core.units import counted
from snode.wallet.logic import (
    balance_lines,
    coins,
    is_register_command,
    is_yes,
    split_command,
    transfer_lines,
    when,
)
from snode.wallet.service import Pending, WalletService, parse_amount
from snode.wallet.staking import locked_line, parse_pubkey, stakes_lines

CANCELLED: Final = "Transaction cancelled."
"""DESIGN.md section 8: what any answer but Yes prints; nothing is sent."""
YES_HINT: Final = "Add --yes to confirm it without a question (standard input is not a terminal)."
"""Follows CANCELLED on its line when --command got no Yes or No from piped or closed input."""
ASK_AGAIN: Final = "Please answer Yes or No."
"""Said on a terminal before "Create a new wallet?" is asked once more, after an answer that is
neither Yes/y nor No/n (a transaction's question is not asked again: anything but Yes cancels)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What a command printed, whether it did what was asked, and what it waits for."""

    lines: tuple[str, ...] = ()
    ok: bool = True
    pending: Pending | None = None
    """A transaction built and waiting for `(Yes/No)`."""
    exit: bool = False


@dataclass(frozen=True, slots=True)
class Command:
    """One wallet command: how to call it and what it does."""

    usage: str
    summary: str
    run: Callable[[WalletService, list[str], str], Reply]
    details: tuple[str, ...] = ()
    """More lines for `help <command>`."""


def _address(service: WalletService, args: list[str], line: str) -> Reply:
    return Reply((service.address,))


def _balance_lines(service: WalletService) -> list[str]:
    balance, nodes = service.balance()
    return balance_lines(balance, nodes, service.params.unlock_confirmations)


def _balance(service: WalletService, args: list[str], line: str) -> Reply:
    return Reply(tuple(_balance_lines(service)))


def _refresh(service: WalletService, args: list[str], line: str) -> Reply:
    height = service.refresh()
    return Reply((f"Refreshed to height {height}.", *_balance_lines(service)))


def _transfer(service: WalletService, args: list[str], line: str) -> Reply:
    if len(args) != 2:
        return _usage("transfer")
    return _ask(service.prepare_transfer(args[0], parse_amount(args[1])))


def _register(service: WalletService, args: list[str], line: str) -> Reply:
    return _ask(service.prepare_registration(line))


def _stake(service: WalletService, args: list[str], line: str) -> Reply:
    if len(args) != 2:
        return _usage("stake")
    return _ask(service.prepare_stake(args[0], args[1]))


def _stakes(service: WalletService, args: list[str], line: str) -> Reply:
    nodes, pending = service.stakes()
    height = service.daemon.tip().height
    locked = [locked_line(s.service_node_pubkey, s.amount, s.unlock_height or 0, s.reason, height)
              for s in service.locked_stakes()]
    return Reply(tuple(stakes_lines(
        nodes, service.key.public, pending, locked=locked,
        unlock=lambda at: when(max(at - height, 0), service.params, service.clock()))))


REWARDS_SHOWN: Final = 10
"""Latest rewards `rewards` lists one by one for each node (the totals count them all)."""


def _rewards(service: WalletService, args: list[str], line: str) -> Reply:
    if len(args) > 1:
        return _usage("rewards")
    keys = [parse_pubkey(args[0]).hex()] if args else [sn.pubkey.hex() for sn in service.my_nodes()]
    if not keys:
        return Reply(("This wallet has no stake on a service node: rewards <service_node_pubkey> shows "
                      "any node's.",))
    lines: list[str] = []
    for key in keys:
        lines += reward_lines(service.daemon.rewards(key), service.address)
    return Reply(tuple(lines))


def reward_lines(found: ServiceNodeRewardsResult, address: str) -> list[str]:
    """A node's rewards: what it paid in all and to `address`, then its latest ones."""
    node = found.service_node_pubkey
    if not found.rewards:
        return [f"Node {node}: no rewards up to height {found.to_height}."]
    mine = sum(t.amount for t in found.totals if t.address == address)
    first, last = found.rewards[0].height, found.rewards[-1].height
    span = f"at height {first}" if first == last else f"from height {first} to {last}"
    lines = [f"Node {node}: {counted(len(found.rewards), 'reward')} {span}, "
             f"{coins(found.total)} in all, {coins(mine)} to this wallet."]
    if not found.complete:
        lines.append(f"  (older rewards than height {first} are not counted: the daemon lists "
                     f"{len(found.rewards)} at most)")
    for reward in found.rewards[-REWARDS_SHOWN:]:
        to_me = sum(s.amount for s in reward.shares if s.address == address)
        lines.append(f"  height {reward.height}: {coins(reward.amount)}, {coins(to_me)} to this wallet")
    return lines


def _request_unlock(service: WalletService, args: list[str], line: str) -> Reply:
    if len(args) != 1:
        return _usage("request_stake_unlock")
    return _ask(service.prepare_unlock(args[0]))


def _show_transfers(service: WalletService, args: list[str], line: str) -> Reply:
    return Reply(tuple(transfer_lines(service.transfers())))


def _help(service: WalletService | None, args: list[str], line: str) -> Reply:
    return Reply(tuple(help_lines(args[0] if args else None)))


def _exit(service: WalletService | None, args: list[str], line: str) -> Reply:
    return Reply(exit=True)


COMMANDS: Final[dict[str, Command]] = {
    "address": Command("address", "Show this wallet's address.", _address),
    "balance": Command("balance", "Show the balance, the unlocked balance and staked coins.", _balance),
    "refresh": Command("refresh", "Catch up with the daemon's chain and show the balance.", _refresh),
    "transfer": Command(
        "transfer <address> <amount>", "Send <amount> coins (decimals allowed) to <address>.",
        _transfer,
    ),
    "register_service_node": Command(
        "register_service_node <operator_cut> <address> <amount> [...] <expiry> <pubkey> "
        "<signature>",
        "Register a service node: paste the line from get_service_node_registration_cmd unchanged.",
        _register,
    ),
    "stake": Command(
        "stake <service_node_pubkey> <amount>|<percent>%",
        "Stake coins on a pool node, or a percentage of what it still needs.", _stake,
        details=(
            "<amount> is in coins (decimals allowed); an amount above what the node still needs "
            "is staked as that remainder.",
            "<percent>% is that share of what the node still needs on the chain: 100% fills "
            "it. Stakes still in the mempool are not counted until they are mined.",
            "Minimum contribution: the node's open remainder divided by its free contributor "
            "slots, unless the stake fills the whole remainder.",
            "A reserved contributor stakes exactly its reservation, in one transaction.",
        ),
    ),
    "stakes": Command(
        "stakes", "List this wallet's stakes: node, my amount, status, node total / requirement, "
        "and when each unlocks.", _stakes,
    ),
    "rewards": Command(
        "rewards [<service_node_pubkey>]",
        "List the rewards a node paid (default: each node this wallet is on): in all, to this "
        f"wallet, and the latest {REWARDS_SHOWN} by height.", _rewards,
        details=("The daemon reads them back from the chain's coinbases (get_service_node_rewards); "
                 "a node must still be registered.",),
    ),
    "request_stake_unlock": Command(
        "request_stake_unlock <service_node_pubkey>",
        "Ask for a node you staked on to leave: every stake on it comes back after the unlock period.",
        _request_unlock,
        details=(
            "Any contributor (the operator or another) of a fully funded node may ask, once per "
            "node; the request costs no fee and cannot be taken back.",
            "The node keeps working and earning until its unlock height; the next block returns "
            "each contributor's stake, spendable 10 blocks later.",
            "An open pool node cannot be unlocked: its stakes come back if it is not filled in "
            "its fill window.",
        ),
    ),
    "show_transfers": Command("show_transfers", "List the transactions that moved this wallet's coins.",
                              _show_transfers),
    "help": Command("help [command]", "Show the commands, or how to use one.", _help),
    "exit": Command("exit", "Close the wallet.", _exit),
}
ALIASES: Final = {"quit": "exit"}


def help_lines(name: str | None = None) -> list[str]:
    """The help text, for every command or one."""
    if name is not None:
        command = COMMANDS.get(ALIASES.get(name, name))
        if command is None:
            return [f"Unknown command '{name}'. Type help for the list."]
        return [f"Usage: {command.usage}", f"  {command.summary}",
                *(f"  {line}" for line in command.details)]
    lines = ["Commands:"]
    for command in COMMANDS.values():
        lines += [f"  {command.usage}", f"      {command.summary}"]
    lines.append("Amounts are in whole coins; decimals are allowed (1 coin = 10^9 atomic units).")
    return lines


def _usage(name: str) -> Reply:
    return Reply((f"Usage: {COMMANDS[name].usage}",), ok=False)


def _unexpected(err: Exception) -> Reply:
    return Reply((f"Error: unexpected failure ({type(err).__name__}: {err}); please report it",), ok=False)


def _ask(pending: Pending) -> Reply:
    return Reply(pending.lines, pending=pending)


def run(service: WalletService, line: str) -> Reply:
    """Run one typed line; every expected failure becomes one `Error: ...` line."""
    name, args = split_command(line)
    if not name:
        return Reply()
    command = COMMANDS.get(ALIASES.get(name, name))
    if command is None:
        typed = line.split()[0]
        return Reply((f"Error: unknown command '{typed}'. Type help for the list.",), ok=False)
    if is_register_command(name):
        line = line.strip()
    try:
        return command.run(service, args, line)
    except SnodeError as err:
        return Reply((f"Error: {err}",), ok=False)
    except Exception as err:  # a bug or a daemon answer of the wrong shape: one line, no traceback
        return _unexpected(err)


def confirm(service: WalletService, pending: Pending, answer: str | None) -> Reply:
    """Submit on Yes (any case) or y; anything else cancels (DESIGN.md section 8)."""
    if not is_yes(answer):
        return Reply((CANCELLED,), ok=False)
    try:
        tx_id = service.submit(pending)
    except SnodeError as err:
        return Reply((f"Error: {err}",), ok=False)
    except Exception as err:  # see run()
        return _unexpected(err)
    return Reply((f"Transaction sent. Transaction ID: {tx_id}",))
