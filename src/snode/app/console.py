"""snoded's console: commands typed on the daemon's stdin (off with --non-interactive).

On a terminal it is a prompt_toolkit prompt with history (`<data-dir>/console_history`, mode
0600) and completion of the command names, as the wallet's REPL has; from a pipe it reads one
command a line and prints no prompt, so a script can drive it.

`print_sn_status` shows this node's record as `get_service_nodes` gives it; `prepare_registration`
asks for the registration's parts one at a time and checks each with the admin RPC's own
`get_service_node_registration_cmd` (the same rules and the same words), then prints the line to
paste into the wallet.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from snode.api import errors as E
from snode.api.errors import RpcError
from snode.api.types import GetServiceNodesParams, ServiceNodesResult, ServiceNodeState
from snode.core.address import decode_address
from snode.core.errors import InvalidAddress, InvalidAmount
from snode.core.units import (
    coin_word,
    counted,
    format_age,
    format_coins,
    format_percent,
    parse_coins,
    parse_percent_ppm,
)
from snode.params import MAX_CONTRIBUTORS, MAX_OPERATOR_FEE_PPM, PPM

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from snode.node.node import Node
    from snode.rpc.methods import MethodTable

COMMANDS: Final = ("status", "print_sn_key", "print_sn_status", "prepare_registration", "help", "exit")
HELP: Final = "commands: " + ", ".join(COMMANDS)
HISTORY_FILE: Final = "console_history"
"""In the data dir: the commands typed at a terminal console, for the up arrow and Ctrl-R."""
NOT_SN: Final = "this daemon is not a service node (start it with --service-node)"
CANCEL: Final = "cancel"
"""Typed at any question of prepare_registration (as are Ctrl-C and Ctrl-D): nothing is printed."""

Ask = Callable[[str], Awaitable[str | None]]
"""Prints a question and returns the line typed; None at the end of input or on Ctrl-C."""


class Cancelled(Exception):
    """The operator left prepare_registration."""


class Console:
    """The daemon's console over its node and admin RPC methods."""

    def __init__(self, node: Node, methods: MethodTable, request_stop: Callable[[], None],
                 data_dir: Path) -> None:
        self.node = node
        self.methods = methods
        self.request_stop = request_stop
        self.data_dir = data_dir

    async def run(self) -> None:
        """Read commands until `exit` (which stops the daemon) or the end of input (which does not)."""
        if sys.stdin.isatty() and sys.stdout.isatty():
            await self._run_terminal()
        else:
            await self._run_pipe()

    async def _run_pipe(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        except (OSError, ValueError):
            return

        async def ask(question: str) -> str | None:
            print(question, flush=True)  # a script reads the question as a line of its own
            return await _read_line(reader)

        while True:
            line = await _read_line(reader)
            if line is None:
                print("console closed; the daemon keeps running (stop it with Ctrl-C or SIGTERM)", flush=True)
                return
            if await self.execute(line, ask):
                return

    async def _run_terminal(self) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.completion import WordCompleter
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.patch_stdout import patch_stdout

        path = self.data_dir / HISTORY_FILE
        history: FileHistory | InMemoryHistory
        try:
            os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
            history = FileHistory(str(path))
        except OSError as err:
            print(f"console: no history file ({path}: {err.strerror or err}); history lasts until the stop")
            history = InMemoryHistory()
        commands: PromptSession[str] = PromptSession(
            history=history, completer=WordCompleter(list(COMMANDS)), complete_while_typing=False)
        questions: PromptSession[str] = PromptSession()
        prompt = f"[snoded {self.node.params.name}]: "

        async def ask(question: str) -> str | None:
            return await _prompt(questions, question)

        print(f"console: {HELP} (Tab completes, the arrows recall)", flush=True)
        with patch_stdout(raw=True):
            while True:
                try:
                    line = await commands.prompt_async(prompt)
                except KeyboardInterrupt:  # Ctrl-C at the prompt is a key, not SIGINT: stop as SIGINT does
                    self.request_stop()
                    return
                except EOFError:
                    print("console closed; the daemon keeps running (stop it with SIGTERM)", flush=True)
                    return
                if await self.execute(line.strip(), ask):
                    return

    async def execute(self, command: str, ask: Ask) -> bool:
        """Run one command line; True when the console ends (`exit`)."""
        node = self.node
        if command == "status":
            print(node.status_line(node.now()), flush=True)
        elif command == "print_sn_key":
            print(node.identity.key.public.hex() if node.identity else NOT_SN, flush=True)
        elif command == "print_sn_status":
            print("\n".join(await self.sn_status()), flush=True)
        elif command == "prepare_registration":
            try:
                print(await self.prepare_registration(ask), flush=True)
            except Cancelled:
                print("prepare_registration cancelled; nothing was made", flush=True)
        elif command in ("exit", "quit", "stop"):
            self.request_stop()
            return True
        elif command == "help":
            print(HELP, flush=True)
        elif command:
            shown = command if len(command) <= 40 else command[:40] + "..."
            print(f"unknown command '{shown}'; {HELP}", flush=True)
        return False

    async def sn_status(self) -> list[str]:
        """print_sn_status: this node's registration, stake and contributors, downtime credit,
        last accepted proof and the network's word on the newest ones."""
        node = self.node
        if node.identity is None:
            return [NOT_SN]
        own = node.identity.key.public.hex()
        found = await self.methods.get_service_nodes(GetServiceNodesParams(service_node_pubkeys=[own]))
        assert isinstance(found, ServiceNodesResult)  # a filtered answer is records, not pre-encoded
        if not found.service_node_states:  # not registered, pending, or how the chain removed it
            return [f"service node {own}: {node.sn_state_word()} (height {node.height}); "
                    "prepare_registration makes the command that registers it"]
        sn: ServiceNodeState = found.service_node_states[0]
        warning = node.credit_warning()
        return [f"service node {own}", *_record_lines(sn), self._proof_line(sn),
                *([f"  WARNING: downtime {warning}"] if warning else [])]

    def _proof_line(self, sn: ServiceNodeState) -> str:
        own, now = self.node.own_proof, self.node.now()
        if not sn.last_uptime_proof:
            line = "  last uptime proof: none accepted yet"
        else:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(sn.last_uptime_proof))
            line = (f"  last uptime proof: {stamp} ({format_age(now - sn.last_uptime_proof)} ago), "
                    f"accepted by {own.accepted_by or 'a peer'}")
        if own.refusal:
            line += f"; the newer ones are refused: {own.refusal}"
        return line

    async def prepare_registration(self, ask: Ask) -> str:
        """The wizard: operator address, its amount or share, the fee, reserved contributors; each
        answer checked at once by get_service_node_registration_cmd's rules. The command line to
        paste into the wallet."""
        params: dict[str, Any] = {"operator_cut": "0", "contributor_addresses": [], "contributor_amounts": []}
        try:
            await self._registration_cmd(params)
        except RpcError as err:
            if err.code in (E.NOT_SERVICE_NODE, E.NOT_SYNCED):
                return err.message
        assert self.node.identity is not None
        if self.node.identity.key.public in self.node.state.service_nodes:
            return "this service node is already registered; print_sn_status shows its record"
        requirement = self.node.params.staking_requirement
        print(f"The registration of this service node, step by step ('{CANCEL}' or Ctrl-C leaves).", flush=True)
        await self._ask_contributor(ask, params, "Operator wallet address: ", 0, default=requirement)
        fee_question = f"Operator fee, percent of the rewards, 0 to {format_percent(MAX_OPERATOR_FEE_PPM)} [0]: "
        await _checked(ask, fee_question, lambda text: self._set_fee(params, text or "0"))
        while (len(params["contributor_addresses"]) < MAX_CONTRIBUTORS
               and sum(params["contributor_amounts"]) < requirement):
            index = len(params["contributor_addresses"])
            if not await self._ask_contributor(
                    ask, params, f"Reserved contributor {index} address (empty: no more): ", index):
                break
        command = await self._registration_cmd(params)
        stake = sum(params["contributor_amounts"])
        return "\n".join([
            f"Stakes reserved: {format_coins(stake)} of {format_coins(requirement)} {coin_word(requirement)}; "
            f"operator fee {params['operator_cut']}%.",
            "Paste this line into snode-wallet (it is valid for about 14 days):", command])

    async def _ask_contributor(self, ask: Ask, params: dict[str, Any], question: str, index: int, *,
                               default: int | None = None) -> bool:
        """Ask for contributor `index`'s address and amount into params; False when the address
        was left empty (allowed for reserved contributors only)."""
        prefix = self.node.params.address_prefix
        who = "operator address" if index == 0 else f"contributor address {index}"
        answer: list[str] = []

        async def address(text: str) -> None:
            if not text and index > 0:
                return
            try:
                decode_address(prefix, text)
            except InvalidAddress as err:
                raise RpcError(E.INVALID_PARAMS, f"{who}: {err.reason}") from None
            answer.append(text)

        await _checked(ask, question, address)
        if not answer:
            return False
        requirement = self.node.params.staking_requirement
        shown = f" [{format_coins(default)}, the whole stake]" if default is not None else ""
        amount_question = f"  its amount, in coins or as a share of {format_coins(requirement)} (50%){shown}: "

        async def amount(text: str) -> None:
            atomic = default if not text and default is not None else _amount(text, requirement)
            await self._registration_cmd({
                **params, "contributor_addresses": [*params["contributor_addresses"], answer[0]],
                "contributor_amounts": [*params["contributor_amounts"], atomic]})
            params["contributor_addresses"].append(answer[0])
            params["contributor_amounts"].append(atomic)

        await _checked(ask, amount_question, amount)
        return True

    async def _set_fee(self, params: dict[str, Any], text: str) -> None:
        cut = text.removesuffix("%").strip()
        await self._registration_cmd({**params, "operator_cut": cut})
        params["operator_cut"] = cut

    async def _registration_cmd(self, params: dict[str, Any]) -> str:
        """get_service_node_registration_cmd itself: its checks, its refusals, its command."""
        return (await self.methods.get_service_node_registration_cmd(params)).registration_cmd


def _amount(text: str, requirement: int) -> int:
    """Coins (`100000`, `1.5`) or a share of the staking requirement (`50%`), in atomic units."""
    try:
        if text.endswith("%"):
            ppm = parse_percent_ppm(text[:-1].strip(), maximum_ppm=PPM)
            return requirement * ppm // PPM
        return parse_coins(text)
    except InvalidAmount as err:
        raise RpcError(E.INVALID_PARAMS, f"{err.reason}; give coins (100000) or a share (50%)") from None


async def _checked(ask: Ask, question: str, take: Callable[[str], Awaitable[None]]) -> None:
    """Ask until `take` accepts the answer; its refusal is printed and the question asked again."""
    while True:
        text = await ask(question)
        if text is None or text.strip().lower() == CANCEL:
            raise Cancelled
        try:
            await take(text.strip())
            return
        except RpcError as err:
            print(f"  {err.message}", flush=True)


async def _read_line(reader: asyncio.StreamReader) -> str | None:
    """The next line of a pipe, stripped; None at its end. A line longer than the reader's
    limit (64 KiB) is dropped with a word, not a traceback."""
    while True:
        try:
            raw = await reader.readline()
        except ValueError:  # the reader dropped the line's bytes: go on with the next one
            print("console: a line over 64 KiB was ignored", flush=True)
            continue
        return raw.decode(errors="replace").strip() if raw else None


async def _prompt(session: PromptSession[str], question: str) -> str | None:
    try:
        return await session.prompt_async(question)
    except (KeyboardInterrupt, EOFError):
        return None


def _record_lines(sn: ServiceNodeState) -> list[str]:
    """The chain's record of this node, as print_sn_status shows it."""
    state = "payable" if sn.payable else "not payable yet" if sn.active else ""
    decommissions = f"decommissioned {counted(sn.decommission_count, 'time')}" + (
        f", last for {sn.last_decommission_reason}" if sn.last_decommission_reason else "")
    lines = [f"  status: {sn.status}{f' ({state})' if state else ''}; registered at height "
             f"{sn.registration_height}; {decommissions}",
             f"  stake: {format_coins(sn.total_contributed)} of {format_coins(sn.staking_requirement)} "
             f"{coin_word(sn.staking_requirement)}; operator fee {format_percent(sn.operator_fee)}%; "
             f"{counted(len(sn.contributors), 'contributor')}:"]
    for i, c in enumerate(sn.contributors):
        reserved = f" (reserved {format_coins(c.reserved)})" if c.reserved else ""
        lines.append(f"    {'operator' if i == 0 else 'contributor':<11} {c.address} "
                     f"{format_coins(c.amount)} {coin_word(c.amount)}{reserved}")
    lines.append(f"  downtime credit: {counted(sn.earned_downtime_blocks, 'block')}; missed "
                 f"{sn.missed_duties} of its last {counted(sn.recorded_duties, 'duty', 'duties')}"
                 + (f"; leaves at height {sn.leaves_at}" if sn.leaves_at else ""))
    return lines
